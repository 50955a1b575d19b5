"""OpenClaw memory-core 2026.2.26 (PIPELINES.md §2): worked examples A1–A4, keyword test vectors, decay edge
cases, Appendix D details and the §A.1 config rules, through the stages and through the presets."""
import math

import numpy as np
import pytest

from retrievers.types import Query
from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked, resolve_preset
from retrievers.stages import ConfigError, Context
from retrievers.index.corpus import dated_path_ts as openclaw_path_date
from retrievers.stages.decay import openclaw_file_timestamp, openclaw_is_evergreen
from retrievers.stages.helpers.similarity import jaccard_matrix, snippet_tokens
from retrievers.presets.config import from_config
from retrievers.presets.config.openclaw import openclaw_weights
from retrievers.stages.helpers.keywords import extract_keywords, openclaw_keywords
from retrievers.text import utf16_truncate

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

DAY = 86400.0


def _run(stages, obj, ctx=None):
    cs = candidates_from_json(obj)
    st = build_pipeline({"name": "t", "stages": stages}).run(cs, ctx)
    return [(d, round(s, 6)) for d, s in ranked(st, cs, 0)], st, cs


def _preset(name):
    """A preset without the budget stage (written elsewhere): the ranking part only."""
    cfg = resolve_preset(name)
    cfg["stages"] = [s for s in cfg["stages"] if s["type"] != "budget.pack"]
    return build_pipeline(cfg)


def _run_preset(name, obj):
    cs = candidates_from_json(obj)
    st = _preset(name).run(cs)
    return [(d, round(s, 6)) for d, s in ranked(st, cs, 0)]


MERGE = {"type": "fuse.weighted_linear", "vector_arm": "vec", "text_arm": "fts", "sort": False}
DECAY = {"type": "decay.half_life"}
SORT = {"type": "decay.half_life", "enabled": False}
MIN = {"type": "filter.min_score", "threshold": 0.35}
TOP = {"type": "cutoff.top_k", "k": 6}


# ---- Example A1 -------------------------------------------------------------------------------------------

A1 = {
    "query": "home network",
    "documents": [{"id": "c1", "text": "t1", "path": "memory/2026-02-10.md"},
                  {"id": "c2", "text": "t2", "path": "MEMORY.md"},
                  {"id": "c3", "text": "t3", "path": "memory/projects.md"},
                  {"id": "c4", "text": "t4", "path": "memory/2026-01-05.md"},
                  {"id": "c5", "text": "t5", "path": "memory/2026-02-01.md"}],
    # vector = raw cosine (sqlite-vec 1 - distance); keyword = BM25 score, FTS5 rank = -score
    "arms": {"vec": [{"id": "c1", "score": 0.82}, {"id": "c2", "score": 0.61}, {"id": "c3", "score": 0.40},
                     {"id": "c4", "score": 0.30}],
             "fts": [{"id": "c5", "score": 7.9}, {"id": "c2", "score": 4.1}, {"id": "c4", "score": 1.2}]},
}


def test_a1_defaults_merged_list_and_output():
    out, st, cs = _run([MERGE, SORT, MIN, TOP], A1, Context(trace=True))
    assert out == [("c2", 0.727), ("c1", 0.574), ("c4", 0.51)]
    # the full merged + sorted list before the threshold (c5, the strongest BM25 hit, is dropped at 0.300)
    _, cols, scores, _, _ = st.trace[1]
    merged = [(cs.corpus.ids[cs.doc[0, c]], round(s, 6)) for c, s in zip(cols[0], scores[0]) if c >= 0]
    assert merged == [("c2", 0.727), ("c1", 0.574), ("c4", 0.51), ("c5", 0.3), ("c3", 0.28)]


def test_a1_insertion_order_is_vector_then_keyword_only():
    out, _, _ = _run([MERGE], A1)
    assert [d for d, _ in out] == ["c1", "c2", "c3", "c4", "c5"]


def test_a1_latest_upstream_scores():
    stages = [dict(MERGE, text_map="rel_over_1_plus_rel"), SORT]
    out, _, _ = _run(stages, A1)
    assert out == [("c2", 0.668176), ("c1", 0.574), ("c4", 0.373636), ("c3", 0.28), ("c5", 0.266292)]
    out, _, _ = _run(stages + [MIN, TOP], A1)
    assert [d for d, _ in out] == ["c2", "c1", "c4"]


