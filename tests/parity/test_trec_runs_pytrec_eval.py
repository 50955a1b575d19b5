"""PARITY TEST — external TREC run files scored by evalkit against trec_eval's own C code (``pytrec_eval``, PyPI
``pytrec-eval-terrier``).

Random run files with every awkward case a real system's output has: document ids the corpus lacks (anywhere in the
list, often first), equal scores (ties broken by trec_eval's document-id rule), scores equal in single precision but
not in double (trec_eval compares C floats), queries the file does not answer and query ids the dataset lacks; graded
(0/1/2/3) and binary qrels. Every per-query value of nDCG@5/10/20, recall@5/10/100, MRR (whole list and @10) and MAP
(whole list and @100) must equal trec_eval's to 1e-12 — ``trec_eval -c`` semantics: a query the file lacks counts
0. A (query, document) pair listed twice is refused by both (trec_eval: "duplicate docs").

Gains: evalkit's nDCG uses the grade as the gain (linear, ranx's ``ndcg``), which is trec_eval's ``ndcg_cut`` (gain
= the qrels value), so graded qrels agree too (exponential gains are ranx's ``ndcg_burges``, not compared here). One
difference by design: a query whose judgements are all 0 has no relevant document; evalkit leaves it out of the
ranking measures (it is an abstention case) while ``trec_eval -c`` would average a 0 for it — the fixtures here judge
every query relevant at least once, so both means run over the same queries.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import pytrec_eval

from evalkit.engine.evaluate import evaluate_run
from evalkit.engine.trec_runs import external_run, place_foreign_ids, read_trec, trec_order
from evalkit.runfolder.write import RunWriter
from retrievers.types import DataError, Dataset, Document, Query

# evalkit measure -> trec_eval measure (per query)
PAIRS = {"ndcg@5": "ndcg_cut_5", "ndcg@10": "ndcg_cut_10", "ndcg@20": "ndcg_cut_20", "recall@5": "recall_5",
         "recall@10": "recall_10", "recall@100": "recall_100", "mrr": "recip_rank", "map": "map",
         "map@100": "map_cut_100"}
TREC_MEASURES = {"ndcg_cut.5,10,20", "recall.5,10,100", "recip_rank", "map", "map_cut.100"}


def _dataset(rng: random.Random, n_docs: int, n_queries: int, graded: bool) -> Dataset:
    docs = [Document(id=f"d{i:03d}", text=f"note {i}") for i in range(n_docs)]
    queries = [Query(id=f"q{j:02d}", text=f"question {j}") for j in range(n_queries)]
    qrels = {}
    for q in queries:
        judged = rng.sample(range(n_docs), rng.randint(1, 12))
        grades = {f"d{i:03d}": (rng.choice([0, 1, 1, 2, 3]) if graded else rng.choice([0, 1])) for i in judged}
        grades[f"d{judged[0]:03d}"] = max(1, grades[f"d{judged[0]:03d}"])  # at least one relevant note
        qrels[q.id] = grades
    return Dataset("parity", docs, queries, qrels, {"test": [q.id for q in queries]})


def _run_file(rng: random.Random, ds: Dataset, path) -> None:
    lines = []
    ids = [d.id for d in ds.documents]
    for q in ds.queries:
        if rng.random() < 0.15:
            continue  # a query the system did not answer
        depth = rng.randint(1, 60)
        picked = rng.sample(ids, min(depth, len(ids)))
        if rng.random() < 0.5:
            picked.insert(0, f"ghost-{rng.randint(0, 999)}")  # an id the corpus lacks, often ranked first
        picked += [f"zz-unknown-{k}" for k in range(rng.randint(0, 3))]
        scale = rng.choice([1.0, 7.3, 1e-3])
        for rank, doc in enumerate(picked, start=1):
            r = rng.random()
            if r < 0.35:
                score = float(rng.choice([1, 2, 3])) * scale  # ties
            elif r < 0.45:
                score = 1.0 + rng.choice([0.0, 1e-10, 2e-10])  # equal as a C float, not as a double
            else:
                score = round(rng.uniform(-5, 20), rng.choice([1, 3, 9])) * scale
            lines.append(f"{q.id} Q0 {doc} {rank} {score!r} sys")
    lines += ["q-unknown Q0 d001 1 3.0 sys"]  # a query the dataset lacks
    rng.shuffle(lines)  # file order never matters
    path.write_text("\n".join(lines) + "\n")


def _trec_eval(ds: Dataset, path) -> dict[str, dict[str, float]]:
    with open(path) as fh:
        run = pytrec_eval.parse_run(fh)
    return pytrec_eval.RelevanceEvaluator(ds.qrels, TREC_MEASURES).evaluate(dict(run))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("graded", [True, False])
def test_parity_run_file_with_trec_eval(tmp_path, seed, graded):
    rng = random.Random(1000 * seed + graded)
    ds = _dataset(rng, n_docs=rng.choice([15, 40, 120]), n_queries=rng.randint(6, 30), graded=graded)
    path = tmp_path / "sys.trec"
    _run_file(rng, ds, path)
    ref = _trec_eval(ds, path)
    run = external_run("sys", path, ds, {q.id for q in ds.queries})
    ev = evaluate_run(ds, run, metrics=list(PAIRS) + ["mrr@10"])
    for ours, theirs in PAIRS.items():
        for q in ds.qrels:
            want = ref.get(q, {}).get(theirs, 0.0)  # trec_eval -c: a query the run lacks counts 0
            assert math.isclose(ev.per_query[ours][q], want, rel_tol=0, abs_tol=1e-12), (ours, q)
        mean_c = float(np.mean([ref.get(q, {}).get(theirs, 0.0) for q in ds.qrels]))
        assert math.isclose(ev.means[ours], mean_c, rel_tol=0, abs_tol=1e-12), ours
    for q in ds.qrels:  # MRR@10 from trec_eval's reciprocal rank: 1/r when r <= 10, else 0
        rr = ref.get(q, {}).get("recip_rank", 0.0)
        assert math.isclose(ev.per_query["mrr@10"][q], rr if rr >= 0.1 - 1e-15 else 0.0, abs_tol=1e-12)
    assert run.info["runfile_unknown_queries"] == 1.0
    assert run.info["runfile_missing_queries"] == sum(1 for q in ds.queries if q.id not in ref)


def test_parity_skip_missing_scores_only_answered_queries(tmp_path):
    """``--run-file-missing skip``: the mean runs over the queries the file answers, which is plain trec_eval
    (without -c)."""
    rng = random.Random(7)
    ds = _dataset(rng, 40, 20, graded=True)
    path = tmp_path / "sys.trec"
    _run_file(rng, ds, path)
    ref = _trec_eval(ds, path)
    run = external_run("sys", path, ds, {q.id for q in ds.queries}, missing="skip")
    answered = [q for q in ds.qrels if q in ref]
    assert len(answered) < len(ds.qrels) and set(run.results) == set(answered)
    ev = evaluate_run(ds.subset(answered), run, metrics=["ndcg@10"])
    assert math.isclose(ev.means["ndcg@10"], float(np.mean([ref[q]["ndcg_cut_10"] for q in answered])),
                        abs_tol=1e-12)


def test_parity_unknown_document_keeps_its_rank(tmp_path):
    """The issue's case: an id the corpus lacks ranked first, the relevant note second → nDCG@10 = 1/log2(3)
    (0.63), as trec_eval; not 1.0 (the unknown id dropped and the note moved up)."""
    ds = Dataset("x", [Document("n1", "a"), Document("n2", "b")], [Query("q1", "?")], {"q1": {"n1": 1}})
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 ghost 1 9.0 s\nq1 Q0 n1 2 8.0 s\n")
    ev = evaluate_run(ds, external_run("s", path, ds, {"q1"}), metrics=["ndcg@10"])
    assert ev.means["ndcg@10"] == pytest.approx(1 / math.log2(3), abs=1e-15)
    assert ev.means["ndcg@10"] == pytest.approx(_trec_eval(ds, path)["q1"]["ndcg_cut_10"], abs=1e-15)
    assert place_foreign_ids([("ghost", 9.0), ("n1", 8.0)], ds.doc_index) == ([("ghost", 9.0), ("n1", 8.0)], 1)


def test_parity_ties_are_broken_by_document_id_descending_in_single_precision(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q Q0 a 1 1.0 s\nq Q0 c 2 1.0 s\nq Q0 b 3 1.0000000001 s\nq Q0 x 4 2.5 s\n")
    order = [x.doc for x in trec_order(read_trec(path)["q"])]
    assert order == ["x", "c", "b", "a"]  # b's extra 1e-10 vanishes in a C float: a tie, broken by id descending
    ds = Dataset("x", [Document(i, i) for i in "abcx"], [Query("q", "?")], {"q": {"a": 1}})
    assert _trec_eval(ds, path)["q"]["recip_rank"] == 1 / 4  # trec_eval puts a last as well


def test_parity_duplicate_pair_refused_like_trec_eval(tmp_path):
    path = tmp_path / "r.trec"
    path.write_text("q1 Q0 n1 1 9.0 s\nq1 Q0 n2 2 8.0 s\nq1 Q0 n1 3 7.0 s\n")
    with pytest.raises(DataError, match=r"r\.trec:3: document 'n1' listed twice for query 'q1' \(first on line 1\)"):
        read_trec(path)
    with open(path) as fh, pytest.raises(AssertionError):  # pytrec_eval.parse_run refuses it too
        pytrec_eval.parse_run(fh)


@pytest.mark.parametrize("seed", range(8))
def test_parity_written_run_file_keeps_the_harness_order_under_trec_eval(tmp_path, seed):
    """The other direction: a run folder's ``runs/…trec`` scored by trec_eval gives the run's own numbers. The
    harness's ranked lists carry ties in its own order (document id ascending, RRF's equal sums, scores equal
    after 6-decimal rounding or in single precision); trec_eval would re-order them by document id descending.
    The file written by :class:`RunWriter` must rank every query exactly as the harness did, so every measure
    equals trec_eval's on a file that states the order outright (score = minus the rank)."""
    rng = random.Random(seed)
    ds = _dataset(rng, n_docs=60, n_queries=20, graded=bool(seed % 2))
    writer = RunWriter(tmp_path / "out")
    items = []
    for q in ds.queries:
        docs = sorted(rng.sample([d.id for d in ds.documents], rng.randint(1, 40)))
        scores = sorted((rng.choice([0.5, 0.25, 1 / 61 + 1 / 62, 1.0 + rng.choice([0, 1e-10]), 3e-7,
                                     round(rng.uniform(0, 1), 7)]) for _ in docs), reverse=True)
        items.append({"query_id": q.id, "ranked": [[d, s] for d, s in zip(docs, scores)]})  # ties: id ascending
    writer.results[("parity", "sys")] = items
    writer.write()
    written = tmp_path / "out" / "runs" / "parity" / "sys.trec"
    stated = tmp_path / "stated.trec"
    stated.write_text("".join(f"{it['query_id']} Q0 {d} {r} {-r} sys\n"
                              for it in items for r, (d, _) in enumerate(it["ranked"], start=1)))
    got, want = _trec_eval(ds, written), _trec_eval(ds, stated)
    assert got == want
    for it in items:  # and trec_eval's order, read back, is the harness's
        assert [x.doc for x in trec_order(read_trec(written)[it["query_id"]])] == [d for d, _ in it["ranked"]]
