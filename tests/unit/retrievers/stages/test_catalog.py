"""The generic stage catalogue (FUSION_CATALOG.md §5): normalisations in closed form (fusion parity with ranx:
tests/parity/test_fusion_ranx.py), RRF conventions, score combination, path / dedupe filters, MMR variants against
straightforward reference implementations, tie-order and determinism invariants, parameter validation."""
import math
import random

import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked, resolve_preset
from retrievers.stages import REGISTRY, ConfigError
from retrievers.stages.helpers.similarity import snippet_tokens
from retrievers.stages.filter import glob_to_regex, path_excluded
from retrievers.stages.fuse.arms import first_seen
from retrievers.stages.helpers.normalize import NORMALISATIONS, normalise
from tests.helpers import ROOT, random_runs

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

NAN = np.nan


def _pipe(*stages):
    return build_pipeline({"name": "t", "stages": list(stages)})


def _run(stages, obj):
    cs = candidates_from_json(obj)
    st = _pipe(*stages).run(cs)
    return [ranked(st, cs, q) for q in range(cs.Q)], st, cs


# ---- normalisations (closed form) -------------------------------------------------------------------------

X = np.array([[3.0, 1.0, 2.0, NAN], [5.0, 5.0, NAN, NAN]])


def _eq(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b)), (a, b)
    assert np.allclose(np.nan_to_num(a), np.nan_to_num(b), atol=1e-12), (a, b)


def test_normalisations_closed_form():
    sd = math.sqrt(2 / 3)
    _eq(normalise("none", X), X)
    _eq(normalise("minmax", X), [[1, 0, 0.5, NAN], [1, 1, NAN, NAN]])
    _eq(normalise("max", X), [[1, 1 / 3, 2 / 3, NAN], [1, 1, NAN, NAN]])
    _eq(normalise("sum", X), [[2 / 3, 0, 1 / 3, NAN], [0, 0, NAN, NAN]])
    _eq(normalise("zscore", X), [[1 / sd, -1 / sd, 0, NAN], [0, 0, NAN, NAN]])
    r14, r50 = math.sqrt(14), math.sqrt(50)
    _eq(normalise("l2", X), [[3 / r14, 1 / r14, 2 / r14, NAN], [5 / r50, 5 / r50, NAN, NAN]])
    _eq(normalise("dbsf", X), [[(3 - (2 - 3 * sd)) / (6 * sd), (1 - (2 - 3 * sd)) / (6 * sd), 0.5, NAN],
                               [0, 0, NAN, NAN]])
    _eq(normalise("tmm", X), [[1, 1 / 3, 2 / 3, NAN], [1, 1, NAN, NAN]])
    _eq(normalise("tmm", X, lower=-1.0), [[1, 0.5, 0.75, NAN], [1, 1, NAN, NAN]])
    _eq(normalise("rank", X), [[1, 1 / 3, 2 / 3, NAN], [1, 0.5, NAN, NAN]])  # ties: column order
    _eq(normalise("rank", X, rank=np.array([[1, 2, 3, 0], [2, 1, 0, 0]])), [[1, 1 / 3, 2 / 3, NAN], [0.5, 1, NAN, NAN]])
    _eq(normalise("sigmoid", X), 1 / (1 + np.exp(-X)))
    assert set(NORMALISATIONS) >= {"none", "minmax", "max", "sum", "zscore", "l2", "dbsf", "tmm", "rank", "sigmoid"}


def test_normalisations_handle_empty_rows_and_keep_absent_nan():
    E = np.full((2, 3), NAN)
    for name in NORMALISATIONS:
        assert np.isnan(normalise(name, E)).all(), name
        assert normalise(name, np.zeros((2, 0))).shape == (2, 0)
        y = normalise(name, X)
        assert np.isnan(y[0, 3]) and np.isfinite(y[0, :3]).all(), name


# ---- RRF conventions ---------------------------------------------------------------------------------------

RRF_OBJ = {"query": "q", "documents": [{"id": k, "text": k} for k in "abcd"],
           "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.5}],
                    "bm25": [{"id": "c", "score": 9.0}]}}