def test_a1_through_presets():
    assert _run_preset("openclaw_core_2026_2_26", A1) == [("c2", 0.727), ("c1", 0.574), ("c4", 0.51)]
    assert _run_preset("openclaw_core_2026_2_26_fixed_bm25_score", A1) == [
        ("c2", 0.668176), ("c1", 0.574), ("c4", 0.373636)]
    # something passes minScore, so the relaxed floor changes nothing
    assert _run_preset("openclaw_core_2026_2_26_fixed_keyword_floor", A1) == [
        ("c2", 0.727), ("c1", 0.574), ("c4", 0.51)]


def test_keyword_only_hits_never_pass_as_shipped_and_the_2026_3_2_floor():
    """§A.10: all-zero query embedding → vector arm empty → keyword-only entries score tw' = 0.3 < 0.35."""
    obj = dict(A1, arms={"vec": [], "fts": A1["arms"]["fts"]})
    assert _run_preset("openclaw_core_2026_2_26", obj) == []
    assert _run_preset("openclaw_core_2026_2_26_fixed_keyword_floor", obj) == [
        ("c5", 0.3), ("c2", 0.3), ("c4", 0.3)]
    # with upstream's rel/(1+rel) the keyword-only scores fall below min(minScore, tw) = 0.3 as well
    assert _run_preset("openclaw_core_2026_2_26_fixed_all", obj) == []
    # no keyword hits at all → the relaxed floor does not apply
    obj2 = dict(A1, arms={"vec": [{"id": "c3", "score": 0.2}], "fts": []})
    assert _run_preset("openclaw_core_2026_2_26_fixed_keyword_floor", obj2) == []


def test_empty_query_returns_nothing():
    obj = dict(A1, query=" \u3000\ufeff ")
    cs = candidates_from_json(obj)
    st = _preset("openclaw_core_2026_2_26").run(cs)
    assert st.skipped.tolist() == [True] and ranked(st, cs, 0) == []


# ---- Example A2 (MMR) -------------------------------------------------------------------------------------

A2 = {
    "query": "router",
    "documents": [
        {"id": "A", "text": "Configured Omada router, set VLAN 10 for IoT devices", "path": "memory/2026-02-10.md"},
        {"id": "B", "text": "Configured Omada router, moved IoT to VLAN 10", "path": "memory/2026-02-08.md"},
        {"id": "D", "text": "Router: Omada ER605, AdGuard: 192.168.10.2, VLAN 10: IoT", "path": "memory/network.md"},
        {"id": "C", "text": "Set up AdGuard DNS on 192.168.10.2", "path": "memory/2026-02-05.md"}],
    "arms": {"vec": [{"id": "A", "score": 0.92}, {"id": "B", "score": 0.89}, {"id": "D", "score": 0.85},
                     {"id": "C", "score": 0.78}]},
}
SINGLE = {"type": "fuse.single", "arm": "vec"}


def test_a2_token_sets_and_jaccard():
    assert snippet_tokens(A2["documents"][0]["text"]) == {"10", "configured", "devices", "for", "iot", "omada",
                                                         "router", "set", "vlan"}
    assert len(snippet_tokens(A2["documents"][2]["text"])) == 10
    cs = candidates_from_json(A2)
    J = jaccard_matrix(cs)[0]
    idx = {d: i for i, d in enumerate(cs.ids(0, np.arange(4)))}
    pairs = {"AB": 0.545455, "AC": 0.125, "AD": 0.357143, "BC": 0.0625, "BD": 0.384615, "CD": 0.357143}
    for p, v in pairs.items():
        assert J[idx[p[0]], idx[p[1]]] == pytest.approx(v, abs=1e-6)
    assert np.allclose(np.diag(J), 1.0)


