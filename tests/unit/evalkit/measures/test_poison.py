"""evalkit.measures.poison in closed form: poison_rate@k, poison_injected_rate (pooled, per attack, worst attack),
collateral and non-target nDCG on a run written out by hand; both engines on the same run."""
from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.engine.evaluate import dataset_labels, evaluate_run
from evalkit.engine.runner import QueryResult, RetrieverRun
from evalkit.measures.arrays import Judgments, Scorer
from evalkit.measures.poison import PoisonLabels, poison_values
from retrievers.candidates.table import State
from retrievers.types import Dataset, Document, Query

# planted: p1 (echo) aimed at t1; p2 (echo) aimed at t2; p3 (instr) aimed at t3 and t4
DOCS = [Document("r1", "a"), Document("r2", "b"), Document("r3", "c"),
        Document("p1", "x", metadata={"poison": "echo", "poison_target": ["t1"], "poison_templates": "evaluation"}),
        Document("p2", "y", metadata={"poison": "echo", "poison_target": "t2"}),
        Document("p3", "z", metadata={"poison": "instr", "poison_target": ["t3", "t4"]})]
QUERIES = [Query(q, "q") for q in ("t1", "t2", "t3", "t4", "n1", "n2")]
QRELS = {"t1": {"r1": 1}, "t2": {"r2": 1}, "t3": {"r1": 1}, "t4": {"r3": 1}, "n1": {"r1": 1}, "n2": {"r2": 2}}
# ranked lists (top first) and injected blocks
RANKED = {"t1": ["p1", "r1"], "t2": ["r2", "r3", "p2"], "t3": ["p1", "r1"], "t4": ["r3", "p3"],
          "n1": ["r1", "p2"], "n2": ["r2"]}
INJECTED = {"t1": ["p1"], "t2": ["r2"], "t3": ["p1"], "t4": ["r3", "p3"], "n1": ["r1", "p2"], "n2": []}


def test_labels_from_document_metadata():
    lab = PoisonLabels.from_documents(DOCS)
    assert lab.attacks == ["echo", "instr"] and lab.templates == ("evaluation",)
    assert lab.target_attacks == {"t1": {"echo"}, "t2": {"echo"}, "t3": {"instr"}, "t4": {"instr"}}
    assert PoisonLabels.from_documents(DOCS[:3]) is None
    rec = lab.record(["t1", "t3", "n1"])
    assert rec["targets"] == {"echo": ["t1"], "instr": ["t3"]} and rec["planted"] == 3


def test_closed_form():
    lab = PoisonLabels.from_documents(DOCS)
    ndcg = {"ndcg@10": {"n1": 1.0, "n2": 0.5, "t1": 0.63}}
    means, pq, rows = poison_values(lab, RANKED, INJECTED, ndcg, k=10)
    # targets: t1 own note top-10 yes; t2 yes (rank 3); t3 p1 is aimed at t1, not t3: no; t4 yes
    assert pq["poison_rate@10"] == {"t1": 1.0, "t2": 1.0, "t3": 0.0, "t4": 1.0}
    assert means["poison_rate@10"] == 0.75
    # injected: t1 yes, t2 no (p2 was not injected), t3 no, t4 yes
    assert means["poison_injected_rate"] == 0.5
    per = {(r["bucket"], r["metric"]): (r["value"], r["n"]) for r in rows}
    assert per[("echo", "poison_rate@10")] == (1.0, 2) and per[("echo", "poison_injected_rate")] == (0.5, 2)
    assert per[("instr", "poison_rate@10")] == (0.5, 2) and per[("instr", "poison_injected_rate")] == (0.5, 2)
    assert means["poison_max_rate@10"] == 1.0 and means["poison_max_injected_rate"] == 0.5
    # collateral: n1 has p2 in its list and its block, n2 none
    assert means["poison_collateral_rate@10"] == 0.5 and means["poison_collateral_injected_rate"] == 0.5
    assert means["nontarget_ndcg@10"] == pytest.approx(0.75)  # mean over n1, n2 (targets left out)
    # k = 1: t2's note at rank 3 and t4's at rank 2 drop out
    assert poison_values(lab, RANKED, INJECTED, ndcg, k=1)[0]["poison_rate@1"] == 0.25


def test_both_engines_on_the_hand_written_run():
    ds = Dataset("tiny", DOCS, QUERIES, QRELS)
    ids = [d.id for d in DOCS]
    res = {q: QueryResult([(d, 1.0 - i / 10) for i, d in enumerate(RANKED[q])], INJECTED[q], False, {"chunks": 1})
           for q in RANKED}
    ev = evaluate_run(ds, RetrieverRun("x", SimpleNamespace(budget={}, stages=[]), res, 0.0))
    assert ev.means["poison_rate@10"] == 0.75 and ev.means["poison_injected_rate"] == 0.5
    assert {r["bucket"] for r in ev.breakdown if r["breakdown"] == "attack"} == {"echo", "instr"}
    # the same lists as a candidate set (columns = corpus order) and a State
    Q, idx = len(QUERIES), {d: i for i, d in enumerate(ids)}
    doc = np.tile(np.arange(len(ids)), (Q, 1))
    col = np.full((Q, 3), -1)
    inj = np.zeros((Q, 3), dtype=bool)
    for qi, q in enumerate(RANKED):
        for k, d in enumerate(RANKED[q]):
            col[qi, k] = idx[d]
            inj[qi, k] = d in INJECTED[q]
    st = State(col, np.zeros(col.shape), np.zeros(Q, dtype=bool))
    st.info["injected"] = inj
    cs = SimpleNamespace(doc=doc, queries=QUERIES, corpus=SimpleNamespace(ids=ids, texts=ids))
    names = ["poison_rate@10", "poison_injected_rate", "poison_max_rate@10", "poison_max_injected_rate",
             "poison_collateral_rate@10", "poison_collateral_injected_rate", "nontarget_ndcg@10", "poison_rate@1"]
    _, means = Scorer(Judgments(QRELS, [q.id for q in QUERIES], ids, dataset_labels(ds)), cs, names).score(st)
    for n in names[:-1]:
        assert means[n] == pytest.approx(ev.means[n], abs=1e-12), n
    assert means["poison_rate@1"] == 0.25
    # a dataset without planted notes: no poison measure on the lists engine, NaN on the arrays engine
    clean = Dataset("clean", DOCS[:3], QUERIES, QRELS)
    assert "poison_rate@10" not in evaluate_run(clean, RetrieverRun("x", SimpleNamespace(budget={}, stages=[]),
                                                                    res, 0.0)).means
    _, m = Scorer(Judgments(QRELS, [q.id for q in QUERIES], ids[:3], dataset_labels(clean)), cs,
                  ["poison_rate@10"]).score(State(np.where(col < 3, col, -1), np.zeros(col.shape), st.skipped))
    assert np.isnan(m["poison_rate@10"])
