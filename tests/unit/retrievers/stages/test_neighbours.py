"""score.neighbours (neighbour context): hand-computed examples on a four-document corpus."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.candidates.table import CandidateSet, State
from retrievers.index.corpus import Corpus
from retrievers.stages import Context, build_stage
from retrievers.stages.score.blend import neighbour_table
from retrievers.types import Dataset, Document, Query

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`


def _corpus() -> Corpus:
    # a, b, c: one session in that order; x: the next document in corpus order but another session
    docs = [Document("a", "t", path="s1"), Document("b", "t", path="s1"), Document("c", "t", path="s1"),
            Document("x", "t", path="s2"), Document("y", "t")]
    c = Corpus(Dataset("tiny", docs, [], {}))
    c.embeddings = np.array([[1, 0], [0, 1], [0.6, 0.8], [1, 0], [1, 0]], dtype=np.float32)
    return c


def _cs(corpus: Corpus, docs: list[int]) -> CandidateSet:
    return CandidateSet(corpus, [Query("q", "t")], np.array([docs]), {}, qemb=np.array([[2.0, 0.0]], np.float32))


def _run(stage: dict, cs: CandidateSet, cols: list[int], scores: list[float]) -> State:
    st = State(np.array([cols]), np.array([scores], dtype=np.float64), np.zeros(1, bool))
    return build_stage(stage).apply(st, cs, Context())


def test_neighbour_table_stays_in_its_path():
    nb = neighbour_table(_corpus(), 2)  # columns: 1st before, 2nd before, 1st after, 2nd after
    assert nb.tolist() == [[-1, -1, 1, 2], [0, -1, 2, -1], [1, 0, -1, -1], [-1, -1, -1, -1], [-1, -1, -1, -1]]


def test_list_signal_example_from_the_docstring():
    cs = _cs(_corpus(), [0, 1, 2])
    out = _run({"type": "score.neighbours", "signal": "list", "window": 1, "agg": "max", "weight": 1.0}, cs,
               [0, 1, 2], [3.0, 1.0, 2.0])
    # n = (1, 3, 1); z = (−1/√2, √2, −1/√2); sd(score) = √(2/3) → 3 − 0.57735, 1 + 1.15470, 2 − 0.57735
    assert out.col.tolist() == [[0, 1, 2]]
    assert out.score[0] == pytest.approx([2.422650, 2.154701, 1.422650], abs=1e-6)
    assert out.extra["neighbours"][0].tolist() == [1.0, 3.0, 1.0]


def test_list_signal_absent_neighbour_counts_the_lowest_score():
    # candidates a and c only: b (their neighbour) is not in the list, so both count the lowest score, 1
    cs = _cs(_corpus(), [0, 2])
    out = _run({"type": "score.neighbours", "signal": "list", "weight": 1.0}, cs, [0, 1], [5.0, 1.0])
    assert out.extra["neighbours"][0].tolist() == [1.0, 1.0]
    assert out.score[0].tolist() == [5.0, 1.0]  # equal signals: z = 0, nothing moves


def test_dense_signal_reads_neighbours_that_are_not_candidates():
    # candidates b and c; query (1, 0). b's neighbours a (cos 1) and c (cos 0.6) → max 1; c's only neighbour is b
    # (x is another session) → cos 0. z = (1, −1), sd(score) = 0.5, weight 2 → b 1 + 1 = 2, c 2 − 1 = 1
    cs = _cs(_corpus(), [1, 2])
    out = _run({"type": "score.neighbours", "signal": "dense", "agg": "max", "weight": 2.0}, cs, [1, 0], [2.0, 1.0])
    assert out.col.tolist() == [[0, 1]]  # b (column 0) now first
    assert out.score[0] == pytest.approx([2.0, 1.0])
    assert out.extra["neighbours"][0] == pytest.approx([1.0, 0.0])
    mean = _run({"type": "score.neighbours", "signal": "dense", "agg": "mean", "weight": 2.0}, cs, [1, 0], [2.0, 1.0])
    assert mean.extra["neighbours"][0] == pytest.approx([0.8, 0.0])  # b: mean(1, 0.6)


def test_no_neighbour_no_signal_and_weight_zero_is_identity():
    cs = _cs(_corpus(), [3, 4, 0])  # x, y have no neighbours; a has one (b, not a candidate)
    out = _run({"type": "score.neighbours", "weight": 1.0}, cs, [0, 1, 2], [3.0, 2.0, 1.0])
    assert np.isnan(out.extra["neighbours"][0][:2]).all() and out.extra["neighbours"][0][2] == pytest.approx(0.0)
    assert out.score[0].tolist() == [3.0, 2.0, 1.0]  # only one row has a signal: z = 0
    st = State(np.array([[0, 1, 2]]), np.array([[3.0, 2.0, 1.0]]), np.zeros(1, bool))
    assert build_stage({"type": "score.neighbours", "weight": 0.0}).apply(st, cs, Context()) is st


def test_doc_cosine_example_from_the_docstring():
    c = _corpus()
    c.embeddings = np.array([[0.2, np.sqrt(0.96)], [0.6, 0.8], [1, 0], [1, 0], [1, 0]], dtype=np.float32)
    cs = _cs(c, [0, 1])
    out = _run({"type": "score.doc_cosine", "weight": 1.0}, cs, [0, 1], [2.0, 1.0])
    assert out.extra["doc_cosine"][0] == pytest.approx([0.2, 0.6], abs=1e-6)
    assert out.score[0] == pytest.approx([1.5, 1.5]) and out.col.tolist() == [[0, 1]]  # a tie keeps the order
    out = _run({"type": "score.doc_cosine", "weight": 2.0}, cs, [0, 1], [2.0, 1.0])
    assert out.col.tolist() == [[1, 0]] and out.score[0] == pytest.approx([2.0, 1.0])


def test_dense_signal_does_not_read_a_neighbour_written_after_the_question():
    c = _corpus()
    c.created = np.array([0.0, 0.0, 100.0, 0.0, 0.0])  # c entered the memory at t = 100
    cs = CandidateSet(c, [Query("q", "t", as_of=50.0)], np.array([[1, 2]]), {},
                      qemb=np.array([[1.0, 0.0]], np.float32))
    out = _run({"type": "score.neighbours", "signal": "dense", "agg": "mean", "weight": 1.0}, cs, [0], [1.0])
    assert out.extra["neighbours"][0] == pytest.approx([1.0])  # b's neighbours: a (cos 1) read, c (later) not


def test_list_signal_ignores_a_later_neighbour_and_the_all_protocol_sees_it():
    c = _corpus()
    c.created = np.array([0.0, 0.0, 100.0, 0.0, 0.0])  # c entered the memory at t = 100
    # rows a, b (c is not a candidate); list signal, window 1, mean: a later c must not count as a neighbour of b
    strict = CandidateSet(c, [Query("q", "t", as_of=50.0)], np.array([[0, 1]]), {},
                          qemb=np.array([[1.0, 0.0]], np.float32))
    stage = {"type": "score.neighbours", "signal": "list", "window": 1, "agg": "mean", "weight": 1.0}
    out = _run(stage, strict, [0, 1], [3.0, 1.0])
    assert out.extra["neighbours"][0] == pytest.approx([1.0, 3.0])  # b's only visible neighbour is a (3)
    # under the `all` protocol the whole memory is visible: c counts, at the list's lowest score (1)
    seen = CandidateSet(c, [Query("q", "t", as_of=50.0)], np.array([[0, 1]]), {},
                        qemb=np.array([[1.0, 0.0]], np.float32), meta={"visibility": "all"})
    out = _run(stage, seen, [0, 1], [3.0, 1.0])
    assert out.extra["neighbours"][0] == pytest.approx([1.0, 2.0])
