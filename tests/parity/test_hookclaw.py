"""HookClaw (PIPELINES.md §C, seed 004): every worked example and test vector of §C, plus the seed-004 gates.

Counted vectors (see the report): skip patterns 6 (+ length gate), fuzzy-cache Jaccard 1, enrichment 4,
temporal 6 (+ the moving-as_of test), FTS query 1, FTS rank mapping 6, v2.1 decay table 6, C1 (table + temporal
filter), C1b (fusion, decay, adaptive, MMR), C2 (3 results + no-boost + repeated token), C3 (boost, decay,
adaptive, MMR, block), adaptive-filter bands.
"""
from datetime import datetime, timezone

import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, load_preset, ranked
from retrievers.stages import ConfigError, Context
from retrievers.stages.helpers.query_text import (
    extract_entities,
    hookclaw_fts,
    hookclaw_fts_tokens,
    parse_temporal,
    path_date,
    v8_iso_date,
)
from retrievers.stages.gate import hookclaw_skip_decision, prompt_similarity
from retrievers.stages.fuse.hookclaw import hookclaw_bm25, hookclaw_tokens

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

NOW = "2026-02-14T12:00:00Z"
NOW_S = datetime(2026, 2, 14, 12, tzinfo=timezone.utc).timestamp()


def ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def run(stages, cs, ctx=None):
    st = build_pipeline({"name": "t", "stages": stages}).run(cs, ctx)
    return st, ranked(st, cs, 0)


# ---- §C.1 gates ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt,skip", [
    ("Write a poem about logs", True),
    ("help me debug the deploy", True),
    ("Thanks, that fixed it", True),
    ("Tell me about the okta migration", False),
    ("okay so what did we decide", False),
    ("Create the migration for users table", True),
])
def test_skip_pattern_vectors(prompt, skip):
    assert hookclaw_skip_decision(prompt) is skip


def test_min_length_is_trimmed_utf16_and_user_patterns_replace_defaults():
    assert hookclaw_skip_decision("   short prompt here  ") is True  # 17 < 20 after trim
    assert hookclaw_skip_decision("\ufeff" + "x" * 19 + "\u00a0") is True  # JS trim removes BOM/NBSP
    assert hookclaw_skip_decision("😀" * 10) is False  # 10 astral chars = 20 UTF-16 units
    # user patterns replace the defaults
    assert hookclaw_skip_decision("Write a poem about logs", patterns=("^deploy",)) is False
    assert hookclaw_skip_decision("deploy the thing right now", patterns=("^deploy",)) is True
    # v2.1 ignores an invalid pattern; v2.0 never registers the hook (every prompt skipped)
    assert hookclaw_skip_decision("deploy the thing right now", patterns=("(", "^deploy")) is True
    assert hookclaw_skip_decision("Tell me about the okta migration", patterns=("(",), on_invalid="ignore") is False
    assert hookclaw_skip_decision("Tell me about the okta migration", patterns=("(",), on_invalid="disable") is True
    with pytest.raises(ConfigError, match="invalid skip pattern"):
        build_pipeline({"name": "x", "stages": [{"type": "gate.hookclaw_skip", "patterns": ["("],
                                                 "on_invalid": "error"}]})


def test_skip_gate_empties_skipped_queries_in_a_batch():
    docs = [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}]
    cs = candidates_from_json({"documents": docs, "queries": [
        {"id": "1", "query": "Write a poem about the deploy logs", "arms": {"vec": [{"id": "a", "score": 0.9}]}},
        {"id": "2", "query": "Tell me about the okta migration", "arms": {"vec": [{"id": "b", "score": 0.8}]}},
    ]})
    st = build_pipeline({"name": "x", "stages": [{"type": "gate.hookclaw_skip"},
                                                 {"type": "fuse.single", "arm": "vec"}]}).run(cs)
    assert list(st.skipped) == [True, False]
    assert ranked(st, cs, 0) == [] and ranked(st, cs, 1) == [("b", 0.8)]


