"""`evalkit bench` answers early and survives an interruption: the first dataset's leaderboard and report.html are
written before its latency pass (which then rewrites them with its figures); a SIGTERM (or Ctrl-C) between datasets
keeps every finished dataset, says how to resume, and the same command again reuses them. Scoring builds ranx's
tables with document ids padded to a fixed width (evalkit/measures/lists.py), so numba compiles them once, not once
per longest-id length: the scores equal ranx's own ``from_dict`` path."""
from __future__ import annotations

import csv
import os
import random
import signal

import pytest
from ranx import Qrels, Run, evaluate as ranx_evaluate

from evalkit.measures.lists import DEFAULT_METRICS, ID_WIDTH, evaluate
from evalkit.workflows.bench import run_bench
from retrievers.index.shared import IndexSettings
from tests.helpers import write_tiny_beir


def _metrics(folder) -> set[tuple[str, str]]:
    with open(folder / "metrics.csv", encoding="utf-8") as fh:
        return {(r["dataset"], r["metric"]) for r in csv.DictReader(fh)}


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_report_before_latency_then_sigterm_keeps_finished_and_resumes(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_tiny_beir(data / "scifact")  # a 12-document stand-in under the second bench dataset's name
    monkeypatch.setenv("EVALKIT_DATA", str(data))
    out, latest = tmp_path / "bench", tmp_path / "bench" / "latest"
    lines: list[str] = []
    seen_at_first_report: dict = {}

    def log(msg: str) -> None:
        lines.append(msg)
        if "report updated after 1/2" in msg and "(CPU " in msg:
            seen_at_first_report.update(report=(latest / "report.html").exists(),
                                        latency=(latest / "latency.json").exists(),
                                        metrics=_metrics(latest))
        if "bench [2/2]" in msg:
            os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a CI timeout would

    handler = signal.getsignal(signal.SIGTERM)
    args = dict(datasets=["memory-workspace", "scifact"], presets=["bm25"], latency_queries=3,
                settings=IndexSettings(backend="exact"))
    with pytest.raises(KeyboardInterrupt):
        run_bench(out, log=log, **args)
    assert signal.getsignal(signal.SIGTERM) is handler  # the bench's handler is gone again

    # the first answer came before the latency pass, without its figures; the pass then added them
    assert seen_at_first_report["report"] and not seen_at_first_report["latency"]
    assert ("memory-workspace", "ndcg@10") in seen_at_first_report["metrics"]
    assert not any(m.startswith("latency_") for _, m in seen_at_first_report["metrics"])
    text = "\n".join(lines)
    assert text.index("report updated after 1/2") < text.index("memory-workspace: latency pass") < \
        text.index("memory-workspace: latency figures added") < text.index("bench [2/2]")
    assert ("memory-workspace", "latency_p50_ms") in _metrics(latest)
    assert "latency" in (latest / "report.html").read_text(encoding="utf-8").lower()
    assert ("memory-workspace", "latency_p50_ms") in _metrics(out / "datasets" / "memory-workspace")
    # the interruption kept the finished dataset and said how to resume
    stop = lines[-1]
    assert "interrupted after 1/2" in stop and "memory-workspace" in stop and "run the same command again" in stop
    assert not (out / "datasets" / "scifact").exists()

    lines.clear()
    run_bench(out, log=lines.append, **args)
    text = "\n".join(lines)
    assert "memory-workspace: finished earlier" in text and "report updated after 2/2" in text
    assert text.count(": latency pass (") == 1  # only the new dataset's (the closing phase table names the phase too)
    table = text[text.index("where the time went"):]  # the closing phase table: every phase, the total, peak memory
    assert all(f"  {p} " in table for p in ("set-up", "embedding", "indexing", "runs", "latency pass", "reports"))
    assert "  total " in table and "peak memory (RSS): " in table
    got = _metrics(latest)
    assert {("memory-workspace", "latency_p50_ms"), ("scifact", "ndcg@10"), ("scifact", "latency_p50_ms")} <= got


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
