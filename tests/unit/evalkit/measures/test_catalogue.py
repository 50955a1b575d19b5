"""evalkit.measures.catalogue: one declaration per measure, one parser, named sets; both engines agree."""
from __future__ import annotations

import ast
from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.engine.evaluate import dataset_labels, evaluate_run
from evalkit.engine.runner import QueryResult, RetrieverRun
from evalkit.measures import budget, catalogue
from evalkit.measures.arrays import Judgments, Scorer, parse_metric
from evalkit.measures.catalogue import FAMILIES, SETS, Family, Measure, parse
from evalkit.measures.lists import evaluate
from retrievers.candidates.table import State
from retrievers.errors import ConfigError
from retrievers.types import Dataset, Document, Query
from tests.helpers import ROOT



def _examples(f: Family) -> list[str]:
    if f.cutoff == "none":
        out = [f.name]
    else:
        out = [f"{f.name}@10", f"{f.name}@1"] + ([f.name] if f.cutoff == "optional" else [])
    if f.injectable:
        out += ["injected_" + n for n in out]
    return out


def test_every_catalogue_name_parses_and_round_trips():
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)
    for f in FAMILIES:
        assert f.kind in catalogue.KINDS and f.cutoff in catalogue.CUTOFFS and f.engines
        assert set(f.engines) <= set(catalogue.ENGINES)
        for n in _examples(f):
            m = parse(n)
            assert str(m) == n and m.family is f
            assert parse(str(m)) == m
            assert m.label  # every measure has a label (its name when none is declared)
    for n in ("ndcg@10", "injected_ndcg@10", "skip_rate", "p95_latency_ms", "recall@10_lost_to_gate"):
        assert str(parse(n)) == n
    for p in catalogue.POLICIES:
        assert str(parse(p.measure)) == p.measure and parse(p.measure).family.policy is p


def test_every_set_entry_parses():
    for name, entries in SETS.items():
        assert entries, name
        for e in entries:
            assert isinstance(e, (Measure, Family)), (name, e)
            if isinstance(e, Measure):
                assert parse(str(e)) == e
    assert catalogue.names("replay.table", 10)[8:10] == ["pseudo_ndcg@10", "pseudo_recall@10"]  # after the harms
    with pytest.raises(ValueError):
        catalogue.names("replay.table")  # an open cut-off needs k


def test_bad_names_give_one_clear_error_listing_valid_names():
    for bad in ("ndgc@10", "recall_any", "ndcg@0", "foo", "injected_skip_rate", "skip_rate@5", ""):
        with pytest.raises(ConfigError) as e:
            parse(bad)
        msg = str(e.value)
        assert "\n" not in msg and repr(bad) in msg
    msg = str(pytest.raises(ConfigError, parse, "ndgc@10").value)
    assert "ndcg" in msg and "skip_rate" in msg and "phase3_policy_compliance" in msg
    # the array engine names what it computes
    msg = str(pytest.raises(ConfigError, parse_metric, "wrongly_skipped").value)
    assert "arrays" in msg and "ndcg" in msg and "wrongly_skipped" not in msg.split("valid:")[1]
    with pytest.raises(ConfigError):
        evaluate({"q": {"d": 1}}, {"q": [("d", 1.0)]}, ["skip_rate"])  # not a per-query ranking measure


def test_labels_and_help_come_from_the_catalogue():
    assert parse("ndcg@10").label == "nDCG@10" and parse("injected_recall@10").label == "injected R@10"
    assert catalogue.label("not-a-measure") == "not-a-measure"
    assert catalogue.glossary()[1][0] == "R@k (recall@k)"
    assert parse("phase3_policy_compliance").short == "phase-3 ok"


# ---- the two engines agree ------------------------------------------------------------------------------------