def test_fuzzy_cache_jaccard_example():
    a = "what did we decide about the database schema"
    b = "what did we decide about database schema"
    assert prompt_similarity(a, b) == pytest.approx(7 / 8)
    assert prompt_similarity(a, b) >= 0.85
    assert prompt_similarity("", "") == 1.0 and prompt_similarity("café", "caf") == 1.0  # ASCII \w


# ---- §C.2 enrichment -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,entities", [
    ("Why does NETSDK1005 appear when I run dotnet build in src/Api/Api.csproj?", ["src/Api/Api.csproj", "NETSDK1005"]),
    ("ERR_MODULE_NOT_FOUND from @xenova/transformers in createHandler", ["@xenova/transformers"]),
    ('Check TelegramBotService and HTTP_500 plus E2E tests; see "deploy notes" and v1.2',
     ["v1.2", "HTTP_500", "E2E", "TelegramBotService", "deploy notes"]),
    ("I don't know what's wrong with wink-bm25", ["t know what"]),
])
def test_entity_vectors(text, entities):
    assert extract_entities(text) == entities


@pytest.mark.parametrize("text,window", [
    ("any updates today or yesterday?", ("2026-02-13T00:00:00Z", "2026-02-13T23:59:59.999Z")),
    ("this week we shipped", ("2026-02-07T00:00:00Z", NOW)),
    ("what happened in the past 10 days", ("2026-02-04T00:00:00Z", NOW)),
    ("errors in the last 6 hours", ("2026-02-14T06:00:00Z", NOW)),
    ("the thing from 3 days ago", ("2026-02-11T00:00:00Z", "2026-02-11T23:59:59.999Z")),
    ("what did we do last month", None),
])
def test_temporal_vectors(text, window):
    got = parse_temporal(text, NOW_S)
    if window is None:
        assert got is None
    else:
        assert got == pytest.approx((ts(window[0]), ts(window[1])))


def test_temporal_window_moves_with_as_of():
    docs = [{"id": d, "path": f"memory/2026-02-{d}.md", "text": d} for d in ("10", "12", "13")]
    arms = {"vec": [{"id": "13", "score": 0.9}, {"id": "12", "score": 0.8}, {"id": "10", "score": 0.7}]}
    q = "what did we change yesterday?"
    stages = [{"type": "fuse.single", "arm": "vec"}, {"type": "query.hookclaw_enrich"},
              {"type": "filter.temporal_window"}]
    out = {}
    for as_of in ("2026-02-14T12:00:00Z", "2026-02-13T09:00:00Z", "2026-02-11T09:00:00Z"):
        cs = candidates_from_json({"query": q, "as_of": as_of, "documents": docs, "arms": arms})
        st, r = run(stages, cs)
        out[as_of] = [d for d, _ in r]
        w = st.info["temporal_window"][0]
        assert w[0] == pytest.approx(ts(as_of[:10] + "T00:00:00Z") - 86400)
    assert out == {"2026-02-14T12:00:00Z": ["13"], "2026-02-13T09:00:00Z": ["12"], "2026-02-11T09:00:00Z": ["10"]}
    # no as_of → no notion of now → no window, nothing removed
    cs = candidates_from_json({"query": q, "documents": docs, "arms": arms})
    assert [d for d, _ in run(stages, cs)[1]] == ["13", "12", "10"]


def test_v8_path_dates():
    assert path_date("memory/2026-02-30.md") == v8_iso_date(2026, 3, 2) == ts("2026-03-02T00:00:00Z")
    assert path_date("memory/2026-13-01.md") is None and path_date("memory/2026-02-00.md") is None
    assert path_date("memory/2026-02-32.md") is None
    assert path_date("notes/x-2026-02-10-standup.md") == ts("2026-02-10T00:00:00Z")  # anywhere in the path
    assert path_date("memory/2026-13-01/2026-02-10.md") is None  # only the first match counts
    assert path_date("memory/２０２６-01-05.md") is None  # ASCII digits only
    assert path_date("a/0000-01-01.md") == pytest.approx(-62167219200.0)  # year 0 taken literally


