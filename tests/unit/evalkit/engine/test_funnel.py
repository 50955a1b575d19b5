"""Recall funnel (evalkit.engine.funnel) against a hand-traced candidate file, and threshold sensitivity."""
from __future__ import annotations

import math

from evalkit.engine.funnel import recall_funnel, threshold_sensitivity
from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, injected_mask
from retrievers.stages import Context

DOCS = [{"id": i, "text": f"note {i}"} for i in ("a", "b", "c", "d", "e", "x", "y")]
CANDS = {"documents": DOCS, "queries": [
    {"id": "q1", "query": "one", "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "x", "score": 0.8},
                                                  {"id": "b", "score": 0.6}, {"id": "c", "score": 0.4}]}},
    {"id": "q2", "query": "two", "arms": {"vec": [{"id": "y", "score": 0.7}, {"id": "d", "score": 0.3}]}}]}
QRELS = {"q1": {"a": 2, "b": 1, "c": 1, "x": 0}, "q2": {"d": 2, "e": 1}}
PIPE = {"name": "t", "arms": [{"name": "vec", "kind": "vector", "depth": 10}],
        "stages": [{"type": "fuse.single", "arm": "vec", "label": "fuse"},
                   {"type": "filter.min_score", "threshold": 0.5, "label": "min_score"},
                   {"type": "cutoff.top_k", "k": 2, "label": "top_k"},
                   {"type": "budget.pack", "max_chunks": 1, "label": "budget", "format": "plain"}]}


def _run():
    cs = candidates_from_json(CANDS)
    p = build_pipeline(PIPE)
    st = p.run(cs, Context(trace=True))
    return p, cs, st


def test_funnel_matches_a_hand_trace():
    p, cs, st = _run()
    f = recall_funnel(cs, p.stages, st.trace, injected_mask(st), st.col, QRELS)
    # final cut-off K = 2 (q1 ends with a, x). By hand, per query (q1 relevant a, b, c; q2 relevant d, e):
    # candidates: q1 3/3, q2 1/2 (e never retrieved)             -> 0.75
    # fuse, top 2 by score: q1 {a, x} 1/3, q2 {y, d} 1/2          -> 5/12
    # min_score 0.5: q1 {a, x} (b survives below the cut) 1/3, q2 {y} 0 -> 1/6
    # top_k, budget: unchanged                                    -> 1/6
    # injected (1 chunk): q1 {a} 1/3, q2 {y} 0                    -> 1/6
    want = [("candidates", 0.75), ("fuse", 5 / 12), ("min_score", 1 / 6), ("top_k", 1 / 6), ("budget", 1 / 6),
            ("injected", 1 / 6)]
    assert f.k == 2 and f.n == 2
    assert [s[0] for s in f.steps] == [w[0] for w in want]
    for (_, _, got), (_, exp) in zip(f.steps, want):
        assert math.isclose(got, exp), f.steps
    stage, typ, lost = f.worst()
    assert stage == "fuse" and typ == "fuse.single" and math.isclose(lost, (0.75 - 5 / 12) / 0.75)


def test_threshold_sensitivity_reruns_the_pipeline_and_marks_the_shipped_value():
    p, cs, st = _run()
    out = threshold_sensitivity(p, cs, Context(), st.trace, QRELS, metric="recall@2")
    (t,) = out
    assert t["stage"] == "min_score" and t["as_shipped"] == 0.5
    # scores reaching the stage: 0.9 0.8 0.6 0.4 0.7 0.3; at or below 0.5: 0.4 and 0.3 -> 2 of 6
    assert math.isclose(t["as_shipped_quantile"], 2 / 6)
    shipped = [v for thr, q, v in t["points"] if q is None]
    # as shipped: q1 top 2 {a, x} recall 1/3, q2 {y} 0 -> 1/6
    assert math.isclose(shipped[0], 1 / 6)
    lowest = min(t["points"], key=lambda x: x[0])
    # the lowest threshold (5 % quantile, below every score but 0.3): q2 keeps {y, d} -> 1/2
    assert lowest[2] >= shipped[0]


RERANK_CANDS = {"documents": DOCS, "queries": [
    dict(CANDS["queries"][0], metadata={"rerank_p": {"a": 0.9, "x": 0.2, "b": 0.7, "c": 0.4}}),
    dict(CANDS["queries"][1], metadata={"rerank_p": {"y": 0.3, "d": 0.8}})]}