def test_rrf_conventions_and_missing_rank():
    out, _, _ = _run([{"type": "fuse.rrf", "convention": "weaviate"}], RRF_OBJ)
    assert out[0][0] == ("a", 1 / 60) and dict(out[0])["b"] == pytest.approx(1 / 61)
    out, _, _ = _run([{"type": "fuse.rrf", "convention": "qdrant"}], RRF_OBJ)
    assert out[0][0] == ("a", 0.5)
    p1 = _pipe({"type": "fuse.rrf", "convention": "chroma"})
    p2 = _pipe({"type": "fuse.rrf", "convention": "chroma", "k": 10, "rank_base": 1})
    assert p1.stages[0].k == 60 and p1.stages[0].rank_base == 0 and p1.hash == p2.hash
    # HookClaw: absent = N + 1 (N = 3 unique docs → rank 4); ties keep first-seen order (a before c)
    out, _, _ = _run([{"type": "fuse.rrf", "missing_rank": "n_plus_1"}], RRF_OBJ)
    assert [d for d, _ in out[0]] == ["a", "c", "b"]
    assert dict(out[0])["a"] == pytest.approx(1 / 61 + 1 / 64) and dict(out[0])["b"] == pytest.approx(1 / 62 + 1 / 64)
    out, _, _ = _run([{"type": "fuse.rrf", "weights": [0.4, 0.3], "missing_rank": "n_plus_1"}], RRF_OBJ)
    assert dict(out[0])["c"] == pytest.approx(0.4 / 64 + 0.3 / 61)
    with pytest.raises(ConfigError, match="2 arms but 1 weights"):
        _pipe({"type": "fuse.rrf", "weights": [1.0]})


# ---- convex / comb -----------------------------------------------------------------------------------------

CC_OBJ = {"query": "q", "documents": [{"id": k, "text": k} for k in "abcd"],
          "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.5}, {"id": "c", "score": 0.1}],
                   "bm25": [{"id": "c", "score": 10.0}, {"id": "d", "score": 5.0}, {"id": "a", "score": 0.0}]}}


