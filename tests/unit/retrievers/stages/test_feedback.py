"""score.feedback (pseudo-relevance feedback over document vectors): hand-computed examples."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.candidates.table import CandidateSet, State
from retrievers.index.corpus import Corpus
from retrievers.stages import Context, build_stage
from retrievers.types import Dataset, Document, Query

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`


def _cs(vectors: list[list[float]], queries: int = 1) -> CandidateSet:
    docs = [Document(f"d{i}", "t") for i in range(len(vectors))]
    c = Corpus(Dataset("tiny", docs, [], {}))
    c.embeddings = np.array(vectors, dtype=np.float32)
    n = len(vectors)
    return CandidateSet(c, [Query(f"q{i}", "t") for i in range(queries)], np.tile(np.arange(n), (queries, 1)), {},
                        qemb=np.ones((queries, 2), np.float32))


def _run(stage: dict, cs: CandidateSet, cols, scores) -> State:
    st = State(np.array(cols), np.array(scores, dtype=np.float64), np.zeros(len(cols), bool))
    return build_stage(stage).apply(st, cs, Context())


# columns: 0 = a (1, 0), 1 = c (0, 1), 2 = b (0.6, 0.8); the incoming list is a 3, b 2, c 1
_VECS = [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]


def test_max_example_from_the_docstring():
    out = _run({"type": "score.feedback", "k": 2, "agg": "max", "weight": 1.0}, _cs(_VECS), [[0, 2, 1]], [[3, 2, 1]])
    assert out.col.tolist() == [[0, 1, 2]]  # a, c, b: c resembles the feedback document b more than b resembles a
    assert out.score[0] == pytest.approx([2.422650, 2.154701, 1.422650], abs=1e-6)
    assert out.extra["feedback"][0] == pytest.approx([0.6, 0.8, 0.6], abs=1e-6)


def test_centroid_counts_the_feedback_row_itself():
    out = _run({"type": "score.feedback", "k": 2, "agg": "centroid", "weight": 1.0}, _cs(_VECS), [[0, 2, 1]],
               [[3, 2, 1]])
    # centroid of a and b = (1.6, 0.8) / |.| = (0.8944, 0.4472): a 0.8944, b 0.8944, c 0.4472
    assert out.extra["feedback"][0] == pytest.approx([0.894427, 0.894427, 0.447214], abs=1e-6)
    assert out.col.tolist() == [[0, 2, 1]]  # z (0.7071, 0.7071, −1.4142) · sd 0.8165 keeps the order
    assert out.score[0] == pytest.approx([3.577350, 2.577350, -0.154701], abs=1e-6)


def test_a_lone_feedback_row_has_no_signal_and_padding_is_ignored():
    # k = 1: the top row (a) has no other feedback document; b and c score by their cosine to a (0.6, 0)
    out = _run({"type": "score.feedback", "k": 1, "agg": "max", "weight": 1.0}, _cs(_VECS), [[0, 1, 2, -1]],
               [[3, 2, 1, -np.inf]])
    f = out.extra["feedback"][0]
    assert np.isnan(f[0]) and f[1:3] == pytest.approx([0.6, 0.0]) and np.isnan(f[3])
    # z over b, c only: (+1, −1); a gets 0; sd of the valid scores 0.8165
    assert out.col.tolist() == [[0, 2, 1, -1]] and out.score[0][:3] == pytest.approx([3.0, 1.816497, 1.183503])


def test_weight_zero_is_the_identity_and_k_beyond_the_list_uses_all_rows():
    st = State(np.array([[0, 2, 1]]), np.array([[3.0, 2.0, 1.0]]), np.zeros(1, bool))
    assert build_stage({"type": "score.feedback", "weight": 0.0}).apply(st, _cs(_VECS), Context()) is st
    wide = _run({"type": "score.feedback", "k": 50, "agg": "max", "weight": 1.0}, _cs(_VECS), [[0, 2, 1]],
                [[3, 2, 1]])
    # every row is feedback: a .6 (b), b .8 (c), c .8 (b) → z (−1.4142, .7071, .7071)
    # → a 1.8453, b 2.5774, c 1.5774: b, a, c
    assert wide.col.tolist() == [[2, 0, 1]] and wide.extra["feedback"][0] == pytest.approx([0.8, 0.6, 0.8])


def test_queries_are_independent():
    cs = _cs(_VECS, queries=2)
    one = _run({"type": "score.feedback", "k": 2, "weight": 1.0}, _cs(_VECS), [[0, 2, 1]], [[3, 2, 1]])
    two = _run({"type": "score.feedback", "k": 2, "weight": 1.0}, cs, [[0, 2, 1], [1, 2, 0]], [[3, 2, 1], [3, 2, 1]])
    assert two.col[0].tolist() == one.col[0].tolist() and two.score[0] == pytest.approx(one.score[0])
    # query 2: feedback c, b → a's best cosine is 0.6 (to b), c ↔ b 0.8, b ↔ c 0.8
    assert two.extra["feedback"][1] == pytest.approx([0.8, 0.8, 0.6])
