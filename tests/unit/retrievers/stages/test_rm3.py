"""score.rm3 (RM3 query expansion, a second BM25 pass over the list's documents): hand-computed examples.

Documents (unicode61 tokens, k1 1.2, b 0 so BM25 = idf · tf / (tf + 1.2), idf = ln(1 + (N − df + 0.5) / (df + 0.5))
with N 3): d0 "banana banana apple", d1 "banana cherry", d2 "cherry date". idf(banana) = idf(cherry) = ln 1.6 =
0.470004, idf(apple) = ln(8/3) = 0.980829; tf 1 → 0.454545, tf 2 → 0.625.
"""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.candidates.table import CandidateSet, State
from retrievers.index.corpus import Corpus
from retrievers.stages import Context, build_stage
from retrievers.types import Dataset, Document, Query

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

_TEXTS = ["banana banana apple", "banana cherry", "cherry date"]


def _cs(query: str = "cherry", queries: int = 1) -> CandidateSet:
    c = Corpus(Dataset("tiny", [Document(f"d{i}", t) for i, t in enumerate(_TEXTS)], [], {}))
    return CandidateSet(c, [Query(f"q{i}", query) for i in range(queries)], np.tile(np.arange(3), (queries, 1)), {})


def _run(stage: dict, cs: CandidateSet, cols, scores) -> State:
    base = {"type": "score.rm3", "tokenizer": "unicode61", "k1": 1.2, "b": 0.0, "weight": 1.0}
    st = State(np.array(cols), np.array(scores, dtype=np.float64), np.zeros(len(cols), bool))
    return build_stage(dict(base, **stage)).apply(st, cs, Context())


def test_one_feedback_document_one_expansion_term():
    # list d0 3, d2 2, d1 1; feedback d0 → P(banana) 2/3, P(apple) 1/3; terms 1 keeps banana (renormalised to 1);
    # lam 0.5: w(cherry) 0.5, w(banana) 0.5 → r = d0 0.5·0.625·0.470004 = 0.146876, d2 0.5·0.213638 = 0.106819,
    # d1 0.5·0.213638 + 0.5·0.213638 = 0.213638; z · sd(3, 2, 1) added → 2.835043, 1.092735, 2.072222: d0, d1, d2
    out = _run({"k": 1, "terms": 1, "lam": 0.5, "doc_weights": "uniform"}, _cs(), [[0, 2, 1]], [[3, 2, 1]])
    assert out.col.tolist() == [[0, 1, 2]]
    assert out.extra["rm3"][0] == pytest.approx([0.146876, 0.213638, 0.106819], abs=1e-5)
    assert out.score[0] == pytest.approx([2.835043, 2.072222, 1.092735], abs=1e-5)


def test_softmax_and_uniform_document_weights_choose_different_terms():
    # feedback d0 (score 3), d2 (score 2), lam 0 (expansion only), terms 2.
    # softmax P(D) = 0.731059, 0.268941 → P(banana) 0.487372, P(apple) 0.243686, P(cherry) = P(date) 0.134471:
    #   banana 2/3, apple 1/3 → d0 2/3·0.293752 + 1/3·0.445831 = 0.344445, d1 2/3·0.213638 = 0.142425, d2 0
    # uniform → banana 1/3, cherry 1/4, apple 1/6, date 1/4 (cherry first seen before date): banana 4/7, cherry 3/7
    #   → d0 4/7·0.293752 = 0.167858, d1 0.213638, d2 3/7·0.213638 = 0.091559
    soft = _run({"k": 2, "terms": 2, "lam": 0.0, "doc_weights": "softmax"}, _cs(), [[0, 2, 1]], [[3, 2, 1]])
    uni = _run({"k": 2, "terms": 2, "lam": 0.0, "doc_weights": "uniform"}, _cs(), [[0, 2, 1]], [[3, 2, 1]])
    assert soft.extra["rm3"][0] == pytest.approx([0.344445, 0.0, 0.142425], abs=1e-5)  # rows d0, d2, d1
    assert uni.extra["rm3"][0] == pytest.approx([0.167858, 0.213638, 0.091559], abs=1e-5)  # rows d0, d1, d2
    assert soft.col.tolist() == [[0, 2, 1]] and uni.col.tolist() == [[0, 1, 2]]  # only the uniform model lifts d1


def test_lam_one_is_the_plain_query_and_weight_zero_is_the_identity():
    out = _run({"k": 2, "terms": 5, "lam": 1.0}, _cs(), [[0, 2, 1]], [[3, 2, 1]])
    # r: d0 0, d2 0.213638, d1 0.213638 → z (−1.4142, 0.7071, 0.7071) · 0.8165 → d0 1.8453, d2 2.5774, d1 1.5774
    assert out.col.tolist() == [[2, 0, 1]] and out.extra["rm3"][0] == pytest.approx([0.213638, 0.0, 0.213638], abs=1e-5)
    st = State(np.array([[0, 2, 1]]), np.array([[3.0, 2.0, 1.0]]), np.zeros(1, bool))
    assert build_stage({"type": "score.rm3", "weight": 0.0}).apply(st, _cs(), Context()) is st


def test_padding_is_ignored_and_queries_are_independent():
    cs = _cs(queries=2)
    two = _run({"k": 1, "terms": 1, "lam": 0.5, "doc_weights": "uniform"}, cs, [[0, 2, 1, -1], [2, 0, -1, -1]],
               [[3, 2, 1, -np.inf], [3, 2, -np.inf, -np.inf]])
    assert two.col[0].tolist() == [0, 1, 2, -1] and np.isnan(two.extra["rm3"][0][3])
    # query 2: feedback d2 → P(cherry) = P(date) 1/2, terms 1 keeps cherry (first seen): w(cherry) 1 → d2 0.213638,
    # d0 0; two rows → z (+1, −1), sd(3, 2) 0.5 → 3.5, 1.5
    assert two.extra["rm3"][1][:2] == pytest.approx([0.213638, 0.0], abs=1e-5)
    assert two.score[1][:2] == pytest.approx([3.5, 1.5], abs=1e-5)