def test_convex_closed_form_and_first_seen_ties():
    out, _, _ = _run([{"type": "fuse.convex"}], CC_OBJ)
    assert out[0] == [("a", 0.5), ("c", 0.5), ("b", 0.25), ("d", 0.25)]
    out, _, _ = _run([{"type": "fuse.convex", "alpha": 1.0}], CC_OBJ)
    assert out[0][0] == ("a", 1.0) and dict(out[0])["d"] == 0.0
    out, _, _ = _run([{"type": "fuse.convex", "norm": "tmm"}], CC_OBJ)  # vec lower −1, bm25 lower 0
    assert dict(out[0])["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert dict(out[0])["b"] == pytest.approx(0.5 * (1.5 / 1.9))


def test_comb_methods_closed_form():
    got = {}
    for m in ("sum", "mnz", "max", "min", "med", "anz"):
        out, _, _ = _run([{"type": "fuse.comb", "method": m}], CC_OBJ)
        got[m] = dict(out[0])
    # minmax: vec a 1, b .5, c 0; bm25 c 1, d .5, a 0
    assert got["sum"] == {"a": 1.0, "b": 0.5, "c": 1.0, "d": 0.5}
    assert got["mnz"] == {"a": 2.0, "b": 0.5, "c": 2.0, "d": 0.5}
    assert got["max"] == {"a": 1.0, "b": 0.5, "c": 1.0, "d": 0.5}
    assert got["min"] == {"a": 0.0, "b": 0.5, "c": 0.0, "d": 0.5}
    assert got["med"] == got["anz"] == {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}


def test_hybrid_cc_preset_is_the_convex_stage():
    cfg = resolve_preset("hybrid-cc")
    assert [(a["name"], a["kind"], a["depth"], a.get("tokenizer")) for a in cfg["arms"]] == [
        ("vec", "vector", 100, None), ("bm25", "lexical", 100, "stem_en")]
    cfg["stages"] = [s for s in cfg["stages"] if s["type"] != "budget.pack"]
    obj, _ = random_runs(11)
    cs = candidates_from_json(obj)
    a = build_pipeline(cfg).run(cs)
    b = _pipe({"type": "fuse.convex", "alpha": 0.5, "norm": "minmax"}).run(cs)
    assert all(ranked(a, cs, q) == ranked(b, cs, q) for q in range(cs.Q))


# ---- invariants ---------------------------------------------------------------------------------------------

FUSIONS = [
    {"type": "fuse.rrf"}, {"type": "fuse.convex"}, {"type": "fuse.comb", "method": "mnz"},
    {"type": "fuse.weighted_linear", "text_arm": "bm25"}, {"type": "fuse.vector_bonus", "text_arm": "bm25"},
    {"type": "fuse.comb", "method": "max", "norm": "rank"},
]


@pytest.mark.parametrize("stage", FUSIONS, ids=lambda s: s["type"] + ":" + str(s.get("method", "")))
def test_fusion_ties_keep_first_seen_order_and_runs_are_deterministic(stage):
    obj, _ = random_runs(5, quantise=4)  # many exact ties
    cs = candidates_from_json(obj)
    p = _pipe(stage)
    st1, st2 = p.run(cs), p.run(cs)
    assert np.array_equal(st1.col, st2.col) and np.array_equal(st1.score, st2.score)
    key = first_seen(cs, [cs.arm("vec").present(), cs.arm("bm25").present()], ["vec", "bm25"])
    for q in range(cs.Q):
        cols, scores = st1.rows(q)
        assert np.isfinite(scores).all()
        assert (np.diff(scores) <= 0).all()
        for i in range(len(cols) - 1):
            if scores[i] == scores[i + 1]:
                assert key[q, cols[i]] < key[q, cols[i + 1]]
        assert len(set(cols.tolist())) == len(cols)


def test_sorting_stages_are_stable():
    obj = {"query": "q", "as_of": "2026-02-27T00:00:00Z", "documents": [{"id": k, "text": k} for k in "abcdef"],
           "arms": {"vec": [{"id": k, "score": 0.5} for k in "cafbed"]}}
    for stage in ({"type": "score.importance"}, {"type": "score.recency_boost"}, {"type": "score.length_norm"},
                  {"type": "decay.floor"}, {"type": "decay.half_life"}):
        out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, stage], obj)
        assert [d for d, _ in out[0]] == list("cafbed"), stage


# ---- filters ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,excluded", [
    ("node_modules/x/readme.md", True), ("a/node_modules/b.md", True), ("a\\node_modules\\b.md", True),
    ("./node_modules/p/index.js", True), ("src/node_modules_x/a.md", False), ("mynode_modules/a.md", False),
    (".git/config", True), ("repo/.git/HEAD", True), ("logs/2026-02-01.md", True), ("x/logs/y.txt", True),
    ("app.log", True), ("dir/app.log", True), ("app.log.md", False), ("memory/logs.md", False),
    ("memory/2026-02-01.md", False), ("", False),
])
def test_default_path_exclusions(path, excluded):
    from retrievers.stages.filter import DEFAULT_EXCLUDES
    pats = tuple(glob_to_regex(g) for g in DEFAULT_EXCLUDES)
    assert path_excluded(path, pats) is excluded


def test_glob_star_does_not_cross_directories():
    r = glob_to_regex("memory/*.md")
    assert r.match("memory/a.md") and not r.match("memory/x/a.md")
    assert glob_to_regex("memory/**/*.md").match("memory/a.md")
    assert glob_to_regex("memory/**/*.md").match("memory/x/y/a.md")
    assert glob_to_regex("a?c").match("abc") and not glob_to_regex("a?c").match("a/c")


def test_exclude_paths_stage_and_secret_flag():
    docs = [{"id": "a", "text": "a", "path": "memory/a.md"}, {"id": "b", "text": "b", "path": "node_modules/x/r.md"},
            {"id": "c", "text": "c", "path": "memory/c.md", "contains_secret": True}, {"id": "d", "text": "d"}]
    obj = {"query": "q", "documents": docs, "arms": {"vec": [{"id": k, "score": 0.9 - i / 10}
                                                            for i, k in enumerate("abcd")]}}
    single = {"type": "fuse.single", "arm": "vec"}
    assert [d for d, _ in _run([single, {"type": "filter.exclude_paths"}], obj)[0][0]] == ["a", "c", "d"]
    assert [d for d, _ in _run([single, {"type": "filter.exclude_paths", "exclude_secret": True}], obj)[0][0]] == [
        "a", "d"]
    assert [d for d, _ in _run([single, {"type": "filter.exclude_paths", "patterns": ["memory/*"]}], obj)[0][0]] == [
        "b", "d"]