# ---- §C.3 FTS query + rank mapping ---------------------------------------------------------------------------

def test_fts_query_terms():
    from retrievers.types import Query
    assert hookclaw_fts_tokens("How does the deploy pipeline work and where are backups?") == \
        ["deploy", "pipeline", "work", "backups"]
    assert hookclaw_fts(Query("q", "How does the deploy pipeline work and where are backups?")) == \
        ["deploy pipeline work backups"]
    assert hookclaw_fts(Query("q", "what is it all about?")) == []  # only stop words → no FTS
    assert hookclaw_fts_tokens("Fix src/api.ts v1.2 a x_y") == ["fix", "src", "api.ts", "v1.2", "x_y"]


@pytest.mark.parametrize("rank,score", [(-0.5, 0.2), (-1, 1 / 3), (-2, 0.5), (-4, 2 / 3), (-6, 0.75), (-10, 5 / 6)])
def test_fts_rank_mapping(rank, score):
    docs = [{"id": "a", "path": "p.md", "text": "x"}]
    cs = candidates_from_json({"query": "q", "documents": docs,
                               "arms": {"vec": [{"id": "a", "score": 0.0}], "fts": [{"id": "a", "score": -rank}]}})
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost", "weight": 1.0}], cs)
    assert st.extra["fts"][0, 0] == pytest.approx(score) and r[0][1] == pytest.approx(score)


# ---- decay -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hours,mult", [(12, 0.951695), (24, 0.905724), (36, 0.861973), (60, 0.780709), (168, 0.5),
                                        (204, 0.430986)])
def test_decay_table_168h(hours, mult):
    docs = [{"id": "a", "path": "memory/2026-02-14.md", "text": "x"}]
    as_of = ts("2026-02-14T00:00:00Z") + hours * 3600
    cs = candidates_from_json({"query": "q", "as_of": as_of, "documents": docs, "arms": {"vec": [{"id": "a", "score": 1}]}})
    assert run([{"type": "fuse.single", "arm": "vec"}, {"type": "decay.hookclaw", "half_life_hours": 168}],
               cs)[1][0][1] == pytest.approx(mult, abs=1e-6)


def test_decay_rollover_undated_and_disabled():
    docs = [{"id": "old", "path": "memory/2026-02-01.md", "text": "x"},
            {"id": "roll", "path": "memory/2026-02-30.md", "text": "y"},  # = 2026-03-02
            {"id": "und", "path": "MEMORY.md", "text": "z"}]
    arms = {"vec": [{"id": "old", "score": 0.9}, {"id": "roll", "score": 0.8}, {"id": "und", "score": 0.1}]}
    cs = candidates_from_json({"query": "q", "as_of": "2026-03-03T00:00:00Z", "documents": docs, "arms": arms})
    r = dict(run([{"type": "fuse.single", "arm": "vec"}, {"type": "decay.hookclaw", "half_life_hours": 24}], cs)[1])
    assert r["roll"] == pytest.approx(0.4) and r["und"] == pytest.approx(0.1)
    assert r["old"] == pytest.approx(0.9 * 2 ** -30)
    # half-life <= 0: untouched and not re-sorted
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "filter.min_score", "threshold": -1},
                 {"type": "decay.hookclaw", "half_life_hours": 0}], cs)
    assert [d for d, _ in r] == ["old", "roll", "und"]


# ---- §C.1 adaptive filter ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("top,n", [(0.39, 0), (0.4, 3), (0.55, 3), (0.7, 3), (0.7001, 2)])
def test_adaptive_filter_bands(top, n):
    docs = [{"id": str(i), "text": str(i)} for i in range(4)]
    hits = [{"id": "0", "score": top}] + [{"id": str(i), "score": 0.3} for i in range(1, 4)]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {"vec": hits}})
    assert len(run([{"type": "fuse.single", "arm": "vec"}, {"type": "filter.hookclaw_adaptive"}], cs)[1]) == n


