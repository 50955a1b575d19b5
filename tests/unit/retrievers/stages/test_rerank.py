"""Rerank stages against real parts without a server: memory-lancedb-pro's cosine path and JavaScript coercions, a
tiny real sentence-transformers CrossEncoder saved to disk (``rerank.cross_encoder``, ``rerank.yes_no``), injected
reranker probabilities (seed 003's D2). The HTTP providers against a real server: tests/system/test_rerank_http.py.
"""
from __future__ import annotations

import pytest

from retrievers.pipeline import ranked
from retrievers.stages import ConfigError
from retrievers.stages.rerank import models as rr
from retrievers.types import DataError
from tests.rerank_cases import (  # noqa: F401  (fixtures)
    CE_DOCS,
    CE_QUERY,
    D2_P,
    DOCS5,
    QEMB,
    approx_rows,
    ce_cs,
    ce_pipe,
    cos,
    cosine_expected,
    d2_cs,
    independent_predict,
    lance_cs,
    lance_pipe,
    tiny_models,
)


@pytest.mark.parametrize("index,outcome", [
    (2, "row"), (2.0, "row"), (-0.0, "row"), ("2", "row+unreturned"), ([2], "row+unreturned"),
    (4, "ignored"), (-1, "ignored"), ("abc", "ignored"), ({"i": 2}, "ignored"), ("", "fallback"),
    ("02", "fallback"), (" 2", "fallback"), (1.5, "fallback"), (None, "fallback"), (False, "fallback"),
])
def test_lancedb_answer_index_coercions_follow_javascript(index, outcome):
    from retrievers.stages.rerank.http import RerankFallback, lancedb_items
    data = {"results": [{"index": index, "relevance_score": "0.5"}]}
    if outcome == "fallback":  # results[i] is undefined → reading .score throws → cosine fallback
        with pytest.raises(RerankFallback):
            lancedb_items("jina", data, 4)
        return
    returned, unreturned, ignored = lancedb_items("jina", data, 4)
    if outcome == "ignored":
        assert returned == [] and ignored == 1 and unreturned == [0, 1, 2, 3]
        return
    row = 0 if index == -0.0 and not isinstance(index, (str, list)) else 2
    assert returned == [(row, 0.5)] and ignored == 0  # Number("0.5") = 0.5
    assert (row in unreturned) == (outcome == "row+unreturned")


def test_lancedb_cosine_missing_vector_returns_input_unchanged_and_zero_norm_is_zero():
    docs = dict(DOCS5)
    docs["d2"] = (0.80, "no vector", None)
    cs = lance_cs(docs)
    st = lance_pipe(limit=2, mode="lightweight").run(cs)
    assert ranked(st, cs, 0) == [(i, pytest.approx(docs[i][0])) for i in ("d1", "d2", "d3", "d4")]  # truncated
    assert st.info["rerank"][0]["path"] == "unchanged"
    assert st.info["rerank"][0]["cosine_error"] == "missing_entry_vector"

    docs["d2"] = (0.80, "zero vector", [0.0, 0.0, 0.0])
    cs = lance_cs(docs)
    st = lance_pipe(limit=2, mode="lightweight").run(cs)
    got = dict(ranked(st, cs, 0))
    assert got["d2"] == pytest.approx(0.7 * 0.80)  # cos = 0 on zero norm
    approx_rows(ranked(st, cs, 0), cosine_expected(docs, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)

    st = lance_pipe(limit=2, mode="lightweight").run(lance_cs(qemb=None))  # no query vector at all
    assert st.info["rerank"][0]["path"] == "unchanged"


def test_lancedb_cosine_clamps_to_unit_interval():
    docs = {"a": (1.0, "ta", [1.0, 0.0]), "b": (0.1, "tb", [-1.0, 0.0])}
    cs = lance_cs(docs, qemb=[1.0, 0.0])
    st = lance_pipe(limit=5, mode="lightweight").run(cs)
    approx_rows(ranked(st, cs, 0), [("a", 1.0), ("b", 0.0)])  # 0.7 + 0.3 → 1; 0.07 − 0.3 clamped to 0


def test_lancedb_params_are_validated():
    with pytest.raises(ConfigError, match="not one of"):
        lance_pipe(provider="cohere")
    with pytest.raises(ConfigError, match="out of range"):
        lance_pipe(limit=21)
    with pytest.raises(ConfigError, match="out of range"):
        lance_pipe(timeout_s=0)


def test_cross_encoder_scores_equal_independent_predict_and_drop_rest(tiny_models):
    rr.clear_caches()
    path = tiny_models[1]
    cs = ce_cs()
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3}).run(cs)
    want = independent_predict(path, [(CE_QUERY, t) for _, t, _ in CE_DOCS[:3]])
    expected = sorted(zip("abc", want.tolist()), key=lambda r: -r[1])
    got = ranked(st, cs, 0)
    assert len(got) == 3  # rows beyond top_k dropped (BEIR)
    approx_rows(got, expected, tol=1e-6)
    assert st.info["rerank"][0]["path"] == "local" and st.info["rerank"][0]["n_in"] == 3