def test_dedupe_keys():
    docs = [{"id": "a", "text": "same", "path": "f.md", "start_line": 1, "end_line": 5},
            {"id": "b", "text": "same", "path": "g.md", "start_line": 1, "end_line": 5},
            {"id": "c", "text": "other", "path": "f.md", "start_line": 1, "end_line": 5},
            {"id": "d", "text": "x", "path": "f.md", "start_line": 6, "end_line": 9},
            {"id": "e", "text": "same"}, {"id": "f", "text": "x"}]
    obj = {"query": "q", "documents": docs, "arms": {"vec": [{"id": k, "score": 0.9 - i / 10}
                                                            for i, k in enumerate("abcdef")]}}
    single = {"type": "fuse.single", "arm": "vec"}

    def ids(key):
        return [d for d, _ in _run([single, {"type": "dedupe", "key": key}], obj)[0][0]]
    assert ids("text") == ["a", "c", "d"]
    assert ids("lines") == ["a", "b", "d", "e", "f"]
    assert ids("hookclaw") == ["a", "b", "e", "f"]


def test_min_score_is_inclusive_and_drops_nan():
    obj = {"query": "q", "documents": [{"id": k, "text": k} for k in "abc"],
           "arms": {"vec": [{"id": "a", "score": 0.35}, {"id": "b", "score": None}, {"id": "c", "score": 0.3499}]}}
    out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, {"type": "filter.min_score", "threshold": 0.35}], obj)
    assert out[0] == [("a", 0.35)]


# ---- MMR variants vs reference implementations -----------------------------------------------------------

def _ref_openclaw_mmr(items, lam):
    """items: [(id, score, tokens)] already sorted; a plain transcription of §A.7."""
    if len(items) <= 1:
        return [i for i, _, _ in items]
    if lam == 1:
        return [i for i, _, _ in sorted(items, key=lambda t: -t[1])]
    lo, hi = min(s for _, s, _ in items), max(s for _, s, _ in items)

    def jac(a, b):
        if not a and not b:
            return 1.0
        if not a or not b:
            return 0.0
        inter = len(a & b)
        return inter / (len(a) + len(b) - inter)
    remaining, selected = list(items), []
    while remaining:
        best, best_v = None, -math.inf
        for it in remaining:
            rel = 1.0 if hi == lo else (it[1] - lo) / (hi - lo)
            sim = max((jac(it[2], s[2]) for s in selected), default=0.0)
            v = lam * rel - (1 - lam) * sim
            if v > best_v or (v == best_v and it[1] > best[1]):
                best, best_v = it, v
        selected.append(best)
        remaining.remove(best)
    return [i for i, _, _ in selected]


def _ref_hookclaw_mmr(items, lam, k):
    if len(items) <= 1:
        return [i for i, _, _ in items]

    def jac(a, b):
        if not a and not b:
            return 1.0
        inter = len(a & b)
        union = len(a | b)
        return inter / union if union else 0.0
    selected, remaining = [items[0]], list(items[1:])
    while remaining and len(selected) < k:
        best, best_v = None, -math.inf
        for it in remaining:
            v = lam * it[1] - (1 - lam) * max(jac(it[2], s[2]) for s in selected)
            if v > best_v:
                best, best_v = it, v
        selected.append(best)
        remaining.remove(best)
    return [i for i, _, _ in selected]


WORDS = "deploy router vlan omada backup postgres nightly cron token rotate key api dns adguard iot 部署 数据".split()