def test_a2_greedy_step_values_at_default_lambda():
    cs = candidates_from_json(A2)
    J = jaccard_matrix(cs)[0]
    rel = {"A": 1.0, "B": (0.89 - 0.78) / 0.14, "D": (0.85 - 0.78) / 0.14, "C": 0.0}
    assert rel["B"] == pytest.approx(0.785714, abs=1e-6) and rel["D"] == pytest.approx(0.5)
    i = {"A": 0, "B": 1, "D": 2, "C": 3}
    mmr = lambda d, sel: 0.7 * rel[d] - 0.3 * max([J[i[d], i[s]] for s in sel], default=0.0)  # noqa: E731
    assert [round(mmr(d, []), 6) for d in "ABDC"] == [0.7, 0.55, 0.35, 0.0]
    assert [round(mmr(d, ["A"]), 6) for d in "BDC"] == [0.386364, 0.242857, -0.0375]
    assert [round(mmr(d, ["A", "B"]), 6) for d in "DC"] == [0.234615, -0.0375]
    assert round(mmr("C", ["A", "B", "D"]), 6) == -0.107143


@pytest.mark.parametrize("lam,order", [(0.7, "ABDC"), (0.5, "ABDC"), (0.3, "ACDB")])
def test_a2_mmr_orders(lam, order):
    out, _, _ = _run([SINGLE, {"type": "diversity.openclaw_mmr", "lam": lam}], A2)
    assert "".join(d for d, _ in out) == order
    # scores are never changed
    assert dict(out) == {"A": 0.92, "B": 0.89, "D": 0.85, "C": 0.78}


def test_mmr_lambda_one_is_a_plain_stable_sort_and_disabled_is_a_noop():
    obj = dict(A2, arms={"vec": [{"id": "C", "score": 0.5}, {"id": "A", "score": 0.9}, {"id": "B", "score": 0.5}]})
    out, _, _ = _run([SINGLE, {"type": "diversity.openclaw_mmr", "lam": 1.0}], obj)
    assert [d for d, _ in out] == ["A", "C", "B"]
    out, _, _ = _run([SINGLE, {"type": "diversity.openclaw_mmr", "enabled": False}], obj)
    assert [d for d, _ in out] == ["C", "A", "B"]


def test_mmr_ties_prefer_higher_raw_score_then_earlier():
    # identical texts: after A is picked, B and C tie on MMR only if relevance ties; use equal scores and texts
    docs = [{"id": x, "text": "same words here"} for x in "ABC"] + [{"id": "E", "text": "other"}]
    obj = {"query": "q", "documents": docs,
           "arms": {"vec": [{"id": "A", "score": 0.9}, {"id": "B", "score": 0.5}, {"id": "C", "score": 0.5},
                            {"id": "E", "score": 0.5}]}}
    out, _, _ = _run([SINGLE, {"type": "diversity.openclaw_mmr", "lam": 0.5}], obj)
    # step 2: B and C are redundant with A (Jaccard 1), E is not → E; then B before C (earlier, equal score)
    assert [d for d, _ in out] == ["A", "E", "B", "C"]
    # equal MMR value, higher raw score wins over an earlier position
    docs2 = [{"id": "A", "text": "x1"}, {"id": "B", "text": "x2"}, {"id": "C", "text": "x3"}]
    obj2 = {"query": "q", "documents": docs2, "arms": {"vec": [{"id": "A", "score": 0.5}, {"id": "B", "score": 0.5},
                                                               {"id": "C", "score": 0.5}]}}
    out, _, _ = _run([SINGLE, {"type": "diversity.openclaw_mmr"}], obj2)
    assert [d for d, _ in out] == ["A", "B", "C"]


def test_mmr_cjk_snippets_are_maximally_redundant():
    docs = [{"id": "a", "text": "部署失败"}, {"id": "b", "text": "数据库迁移"}, {"id": "c", "text": "deploy failed"}]
    cs = candidates_from_json({"query": "q", "documents": docs,
                               "arms": {"vec": [{"id": d["id"], "score": 1 - i / 10} for i, d in enumerate(docs)]}})
    J = jaccard_matrix(cs)[0]
    assert J[0, 1] == 1.0 and J[0, 2] == 0.0


def test_snippet_is_truncated_to_700_utf16_units_surrogate_safe():
    s = "a" * 699 + "😀" + "b"
    assert utf16_truncate(s, 700) == "a" * 699
    assert utf16_truncate("x" * 698 + "😀b", 700) == "x" * 698 + "😀"
    assert snippet_tokens("w " * 349 + "tail end") == {"w", "ta"}  # "tail" starts at unit 698: cut to "ta"
    assert snippet_tokens("w " * 349 + "tail", 0) == {"w", "tail"}


