"""Two-stage recall + rerank (seed 003, PIPELINES.md §6): Example D2-1 end to end, with the reranker's
probabilities injected through the candidate file (``metadata.rerank_p`` / ``rerank_logits``, read by the
``rerank.yes_no`` stage)."""
import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, load_preset, ranked

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

COS = {"x1": 0.82, "x2": 0.75, "x3": 0.55, "x4": 0.48, "x5": 0.60, "x6": 0.30}
BM25 = {"x4": 15.0, "x2": 12.0, "x3": 3.0}
P = {"x1": 0.91, "x2": 0.40, "x3": 0.75, "x4": 0.88, "x5": 0.05}


def d21_cs(meta=None):
    docs = [{"id": i, "text": i} for i in COS]
    vec = [{"id": i, "score": s} for i, s in sorted(COS.items(), key=lambda kv: -kv[1])]
    bm = [{"id": i, "score": s} for i, s in sorted(BM25.items(), key=lambda kv: -kv[1])]
    q = {"query": "find the kernel diagram", "documents": docs, "arms": {"vec": vec, "bm25": bm}}
    if meta is not None:
        q["metadata"] = meta
    return candidates_from_json(q)


def run(stages, cs):
    st = build_pipeline({"name": "t", "stages": stages}).run(cs)
    return st, ranked(st, cs, 0)


def test_d2_1_recall_and_hybrid():
    st, r = run([{"type": "fuse.two_stage"}], d21_cs())
    assert [d for d, _ in r] == ["x2", "x4", "x1", "x3", "x5"]  # x6 never enters (cos 0.30, no BM25)
    assert [s for _, s in r] == pytest.approx([0.765, 0.636, 0.574, 0.445, 0.42])
    bm25n = dict(zip([d for d, _ in r], st.extra["bm25n"][0]))
    assert bm25n == pytest.approx({"x2": 0.8, "x4": 1.0, "x1": 0.0, "x3": 0.2, "x5": 0.0})
    assert dict(zip([d for d, _ in r], st.extra["cos"][0]))["x4"] == pytest.approx(0.48)  # [B3] true cosine


def test_d2_1_rerank_with_injected_probabilities():
    cs = d21_cs({"rerank_p": P})
    stages = [{"type": "fuse.two_stage"}, {"type": "rerank.yes_no", "provider": "injected", "keep": 10}]
    st, r = run(stages, cs)
    assert [d for d, _ in r] == ["x1", "x4", "x3", "x2", "x5"]
    assert [s for _, s in r] == pytest.approx([0.91, 0.88, 0.75, 0.40, 0.05])
    st, r = run(stages[:1] + [dict(stages[1], min_p=0.6)], cs)  # [B7] optional filter
    assert [d for d, _ in r] == ["x1", "x4", "x3"]


def test_d2_1_logit_example_and_rerank_ties():
    cs = d21_cs({"rerank_logits": {i: [2.0, -0.3] for i in COS}})
    st, r = run([{"type": "fuse.two_stage"}, {"type": "rerank.yes_no"}], cs)
    assert r[0][1] == pytest.approx(0.908877, abs=1e-6)
    # all p equal → ties keep the hybrid order (then id asc)
    assert [d for d, _ in r] == ["x2", "x4", "x1", "x3", "x5"]


def test_d2_presets():
    cs = d21_cs({"rerank_p": P})
    st = load_preset("two_stage_rerank").run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4", "x3", "x2", "x5"]
    assert st.info["injected"][0].all() and st.info["budget"]["chunks"].tolist() == [5]
    st = load_preset("two_stage_rerank_min_p").run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4", "x3"]
    st = load_preset("two_stage_recall_only").run(d21_cs())
    assert [d for d, _ in ranked(st, cs, 0)] == ["x2", "x4", "x1", "x3", "x5"]


def test_hybrid_ties_break_by_id_and_missing_cosine():
    docs = [{"id": i, "text": i, "embedding": e} for i, e in (("b", [1.0, 0.0]), ("a", [1.0, 0.0]),
                                                                 ("z", [0.0, 1.0]))]
    cs = candidates_from_json({"query": "q", "query_embedding": [1.0, 0.0], "documents": docs, "arms": {
        "vec": [{"id": "b", "score": 0.9}, {"id": "a", "score": 0.9}], "bm25": [{"id": "z", "score": 2.0}]}})
    st, r = run([{"type": "fuse.two_stage"}], cs)
    assert [d for d, _ in r] == ["a", "b", "z"]  # [B5] ties → id asc
    assert r[2][1] == pytest.approx(0.3)  # z: cosine 0 from the embeddings [B8], bm25n 1
    assert np.isfinite(st.score[0]).all()