def _mmr_case(seed, n_q=5):
    rng = random.Random(seed)
    docs = [{"id": f"t{i}", "text": " ".join(rng.sample(WORDS, rng.randint(0, 5)))} for i in range(25)]
    queries = []
    for qi in range(n_q):
        hits = rng.sample(docs, rng.randint(1, 12))
        scores = sorted((round(rng.uniform(0.2, 0.9), 1) for _ in hits), reverse=True)  # coarse: ties happen
        queries.append({"id": str(qi), "query": "q", "arms": {"vec": [{"id": h["id"], "score": s}
                                                                     for h, s in zip(hits, scores)]}})
    return {"documents": docs, "queries": queries}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
def test_openclaw_mmr_matches_reference(seed, lam):
    obj = _mmr_case(seed)
    out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, {"type": "diversity.openclaw_mmr", "lam": lam}], obj)
    text = {d["id"]: d["text"] for d in obj["documents"]}
    for q, qo in enumerate(obj["queries"]):
        items = [(h["id"], h["score"], snippet_tokens(text[h["id"]])) for h in qo["arms"]["vec"]]
        assert [d for d, _ in out[q]] == _ref_openclaw_mmr(items, lam)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam,k", [(0.7, 3), (0.3, 5), (0.5, 20)])
def test_hookclaw_mmr_matches_reference(seed, lam, k):
    obj = _mmr_case(seed)
    out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, {"type": "diversity.hookclaw_mmr", "lam": lam, "k": k}],
                     obj)
    text = {d["id"]: d["text"] for d in obj["documents"]}
    for q, qo in enumerate(obj["queries"]):
        items = [(h["id"], h["score"], snippet_tokens(text[h["id"]])) for h in qo["arms"]["vec"]]
        assert [d for d, _ in out[q]] == _ref_hookclaw_mmr(items, lam, k)


def test_hookclaw_mmr_example_c3_tail():
    """§C.6 Example C3 after decay: A 0.685221, B 0.675704, X 0.55 → MMR λ 0.7 → [A, X, B]."""
    docs = [{"id": "X", "text": "Postgres backups run nightly at 2am UTC", "path": "MEMORY.md"},
            {"id": "A", "text": "Deploy pipeline uses GitHub Actions with blue green strategy",
             "path": "memory/2026-02-14.md"},
            {"id": "B", "text": "Deploy pipeline uses GitHub Actions with blue green rollout",
             "path": "memory/2026-02-14.md"}]
    obj = {"query": "q", "documents": docs, "arms": {"vec": [{"id": "A", "score": 0.685221},
                                                            {"id": "B", "score": 0.675704},
                                                            {"id": "X", "score": 0.55}]}}
    out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, {"type": "diversity.hookclaw_mmr"}], obj)
    assert out[0] == [("A", 0.685221), ("X", 0.55), ("B", 0.675704)]
    a, b = snippet_tokens(docs[1]["text"]), snippet_tokens(docs[2]["text"])
    assert len(a & b) / len(a | b) == 0.8
    assert round(0.7 * 0.675704 - 0.3 * 0.8, 6) == 0.232993


def _ref_classic_mmr(rel, S, lam, k):
    n = len(rel)
    selected, remaining = [], list(range(n))
    while remaining and (not k or len(selected) < k):
        best, best_v = None, -math.inf
        for i in remaining:
            pen = max((S[i][j] for j in selected), default=0.0)
            v = lam * rel[i] - (1 - lam) * pen
            if v > best_v:
                best, best_v = i, v
        selected.append(best)
        remaining.remove(best)
    return selected


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam,k", [(0.5, 0), (0.2, 3), (0.9, 5)])
def test_classic_mmr_matches_reference(seed, lam, k):
    rng = np.random.default_rng(seed)
    n, dim = 10, 4
    E = rng.normal(size=(n, dim))
    qv = rng.normal(size=dim)
    docs = [{"id": f"e{i}", "text": "t", "embedding": E[i].tolist()} for i in range(n)]
    obj = {"query": "q", "query_embedding": qv.tolist(), "documents": docs,
           "arms": {"vec": [{"id": f"e{i}", "score": float(10 - i)} for i in range(n)]}}
    out, _, _ = _run([{"type": "fuse.single", "arm": "vec"}, {"type": "diversity.mmr", "lam": lam, "k": k}], obj)
    E32 = E.astype(np.float32).astype(np.float64)
    q32 = qv.astype(np.float32).astype(np.float64)
    nrm = np.linalg.norm(E32, axis=1)
    rel = E32 @ q32 / (nrm * np.linalg.norm(q32))
    S = (E32 @ E32.T) / np.outer(nrm, nrm)
    want = [f"e{i}" for i in _ref_classic_mmr(rel, S, lam, k)]
    assert [d for d, _ in out[0]] == want