# ---- Example A3 (temporal decay) ---------------------------------------------------------------------------

A3 = {
    "query": "q", "as_of": "2026-02-10T00:00:00Z",
    "documents": [
        {"id": "d1", "text": "1", "path": "memory/2025-09-15.md"},
        {"id": "d2", "text": "2", "path": "memory/2026-02-10.md"},
        {"id": "d3", "text": "3", "path": "memory/2026-02-03.md"},
        {"id": "d5", "text": "5", "path": "memory/2026-02-10-standup.md"},
        {"id": "d4", "text": "4", "path": "MEMORY.md"},
        {"id": "d6", "text": "6", "path": "sessions/s1.jsonl", "source": "sessions", "mtime": "2026-01-27T00:00:00Z"},
        {"id": "d7", "text": "7", "path": "memory/2026-02-30.md"}],
    "arms": {"vec": [{"id": "d1", "score": 0.91}, {"id": "d2", "score": 0.82}, {"id": "d3", "score": 0.80},
                     {"id": "d5", "score": 0.70}, {"id": "d4", "score": 0.60}, {"id": "d6", "score": 0.75},
                     {"id": "d7", "score": 0.66}],
             "fts": [{"id": "d2", "score": 2.5}]},
}
A3_OUT = [("d2", 0.874), ("d5", 0.49), ("d3", 0.476374), ("d7", 0.462), ("d4", 0.42), ("d6", 0.379908)]


def test_a3_decay_table_and_output():
    out, _, _ = _run([MERGE, DECAY], A3)
    assert out == A3_OUT + [("d1", 0.020848)]
    out, _, _ = _run([MERGE, DECAY, MIN, TOP], A3)
    assert out == A3_OUT


def test_a3_through_decay_mmr_preset_keeps_the_passing_set():
    """MMR runs before the threshold and never changes scores: the passing set is A3's (6 items ≤ maxResults)."""
    out = _run_preset("openclaw_core_2026_2_26_decay_mmr", A3)
    assert sorted(out) == sorted(A3_OUT)
    assert out[0] == ("d2", 0.874)


@pytest.mark.parametrize("age,mult", [(0, 1.0), (7, 0.850667), (30, 0.5), (90, 0.125), (148, 0.032728),
                                      (180, 0.015625)])
def test_decay_multiplier_table(age, mult):
    now = 1770681600.0  # 2026-02-10
    from datetime import datetime, timezone
    date = datetime.fromtimestamp(now - age * DAY, tz=timezone.utc).strftime("%Y-%m-%d")
    obj = {"query": "q", "as_of": now, "documents": [{"id": "x", "text": "x", "path": f"memory/{date}.md"}],
           "arms": {"vec": [{"id": "x", "score": 1.0}]}}
    out, _, _ = _run([SINGLE, DECAY], obj)
    assert out[0][1] == pytest.approx(mult, abs=1e-6)


@pytest.mark.parametrize("path,source,kind", [
    ("memory/2026-02-10.md", "memory", "dated"),
    ("./memory/2026-02-10.md", "memory", "dated"),
    ("memory\\2026-02-10.md", "memory", "dated"),
    ("notes/memory/2026-02-10.md", "memory", "dated"),
    ("memory/2026-02-10-standup.md", "memory", "evergreen"),
    ("memory/archive/2025-01-01.md", "memory", "evergreen"),
    ("MEMORY.md", "memory", "evergreen"),
    ("memory.md", "memory", "evergreen"),
    ("memory/projects.md", "memory", "evergreen"),
    ("memory/projects.md", "sessions", "mtime"),  # evergreen only for source memory
    ("memory/2026-02-30.md", "memory", "mtime"),  # matches the pattern, not a real date → not evergreen either
    ("memory/0099-01-01.md", "memory", "mtime"),  # Appendix D: years 0000-0099 never count
    ("memory/２０２６-01-05.md", "memory", "evergreen"),  # Appendix D: full-width digits are not dated
    ("notes/x.md", "memory", "mtime"),
    ("sessions/s1.jsonl", "sessions", "mtime"),
])
def test_timestamp_rules(path, source, kind):
    mtime = 1.0e9
    ts = openclaw_file_timestamp(path, source, mtime)
    if kind == "dated":
        assert ts == openclaw_path_date(path) and ts is not None and ts != mtime
    elif kind == "evergreen":
        assert math.isnan(ts) and openclaw_is_evergreen(path, source)
    else:
        assert ts == mtime
        assert math.isnan(openclaw_file_timestamp(path, source, float("nan")))


