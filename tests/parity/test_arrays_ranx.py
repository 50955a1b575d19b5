"""evalkit.measures.arrays: parity with ranx itself (evalkit.measures.lists.evaluate(engine="ranx")) to 1e-9 on random fixtures and a real run."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.measures.arrays import Judgments, Scorer, parse_metric
from evalkit.measures.lists import evaluate
from retrievers.candidates.table import State
from retrievers.errors import ConfigError

METRICS = ["ndcg@1", "ndcg@3", "ndcg@10", "ndcg@100", "ndcg", "recall@1", "recall@5", "recall@50", "mrr@10",
           "mrr", "map@100", "map@5", "precision@1", "precision@5", "precision", "hit_rate@3", "recall_any@5",
           "recall_all@5", "recall_any@10", "recall_all@10"]


def _lists(st: State, cs, mask=None) -> dict[str, list[tuple[str, float]]]:
    """What evalkit.engine.runner.collect hands to evaluate: rows in order, empty slots dropped."""
    out = {}
    for qi, q in enumerate(cs.queries):
        row = st.col[qi]
        ok = (row >= 0) if mask is None else (row >= 0) & mask[qi]
        out[q.id] = [(cs.corpus.ids[cs.doc[qi, c]], 0.0) for c in row[ok]]
    return out


def _fixture(rng, Q=60, C=30, K=25, n_docs=80, dup_rate=0.0, grades=(0, 1, 2, 3)):
    ids = [f"d{i}" for i in range(n_docs)]
    doc = np.full((Q, C), -1, dtype=np.int64)
    for q in range(Q):
        n = rng.integers(0, C + 1)
        doc[q, :n] = rng.choice(n_docs, size=n, replace=False)
    qrels = {}
    for q in range(Q):
        if rng.random() < 0.1:
            continue  # unjudged query
        nrel = rng.integers(1, 8)
        docs = rng.choice(n_docs + 10, size=nrel, replace=False)  # some relevant docs are not in the corpus
        qrels[f"q{q}"] = {(f"d{d}" if d < n_docs else f"missing{d}"): int(rng.choice(grades)) for d in docs}
        if rng.random() < 0.05:
            qrels[f"q{q}"] = {ids[0]: 0}  # only grade-0 judgements: not scored
    col = np.full((Q, K), -1, dtype=np.int64)
    for q in range(Q):
        n_valid = int((doc[q] >= 0).sum())
        n = min(K, int(rng.integers(0, n_valid + 1))) if n_valid else 0
        if n:
            col[q, :n] = rng.choice(n_valid, size=n, replace=False)
            if dup_rate:
                for k in range(1, n):
                    if rng.random() < dup_rate:
                        col[q, k] = col[q, rng.integers(0, k)]
        if rng.random() < 0.2:  # holes in the middle of a list
            col[q, rng.integers(0, K)] = -1
    skipped = rng.random(Q) < 0.1
    col[skipped] = -1
    queries = [SimpleNamespace(id=f"q{q}") for q in range(Q)]
    cs = SimpleNamespace(doc=doc, queries=queries, corpus=SimpleNamespace(ids=ids, texts=[f"t{i}" for i in ids]))
    st = State(col, np.zeros((Q, K)), skipped)
    return cs, st, qrels


def _check(cs, st, qrels, metrics, mask=None, prefix=""):
    j = Judgments(qrels, [q.id for q in cs.queries], cs.corpus.ids)
    sc = Scorer(j, cs, [prefix + m for m in metrics])
    if mask is not None:
        st.info["injected"] = mask
    per, means = sc.score(st)
    ref = evaluate(qrels, _lists(st, cs, mask), metrics, engine="ranx")
    for m in metrics:
        want = np.array([ref[m][q] for q in j.judged_ids])
        got = per[prefix + m]
        assert got.shape == want.shape, m
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=m)
        assert abs(means[prefix + m] - want.mean()) < 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_random(seed):
    rng = np.random.default_rng(seed)
    cs, st, qrels = _fixture(rng)
    _check(cs, st, qrels, METRICS)


def test_parity_binary_grades_and_short_lists():
    rng = np.random.default_rng(7)
    cs, st, qrels = _fixture(rng, Q=80, C=8, K=6, grades=(1,))
    _check(cs, st, qrels, METRICS)


def test_parity_duplicates_count_once_at_first_position():
    rng = np.random.default_rng(3)
    cs, st, qrels = _fixture(rng, dup_rate=0.3)
    assert any(len(set(r[r >= 0])) < (r >= 0).sum() for r in st.col)
    _check(cs, st, qrels, [m for m in METRICS if not m.startswith("recall_a")])
    # recall_any/all cut the list before removing copies (evalkit.measures.lists._recall_any_all): the same here
    _check(cs, st, qrels, ["recall_any@5", "recall_all@5", "recall_any@10", "recall_all@10"])


def test_parity_injected_lists():
    rng = np.random.default_rng(11)
    cs, st, qrels = _fixture(rng)
    mask = rng.random(st.col.shape) < 0.5
    _check(cs, st, qrels, ["ndcg@10", "recall@10", "mrr@10"], mask=mask, prefix="injected_")


def test_closed_form():
    # one query, relevant a (grade 2), b (grade 1), c not in the corpus; list: x, a, b
    cs = SimpleNamespace(doc=np.array([[0, 1, 2]]), queries=[SimpleNamespace(id="q")],
                         corpus=SimpleNamespace(ids=["x", "a", "b"], texts=["", "", ""]))
    j = Judgments({"q": {"a": 2, "b": 1, "c": 1}}, ["q"], cs.corpus.ids)
    st = State(np.array([[0, 1, 2]]), np.zeros((1, 3)), np.array([False]))
    per, _ = Scorer(j, cs, ["ndcg@3", "recall@2", "mrr@10", "precision@2", "recall_all@3"]).score(st)
    idcg = 2 + 1 / np.log2(3) + 1 / np.log2(4)
    assert per["ndcg@3"][0] == pytest.approx((2 / np.log2(3) + 1 / np.log2(4)) / idcg, abs=1e-12)
    assert per["recall@2"][0] == pytest.approx(1 / 3)
    assert per["mrr@10"][0] == 0.5 and per["precision@2"][0] == 0.5 and per["recall_all@3"][0] == 0.0


def test_run_level_metrics():
    cs = SimpleNamespace(doc=np.array([[0, 1], [1, 2], [2, -1]]), queries=[SimpleNamespace(id=f"q{i}") for i in range(3)],
                         corpus=SimpleNamespace(ids=["a", "b", "c"], texts=["aa", "bbb", "c"]))
    j = Judgments({"q0": {"a": 1}, "q1": {"b": 1}}, [q.id for q in cs.queries], cs.corpus.ids)
    st = State(np.array([[0, 1], [-1, -1], [0, -1]]), np.zeros((3, 2)), np.array([False, True, False]))
    st.info["injected"] = np.array([[True, True], [False, False], [False, False]])
    st.info["budget"] = {"chunks": np.array([2, 0, 0]), "tokens": np.array([900, 0, 0]),
                         "chars": np.array([10, 0, 0])}
    _, means = Scorer(j, cs, ["skip_rate", "injection_rate", "correct_abstention", "budget_compliance",
                              "injected_chunks_mean"], budget={"max_chunks": 1}).score(st)
    assert means["skip_rate"] == pytest.approx(1 / 3)
    assert means["injection_rate"] == pytest.approx(1 / 3)
    assert means["correct_abstention"] == 1.0
    assert means["budget_compliance"] == pytest.approx(2 / 3)
    assert means["injected_chunks_mean"] == pytest.approx(2 / 3)


def test_bad_metric_names():
    for bad in ("ndgc@10", "recall_any", "ndcg@0", "foo"):
        with pytest.raises(ConfigError):
            parse_metric(bad)
    assert parse_metric("injected_ndcg@10").injected


def test_parity_real_run():
    """Two presets over memory-workspace through the real runner: Scorer == evaluate (ranx) per query."""
    from evalkit.data.registry import load_dataset
    from evalkit.engine.runner import arm_map
    from retrievers.candidates.search import build_candidates
    from retrievers.candidates.table import view
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context

    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    ps = [load_preset("openclaw_core_2026_2_26_decay_mmr"), load_preset("hybrid-rrf")]
    cs = build_candidates(index, ds.queries, [a for p in ps for a in p.arms])
    j = Judgments(ds.qrels, [q.id for q in cs.queries], cs.corpus.ids)
    metrics = ["ndcg@10", "ndcg@3", "recall@10", "recall@100", "mrr@10", "map@100", "precision@5", "recall_any@5",
               "recall_all@10"]
    for p in ps:
        v = view(cs, arm_map(p))
        st = p.run(v, Context(embedder=index.embedder))
        per, _ = Scorer(j, v, metrics + ["injected_ndcg@10"]).score(st)
        ref = evaluate(ds.qrels, _lists(st, v), metrics, engine="ranx")
        ref_inj = evaluate(ds.qrels, _lists(st, v, st.info["injected"]), ["ndcg@10"], engine="ranx")
        for m in metrics:
            np.testing.assert_allclose(per[m], [ref[m][q] for q in j.judged_ids], rtol=0, atol=1e-9, err_msg=m)
        np.testing.assert_allclose(per["injected_ndcg@10"], [ref_inj["ndcg@10"][q] for q in j.judged_ids],
                                   rtol=0, atol=1e-9)


def test_secret_leak_rate_parity_memory_workspace_presets():
    """secret_leak_rate on the arrays engine (what a tune constraint reads) equals harms.harm_means (the lists
    engine of evalkit run) on memory-workspace, for a preset that leaks and one with the secret guard."""
    from evalkit.data.registry import load_dataset
    from evalkit.engine.evaluate import dataset_labels
    from evalkit.engine.runner import arm_map
    from evalkit.measures.harms import harm_means
    from retrievers.candidates.search import build_candidates
    from retrievers.candidates.table import view
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context

    full = load_dataset("memory-workspace")
    ds = full.split("test")
    labels = dataset_labels(full)
    index = SharedIndex(ds)
    ps = [load_preset("hybrid-rrf"), load_preset("phase3_policy")]
    cs = build_candidates(index, ds.queries, [a for p in ps for a in p.arms])
    j = Judgments(ds.qrels, [q.id for q in cs.queries], cs.corpus.ids, labels)
    got = {}
    for p in ps:
        v = view(cs, arm_map(p))
        st = p.run(v, Context(embedder=index.embedder))
        _, means = Scorer(j, v, ["secret_leak_rate"]).score(st)
        live = ~st.skipped[:, None]
        ranked = {q: [d for d, _ in r] for q, r in _lists(st, v, live).items()}
        injected = {q: [d for d, _ in r] for q, r in _lists(st, v, st.info["injected"] & live).items()}
        ref, _ = harm_means(labels, ds.qrels, ranked, injected)
        assert means["secret_leak_rate"] == pytest.approx(ref["secret_leak_rate"], abs=1e-12), p.name
        got[p.name] = means["secret_leak_rate"]
    assert got["hybrid-rrf"] > 0 and got["phase3_policy"] == 0  # both branches of the measure are exercised
    # without declared labels the measure is n/a on both engines, never 0
    _, means = Scorer(Judgments(ds.qrels, [q.id for q in cs.queries], cs.corpus.ids), view(cs, arm_map(ps[0])),
                      ["secret_leak_rate"]).score(ps[0].run(view(cs, arm_map(ps[0])), Context(embedder=index.embedder)))
    assert np.isnan(means["secret_leak_rate"])