def test_cross_encoder_blend_and_keep_rest(tiny_models):
    path = tiny_models[1]
    cs = ce_cs()
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3, "blend": 0.25,
                  "keep_rest": True}).run(cs)
    ce = independent_predict(path, [(CE_QUERY, t) for _, t, _ in CE_DOCS[:3]])
    head = sorted([(i, 0.25 * c + 0.75 * s) for (i, _, s), c in zip(CE_DOCS[:3], ce)], key=lambda r: -r[1])
    approx_rows(ranked(st, cs, 0), head + [("d", 0.6), ("e", 0.5)], tol=1e-6)  # rest kept after, unchanged


def test_cross_encoder_ties_keep_previous_order(tiny_models):
    # b and a have the same text → the same model score; b came first (higher first-stage score) and stays first
    docs = [("b", "same text twice", 0.9), ("a", "same text twice", 0.8), ("c", "another text", 0.7)]
    cs = ce_cs(docs)
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": tiny_models[1]}).run(cs)
    got = [d for d, _ in ranked(st, cs, 0)]
    assert got.index("b") == got.index("a") - 1


def test_cross_encoder_model_loaded_once_and_pairs_memoised(tiny_models):
    rr.clear_caches()
    before = dict(rr.STATS)
    path = tiny_models[1]
    p3 = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3})
    first = p3.run(ce_cs())
    assert rr.STATS["model_loads"] - before["model_loads"] == 1
    assert rr.STATS["predict_calls"] - before["predict_calls"] == 1
    assert rr.STATS["pairs_scored"] - before["pairs_scored"] == 3

    model = rr.load_cross_encoder(path)
    calls = []
    original = model.predict

    def counting_predict(pairs, *a, **kw):
        calls.append(list(pairs))
        return original(pairs, *a, **kw)

    model.predict = counting_predict
    try:
        again = p3.run(ce_cs())  # a fresh candidate set: memo is per (model, query, doc), not per candidate set
        ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 2, "blend": 0.5,
                 "keep_rest": True}).run(ce_cs())  # another config of a sweep
        assert calls == []
        assert ranked(again, ce_cs(), 0) == ranked(first, ce_cs(), 0)
        ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 5}).run(ce_cs())
        assert calls == [[(CE_QUERY, CE_DOCS[3][1]), (CE_QUERY, CE_DOCS[4][1])]]  # only the new pairs
    finally:
        del model.predict
    assert rr.STATS["model_loads"] - before["model_loads"] == 1