# ---- §C.6 worked examples ----------------------------------------------------------------------------------------

def _c1_cs(query="NETSDK1005 and RouteOps issues in the last 3 days"):
    docs = [
        {"id": "v1", "path": "memory/2026-02-10.md", "text": "NETSDK1005 error when building the Axle API"},
        {"id": "v2", "path": "memory/2026-02-13.md", "text": "Fixed DatePicker validation in RouteOps"},
        {"id": "v3", "path": "MEMORY.md", "text": "Preferences: Serilog for logging"},
        {"id": "v4", "path": "memory/2026-02-10.md", "text": "Axle API build notes (second chunk)"},
        {"id": "n1", "path": "notes/errors.md", "text": "NETSDK1005 means the target framework is missing"},
    ]
    arms = {"vec": [{"id": "v1", "score": 0.62}, {"id": "v2", "score": 0.58}, {"id": "v3", "score": 0.55},
                    {"id": "v4", "score": 0.50}],
            "bm25": [{"id": "v2", "score": 7.1}, {"id": "n1", "score": 5.0}]}
    return candidates_from_json({"query": query, "as_of": NOW, "documents": docs, "arms": arms})


def test_example_c1_fuse_results():
    cs = _c1_cs()
    rrf = {"type": "fuse.hookclaw_rrf", "bm25": "arm", "use_entities": True, "temporal": False, "max_results": 5}
    st, r = run([{"type": "fuse.single", "arm": "vec"}, rrf], cs)
    assert [d for d, _ in r] == ["v2", "v1", "n1", "v3"]
    assert [s for _, s in r] == pytest.approx([0.01626124, 0.01603791, 0.01570486, 0.01570169], abs=1e-8)
    ranks = np.stack([st.extra[k][0] for k in ("vec_rank", "bm25_rank", "recency_rank", "entity_rank")], axis=1)
    assert ranks.tolist() == [[2, 1, 1, 2], [1, 5, 2, 1], [5, 2, 4, 3], [3, 5, 3, 4]]
    # with the temporal filter of "in the last 3 days" ([02-11T00:00, now]) memory/2026-02-10.md is removed
    st, r = run([{"type": "fuse.single", "arm": "vec"}, dict(rrf, temporal=True)], cs)
    assert [d for d, _ in r] == ["v2", "n1", "v3"]


def test_example_c1b_production():
    cs = _c1_cs()
    base = [{"type": "fuse.single", "arm": "vec"},
            {"type": "fuse.hookclaw_rrf", "bm25": "empty", "use_entities": False, "temporal": False,
             "max_results": 3}]
    st, r = run(base, cs)
    assert r == [("v1", pytest.approx(0.01603318, abs=1e-8)), ("v2", pytest.approx(0.01598030, abs=1e-8)),
                 ("v3", pytest.approx(0.01577381, abs=1e-8))]
    decay = {"type": "decay.hookclaw", "half_life_hours": 24}
    st, r = run(base + [decay], cs)
    assert r == [("v3", pytest.approx(0.01577381, abs=1e-8)), ("v2", pytest.approx(0.00564989, abs=1e-8)),
                 ("v1", pytest.approx(0.00070857, abs=1e-8))]
    assert run(base + [decay, {"type": "filter.hookclaw_adaptive"}], cs)[1] == []  # no injection
    r = run(base + [decay, {"type": "diversity.hookclaw_mmr", "lam": 0.7, "k": 3}], cs)[1]
    assert [d for d, _ in r] == ["v3", "v2", "v1"]  # adaptiveResults off: MMR keeps the order