def test_dated_paths_are_midnight_utc_and_future_dates_do_not_boost():
    assert openclaw_path_date("memory/2026-02-10.md") == 1770681600.0
    assert openclaw_path_date("memory/2024-02-29.md") is not None
    assert openclaw_path_date("memory/2025-02-29.md") is None
    obj = {"query": "q", "as_of": "2026-02-10T00:00:00Z",
           "documents": [{"id": "f", "text": "f", "path": "memory/2026-03-01.md"},
                         {"id": "n", "text": "n", "path": "notes/n.md"}],
           "arms": {"vec": [{"id": "f", "score": 0.5}, {"id": "n", "score": 0.4}]}}
    out, _, _ = _run([SINGLE, DECAY], obj)
    assert out == [("f", 0.5), ("n", 0.4)]  # future → age 0; no mtime → no decay


def test_decay_without_now_does_nothing():
    obj = dict(A3)
    obj.pop("as_of")
    out, _, _ = _run([MERGE, DECAY], obj)
    assert [d for d, _ in out] == ["d1", "d2", "d3", "d5", "d4", "d6", "d7"]


def test_decay_timestamp_mode_uses_document_timestamps():
    obj = {"query": "q", "as_of": "2026-02-10T00:00:00Z",
           "documents": [{"id": "a", "text": "a", "timestamp": "2026-01-11T00:00:00Z"},
                         {"id": "b", "text": "b"}],
           "arms": {"vec": [{"id": "a", "score": 0.8}, {"id": "b", "score": 0.5}]}}
    out, _, _ = _run([SINGLE, dict(DECAY, timestamps="timestamp")], obj)
    assert out == [("b", 0.5), ("a", 0.4)]


# ---- Example A4 (FTS-only) ---------------------------------------------------------------------------------

A4 = {
    "query": "what was the solution for the deploy bug",
    "documents": [{"id": k, "text": k} for k in ("k1", "k2", "k3", "k4", "k5")],
    "arms": {"fts#0": [{"id": "k3", "score": 3.0}, {"id": "k1", "score": 2.0}],
             "fts#1": [{"id": "k2", "score": 5.5}, {"id": "k1", "score": 4.0}, {"id": "k4", "score": 1.1}],
             "fts#2": [{"id": "k4", "score": 6.0}, {"id": "k5", "score": 0.5}]},
}


def test_a4_fts_only_as_shipped_and_upstream():
    assert openclaw_keywords(Query("q", A4["query"])) == ["solution", "deploy", "bug"]
    assert _run_preset("openclaw_core_2026_2_26_fts_only", A4) == [
        ("k3", 1.0), ("k1", 1.0), ("k2", 1.0), ("k4", 1.0), ("k5", 1.0)]
    assert _run_preset("openclaw_core_2026_2_26_fts_only_fixed_bm25_score", A4) == [
        ("k4", 0.857143), ("k2", 0.846154), ("k1", 0.8), ("k3", 0.75)]


def test_fts_only_merge_keeps_strictly_higher_score_first_seen_position():
    stage = {"type": "fuse.openclaw_fts_only", "arm": "fts", "map": "identity"}
    obj = {"query": "q", "documents": [{"id": k, "text": k} for k in "abc"],
           "arms": {"fts#0": [{"id": "a", "score": 1.0}, {"id": "b", "score": 2.0}],
                    "fts#1": [{"id": "c", "score": 2.0}, {"id": "a", "score": 2.0}, {"id": "b", "score": 1.0}]}}
    out, _, _ = _run([stage], obj)
    assert out == [("a", 2.0), ("b", 2.0), ("c", 2.0)]  # a raised to 2.0 keeps its first-seen slot (before b)
    # a plain arm (no variants) works too
    out, _, _ = _run([stage], {"query": "q", "documents": obj["documents"], "arms": {"fts": obj["arms"]["fts#0"]}})
    assert out == [("b", 2.0), ("a", 1.0)]


