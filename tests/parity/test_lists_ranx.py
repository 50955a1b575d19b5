"""evalkit.measures.lists.evaluate (numpy, ranx's arithmetic) against ranx itself (``engine="ranx"``): equal to the
bit on random lists with ties, copies, empty lists, grade-0 rows and unjudged queries, and on a real run."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.measures import catalogue
from evalkit.measures.lists import evaluate
from retrievers.errors import ConfigError

#: the cut-offs each measure is checked at (edge cases: @1, a cut-off past most lists, none)
LISTED = ["ndcg@1", "ndcg@3", "ndcg@10", "ndcg@100", "ndcg", "dcg@5", "ndcg_burges@10", "dcg_burges",
          "recall@1", "recall@5", "recall@50", "recall", "precision@1", "precision@5", "precision", "mrr@10",
          "mrr", "map@5", "map@100", "map", "hit_rate@3", "hit_rate", "hits@10", "f1@5", "f1", "r-precision",
          "recall_any@5", "recall_all@10", "judged@10"]


def with_declared(listed: list[str]) -> list[str]:
    """``listed`` plus every ranking measure declared for the list engine (evalkit.measures.catalogue) that it does
    not name — a new one — at @5 (bare when it takes no cut-off): a measure added to the catalogue is compared with
    ranx here (or, for one ranx lacks, run on the same cases) without this file being edited. bpref: ranx scores it
    itself."""
    have = {catalogue.parse(m).measure for m in listed}
    return listed + [f.name if f.cutoff == "none" else f"{f.name}@5" for f in catalogue.FAMILIES
                     if f.kind == "ranking" and "lists" in f.engines and f.name not in have | {"bpref"}]


METRICS = with_declared(LISTED)


def test_every_ranking_measure_of_the_list_engine_is_compared():
    """Every measure declared for the list engine is in METRICS, under a name the catalogue parses (a new one is
    added by :func:`with_declared`; a family whose declared cut-off rule makes that name unparseable fails here)."""
    declared = {f.name for f in catalogue.FAMILIES if f.kind == "ranking" and "lists" in f.engines}
    assert METRICS[:len(LISTED)] == LISTED
    assert declared - {"bpref"} == {catalogue.parse(m).measure for m in METRICS}  # bpref: ranx scores it itself


def _random_case(rng, Q=80, n_docs=60):
    qrels, ranked = {}, {}
    for q in range(Q):
        qid = f"q{q}"
        u = rng.random()
        if u < 0.08:
            qrels[qid] = {f"d{rng.integers(n_docs)}": 0}  # grade-0 rows only: not scored
        elif u < 0.12:
            pass  # no judgement at all
        else:
            docs = rng.choice(n_docs + 10, size=int(rng.integers(1, 9)), replace=False)
            qrels[qid] = {(f"d{d}" if d < n_docs else f"gone{d}"): int(rng.choice([0, 1, 2, 3])) for d in docs}
        n = 0 if rng.random() < 0.1 else int(rng.integers(1, 40))  # some lists are empty
        ids = [f"d{d}" for d in rng.integers(0, n_docs, size=n)]  # with replacement: copies in a list
        scores = np.round(rng.random(n), 1)  # many equal scores: the list order decides, not the score
        ranked[qid] = list(zip(ids, map(float, scores)))
    return qrels, ranked


def _assert_same(qrels, ranked, metrics):
    got = evaluate(qrels, ranked, metrics)
    ref = evaluate(qrels, ranked, metrics, engine="ranx")
    assert list(got) == list(ref) == metrics
    for m in metrics:
        assert got[m].keys() == ref[m].keys(), m
        bad = {q: (got[m][q], ref[m][q]) for q in ref[m] if got[m][q] != ref[m][q]}
        assert not bad, (m, list(bad.items())[:3])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_lists_bit_identical(seed):
    qrels, ranked = _random_case(np.random.default_rng(seed))
    assert any(len({d for d, _ in r}) < len(r) for r in ranked.values())  # copies present
    assert any(not r for r in ranked.values())  # empty lists present
    _assert_same(qrels, ranked, METRICS)


def test_unjudged_and_grade_zero_queries_not_scored():
    qrels = {"a": {"x": 1, "y": 0}, "b": {"x": 0}, "c": {}}
    ranked = {"a": [("y", 1.0), ("x", 1.0)], "b": [("x", 1.0)], "d": [("x", 1.0)]}
    got = evaluate(qrels, ranked, ["ndcg@10", "mrr@10"])
    assert got == {"ndcg@10": {"a": 1 / np.log2(3)}, "mrr@10": {"a": 0.5}}
    _assert_same(qrels, ranked, ["ndcg@10", "mrr@10", "precision", "f1"])
    assert evaluate({"b": {"x": 0}}, ranked, ["ndcg@10"]) == {"ndcg@10": {}}


def test_real_run_bit_identical():
    """BM25 lists over memory-workspace through the real index and search (the bm25 preset's candidates)."""
    from evalkit.data.registry import load_dataset
    from retrievers.candidates.search import build_candidates
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset

    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    p = load_preset("bm25")
    cs = build_candidates(index, ds.queries, p.arms)
    ranked = {q.id: [(cs.corpus.ids[d], 0.0) for d in cs.doc[qi] if d >= 0] for qi, q in enumerate(cs.queries)}
    assert sum(map(len, ranked.values())) > 1000
    _assert_same(ds.qrels, ranked, METRICS)


def test_unknown_engine_is_refused():
    with pytest.raises(ConfigError, match="unknown list-scoring engine 'ranks'"):
        evaluate({"q": {"d": 1}}, {"q": [("d", 1.0)]}, ["ndcg@10"], engine="ranks")