def test_rrf_skipped_without_signal_and_normalised_fix():
    cs = _c1_cs()
    st, r = run([{"type": "fuse.single", "arm": "vec"},
                 {"type": "fuse.hookclaw_rrf", "bm25": "empty", "enrichment": False}], cs)
    assert r == [("v1", 0.62), ("v2", 0.58), ("v3", 0.55), ("v4", 0.50)]  # RRF never ran
    st, r = run([{"type": "fuse.single", "arm": "vec"},
                 {"type": "fuse.hookclaw_rrf", "temporal": False, "normalize": "max_possible"}], cs)
    assert r[0][1] == pytest.approx(0.01603318 * 61) and [d for d, _ in r] == ["v1", "v2", "v3"]


def test_example_c2_bm25_index():
    texts = ["Serilog structured logging patterns for .NET",
             "NETSDK1005 error: update the target framework in the csproj",
             "Deploy to Azure App Service with zero downtime; deploy slots",
             "Logging config: Serilog sinks to Seq and console; logging levels"]
    assert [len(hookclaw_tokens(t)) for t in texts] == [6, 9, 10, 10]
    got = hookclaw_bm25(texts, "serilog logging NETSDK1005", ["NETSDK1005"])
    assert [i for i, _ in got] == [1, 0, 3]
    assert [s for _, s in got] == pytest.approx([2.380126, 1.590830, 1.571138], abs=1e-6)
    got = hookclaw_bm25(texts, "serilog logging NETSDK1005")
    assert [i for i, _ in got] == [0, 3, 1]
    assert [s for _, s in got] == pytest.approx([1.590830, 1.571138, 1.190063], abs=1e-6)
    assert hookclaw_bm25(texts, "deploy deploy") == [(2, pytest.approx(3.183035, abs=1e-6))]
    assert hookclaw_tokens("src/api.ts a@b.c wink-bm25 .NET naïve") == ["src/api.ts", "a@b.c", "wink-bm25", "net",
                                                                       "na", "ve"]


def test_bm25_over_vector_results_feeds_rrf():
    cs = _c1_cs("serilog logging NETSDK1005")
    st, r = run([{"type": "fuse.single", "arm": "vec"},
                 {"type": "fuse.hookclaw_rrf", "bm25": "vector_results", "max_results": 5, "temporal": False}], cs)
    # BM25 over the 4 returned chunks (N 4, avgdl 5.5): v3 (serilog + logging, 4 tokens) 2.71 beats v1
    # (NETSDK1005 ×2 boost, 7 tokens) 2.17; the others match nothing → rank N + 1 = 4
    bm = dict(zip([d for d, _ in r], st.extra["bm25_rank"][0].tolist()))
    assert bm == {"v3": 1.0, "v1": 2.0, "v2": 4.0}


def _c3_cs():
    docs = [
        {"id": "X", "path": "MEMORY.md", "text": "Postgres backups run nightly at 2am UTC"},
        {"id": "A", "path": "memory/2026-02-14.md", "text": "Deploy pipeline uses GitHub Actions with blue green strategy"},
        {"id": "B", "path": "memory/2026-02-14.md", "text": "Deploy pipeline uses GitHub Actions with blue green rollout"},
        {"id": "F", "path": "memory/2026-02-14.md", "text": "Release checklist for the deploy pipeline"},
        {"id": "G", "path": "notes/other.md", "text": "unrelated FTS-only hit about backups"},
    ]
    arms = {"vec": [{"id": "X", "score": 0.55}, {"id": "A", "score": 0.52}, {"id": "B", "score": 0.51}],
            "fts": [{"id": "F", "score": 4.0}, {"id": "G", "score": 1.0}]}
    return candidates_from_json({"query": "How does the deploy pipeline work and where are backups?", "as_of": NOW,
                                 "documents": docs, "arms": arms})