# ---- keyword extraction -----------------------------------------------------------------------------------

KEYWORD_VECTORS = [
    ("that thing we discussed about the API", ["discussed", "api"]),
    ("之前讨论的那个方案", ["之", "讨", "论", "个", "方", "案", "前讨", "讨论", "论的", "的那", "个方", "方案"]),
    ("what was the solution for the deploy bug", ["solution", "deploy", "bug"]),
    ("¿Qué decidimos sobre la base de datos?", ["decidimos", "base", "datos"]),
    ("o que falamos sobre o servidor", ["falamos", "servidor"]),
    ("어제 서버에서 에러가 났어", ["서버에서", "서버", "에러가", "에러", "났어"]),
    ("昨日のデプロイでエラーが出た", ["デプロイ", "エラー", "出"]),
    ("JSONのパースエラー", ["json", "パースエラー"]),
    ("API를 설정했어", ["api를", "api", "설정했어"]),
    ("hi ok db 2024 ci/cd pipeline", ["pipeline"]),
    ("ما الذي ناقشناه حول الخادم", ["ما", "الذي", "ناقشناه", "حول", "الخادم"]),
]


@pytest.mark.parametrize("query,expected", KEYWORD_VECTORS)
def test_keyword_vectors(query, expected):
    assert extract_keywords(query) == expected


def test_stop_word_set_sizes():
    from retrievers.stages.helpers.keywords import KO_PARTICLES, STOP_SETS
    assert {k: len(v) for k, v in STOP_SETS.items()} == {"en": 97, "es": 65, "pt": 61, "ar": 53, "ko": 94,
                                                         "ja": 45, "zh": 88}
    assert len(KO_PARTICLES) == 25 and KO_PARTICLES[:2] == ("에서", "으로")


def test_keyword_appendix_d_details():
    assert extract_keywords("deploy 2024 ２０２６ ٢٠٢٤") == ["deploy", "２０２６", "٢٠٢٤"]  # only ASCII digits dropped
    assert extract_keywords("deploy\ufeffpipeline") == ["deploy", "pipeline"]  # BOM splits like whitespace
    assert extract_keywords("c++ $$$ rocks") == ["c++", "rocks"]  # symbols stay inside tokens; pure symbols go
    assert extract_keywords("Deploy deploy DEPLOY") == ["deploy"]
    assert extract_keywords("前 之前") == ["之"]  # JA "前" and ZH "之前" apply to every token; "之" survives


def test_keyword_query_transform_fallbacks():
    assert openclaw_keywords(Query("q", "   ")) == []
    assert openclaw_keywords(Query("q", "  the a  ")) == ["the a"]


# ---- §A.1 config normalisation ------------------------------------------------------------------------------

def _oc(query=None, **hybrid):
    """The resolved values of a memorySearch block {query: {..., hybrid: {...}}} (the config front end)."""
    q = dict(query or {})
    if hybrid:
        q["hybrid"] = hybrid
    return from_config("openclaw", {"memorySearch": {"query": q}}).resolved


def test_config_resolution_rules():
    """§A.1 lives in the config front end now (the stages take raw values)."""
    d = _oc()
    assert (d["query.maxResults"], d["query.minScore"], d["candidates per arm"], d["query.hybrid.mmr.lambda"],
            d["query.hybrid.temporalDecay.halfLifeDays"]) == (6, 0.35, 24, 0.7, 30)
    assert (d["query.hybrid.vectorWeight"], d["query.hybrid.textWeight"]) == pytest.approx((0.7, 0.3))
    assert _oc({"minScore": 1.5})["query.minScore"] == 1.0
    assert _oc({"minScore": -0.2})["query.minScore"] == 0.0
    assert openclaw_weights(0.5, 0.25) == pytest.approx((0.666667, 0.333333), abs=1e-6)
    assert openclaw_weights(0, 0) == (0.7, 0.3)
    assert openclaw_weights(3.0, -1.0) == (1.0, 0.0)
    assert _oc(candidateMultiplier=0)["query.hybrid.candidateMultiplier"] == 1
    assert _oc(candidateMultiplier=50)["query.hybrid.candidateMultiplier"] == 20
    assert _oc(candidateMultiplier=2.7)["candidates per arm"] == 12
    assert _oc({"maxResults": 100})["candidates per arm"] == 200
    assert _oc(mmr={"lambda": 1.5})["query.hybrid.mmr.lambda"] == 1.0
    assert _oc(mmr={"lambda": float("nan")})["query.hybrid.mmr.lambda"] == 0.7
    for h, want in ((0, 1), (0.5, 1), (7.9, 7), (float("inf"), 30), ("14", 30)):
        assert _oc(temporalDecay={"halfLifeDays": h})["query.hybrid.temporalDecay.halfLifeDays"] == want


