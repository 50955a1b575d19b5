"""The ranx verbs on in-memory runs (evalkit.evaluate, evalkit.fuse) agree with ranx itself on random runs, from
dicts and from DataFrames alike; evalkit.experiment equals evalkit.run followed by evalkit.compare."""
import random

import pandas as pd
import pytest

import evalkit
from tests.helpers import random_runs

METRICS = ["ndcg@10", "ndcg@5", "recall@10", "recall@100", "mrr@10", "map@100", "precision@5"]


def _random_qrels(seed, runs, n_docs=40):
    rng = random.Random(seed)
    qrels = {}
    for q in runs["vec"]:
        docs = rng.sample([f"d{i:02d}" for i in range(n_docs)], rng.randint(1, 6))
        qrels[q] = {d: rng.randint(1, 3) for d in docs}
    return qrels


def _frame(table, value="score"):
    return pd.DataFrame([(q, d, v) for q, docs in table.items() for d, v in docs.items()],
                        columns=["q_id", "doc_id", value])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_evaluate_equals_ranx_from_dicts_and_frames(ranx, seed):
    _, runs = random_runs(seed)
    qrels = _random_qrels(seed, runs)
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(runs["bm25"]), METRICS, make_comparable=True)
    ours = evalkit.evaluate(qrels, runs["bm25"], METRICS)
    assert ours.keys() == theirs.keys()
    for m in METRICS:
        assert ours[m] == pytest.approx(theirs[m], abs=1e-12), m
    assert evalkit.evaluate(_frame(qrels), _frame(runs["bm25"]), METRICS) == ours
    per = evalkit.evaluate(qrels, runs["bm25"], ["ndcg@10"], per_query=True)
    their_per = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(runs["bm25"]), "ndcg@10", return_mean=False,
                              make_comparable=True)
    assert per["ndcg@10"].tolist() == pytest.approx(list(their_per), abs=1e-12)


def test_evaluate_ranks_by_score_whatever_the_dict_order():
    qrels = {"q": {"b": 1}}
    assert evalkit.evaluate(qrels, {"q": {"a": 0.1, "b": 0.9}}, "mrr@10") == 1.0
    assert evalkit.evaluate(qrels, {"q": [("a", 0.1), ("b", 0.9)]}, "mrr@10") == 1.0
    assert evalkit.evaluate(qrels, {}, "mrr@10") == 0.0  # a query missing from the run scores 0


FUSIONS = [("rrf", None, None, None), ("rrf", None, None, {"k": 10}), ("wsum", "min-max", [0.3, 0.7], None),
           ("sum", "min-max", None, None), ("mnz", "min-max", None, None), ("max", "min-max", None, None),
           ("anz", "min-max", None, None), ("sum", "zmuv", None, None), ("mnz", "max", None, None)]


@pytest.mark.parametrize("seed", [1, 2])
def test_fuse_equals_ranx(ranx, seed):
    _, runs = random_runs(seed)
    for method, norm, weights, params in FUSIONS:
        ours = evalkit.fuse([runs["vec"], runs["bm25"]], method, norm=norm, weights=weights, params=params)
        kw = dict(params or {})
        if weights is not None:
            kw["weights"] = weights
        theirs = ranx.fuse([ranx.Run(runs["vec"]), ranx.Run(runs["bm25"])], norm=norm, method=method,
                           params=kw).to_dict()
        assert ours.keys() == theirs.keys()
        for q in ours:
            assert ours[q].keys() == theirs[q].keys(), (method, q)
            for d, s in ours[q].items():
                assert s == pytest.approx(theirs[q][d], abs=1e-9), (method, norm, q, d)
        assert evalkit.fuse([_frame(runs["vec"]), _frame(runs["bm25"])], method, norm=norm, weights=weights,
                            params=params) == ours


def test_fuse_refuses_what_it_cannot_do():
    from retrievers.errors import ConfigError
    with pytest.raises(ConfigError, match="unknown method 'borda'"):
        evalkit.fuse([{"q": {"a": 1.0}}], "borda")
    with pytest.raises(ConfigError, match="2 runs but 1 weights"):
        evalkit.fuse([{"q": {"a": 1.0}}, {"q": {"b": 1.0}}], "wsum", weights=[1.0])
    with pytest.raises(ConfigError, match="needs the columns q_id, doc_id, score"):
        evalkit.evaluate({"q": {"a": 1}}, pd.DataFrame({"x": [1]}), "mrr@10")


@pytest.mark.slow
def test_experiment_is_run_then_compare():
    exp = evalkit.experiment("memory-workspace", ["bm25", "hybrid-rrf"], metrics=["ndcg@10"], limit=30)
    again = evalkit.compare([evalkit.run("memory-workspace", ["bm25", "hybrid-rrf"], limit=30)], baseline="bm25",
                            metrics=["ndcg@10"])
    assert exp.comparison.table.equals(again.table)
    assert exp.run.metrics.equals(evalkit.run("memory-workspace", ["bm25", "hybrid-rrf"], limit=30).metrics)