def test_example_c3_v2_1():
    cs = _c3_cs()
    stages = [{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost"}]
    st, r = run(stages, cs)
    # path-level boost: F's FTS hit (rank -4 → 0.666667) boosts both chunks A and B of memory/2026-02-14.md
    assert r == [("A", pytest.approx(0.72)), ("B", pytest.approx(0.71)), ("X", 0.55)]
    assert "F" not in dict(r) and "G" not in dict(r)  # FTS-only hits are not added
    full = stages + [{"type": "decay.hookclaw", "half_life_hours": 168}, {"type": "filter.hookclaw_adaptive"}]
    r = run(full, cs)[1]  # top 0.685 is in the middle band → keep 3
    assert r == [("A", pytest.approx(0.685221, abs=1e-6)), ("B", pytest.approx(0.675704, abs=1e-6)), ("X", 0.55)]
    st, r = run(full + [{"type": "diversity.hookclaw_mmr", "lam": 0.7, "k": 3}], cs)
    assert r == [("A", pytest.approx(0.685221, abs=1e-6)), ("X", 0.55), ("B", pytest.approx(0.675704, abs=1e-6))]


def test_fts_boost_not_resorted_when_nothing_boosted_and_path_key():
    docs = [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}, {"id": "c", "text": "c"}]
    arms = {"vec": [{"id": "a", "score": 0.5}, {"id": "b", "score": 0.7}], "fts": [{"id": "c", "score": 2.0}]}
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": arms})
    # path-less documents share HookClaw's key "" → every vector result is boosted (as shipped)
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost"}], cs)
    assert r == [("b", pytest.approx(0.85)), ("a", pytest.approx(0.65))]
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost", "key": "path_or_id"}],
                cs)
    assert r == [("a", 0.5), ("b", 0.7)]  # nothing boosted → not re-sorted (vector order kept)


# ---- presets ----------------------------------------------------------------------------------------------------

def _preset_cs(query, as_of=NOW):
    docs = [
        {"id": "X", "path": "MEMORY.md", "text": "Postgres backups run nightly at 2am UTC", "start_line": 1,
         "end_line": 4},
        {"id": "A", "path": "memory/2026-02-14.md", "text": "Deploy pipeline uses GitHub Actions with blue green strategy"},
        {"id": "B", "path": "memory/2026-02-14.md", "text": "Deploy pipeline uses GitHub Actions with blue green rollout"},
        {"id": "O", "path": "memory/2026-01-02.md", "text": "Old note about the deploy pipeline"},
    ]
    # OpenClaw scores 0.7·cos (no keyword hit in its AND-query arm): X 0.55, A 0.52, B 0.51 as in Example C3
    vec = [{"id": "X", "score": 0.55 / 0.7}, {"id": "A", "score": 0.52 / 0.7}, {"id": "B", "score": 0.51 / 0.7},
           {"id": "O", "score": 0.30}]
    return candidates_from_json({"query": query, "as_of": as_of, "documents": docs, "arms": {
        "vec": vec, "fts": [], "hcfts#0": [{"id": "A", "score": 4.0}]}})


def test_presets_chain_on_openclaw_and_pack_the_xml_block():
    q = "How does the deploy pipeline work and where are backups?"
    cs = _preset_cs(q)
    st = load_preset("hookclaw_v2_1_fts").run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["A", "X", "B"]  # = Example C3 through the chained preset
    assert st.info["injected"][0].tolist() == [True, True, True]
    block = st.info["blocks"][0]
    assert block.startswith("<relevant_memories>\n  <memory source=\"memory\" path=\"memory/2026-02-14.md\" "
                            "score=\"0.685\">\n    Deploy pipeline uses GitHub Actions with blue green strategy\n")
    assert '<memory source="memory" path="MEMORY.md" lines="1-4" score="0.550">' in block
    assert block.endswith("  </memory>\n</relevant_memories>")
    # v1.1: OpenClaw's top 3 (minScore 0.5 drops O) → adaptive filter (top 0.55: keep 3), no decay, no MMR
    st = load_preset("hookclaw_v1_1").run(cs)
    assert ranked(st, cs, 0) == [("X", pytest.approx(0.55)), ("A", pytest.approx(0.52)), ("B", pytest.approx(0.51))]
    # v2.0 as shipped never injects; the fixed sibling does
    st = load_preset("hookclaw_v2_0_rrf").run(_strong_cs(q))
    assert st.info["budget"]["chunks"].tolist() == [0]
    st = load_preset("hookclaw_v2_0_rrf_fixed").run(_strong_cs(q))
    assert st.info["budget"]["chunks"].tolist() == [2]
    # the skip gate sits first
    cs = _preset_cs("Write a poem about deploy pipelines")
    assert load_preset("hookclaw_v2_1_fts").run(cs).skipped.tolist() == [True]