def _fixture():
    rng = np.random.default_rng(7)
    Q, C, K, n_docs = 12, 8, 6, 20
    ids = [f"d{i}" for i in range(n_docs)]
    doc = np.stack([rng.choice(n_docs, size=C, replace=False) for _ in range(Q)])
    col = np.stack([rng.permutation(C)[:K] for _ in range(Q)])
    col[3, 4:] = -1  # a short list
    skipped = np.zeros(Q, dtype=bool)
    skipped[5] = True
    col[5] = -1
    inj = np.zeros((Q, K), dtype=bool)
    for q in range(Q):
        inj[q, :int(rng.integers(0, 5))] = True
    inj &= col >= 0
    qrels = {f"q{q}": {ids[d]: int(rng.integers(1, 3)) for d in rng.choice(n_docs, size=3, replace=False)}
             for q in range(Q) if q not in (2, 8)}  # q2, q8: no relevant document
    chunks = inj.sum(axis=1)
    tokens = chunks * 250
    chars = chunks * 900
    # what a packer records besides: its own token count and the longest snippet (both cross some limits below)
    budget_tokens = chunks * 180 + (np.arange(Q) % 3) * 200
    snippet = np.where(chunks > 0, 500 + (np.arange(Q) % 4) * 150, 0)
    return ids, doc, col, skipped, inj, qrels, chunks, tokens, chars, budget_tokens, snippet


def test_both_engines_agree_on_every_measure_both_compute():
    ids, doc, col, skipped, inj, qrels, chunks, tokens, chars, budget_tokens, snippet = _fixture()
    Q = len(col)
    queries = [SimpleNamespace(id=f"q{q}") for q in range(Q)]
    cs = SimpleNamespace(doc=doc, queries=queries, corpus=SimpleNamespace(ids=ids, texts=[f"t{i}" for i in ids]))
    st = State(col, np.zeros(col.shape), skipped)
    st.info["injected"] = inj
    st.info["budget"] = {"chunks": chunks, "tokens": tokens, "chars": chars, "budget_tokens": budget_tokens,
                         "max_snippet_chars": snippet}
    own = {"max_chunks": 3, "max_tokens": 600}
    both = [f for f in FAMILIES if {"lists", "arrays"} <= set(f.engines)]
    assert {f.kind for f in both} == {"ranking", "run", "budget"}

    ranked = {f"q{q}": [(ids[doc[q, c]], 0.0) for c in col[q] if c >= 0] for q in range(Q)}
    injected = {f"q{q}": [(ids[doc[q, c]], 0.0) for c, ok in zip(col[q], inj[q]) if c >= 0 and ok]
                for q in range(Q)}
    names = [n for f in both if f.kind == "ranking" for n in _examples(f)]
    per, means = Scorer(Judgments(qrels, [q.id for q in queries], ids), cs, names, budget=own).score(st)
    for n in names:
        m = parse(n)
        ref = evaluate(qrels, injected if m.injected else ranked, [str(m.base)])[str(m.base)]
        want = np.array([ref[q] for q in sorted(ref, key=lambda x: int(x[1:]))])
        np.testing.assert_allclose(per[n], want, rtol=0, atol=1e-9, err_msg=n)

    # run-level and budget measures: evaluate_run (list engine) vs the Scorer
    # harm labels: a few documents hold a secret, so secret_leak_rate is a real share on both engines
    secret = [ids[i] for i in range(0, len(ids), 3)]
    # planted notes (evalkit.measures.poison): two attacks, some notes aimed at several queries, q5 (skipped) a target
    planted = {"d1": ("a", ["q0", "q1", "q5"]), "d4": ("a", ["q2"]), "d7": ("b", ["q3", "q6"]),
               "d10": ("b", ["q9", "q4"]), "d13": ("b", ["q7"])}
    ds = Dataset("tiny", [Document(i, f"t{i}", metadata={"poison": planted[i][0], "poison_target": planted[i][1]}
                                   if i in planted else {}) for i in ids],
                 [Query(f"q{q}", "x") for q in range(Q)], qrels, info={"labels": {"secret": secret}})
    results = {f"q{q}": QueryResult(ranked[f"q{q}"], [d for d, _ in injected[f"q{q}"]], bool(skipped[q]),
                                    {"chunks": int(chunks[q]), "tokens": int(tokens[q]), "chars": int(chars[q]),
                                     "budget_tokens": int(budget_tokens[q]), "max_snippet_chars": int(snippet[q])})
               for q in range(Q)}
    run = RetrieverRun("tiny", SimpleNamespace(budget=own, stages=[]), results, 0.0)
    ev = evaluate_run(ds, run, ["ndcg@10"])
    run_names = [f.name if f.cutoff == "none" else f"{f.name}@10" for f in both if f.kind != "ranking"]
    judg = Judgments(qrels, [q.id for q in queries], ids, dataset_labels(ds))
    _, rmeans = Scorer(judg, cs, run_names, budget=own).score(st)
    assert "secret_leak_rate" in run_names and 0 < ev.means["secret_leak_rate"] < 1  # the fixture leaks, partly
    for n in catalogue.names("poison"):  # every poison measure is computed, and the fixture makes each a real share
        assert n in run_names and 0 < ev.means[n] < 1, (n, ev.means.get(n))
    for n in run_names:
        assert rmeans[n] == pytest.approx(ev.means[n], abs=1e-12), n
    for n in catalogue.names("injected"):
        assert means[n] == pytest.approx(ev.means[n], abs=1e-12), n
    assert 0 < ev.means["budget_compliance"] < 1  # the fixture exercises the limit
    # the packer's token count and the snippet limit decide some queries (not only the chunk count)
    by_chunks = float(np.mean(chunks <= 3))
    assert ev.means["budget_compliance"] != pytest.approx(by_chunks)
    assert ev.means["phase3_policy_compliance"] != pytest.approx(float(np.mean((chunks <= 6) & (tokens <= 1200))))


