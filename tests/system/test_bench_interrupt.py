"""`evalkit bench` answers early and survives an interruption: the first dataset's leaderboard and report.html are
written before its latency pass (which then rewrites them with its figures); a SIGTERM (or Ctrl-C) between datasets
keeps every finished dataset, says how to resume, and the same command again reuses them. The interrupted bench runs
in a child process: a signal sent inside a pytest worker can take the worker down."""
from __future__ import annotations

import csv
import os

import pytest

from evalkit.workflows.bench import run_bench
from retrievers.index.shared import IndexSettings
from tests.helpers import write_tiny_beir


def _metrics(folder) -> set[tuple[str, str]]:
    with open(folder / "metrics.csv", encoding="utf-8") as fh:
        return {(r["dataset"], r["metric"]) for r in csv.DictReader(fh)}


#: the bench interrupted by SIGTERM, run in a child process (a signal sent inside a pytest worker can take the worker
#: down with it, and xdist then waits for it forever): the child logs every line as JSON, and when the first
#: dataset's report is written it also logs which files existed then
CHILD = r"""
import json, os, signal, sys
from pathlib import Path
from evalkit.workflows.bench import run_bench
from retrievers.index.shared import IndexSettings
out = Path(sys.argv[1]); latest = out / "latest"
def metrics():
    import csv
    if not (latest / "metrics.csv").exists():
        return []
    with open(latest / "metrics.csv", encoding="utf-8") as fh:
        return sorted({(r["dataset"], r["metric"]) for r in csv.DictReader(fh)})
def log(msg):
    rec = {"line": str(msg)}
    if "report updated after 1/2" in msg and "(CPU " in msg:
        rec["first"] = {"report": (latest / "report.html").exists(), "latency": (latest / "latency.json").exists(),
                        "metrics": metrics()}
    print(json.dumps(rec), flush=True)
    if "bench [2/2]" in msg:
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a CI timeout would
handler = signal.getsignal(signal.SIGTERM)
try:
    run_bench(out, log=log, datasets=["memory-workspace", "scifact"], presets=["bm25"], latency_queries=3,
              settings=IndexSettings(backend="exact"))
except KeyboardInterrupt:
    print(json.dumps({"interrupted": True, "handler_restored": signal.getsignal(signal.SIGTERM) is handler}))
"""


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_report_before_latency_then_sigterm_keeps_finished_and_resumes(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys
    data = tmp_path / "data"
    write_tiny_beir(data / "scifact")  # a 12-document stand-in under the second bench dataset's name
    monkeypatch.setenv("EVALKIT_DATA", str(data))
    out, latest = tmp_path / "bench", tmp_path / "bench" / "latest"
    args = dict(datasets=["memory-workspace", "scifact"], presets=["bm25"], latency_queries=3,
                settings=IndexSettings(backend="exact"))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "EVALKIT_DATA": str(data)})
    recs = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and {"interrupted": True, "handler_restored": True} in recs, proc.stderr[-2000:]
    lines = [r["line"] for r in recs if "line" in r]
    seen_at_first_report = next(r["first"] for r in recs if "first" in r)
    first_metrics = {tuple(m) for m in seen_at_first_report["metrics"]}

    # the first answer came before the latency pass, without its figures; the pass then added them
    assert seen_at_first_report["report"] and not seen_at_first_report["latency"]
    assert ("memory-workspace", "ndcg@10") in first_metrics
    assert not any(m.startswith("latency_") for _, m in first_metrics)
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

    lines = []
    run_bench(out, log=lines.append, **args)
    text = "\n".join(lines)
    assert "memory-workspace: finished earlier" in text and "report updated after 2/2" in text
    assert text.count(": latency pass (") == 1  # only the new dataset's (the closing phase table names the phase too)
    table = text[text.index("where the time went"):]  # the closing phase table: every phase, the total, peak memory
    assert all(f"  {p} " in table for p in ("set-up", "embedding", "indexing", "runs", "latency pass", "reports"))
    assert "  total " in table and "peak memory (RSS): " in table
    got = _metrics(latest)
    assert {("memory-workspace", "latency_p50_ms"), ("scifact", "ndcg@10"), ("scifact", "latency_p50_ms")} <= got