def _strong_cs(query):
    docs = [{"id": "X", "path": "MEMORY.md", "text": "Postgres backups run nightly at 2am UTC"},
            {"id": "A", "path": "memory/2026-02-14.md", "text": "Deploy pipeline uses GitHub Actions"},
            {"id": "C", "path": "notes/c.md", "text": "Completely different note about cats"}]
    return candidates_from_json({"query": query, "as_of": NOW, "documents": docs, "arms": {
        "vec": [{"id": "X", "score": 0.95}, {"id": "A", "score": 0.9}, {"id": "C", "score": 0.8}], "fts": []}})


def test_fixed_temporal_sibling_applies_the_window():
    q = "what did we change in the deploy pipeline yesterday?"
    docs = [{"id": "Y", "path": "memory/2026-02-13.md", "text": "Changed the deploy pipeline to blue green"},
            {"id": "T", "path": "memory/2026-02-14.md", "text": "Deploy pipeline notes of today"}]
    cs = candidates_from_json({"query": q, "as_of": NOW, "documents": docs, "arms": {
        "vec": [{"id": "T", "score": 0.95}, {"id": "Y", "score": 0.94}], "fts": []}})
    assert [d for d, _ in ranked(load_preset("hookclaw_v2_1_fts").run(cs), cs, 0)] == ["T", "Y"]
    assert [d for d, _ in ranked(load_preset("hookclaw_v2_1_fts_fixed_temporal").run(cs), cs, 0)] == ["Y"]


# ---- seed 004 gates with real embeddings ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def embedder():
    """The shared all-MiniLM-L6-v2 embedder with the project's content-hash cache ($EVALKIT_CACHE): the first run
    embeds ~30 short texts, later runs never load the model."""
    from retrievers.embed.model import Embedder
    return Embedder(progress=False)


def test_intent_prototype_gate(embedder):
    docs = [{"id": "a", "text": "alpha"}]
    prompts = ["Write a poem about the sea", "Format this JSON please", "Set a timer for 5 minutes",
               "What did we decide about the database schema?", "Tell me about the okta migration"]
    cs = candidates_from_json({"documents": docs, "queries": [
        {"id": str(i), "query": p, "arms": {"vec": [{"id": "a", "score": 0.9}]}} for i, p in enumerate(prompts)]})
    st = build_pipeline({"name": "x", "stages": [{"type": "gate.intent_prototype"},
                                                 {"type": "fuse.single", "arm": "vec"}]}).run(
        cs, Context(embedder=embedder))
    assert st.skipped.tolist() == [True, True, True, False, False]
    assert (st.info["intent_score"][:3] > 0.75).all() and (st.info["intent_score"][3:] < 0.3).all()