RERANK_PIPE = {"name": "r", "arms": [{"name": "vec", "kind": "vector", "depth": 10}],
               "stages": [{"type": "fuse.single", "arm": "vec", "label": "fuse"},
                          {"type": "rerank.yes_no", "provider": "injected", "keep": 10, "min_p": 0.5,
                           "label": "rerank"},
                          {"type": "cutoff.top_k", "k": 3, "label": "top_k"}]}


def test_reranker_floor_is_swept_over_its_own_probabilities():
    from evalkit.engine.funnel import threshold_params
    cs = candidates_from_json(RERANK_CANDS)
    p = build_pipeline(RERANK_PIPE)
    st = p.run(cs, Context(trace=True))
    (t,) = threshold_sensitivity(p, cs, Context(), st.trace, QRELS, metric="recall@3")
    assert t["stage"] == "rerank" and t["param"] == "min_p" and t["as_shipped"] == 0.5
    # p with the floor off: .9 .7 .4 .2 (q1), .8 .3 (q2); at or below 0.5: .4 .2 .3 -> 3 of 6
    assert math.isclose(t["as_shipped_quantile"], 0.5)
    by_q = {q: v for thr, q, v in t["points"]}
    # as shipped: q1 keeps a, b -> 2/3; q2 keeps d -> 1/2
    assert math.isclose(by_q[None], 7 / 12)
    # 5 % quantile (0.225): q1 a, b, c -> 1; q2 d, y -> 1/2.  95 % (0.875): q1 a -> 1/3; q2 nothing -> 0
    assert math.isclose(by_q[0.05], 0.75) and math.isclose(by_q[0.95], 1 / 6)
    # the floor off (None) is not a threshold; a gate is one only when it names the score it compares
    off = build_pipeline({**RERANK_PIPE, "stages": [dict(s, min_p=None) if s["label"] == "rerank" else s
                                                    for s in RERANK_PIPE["stages"]]})
    assert threshold_sensitivity(off, cs, Context(), st.trace, QRELS) == []
    gates = build_pipeline({"name": "g", "arms": [{"name": "vec", "kind": "vector", "depth": 10}],
                            "stages": [{"type": "gate.empty_query"}, {"type": "gate.intent_prototype"},
                                       {"type": "fuse.single", "arm": "vec"}]}).stages
    assert [threshold_params(s) for s in gates[:2]] == [None, "threshold"]


def test_gate_threshold_is_swept_over_the_score_it_declares():
    """gate.intent_prototype skips a query when max cos(query, no-memory prototypes) > threshold: the sweep takes
    that per-query score's quantiles, and each point equals the unskipped recall of the queries the gate keeps
    (computed here from the model's own vectors)."""
    import numpy as np

    from retrievers.embed.model import Embedder
    emb = Embedder()
    protos = {"no_memory": ["thanks!", "hello there"], "needs_memory": ["what did we decide about the database?"]}
    cands = {"documents": DOCS, "queries": [dict(CANDS["queries"][0], query="thanks a lot"),
                                            dict(CANDS["queries"][1], query="which database did we pick?")]}
    cs = candidates_from_json(cands)
    pipe = {"name": "g", "arms": PIPE["arms"],
            "stages": [{"type": "gate.intent_prototype", "threshold": 0.5, "prototypes": protos, "label": "intent"},
                       {"type": "fuse.single", "arm": "vec"}, {"type": "cutoff.top_k", "k": 2}]}
    p = build_pipeline(pipe)
    ctx = Context(embedder=emb)
    st = p.run(cs, Context(emb, True, None, {}))
    (t,) = threshold_sensitivity(p, cs, ctx, st.trace, QRELS, metric="recall@2")
    P = np.asarray(emb.encode(protos["no_memory"]), dtype=np.float64)
    s_no = (np.asarray(emb.encode(["thanks a lot", "which database did we pick?"]), dtype=np.float64) @ P.T).max(1)
    assert t["param"] == "threshold" and math.isclose(t["as_shipped_quantile"], float(np.mean(s_no <= 0.5)))
    recall = np.array([1 / 3, 1 / 2])   # top 2 unskipped: q1 {a, x} of a, b, c; q2 {y, d} of d, e
    for thr, q, v in t["points"]:
        assert math.isclose(v, float(np.mean(np.where(s_no > thr + 1e-6, 0.0, recall))), abs_tol=1e-6), (thr, v)
    # the grid is taken from the gate's own per-query scores (not from any row score)
    grid = [thr for thr, q, _ in t["points"] if q is not None]
    assert len(grid) == 10 and s_no.min() - 1e-6 <= min(grid) and max(grid) <= s_no.max() + 1e-6