# ---- parameter validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("stage,match", [
    ({"type": "decay.floor", "floor": 1.5}, "floor.*out of range"),
    ({"type": "score.recency_boost", "half_life_days": float("nan")}, "half_life_days.*is NaN"),
    ({"type": "decay.half_life", "half_life_days": "30"}, "half_life_days.*must be a number"),
    ({"type": "diversity.openclaw_mmr", "lam": 1.2}, "lam.*out of range.*<= 1"),
    ({"type": "diversity.hookclaw_mmr", "lam": -0.1}, "lam.*out of range"),
    ({"type": "diversity.mmr", "lam": 2}, "lam.*out of range"),
    ({"type": "fuse.convex", "alpha": 1.5}, "alpha.*out of range"),
    ({"type": "fuse.convex", "norm": "nope"}, "norm.*'nope' is not one of:.*minmax"),
    ({"type": "fuse.single", "map": "cosine"}, "map.*is not one of:.*inv_l2"),
    ({"type": "fuse.weighted_linear", "text_map": "x"}, "text_map.*is not one of:.*openclaw_rank"),
    ({"type": "fuse.comb", "method": "prod"}, "method.*is not one of: sum, mnz"),
    ({"type": "fuse.comb", "method": "max", "weights": [1, 2]}, "weights only apply"),
    ({"type": "fuse.comb", "arms": ["a", "b"], "maps": ["identity"]}, "2 arms but 1 maps"),
    ({"type": "fuse.rrf", "convention": "bing"}, "convention.*is not one of: custom"),
    ({"type": "score.importance", "default": 1.5}, "default.*out of range"),
    ({"type": "dedupe", "key": "hash"}, "key.*is not one of: text, lines, hookclaw"),
    ({"type": "filter.exclude_paths", "patterns": ["", "x"]}, "patterns"),
    ({"type": "diversity.cosine_defer", "threshold": "high"}, "must be a number"),
    ({"type": "decay.half_life", "timestamps": "mtime"}, "timestamps.*is not one of"),
    ({"type": "filter.noise", "boundary": True}, r"unknown parameter\(s\) boundary \(valid: .*word_boundary"),
    ({"type": "gate.lancedb_skp"}, r"unknown stage 'gate.lancedb_skp' \(valid: .*gate.lancedb_skip"),
])
def test_bad_parameters_are_rejected_with_a_clear_message(stage, match):
    with pytest.raises(ConfigError, match=match):
        _pipe(stage)


@pytest.mark.parametrize("stage", [
    {"type": "decay.floor", "half_life_days": -1},
    {"type": "score.recency_boost", "half_life_days": -14},
    {"type": "decay.half_life", "half_life_days": -30},
    {"type": "score.length_norm", "anchor": -500},
])
def test_non_positive_half_lives_and_anchors_are_raw_values_that_disable_the_stage(stage):
    """Issue 19: the originals disable these steps for a value <= 0 (``!v || v <= 0``, ``toDecayLambda``); the
    stage takes the raw value and leaves the scores unchanged (resolution of config values is the front end's)."""
    obj = {"query": "q", "as_of": "2026-02-27T00:00:00Z",
           "documents": [{"id": "a", "text": "x" * 2000, "timestamp": "2025-01-01T00:00:00Z",
                          "path": "memory/2025-01-01.md"},
                         {"id": "b", "text": "y", "timestamp": "2026-02-26T00:00:00Z", "path": "memory/2026-02-26.md"}],
           "arms": {"vec": [{"id": "a", "score": 0.8}, {"id": "b", "score": 0.6}]}}
    p = build_pipeline({"name": "t", "stages": [{"type": "fuse.single", "arm": "vec"}, stage]})
    cs = candidates_from_json(obj)
    st = p.run(cs)
    assert ranked(st, cs, 0) == [("a", 0.8), ("b", 0.6)]