def test_budget_module():
    assert not budget.has_limits({}) and budget.has_limits({"max_chars": 10})
    recs = [{"chunks": 2, "tokens": 100}, {"chunks": 7, "tokens": 100}, {"chunks": 1, "tokens": 900,
                                                                         "budget_tokens": 50}]
    assert budget.compliance(recs, {"max_chunks": 6, "max_tokens": 500}) == pytest.approx(1 / 3)
    assert budget.compliance(recs, {"max_chunks": 6, "max_tokens": 500}, packer_tokens=True) == pytest.approx(2 / 3)
    assert np.isnan(budget.compliance([], {"max_chunks": 1}))
    p = SimpleNamespace(budget={"max_chunks": 6}, stages=[SimpleNamespace(name="budget.pack", max_chunks=9,
                                                                          max_tokens=1200, max_chars=None)])
    assert budget.declared_budget(p) == {"max_chunks": 6, "max_tokens": 1200}


def test_dataset_declares_its_extra_measures():
    ids, doc, col, skipped, inj, qrels, *_ = _fixture()
    ds = Dataset("not-longmemeval", [Document(i, "t") for i in ids], [Query("q0", "x")], {"q0": qrels["q0"]},
                 info={"extra_measures": ["recall_any@5", "recall_all@5"]})
    run = RetrieverRun("r", SimpleNamespace(budget={}, stages=[]), {"q0": QueryResult([(ids[0], 1.0)], [], False)},
                       0.0)
    ev = evaluate_run(ds, run, ["ndcg@10"])
    assert list(ev.per_query)[:3] == ["ndcg@10", "recall_any@5", "recall_all@5"]


# ---- no harness module keeps its own list of measure names --------------------------------------------------

ALLOWED = {
    "evalkit/measures/catalogue.py",  # the catalogue itself
    # a dataset declares the measures it adds and its official measures (the data layer sits below
    # evalkit.measures and cannot import it)
    "evalkit/data/readers/longmemeval.py",
    "evalkit/data/readers/locomo.py",
    "evalkit/data/readers/memory_workspace.py",
}


def _is_measure(s: str) -> bool:
    try:
        parse(s)
        return True
    except ValueError:
        return False


def test_no_harness_module_defines_a_list_of_measure_names():
    bad = []
    for path in sorted((ROOT / "evalkit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= 2:
                strs = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(strs) == len(node.elts) and all(_is_measure(s) for s in strs):
                    bad.append(f"{rel}:{node.lineno}: {strs}")
    assert not bad, "measure-name lists outside the catalogue:\n" + "\n".join(bad)