def test_weighted_linear_takes_raw_weights():
    """mergeHybridResults with raw weights: no clamp, no renormalisation; 0/0 makes every merged score 0
    (the §A.1 normalisation is the config front end's)."""
    out, _, _ = _run([dict(MERGE, vector_weight=0.5, text_weight=0.25), SORT], A1)
    assert dict(out)["c2"] == pytest.approx(0.5 * 0.61 + 0.25)
    out0, _, _ = _run([dict(MERGE, vector_weight=0, text_weight=0), SORT], A1)
    assert all(v == 0.0 for _, v in out0) and len(out0) == 5
    out_big, _, _ = _run([dict(MERGE, vector_weight=3.0, text_weight=-1.0), SORT], A1)
    assert dict(out_big)["c2"] == pytest.approx(3.0 * 0.61 - 1.0)


def test_half_life_decay_takes_the_raw_half_life():
    """calculateTemporalDecayMultiplier: the half-life is used as given (0.5 d → a day-old row ×0.25), and <= 0
    disables the decay (×1). OpenClaw's config floor max(1, floor(h)) is the front end's."""
    obj = {"query": "q", "as_of": "2026-02-10T00:00:00Z",
           "documents": [{"id": "x", "text": "x", "path": "memory/2026-02-09.md"}],
           "arms": {"vec": [{"id": "x", "score": 1.0}]}}
    for h, want in ((0.5, 0.25), (1.0, 0.5), (1.9, 2 ** (-1 / 1.9)), (0, 1.0), (-3, 1.0)):
        out, _, _ = _run([SINGLE, dict(DECAY, half_life_days=h)], obj)
        assert out[0][1] == pytest.approx(want)
    assert from_config("openclaw", {"query": {"hybrid": {"temporalDecay": {"halfLifeDays": 0.5}}}}).overrides[
        "decay"]["half_life_days"] == 1.0


def test_presets_build_and_are_deterministic():
    for name in ("openclaw_core_2026_2_26", "openclaw_core_2026_2_26_decay_mmr",
                 "openclaw_core_2026_2_26_fixed_bm25_score", "openclaw_core_2026_2_26_fixed_keyword_floor",
                 "openclaw_core_2026_2_26_fixed_all"):
        a, b = _run_preset(name, A3), _run_preset(name, A3)
        assert a == b and a
    cfg = resolve_preset("openclaw_core_2026_2_26")
    assert cfg["stages"][-1] == {"label": "budget", "type": "budget.pack", "max_chunks": 6, "snippet_chars": 700,
                                 "format": "openclaw"}
    assert [a["depth"] for a in cfg["arms"]] == [24, 24]
    assert resolve_preset("openclaw_core_2026_2_26_fixed_bm25_score")["fixes"]


def test_non_integer_max_results_multiplies_raw_and_truncates_when_slicing():
    r = from_config("openclaw", {"query": {"maxResults": 2.5}})
    assert r.resolved["candidates per arm"] == 10 and r.overrides["top_k"]["k"] == 2
    assert [a["depth"] for a in r.arms] == [10, 10]


def test_fts_only_preset_declares_keyword_variant_arms():
    p = _preset("openclaw_core_2026_2_26_fts_only")
    (arm,) = p.arms
    assert (arm.kind, arm.tokenizer, arm.match, arm.query, arm.depth) == ("lexical", "unicode61", "all",
                                                                          "openclaw_keywords", 24)
    assert arm.variant_names[:3] == ["fts#0", "fts#1", "fts#2"]
