"""Scoring builds ranx's tables with document ids padded to a fixed width (evalkit/measures/lists.py), so numba
compiles them once, not once per longest-id length: the scores equal ranx's own ``from_dict`` path. (The bench's
early report and its interruption: tests/system/test_bench_interrupt.py.)"""
from __future__ import annotations

import random

import pytest
from ranx import Qrels, Run, evaluate as ranx_evaluate

from evalkit.measures.lists import DEFAULT_METRICS, ID_WIDTH, evaluate


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_padded_ids_score_exactly_as_ranx_from_dict():
    rng = random.Random(7)
    # ids of many lengths up to one short of the padding width, non-ASCII and digit-only ones among them
    docs = [f"d{i}" for i in range(40)] + ["x" * (ID_WIDTH - 1), "sessión-ü-7", "0042", "a:b/c#1"]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 6))} for i in range(25)}
    qrels["q0"]["x" * (ID_WIDTH - 1)] = 2  # the longest id (ranx: <U31, evalkit: <U32) is relevant somewhere
    ranked = {q: [(d, 0.0) for d in rng.sample(docs, rng.randint(1, 30))] for q in qrels}
    ranked["q3"] = []  # an empty list scores 0
    ours = evaluate(qrels, ranked, DEFAULT_METRICS)

    rq = {q: {d: g for d, g in r.items() if g >= 1} for q, r in qrels.items()}
    rq = {q: r for q, r in rq.items() if r}
    run = {q: ({d: float(len(ranked[q]) - i) for i, (d, _) in enumerate(ranked[q])} or {"__evalkit_empty__": 0.0})
           for q in rq}
    rr = Run.from_dict(run)
    ranx_evaluate(Qrels.from_dict(rq), rr, DEFAULT_METRICS, return_mean=True, make_comparable=True)
    for m in DEFAULT_METRICS:
        assert ours[m] == {q: float(rr.scores[m][q]) for q in rq}, m
    assert any(v > 0 for v in ours["ndcg@10"].values()) and any(v == 0 for v in ours["ndcg@10"].values())


def test_progress_line_counts_the_queries_the_quality_run_scores():
    from evalkit.workflows.bench import progress_line
    from retrievers.types import Dataset, Document, Query
    docs = [Document(f"d{i}", "t") for i in range(3)]
    queries = [Query(f"q{i}", "x") for i in range(5)]
    qrels = {f"q{i}": {"d0": 1} for i in range(5)}
    split = Dataset("tiny", docs, queries, qrels, splits={"train": ["q0", "q1", "q2"], "test": ["q3", "q4"]})
    line = progress_line(1, 1, split, [0.0, 0.0], 0.0, [])
    assert "2 of its 5 queries scored (the default split)" in line and "3 documents" in line
    whole = Dataset("tiny", docs, queries, qrels)
    assert ", 5 queries" in progress_line(1, 1, whole, [0.0, 0.0], 0.0, [])


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_first_answer_runs_the_presets_that_embed_nothing_before_any_model_loads(tmp_path, cache):
    """The bench's first answer: the presets that read no vectors on the first dataset, a report in latest/ and one
    console line, with no model loaded; nothing when every preset reads vectors, none does, or the dataset's run
    is already finished."""
    import csv

    from evalkit.workflows.bench import Phases, first_answer
    from retrievers.embed.model import Embedder
    from retrievers.index.shared import IndexSettings
    from retrievers.pipeline import load_preset

    bm25, dense = load_preset("bm25"), load_preset("dense")
    emb, lines, out = Embedder(progress=False), [], tmp_path / "bench"
    args = (IndexSettings(), emb, out, lines.append, Phases(0.0), (0.0, 0.0))
    assert first_answer("memory-workspace", [dense], [], *args) is None  # every preset reads vectors
    assert first_answer("memory-workspace", [bm25], [], *args) is None  # none does: its own run is as quick
    path = first_answer("memory-workspace", [bm25, dense], [], *args)
    assert path == out / "latest" and (path / "report.html").exists() and not emb.model_loaded
    with open(path / "metrics.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["retriever"] for r in rows} == {"bm25"} and any(r["metric"] == "ndcg@10" for r in rows)
    said = next(x for x in lines if "first answer at +" in x)
    assert "the 1 presets that embed nothing on memory-workspace (bm25)" in said and "1 presets that read" in said