def test_every_stage_of_this_library_has_a_docstring_and_builds_with_defaults():
    mine = [n for n in REGISTRY if n.split(".")[0] in ("fuse", "score", "decay", "filter", "cutoff", "gate",
                                                       "diversity") or n == "dedupe"]
    assert {"fuse.single", "fuse.rrf", "fuse.weighted_linear", "fuse.vector_bonus", "fuse.comb", "fuse.convex",
            "fuse.openclaw_fts_only", "score.recency_boost", "score.importance", "score.length_norm", "decay.floor",
            "decay.half_life", "filter.min_score", "filter.relaxed_min_score", "filter.noise",
            "filter.exclude_paths", "dedupe", "cutoff.top_k", "gate.lancedb_skip", "gate.empty_query",
            "diversity.openclaw_mmr", "diversity.hookclaw_mmr", "diversity.cosine_defer",
            "diversity.mmr"} <= set(mine)
    for n in mine:
        cls = REGISTRY[n]
        assert cls.__doc__ and len(cls.__doc__) > 60, n
        _pipe({"type": n})


# ---- where a stage lives (the rule of retrievers/stages/__init__.py) --------------------------------------------

STAGES_DIR = ROOT / "retrievers" / "stages"


def home_of(name: str, kind: str) -> str:
    """The module (or package) a stage must live in: its name prefix, or its kind when the name has none."""
    return name.split(".", 1)[0] if "." in name else kind


def test_every_stage_lives_in_the_module_of_its_name_prefix():
    wrong = []
    for name, cls in REGISTRY.items():
        if not cls.__module__.startswith("retrievers."):
            continue  # a test's own stage (tests register some)
        home = f"retrievers.stages.{home_of(name, cls.kind)}"
        if cls.__module__ != home and not cls.__module__.startswith(home + "."):
            wrong.append(f"{name} (kind {cls.kind}) is in {cls.__module__}, not {home}")
    assert not wrong, "\n".join(wrong)


def _imported_modules(path) -> set[str]:
    import ast
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_every_stage_module_holds_stages_of_its_own_prefix_only():
    """No module outside base/helpers is a stage module without stages (a helper module in disguise). A stage
    package (``rerank/``) may keep its own support modules (``rerank/models.py``, ``rerank/http.py``): modules of
    that package only, which no stage module of another prefix imports."""
    homes = {home_of(n, c.kind) for n, c in REGISTRY.items() if c.__module__.startswith("retrievers.")}
    modules = {c.__module__ for c in REGISTRY.values()}
    files = {p: p.relative_to(STAGES_DIR).with_suffix("").parts for p in sorted(STAGES_DIR.rglob("*.py"))}
    stray = []
    for p, rel in files.items():
        if rel[0] in ("__init__", "base", "helpers") or rel[-1] == "__init__":
            continue
        mod = "retrievers.stages." + ".".join(rel)
        if rel[0] not in homes:
            stray.append(mod)
        elif mod not in modules:
            support = len(rel) > 1 and not any(mod in _imported_modules(q) for q, r in files.items()
                                               if r[0] not in (rel[0], "__init__", "base", "helpers"))
            if not support:
                stray.append(mod)
    assert not stray, f"modules under retrievers/stages/ that define no stage of their prefix: {stray}"


def test_helpers_never_import_a_stage_module():
    import ast
    bad = []
    for p in sorted((STAGES_DIR / "helpers").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t.startswith("retrievers.stages.") and not t.startswith(("retrievers.stages.base",
                                                                           "retrievers.stages.helpers")):
                    bad.append(f"{p.name}:{node.lineno} imports {t}")
    assert not bad, "\n".join(bad)


def test_ablation_off_declarations_are_valid_parameter_settings():
    """``Stage.ablation_off`` (read by the ablation workflow) must name real parameters with valid values."""
    declared = {n: c for n, c in REGISTRY.items() if c.ablation_off}
    assert "route.phase3" in declared
    for name, cls in declared.items():
        assert cls.from_dict(dict(cls.ablation_off)).params().items() >= cls.ablation_off.items(), name
