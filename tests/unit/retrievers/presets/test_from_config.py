"""Issue 19: presets from the systems' own config files (``evalkit preset from-config``), and the knobs the
presets lacked — each a worked example through a candidate file (``evalkit score`` or ``candidates_from_json``).

Expected values are closed forms written out here (PIPELINES.md formulas), not the library's output.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalkit.cli import main
from evalkit.engine.runner import QueryResult, RetrieverRun
from evalkit.workflows.replay import serve_from_cache
from retrievers.candidates.files import candidates_from_json
from retrievers.errors import ConfigError
from retrievers.pipeline import build_pipeline, load_preset, ranked
from retrievers.presets.config import from_config, preset_toml
from retrievers.stages.gate import hookclaw_skip_decision
from tests.helpers import FIXTURES

FIX = FIXTURES / "from_config"
DAY = 86400.0


def _load(name: str) -> dict:
    return json.loads((FIX / name).read_text(encoding="utf-8"))


def _from_config(tmp_path, capsys, system: str, config: str, *extra: str) -> tuple[Path, str]:
    out = tmp_path / f"{system}.toml"
    rc = main(["preset", "from-config", "--system", system, str(FIX / config), "--name", "mine", "--out", str(out),
               *extra])
    err = capsys.readouterr().err
    assert rc == 0, err
    return out, err


def _score(capsys, preset: Path | str, candidates) -> list[dict]:
    rc = main(["score", "--preset", str(preset), "--candidates", str(candidates)])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)["queries"]


def _ids(q: dict) -> list[str]:
    return [r["id"] for r in q["ranked"]]


# ---- deliverable 1: one real-shaped config per system → resolved preset → evalkit score ------------------------

def test_openclaw_config_resolves_as_mergeconfig_and_scores(tmp_path, capsys):
    """maxResults 4.5 → top 4 and 90 candidates (floor(4.5 × 20)); minScore −0.5 → 0; vectorWeight 1.5 → 1 with
    textWeight absent (0.3) → 1/1.3, 0.3/1.3; multiplier 30 → 20; λ 1.7 → 1; half-life 0.5 → 1 day (§A.1)."""
    toml, err = _from_config(tmp_path, capsys, "openclaw", "openclaw.json")
    assert "query.minScore = -0.5 → 0" in err and "candidates per arm = 90" in err
    assert "query.hybrid.temporalDecay.halfLifeDays = 0.5 → 1" in err
    assert "rejects it" in err  # the zod schema notes
    p = load_preset(str(toml))
    assert [a.depth for a in p.arms] == [90, 90]
    merge = next(s for s in p.stages if s.display == "merge")
    assert (merge.vector_weight, merge.text_weight) == pytest.approx((1 / 1.3, 0.3 / 1.3))
    (q,) = _score(capsys, toml, FIX / "openclaw_candidates.json")
    vw, tw = 1 / 1.3, 0.3 / 1.3
    want = {"c2": vw * 0.61 + tw, "c1": vw * 0.82, "c3": vw * 0.40,  # evergreen / dated today: no decay
            "c5": tw * 2 ** -9}  # memory/2026-02-01.md is 9 days old at half-life 1 day
    assert _ids(q) == ["c2", "c1", "c3", "c5"]  # c4 (36 d old, ×2^-36) is 5th: top 4 keeps it out
    for r in q["ranked"]:
        assert r["score"] == pytest.approx(want[r["id"]], abs=1e-6)


def test_lancedb_pro_config_resolves_and_scores(tmp_path, capsys):
    """minScore "0.25" compared as a number; pool max(2, 2·3) = 6; rerank lightweight → cosine fallback; recency
    half-life 0 and anchor −100 → those steps off; time decay default 60; hardMinScore 0.3; limit 3 (§B.1–B.4)."""
    toml, err = _from_config(tmp_path, capsys, "lancedb-pro", "lancedb_pro.json")
    assert "candidate pool per arm = 6" in err and "rerank path = 'cosine'" in err
    assert "declared but not used" in err
    (q,) = _score(capsys, toml, FIX / "lancedb_pro_candidates.json")
    cos_q = {"m1": 1.0, "m2": 0.0, "m3": 0.95 / math.hypot(0.95, 0.312), "m4": 0.0, "m5": 0.6}
    fused = {"m1": 1.0, "m2": 1 / (3 - 1.5), "m3": 1 / (1 + math.exp(-2 / 5)), "m4": 1 / (3 - 0.5), "m5": 1 / 3}
    imp = {"m1": 0.9, "m2": 0.5, "m3": 0.7, "m4": 0.3, "m5": 1.0}
    age = {"m1": 2, "m2": 30, "m3": 0.5, "m4": 10, "m5": 1}
    final = {d: min(1, 0.7 * fused[d] + 0.3 * cos_q[d]) * (0.7 + 0.3 * imp[d]) * (0.5 + 0.5 * math.exp(-age[d] / 60))
             for d in fused}
    assert final["m4"] < 0.3  # hardMinScore drops it
    # m3 (cos 0.95 with m1) is deferred behind m5 and m2 by the diversity step, then the limit cuts it
    assert _ids(q) == ["m1", "m5", "m2"]
    for r in q["ranked"]:
        assert r["score"] == pytest.approx(final[r["id"]], abs=1e-6)


def test_hookclaw_v2_0_config_resolves_and_scores(tmp_path, capsys):
    """maxResults 4.7 → OpenClaw top 4 (18 candidates), RRF with weights {vector 1, recency "0.5"} (bm25/entity
    absent → 0), enableBm25 → the enricher runs → the "last 3 days" window reaches RRF; halfLifeHours −1 → no
    decay; adaptive off; Markdown block."""
    toml, err = _from_config(tmp_path, capsys, "hookclaw-v2.0", "hookclaw_v2_0.json")
    assert "query enricher runs = true" in err and "temporal window reaches RRF = true" in err
    (q,) = _score(capsys, toml, FIX / "hookclaw_v2_0_candidates.json")
    # N = 4 unique docs; vector ranks T1 O2 Y3 M4; recency ranks T1 Y2 O3 M4 (undated last)
    rrf = {"T": 1 / 61 + 0.5 / 61, "O": 1 / 62 + 0.5 / 63, "Y": 1 / 63 + 0.5 / 62, "M": 1 / 64 + 0.5 / 64}
    assert _ids(q) == ["T", "Y", "M"]  # O (2026-01-02) is outside [2026-02-11T00:00, now]
    for r in q["ranked"]:
        assert r["score"] == pytest.approx(rrf[r["id"]], abs=1e-6)
    assert q["injected_block"] == (
        "---\n**Relevant Memories:**\n\n"
        "> *memory* | `memory/2026-02-14.md` | (score: 0.025)\nDeploy pipeline switched to blue green\n\n"
        "> *memory* | `memory/2026-02-13.md` | (score: 0.024)\nFixed the login timeout bug\n\n"
        "> *memory* | `MEMORY.md` | lines 1-4 | (score: 0.023)\nPostgres backups nightly\n\n---")


def test_hookclaw_v2_1_config_resolves_and_scores(tmp_path, capsys):
    """maxResults 2 (OpenClaw top 2, FTS 8 rows keep 4), minScore null → OpenClaw's 0.35, skipShortPrompts 12.5
    → a 13-unit prompt passes, ftsBoostWeight 0.5, half-life default 168 h, MMR off (0), Markdown (§C.1, §C.3)."""
    toml, err = _from_config(tmp_path, capsys, "hookclaw-v2.1", "hookclaw_v2_1.json")
    assert "halfLifeHours = (absent) → 168" in err
    (q,) = _score(capsys, toml, FIX / "hookclaw_v2_1_candidates.json")
    a = min(1.0, 0.52 + 0.5 * (4 / 6)) * 2 ** (-12 / 168)  # FTS rank −4 → 4/(4+2); 12 h old
    assert [(r["id"], r["score"]) for r in q["ranked"]] == [("A", pytest.approx(a, abs=1e-6)),
                                                           ("X", pytest.approx(0.55, abs=1e-6))]
    assert q["injected_block"].startswith("---\n**Relevant Memories:**\n\n> *memory* | `memory/2026-02-14.md` | "
                                          "(score: 0.812)\n")
    short = json.loads((FIX / "hookclaw_v2_1_candidates.json").read_text())
    short["query"] = "deploy note?"  # 12 units < 12.5
    src = tmp_path / "short.json"
    src.write_text(json.dumps(short))
    (q,) = _score(capsys, toml, src)
    assert q["skipped"] is True


def test_the_written_preset_extends_the_as_shipped_one_and_defaults_change_nothing(tmp_path):
    """A config of defaults resolves to the as-shipped values: same stages and arm depths as the preset it extends
    (for v2.0 the defaults plus the rollout flags the as-shipped preset assumes)."""
    rollout = {"enableBm25": True, "enableRrf": True, "enableTemporalParsing": True}  # the v2.0 preset's flags
    for system, base, cfg in (("openclaw", "openclaw_core_2026_2_26", {}), ("lancedb-pro", "lancedb_pro_6a50220", {}),
                              ("hookclaw-v2.0", "hookclaw_v2_0_rrf", rollout), ("hookclaw-v2.1", "hookclaw_v2_1_fts", {})):
        res = from_config(system, cfg)
        path = tmp_path / f"{base}_same.toml"
        path.write_text(preset_toml(res, path.stem))
        mine, shipped = load_preset(str(path)), load_preset(base)
        strip = [s for s in mine.stages if s.name != "gate.hookclaw_cache"]  # the cache acts only in replays
        mine_p, shipped_p = [s.params() for s in strip], [s.params() for s in shipped.stages]
        if system == "lancedb-pro":
            # no rerankApiKey in the config → the original always takes the cosine fallback; the as-shipped
            # preset does so too unless JINA_API_KEY is set in the environment (offline it never is)
            (i,) = [i for i, s in enumerate(shipped_p) if s["label"] == "rerank"]
            assert (mine_p[i]["mode"], shipped_p[i]["mode"]) == ("lightweight", "cross-encoder")
            mine_p[i]["mode"] = "cross-encoder"
        assert mine_p == shipped_p, system
        assert [a.depth for a in mine.arms] == [a.depth for a in shipped.arms], system


@pytest.mark.parametrize("system, config, extra, needle", [
    ("openclaw", {"memorySearch": {"enabled": False}}, [], "memory search is off"),
    ("openclaw", {"query": {"hybird": {}}}, [], "unknown key(s) hybird"),
    ("openclaw", {"query": {"maxResults": 0}}, [], "maxResults = 0"),
    ("openclaw", {"query": {}}, ["--limit", "3"], "--limit does not apply to --system openclaw"),
    ("lancedb-pro", {"retrieval": {"minScroe": 0.3}}, [], "unknown key(s) minScroe"),
    ("lancedb-pro", {"autoRecall": False, "embedding": {}}, [], "autoRecall is false"),
    ("lancedb-pro", {"retrieval": {"lengthNormAnchor": "wide"}}, [], "multiplies every score by 0.3"),
    ("hookclaw-v2.0", {"skipPatterns": "^x"}, [], "skipPatterns"),
    ("hookclaw-v2.1", {"halfLifeHours": "soon"}, [], "halfLifeHours"),
    ("nope", {}, [], "unknown system 'nope'"),
])
def test_invalid_configs_are_one_line_and_write_nothing(tmp_path, capsys, system, config, extra, needle):
    src, out = tmp_path / "cfg.json", tmp_path / "out.toml"
    src.write_text(json.dumps(config))
    rc = main(["preset", "from-config", "--system", system, str(src), "--out", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("evalkit: error:") and needle in err[0], err
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_out_never_replaces_a_file_evalkit_did_not_write(tmp_path, capsys):
    """--out on a user's file: one line, the file untouched; on an earlier from-config output: replaced."""
    mine = tmp_path / "mine.toml"
    mine.write_text("name = 'hand written'\n")
    rc = main(["preset", "from-config", "--system", "openclaw", str(FIX / "openclaw.json"), "--out", str(mine)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "evalkit never replaces it" in err[0], err
    assert mine.read_text() == "name = 'hand written'\n"
    out = tmp_path / "gen.toml"
    for system in ("openclaw", "hookclaw-v2.1"):
        cfg = "openclaw.json" if system == "openclaw" else "hookclaw_v2_1.json"
        assert main(["preset", "from-config", "--system", system, str(FIX / cfg), "--out", str(out)]) == 0
        assert load_preset(str(out)).meta["tags"][1] == system
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen.toml", "mine.toml"]  # no temporary left


def test_not_json_is_one_line(tmp_path, capsys):
    src = tmp_path / "cfg.json"
    src.write_text("{ // a JSON5 comment\n}")
    rc = main(["preset", "from-config", "--system", "openclaw", str(src)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "not valid JSON" in err[0]


def test_js_coercion_null_and_contradictory_flags():
    # OpenClaw: null = absent (??); Number.isFinite does not coerce "7"; Boolean("false") is true
    r = from_config("openclaw", {"query": {"minScore": None, "hybrid": {"temporalDecay": {"halfLifeDays": "7"},
                                                                         "mmr": {"enabled": "false"}}}}).resolved
    assert r["query.minScore"] == 0.35 and r["query.hybrid.temporalDecay.halfLifeDays"] == 30
    assert r["query.hybrid.mmr.enabled"] is True
    # weights: both 0 → 0.7/0.3; NaN → 0.7/0.3
    for vw, tw in ((0, 0), (float("nan"), 0.3)):
        r = from_config("openclaw", {"query": {"hybrid": {"vectorWeight": vw, "textWeight": tw}}}).resolved
        assert (r["query.hybrid.vectorWeight"], r["query.hybrid.textWeight"]) == (0.7, 0.3)
    # lancedb-pro: a present null replaces the default (object spread): hardMinScore null → score >= 0
    res = from_config("lancedb-pro", {"retrieval": {"hardMinScore": None, "minScore": "abc", "filterNoise": 0}})
    assert res.overrides["hard_min_score"]["threshold"] == 0.0
    assert res.overrides["min_score"]["threshold"] == math.inf  # score >= NaN is never true
    assert res.overrides["noise"] == {"disabled": True}
    # the call's limit: clampInt(limit, 1, 20), non-finite → 1
    assert from_config("lancedb-pro", {}, limit=25).resolved["limit"] == 20
    assert from_config("lancedb-pro", {}, limit=float("nan")).resolved["limit"] == 1
    # OpenClaw: no provider + hybrid disabled → nothing returned; no provider → FTS-only sibling
    res = from_config("openclaw", {"query": {"hybrid": {"enabled": False}}}, provider="none")
    assert res.extends == "openclaw_core_2026_2_26_fts_only" and res.overrides["top_k"]["k"] == 0
    # HookClaw v2.0: enableRrf without the enricher → no window; rrfWeights null → RRF stage removed
    res = from_config("hookclaw-v2.0", {"enableRrf": True})
    assert res.overrides["rrf"]["enrichment"] is False and res.overrides["rrf"]["temporal"] is False
    assert from_config("hookclaw-v2.0", {"enableRrf": True, "rrfWeights": None}).overrides["rrf"] == {"disabled": True}


# ---- deliverable 3: the knobs -----------------------------------------------------------------------------------

A1 = json.loads((FIX / "openclaw_candidates.json").read_text())


def test_knob_openclaw_hybrid_disabled_is_vector_only(tmp_path, capsys):
    """query.hybrid.enabled = false with a provider: vector rows with score >= minScore, in vector order, first
    maxResults — no keyword arm, no 0.7/0.3 merge (§A.2 step 5)."""
    cfg = tmp_path / "oc.json"
    cfg.write_text(json.dumps({"query": {"minScore": 0.5, "hybrid": {"enabled": False}}}))
    out = tmp_path / "vec_only.toml"
    assert main(["preset", "from-config", "--system", "openclaw", str(cfg), "--out", str(out)]) == 0
    capsys.readouterr()
    (q,) = _score(capsys, out, FIX / "openclaw_candidates.json")
    assert [(r["id"], r["score"]) for r in q["ranked"]] == [("c1", 0.82), ("c2", 0.61)]


def test_knob_openclaw_js_cosine_fallback_candidate_mode(tmp_path, capsys):
    """store.vector.enabled = false: OpenClaw's JS cosine over the stored embeddings — the first min(len) components,
    stored JSON that does not parse → empty → 0, a missing vector → 0; stable sort desc; first `limit` (§A.4)."""
    docs = [{"id": "d1", "text": "one", "embedding": [1.0, 0.0, 0.0]},
            {"id": "d2", "text": "two", "embedding": [0.6, 0.8]},
            {"id": "d3", "text": "three", "embedding": "not json"},
            {"id": "d4", "text": "four", "embedding": "[0.5, 0.5, 0.5, 9]"},
            {"id": "d5", "text": "five"}]
    obj = {"query": "q", "query_embedding": [0.8, 0.6, 0.0], "documents": docs,
           "arms": {"vec": {"compute": "openclaw_js_cosine", "limit": 4}, "fts": []}}
    src = tmp_path / "js.json"
    src.write_text(json.dumps(obj))
    cs = candidates_from_json(obj)
    hits = cs.arm("vec")
    got = {cs.corpus.ids[cs.doc[0, c]]: (float(hits.score[0, c]), int(hits.rank[0, c])) for c in range(cs.C)}
    assert got == {"d2": (pytest.approx(0.96), 1), "d4": (pytest.approx(0.7 / math.sqrt(0.75)), 2),
                   "d1": (pytest.approx(0.8), 3), "d3": (0.0, 4)}  # d5 ties d3 at 0, later in document order
    cfg = tmp_path / "oc.json"
    cfg.write_text(json.dumps({"store": {"vector": {"enabled": False}}, "query": {"hybrid": {"enabled": False},
                                                                                  "minScore": 0.5}}))
    out = tmp_path / "js.toml"
    assert main(["preset", "from-config", "--system", "openclaw", str(cfg), "--out", str(out)]) == 0
    assert "JS cosine" in capsys.readouterr().err
    (q,) = _score(capsys, out, src)
    assert _ids(q) == ["d2", "d4", "d1"]


def test_knob_lancedb_category_filter(tmp_path, capsys):
    """retrieve({category}): rows of other categories dropped after each search (here: only 'decision' rows, so
    m3 — deferred behind m1 by diversity before — is now second and in the top 3)."""
    toml, err = _from_config(tmp_path, capsys, "lancedb-pro", "lancedb_pro.json", "--limit", "3",
                             "--category", "decision")
    assert "category = 'decision'" in err
    (q,) = _score(capsys, toml, FIX / "lancedb_pro_candidates.json")
    assert _ids(q) == ["m1", "m3"]
    assert all(r["id"] in ("m1", "m3") for r in q["ranked"])


def _lancedb_cs(vectors: dict, query_vec, order=("a", "b", "c")):
    docs = [{"id": d, "text": f"note {d} about the schema decision", "embedding": vectors[d], "importance": 1.0}
            for d in order]
    arms = {"vec": [{"id": d, "score": 0.9 - 0.1 * i} for i, d in enumerate(order)], "fts": []}
    return candidates_from_json({"query": "what did we decide about the schema?", "as_of": "2026-02-27T00:00:00Z",
                                 "query_embedding": query_vec, "documents": docs, "arms": arms})


RERANK = [{"type": "fuse.single", "arm": "vec", "map": "identity"},
          {"type": "rerank.lancedb", "label": "rerank", "mode": "lightweight", "limit": 1}]


def test_knob_lancedb_other_dimension_entries_and_float64_cosine():
    """An entry vector of another size than the query: the original's cosine throws inside the rerank fallback and
    the whole step returns its input (only when that entry is among the first 2·limit); the cosine is float64 on
    the vectors as given (not rounded to float32)."""
    q = [0.1, 0.7, 0.3]
    vecs = {"a": [0.3, 0.1, 0.9], "b": [0.2, 0.2], "c": [0.7, 0.1, 0.1]}
    p = build_pipeline({"name": "t", "stages": RERANK})
    cs = _lancedb_cs(vecs, q)  # the file is accepted with mixed sizes
    st = p.run(cs)
    assert st.info["rerank"][0]["path"] == "unchanged" and st.info["rerank"][0]["cosine_error"] == "dim_mismatch"
    assert [d for d, _ in ranked(st, cs, 0)] == ["a", "b"]  # limit 1 → head a, b (the rest discarded); b mismatches
    cs = _lancedb_cs(vecs, q, order=("a", "c", "b"))  # b is third: outside the 2·limit head
    st = p.run(cs)
    assert st.info["rerank"][0]["path"] == "cosine"

    def cos64(x, y):
        dot = sum(i * j for i, j in zip(x, y))
        return dot / (math.sqrt(sum(i * i for i in x)) * math.sqrt(sum(j * j for j in y)))
    got = dict(ranked(st, cs, 0))
    assert got["a"] == 0.7 * 0.9 + 0.3 * cos64(q, vecs["a"])  # exact float64
    q32, a32 = (np.asarray(v, dtype=np.float32).astype(np.float64) for v in (q, vecs["a"]))
    assert got["a"] != 0.7 * 0.9 + 0.3 * cos64(q32.tolist(), a32.tolist())  # what float32 inputs would give


def test_knob_lancedb_diversity_dimension_mismatch_empties_the_query():
    """applyMMRDiversity compares a candidate with the selected items in order; a size mismatch throws out of
    retrieve(), so the call returns nothing (auto-recall injects nothing)."""
    p = build_pipeline({"name": "t", "stages": [RERANK[0], {"type": "diversity.cosine_defer"}]})
    cs = _lancedb_cs({"a": [1.0, 0.0, 0.0], "b": [1.0, 0.0], "c": [0.0, 1.0, 0.0]}, [1.0, 0.0, 0.0])
    st = p.run(cs)
    assert ranked(st, cs, 0) == [] and st.info["diversity_error"].tolist() == [True]
    cs = _lancedb_cs({"a": [1.0, 0.0, 0.0], "b": [0.99, 0.01, 0.0], "c": [0.0, 1.0]}, [1.0, 0.0, 0.0])
    st = p.run(cs)  # c is compared with a (selected) → throws; b was deferred (cos > 0.85) and never compared
    assert ranked(st, cs, 0) == []
    cs = _lancedb_cs({"a": [1.0, 0.0, 0.0], "b": [0.99, 0.01, 0.0], "c": []}, [1.0, 0.0, 0.0])
    st = p.run(cs)  # an empty vector is never "too similar" and never compared
    assert [d for d, _ in ranked(st, cs, 0)] == ["a", "c", "b"]


CACHE = {"type": "gate.hookclaw_cache", "scope": "always", "size": 5, "ttl_ms": 300000.0, "fuzzy_threshold": 0.8,
         "fuzzy_refresh": True}


def _session(prompts: list[tuple[float, str, list[tuple[str, float]]]]) -> dict:
    docs = [{"id": d, "text": f"note {d}"} for d in ("a", "b", "c")]
    t0 = 1771070400.0  # 2026-02-14T12:00:00Z
    return {"documents": docs, "queries": [
        {"id": f"q{i}", "query": text, "as_of": t0 + dt, "arms": {"vec": [{"id": d, "score": s} for d, s in hits]}}
        for i, (dt, text, hits) in enumerate(prompts)]}


def test_knob_hookclaw_fuzzy_lru_cache_across_a_session():
    """§C.1 step 3: q1 is a near-repeat of q0 within the TTL (Jaccard 7/8 = 0.875 >= 0.8) → q0's list; q2 repeats
    q0 exactly but 400 s later (TTL 300 s: expired) → searched; q3 is skipped by the gate and never cached; q4 finds
    nothing and caches the empty list; q5 (exact repeat) is answered with that empty list."""
    ab, ba = [("a", 0.9), ("b", 0.8)], [("b", 0.95), ("a", 0.5)]
    obj = _session([(0, "what did we decide about the database schema", ab),
                    (60, "what did we decide about database schema", ba),
                    (400, "what did we decide about the database schema", ba),
                    (410, "Thanks, that fixed it and more text", ab),
                    (420, "how do backups work for postgres at night", []),
                    (430, "how do backups work for postgres at night", ab)])
    cs = candidates_from_json(obj)
    p = build_pipeline({"name": "t", "stages": [
        {"type": "gate.hookclaw_skip", "min_length": 13}, {"type": "fuse.single", "arm": "vec"}, CACHE]})
    st = p.run(cs)
    assert st.info["served_from"].tolist() == [-1, 0, -1, -1, -1, 4]
    assert st.info["cache_hit"].tolist() == ["", "fuzzy", "", "", "", "exact"]
    assert [d for d, _ in ranked(st, cs, 1)] == ["a", "b"]  # q0's list, not q1's own b, a
    assert [d for d, _ in ranked(st, cs, 2)] == ["b", "a"]
    assert ranked(st, cs, 5) == []  # the cached empty result: no injection
    # the threshold at 1 turns the fuzzy lookup off; a cache of size 0 keeps nothing
    st = p.with_params({"gate.hookclaw_cache": {"fuzzy_threshold": 1.0}}).run(cs)
    assert st.info["served_from"].tolist() == [-1, -1, -1, -1, -1, 4]
    st = p.with_params({"gate.hookclaw_cache": {"size": 0}}).run(cs)
    assert st.info["served_from"].tolist() == [-1] * 6
    # a benchmark (no log order) leaves every query its own list
    st = p.with_params({"gate.hookclaw_cache": {"scope": "log"}}).run(cs)
    assert "served_from" not in st.info


def test_knob_hookclaw_cache_lru_refresh_differs_between_versions():
    """v2.1 moves a fuzzy hit to the end of the LRU; v2.0 does not — with 2 entries, a fuzzy hit on the oldest then a
    third prompt evicts the other entry in v2.1 and the hit one in v2.0."""
    s = [(0, "alpha beta gamma delta epsilon zeta", [("a", 0.9)]),
         (1, "one two three four five six", [("b", 0.9)]),
         (2, "alpha beta gamma delta epsilon eta zeta", [("c", 0.9)]),  # fuzzy 6/7 → q0
         (3, "completely new prompt about other things", [("c", 0.9)]),  # miss, evicts the LRU-oldest
         (4, "alpha beta gamma delta epsilon zeta", [("c", 0.9)])]  # exact repeat of q0
    cs = candidates_from_json(_session(s))
    for refresh, want in ((True, [-1, -1, 0, -1, 0]), (False, [-1, -1, 0, -1, -1])):
        p = build_pipeline({"name": "t", "stages": [{"type": "fuse.single", "arm": "vec"},
                                                    dict(CACHE, size=2, fuzzy_refresh=refresh)]})
        assert p.run(cs).info["served_from"].tolist() == want


def test_replay_puts_the_served_events_results_in_place():
    """evalkit replay: an event answered from the cache gets the serving event's results (ranked and injected)."""
    res = {"e0": QueryResult([("a", 0.9), ("b", 0.8)], ["a", "b"], False, {"chunks": 2}, "<block>"),
           "e1": QueryResult([("c", 0.7)], ["c"], False, {"chunks": 1}, "<other>"),
           "e2": QueryResult([], [], True)}
    run = RetrieverRun("p", None, res, 0.0, info={"served_from": np.array([-1, 0, -1])})
    assert serve_from_cache(run, ["e0", "e1", "e2"]) == 1
    assert run.results["e1"].ranked == [("a", 0.9), ("b", 0.8)] and run.results["e1"].injected == ["a", "b"]
    assert run.results["e2"].skipped is True
    assert serve_from_cache(RetrieverRun("q", None, dict(res), 0.0), ["e0", "e1", "e2"]) == 0


def test_knob_hookclaw_v2_0_invalid_skip_pattern_stops_the_hook_whatever_enable_skip_patterns_says():
    """v2.0 compiles user patterns while registering; an invalid one throws there, so nothing is ever injected —
    also with enableSkipPatterns false. v2.1 skips the invalid pattern."""
    pats = ("^(deploy|ship)\\b", "([unclosed")
    prompt = "what did we decide about the database schema"
    for enable in (True, False):
        assert hookclaw_skip_decision(prompt, 20, pats, enable, "disable") is True
        assert hookclaw_skip_decision(prompt, 20, pats, enable, "ignore") is False
    assert hookclaw_skip_decision("deploy the thing to production now", 20, pats, True, "ignore") is True
    res = from_config("hookclaw-v2.0", {"skipPatterns": list(pats), "enableSkipPatterns": False})
    assert res.overrides["gate"]["on_invalid"] == "disable" and any("nothing is ever" in n for n in res.notes)


def test_knob_hookclaw_temporal_window_follows_the_enricher_not_temporal_parsing(tmp_path):
    """fuseResults gets queryEnrichment.temporalFilter whenever the enricher ran: enableBm25 alone applies the
    window; with neither flag RRF does not run at all (BM25 empty, no enrichment) and O stays."""
    obj = _load("hookclaw_v2_0_candidates.json")
    cs = candidates_from_json(obj)
    base = {"maxResults": 4, "minScore": 0.3, "enableRrf": True, "adaptiveResults": False, "enableMmr": False,
            "halfLifeHours": 0}
    for flags, want in (({"enableBm25": True}, ["T", "Y", "M"]), ({"enableTemporalParsing": True}, ["T", "Y", "M"]),
                        ({}, ["T", "O", "Y", "M"])):
        res = from_config("hookclaw-v2.0", dict(base, **flags))
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.toml"
        path.write_text(preset_toml(res, path.stem))
        assert [d for d, _ in ranked(load_preset(str(path)).run(cs), cs, 0)] == want, flags
    # the stage itself: temporal = true without the enricher passes no window
    p = build_pipeline({"name": "t", "stages": [{"type": "fuse.single", "arm": "vec"},
                                                {"type": "fuse.hookclaw_rrf", "bm25": "arm", "bm25_arm": "vec",
                                                 "max_results": 4, "temporal": True, "enrichment": False}]})
    assert "O" in [d for d, _ in ranked(p.run(cs), cs, 0)]


def test_knob_hookclaw_markdown_budget_estimate():
    """formatAsMarkdown's per-entry estimate is the header length + 10: with maxContextChars just below two entries'
    estimate the second entry is cut to the remaining room + '...' (when > 50 chars remain)."""
    text = "x" * 120
    obj = {"query": "q", "documents": [{"id": "a", "text": text, "path": "p.md"},
                                       {"id": "b", "text": text, "path": "q.md"}],
           "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.8}]}}
    cs = candidates_from_json(obj)
    head_a = "> *memory* | `p.md` | (score: 0.900)"
    room = 120 + len(head_a) + 10 + 100  # a fits; b's estimate (120 + 47) does not
    p = build_pipeline({"name": "t", "stages": [
        {"type": "fuse.single", "arm": "vec"},
        {"type": "budget.pack", "format": "hookclaw_markdown", "max_chars": room, "char_accounting": "hookclaw",
         "policy": "truncate"}]})
    block = p.run(cs).info["blocks"][0]
    head_b = "> *memory* | `q.md` | (score: 0.800)"
    cut = room - (120 + len(head_a) + 10) - (len(head_b) + 10) - 3
    assert block == (f"---\n**Relevant Memories:**\n\n{head_a}\n{text}\n\n{head_b}\n{'x' * cut}...\n\n---")


def test_utf16_truncate_takes_raw_limits():
    from retrievers.text import utf16_truncate
    assert utf16_truncate("abc", 0) == "" and utf16_truncate("abc", -2) == "" and utf16_truncate("abc", 0.5) == ""
    assert utf16_truncate("abcdef", 2.9) == "ab" and utf16_truncate("a😀b", 2) == "a"
    assert utf16_truncate("abc", float("inf")) == "abc" and utf16_truncate("abc", float("nan")) == ""


def test_unknown_call_option_for_a_front_end_is_a_config_error():
    with pytest.raises(ConfigError, match="--category does not apply"):
        from_config("hookclaw-v2.1", {}, category="fact")