def test_topic_shift_gate(embedder):
    ctx_msgs = ["We configured the Omada router with VLAN 10 for IoT devices", "AdGuard DNS runs on 192.168.10.2",
                "The home network uses an ER605 gateway"]
    docs = [{"id": "a", "path": "memory/2026-02-13.md", "text": "alpha"}]
    qs = [("Which VLAN did we put the IoT devices on?", ctx_msgs), ("Write a haiku about cats", ctx_msgs),
          ("Which VLAN did we put the IoT devices on?", [])]
    cs = candidates_from_json({"documents": docs, "queries": [
        {"id": str(i), "query": q, "as_of": NOW, "context": c, "arms": {"vec": [{"id": "a", "score": 0.9}]}}
        for i, (q, c) in enumerate(qs)]})
    run_ = lambda p: build_pipeline({"name": "x", "stages": [  # noqa: E731
        {"type": "fuse.single", "arm": "vec"}, dict({"type": "gate.topic_shift"}, **p),
        {"type": "decay.hookclaw", "half_life_hours": 24}]}).run(cs, Context(embedder=embedder))
    st = run_({"threshold": 0.3})
    sim = st.info["topic_similarity"]
    assert sim[0] > 0.3 > sim[1] and np.isnan(sim[2])
    assert st.skipped.tolist() == [False, True, False]
    # option B: keep the results, no temporal decay for the shifted query
    st = run_({"threshold": 0.3, "action": "no_decay"})
    assert st.skipped.tolist() == [False, False, False]
    assert st.score[1, 0] == pytest.approx(0.9) and st.score[0, 0] < 0.9
    # the seed's 0.75 is calibrated for 3072-d Gemini vectors: with all-MiniLM-L6-v2 on-topic follow-ups
    # score ~0.45, so the default flags every query that has context
    assert run_({}).skipped.tolist() == [True, True, False]


# ---- more §C details ---------------------------------------------------------------------------------------------

def test_recency_ties_keep_insertion_order_and_entities_only_when_given():
    docs = [{"id": "a", "path": "notes/2026-02-10-a.md", "text": "a"}, {"id": "b", "path": "memory/2026-02-10.md",
                                                                      "text": "b"},
            {"id": "c", "path": "", "text": "no path: keyed by its first 100 characters"}]
    cs = candidates_from_json({"query": "plain question without entities", "as_of": NOW, "documents": docs,
                               "arms": {"vec": [{"id": i, "score": 0.9 - k / 10} for k, i in enumerate("abc")]}})
    st, r = run([{"type": "fuse.single", "arm": "vec"},
                 {"type": "fuse.hookclaw_rrf", "use_entities": True, "max_results": 5}], cs)
    assert dict(zip([d for d, _ in r], st.extra["recency_rank"][0])) == {"a": 1, "b": 2, "c": 3}
    assert st.extra["entity_rank"][0].tolist() == [4, 4, 4]  # no entities → N + 1 for everyone


def test_fts_boost_keeps_only_the_top_6_of_12():
    docs = [{"id": "v", "path": "memory/p7.md", "text": "v"}] + \
        [{"id": f"f{i}", "path": f"memory/p{i}.md", "text": f"f{i}"} for i in range(14)]
    fts = [{"id": f"f{i}", "score": 20.0 - i} for i in range(14)]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {"vec": [{"id": "v", "score": 0.5}],
                                                                        "fts": fts}})
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost"}], cs)
    assert r == [("v", 0.5)]  # p7 is the 8th FTS row: fetched (12) but not kept (6)
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "score.hookclaw_fts_boost", "keep": 8}], cs)
    assert r[0][1] == pytest.approx(0.5 + 0.3 * 13 / 15)


def test_context_synthesis_transform():
    from retrievers.types import Query
    from retrievers.candidates.arms import QUERY_TRANSFORMS
    from retrievers.stages.helpers.query_text import context_terms
    ctx = ["We hit the RouteOps DatePicker validation error again", "ok", "the DatePicker validation fails on UTC"]
    assert context_terms("what about that bug?", ctx) == ["DatePicker", "RouteOps", "validation"]
    q = Query("1", "what about that bug?", metadata={"context": ctx})
    assert QUERY_TRANSFORMS["context_synthesis"](q) == ["what about that bug? DatePicker RouteOps validation"]
    assert QUERY_TRANSFORMS["context_synthesis"](Query("2", "what about that bug?")) == ["what about that bug?"]
    assert QUERY_TRANSFORMS["context_synthesis"](Query("3", "  ")) == []
    assert context_terms("fix datepicker", ctx) == ["RouteOps", "validation"]  # already in the prompt → dropped