def test_cross_encoder_rejects_two_output_models_and_missing_path(tiny_models, tmp_path):
    with pytest.raises(ConfigError, match="single-score"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": tiny_models[2]}).run(ce_cs(query="two outputs?"))
    with pytest.raises(ConfigError, match="not a directory"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": str(tmp_path / "nope")}).run(ce_cs())
    with pytest.raises(ConfigError, match="needs model_path"):
        ce_pipe({"type": "rerank.cross_encoder"})
    with pytest.raises(ConfigError, match="out of range"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": "x", "blend": 1.5})


# ---- rerank.yes_no -----------------------------------------------------------------------------------------------------

def test_yes_no_one_logit_is_sigmoid_two_logits_is_softmax_yes(tiny_models):
    cs = ce_cs(query="yes or no?")
    pairs = [("yes or no?", t) for _, t, _ in CE_DOCS]
    # one output: p = sigmoid(logit) = CrossEncoder's default predict
    st1 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[1]}).run(cs)
    p1 = dict(zip("abcde", independent_predict(tiny_models[1], pairs).tolist()))
    approx_rows(ranked(st1, cs, 0), sorted(p1.items(), key=lambda r: -r[1]), tol=1e-6)
    # two outputs labelled no/yes: p = softmax(...)[yes] = sigmoid(yes − no)
    st2 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[2]}).run(cs)
    probs = independent_predict(tiny_models[2], pairs, apply_softmax=True)
    p2 = dict(zip("abcde", probs[:, 1].tolist()))
    approx_rows(ranked(st2, cs, 0), sorted(p2.items(), key=lambda r: -r[1]), tol=1e-6)
    # yes_index = 0 reads the other output: p = 1 − p(yes)
    st3 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[2],
                   "yes_index": 0}).run(cs)
    approx_rows(ranked(st3, cs, 0), sorted(((k, 1 - v) for k, v in p2.items()), key=lambda r: -r[1]), tol=1e-6)


def test_yes_no_injected_example_d2_1():
    cs = d2_cs({"rerank_p": D2_P})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    assert ranked(st, cs, 0) == [("x1", 0.91), ("x4", 0.88), ("x3", 0.75), ("x2", 0.40), ("x5", 0.05)]
    st = ce_pipe({"type": "rerank.yes_no", "min_p": 0.6}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4", "x3"]
    st = ce_pipe({"type": "rerank.yes_no", "keep": 2}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4"]
    st = ce_pipe({"type": "rerank.yes_no", "top_k_input": 2}).run(cs)  # only x2, x4 reach the reranker
    assert [d for d, _ in ranked(st, cs, 0)] == ["x4", "x2"]


def test_yes_no_injected_logits_and_tie_order():
    # logit example of PIPELINES.md §6: yes 2.0, no −0.3 → p = 0.908877 (x1, x2, x3 tie on it)
    logits = {i: [2.0, -0.3] for i in ("x1", "x2", "x3")}
    logits["x5"] = 0.0  # one logit → sigmoid(0) = 0.5
    cs = d2_cs({"rerank_logits": logits, "rerank_p": {"x4": 0.95}})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    got = ranked(st, cs, 0)
    # equal p: previous (hybrid) score desc → x2 .765, x1 .574, x3 .445
    assert [d for d, _ in got] == ["x4", "x2", "x1", "x3", "x5"]
    assert got[1][1] == pytest.approx(0.908877, abs=1e-6) and got[4][1] == 0.5
    # equal p and equal previous score → document id ascending (not input order)
    docs = [("zz", "t1", 0.5), ("mm", "t2", 0.5), ("aa", "t3", 0.5), ("top", "t4", 0.9)]
    cs = ce_cs(docs, metadata={"rerank_p": {"zz": 0.7, "mm": 0.7, "aa": 0.7, "top": 0.7}})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["top", "aa", "mm", "zz"]


def test_yes_no_injected_missing_or_bad_value_is_a_data_error():
    with pytest.raises(DataError, match="x5.*no reranker probability"):
        ce_pipe({"type": "rerank.yes_no"}).run(d2_cs({"rerank_p": {k: v for k, v in D2_P.items() if k != "x5"}}))
    with pytest.raises(DataError, match=r"rerank_p must be a number in \[0, 1\]"):
        ce_pipe({"type": "rerank.yes_no"}).run(d2_cs({"rerank_p": dict(D2_P, x1=1.5)}))
