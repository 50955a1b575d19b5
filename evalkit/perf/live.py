"""Section 7 of ``evalkit perf``: what driving a live system costs beyond the system's own time.

Against a loopback echo service in its own process (:mod:`evalkit.perf.echo`, an ``http`` system file built in
memory, no ingest, a fresh response cache so every query is asked):

* **adapter overhead** — echo answering at once, concurrency 1: the median round trip of a bare keep-alive client
  (``http.client``, the system's own time as any client sees it) against evalkit's wall time per query over the
  whole live run (request, timeout scope, answer parsing, id mapping, the response-cache write, the run's
  bookkeeping); overhead = the difference. Target <= 1 ms per query. The same difference in process CPU time is
  printed beside it: on a shared machine the wall time also counts waiting for a core.
* **throughput** — echo answering in 20 ms, concurrency 4: queries per second over the whole run. Target >= 150
  (4 in flight / 20 ms = 200 at most).
"""
from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.retriever import run_system
from evalkit.perf.common import Section, Table, progress
from retrievers.systems.file import system_from_dict
from retrievers.types import Dataset, Document, Query

OVERHEAD_TARGET_MS = 1.0
THROUGHPUT_TARGET = 150.0


def echo_process(delay_ms: float) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([sys.executable, "-m", "evalkit.perf.echo", "--port", "0", "--delay-ms", str(delay_ms)],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening"):
        p.kill()
        raise RuntimeError(f"echo service did not start: {line!r}")
    return p, int(line.split()[1])


def echo_spec(port: int, concurrency: int):
    return system_from_dict({
        "name": "echo", "kind": "http", "k": 10,
        "http": {"base_url": f"http://127.0.0.1:{port}",
                 "search": {"path": "/search", "body": {"query": "{query}", "k": "{k}"},
                            "answer": {"results": "results", "id": "id", "score": "score",
                                       "system_ms": "took_ms"}}},
        "limits": {"concurrency": concurrency, "timeout": 10.0, "retries": 0}}, "<perf echo>")


def echo_dataset(n: int) -> Dataset:
    docs = [Document(f"d{i}", f"document {i}") for i in range(10)]
    qs = [Query(f"q{i}", f"query number {i}") for i in range(n)]
    return Dataset("echo", docs, qs, {q.id: {"d0": 1} for q in qs}, {"all": [q.id for q in qs]})


def bare_round_trips(port: int, n: int) -> list[float]:
    """Round-trip times (ms) of a bare keep-alive client; the process CPU seconds it spent are in ``bare_cpu``."""
    con = http.client.HTTPConnection("127.0.0.1", port)
    out = []
    c0 = time.process_time()
    for i in range(n):
        body = json.dumps({"query": f"query number {i}", "k": 10})
        t0 = time.perf_counter()
        con.request("POST", "/search", body, {"Content-Type": "application/json"})
        r = con.getresponse()
        json.loads(r.read())
        out.append((time.perf_counter() - t0) * 1000.0)
    con.close()
    bare_cpu.append(time.process_time() - c0)
    return out


bare_cpu: list[float] = []


def driven(port: int, n: int, concurrency: int) -> tuple[float, object, float]:
    """(wall seconds, the run, process CPU seconds) of evalkit driving ``n`` queries."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "responses.sqlite")
        c0, t0 = time.process_time(), time.perf_counter()
        run = run_system(echo_spec(port, concurrency), echo_dataset(n), "all", refresh=True, cache=cache,
                         log=lambda *a: None)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        cache.close()
    return wall, run, cpu


def run(sec: Section, n_queries: int = 400, repeats: int = 3) -> dict:
    data: dict = {}
    t = sec.table(Table("adapter overhead per query (echo answers at once, concurrency 1; best of "
                        f"{repeats} runs of {n_queries} queries)",
                        ["measure", "ms per query"]))
    p, port = echo_process(0.0)
    try:
        progress("live: bare client vs evalkit against the echo service")
        bare_cpu.clear()
        bare = min((statistics.median(bare_round_trips(port, n_queries)) for _ in range(repeats)))
        walls, cpus = [], []
        for _ in range(repeats):
            wall, run_, cpu = driven(port, n_queries, 1)
            walls.append(wall)
            cpus.append(cpu)
        per_query = min(walls) / n_queries * 1000.0
        cpu_bare = min(bare_cpu) / n_queries * 1000.0
        cpu_evalkit = min(cpus) / n_queries * 1000.0
        lat = run_.info.get("latency_with_embedding_p50_ms", float("nan"))
    finally:
        p.kill()
        p.wait()
    overhead = per_query - bare
    t.add("bare client round trip (http.client, keep-alive), median", round(bare, 3))
    t.add("evalkit: request wall (adapter), p50", round(lat, 3))
    t.add("evalkit: whole run / queries (incl. mapping, cache write)", round(per_query, 3))
    t.add("overhead = whole run per query - bare round trip", round(overhead, 3))
    t.add("CPU: bare client per query", round(cpu_bare, 3))
    t.add("CPU: evalkit whole run per query", round(cpu_evalkit, 3))
    t.add("CPU overhead = evalkit - bare (load-robust)", round(cpu_evalkit - cpu_bare, 3))
    t.notes.append(f"target <= {OVERHEAD_TARGET_MS:g} ms: {'met' if overhead <= OVERHEAD_TARGET_MS else 'NOT met'}"
                   f" on wall time ({overhead:.3f} ms), "
                   f"{'met' if cpu_evalkit - cpu_bare <= OVERHEAD_TARGET_MS else 'NOT met'} on CPU time "
                   f"({cpu_evalkit - cpu_bare:.3f} ms; wall time on a loaded machine counts waiting for a core)")
    data["overhead"] = {"bare_ms": bare, "adapter_p50_ms": lat, "per_query_ms": per_query, "overhead_ms": overhead,
                        "cpu_bare_ms": cpu_bare, "cpu_evalkit_ms": cpu_evalkit}
    t2 = sec.table(Table(f"throughput (echo answers in 20 ms, concurrency 4, {n_queries} queries, best of "
                         f"{repeats})", ["measure", "value"]))
    p, port = echo_process(20.0)
    try:
        progress("live: throughput at concurrency 4 against a 20 ms echo")
        walls = [driven(port, n_queries, 4)[0] for _ in range(repeats)]
    finally:
        p.kill()
        p.wait()
    qps = n_queries / min(walls)
    t2.add("queries per second", round(qps, 1))
    t2.add("ceiling (4 in flight / 20 ms)", 200.0)
    t2.notes.append(f"target >= {THROUGHPUT_TARGET:g} q/s: {'met' if qps >= THROUGHPUT_TARGET else 'NOT met'}")
    data["throughput"] = {"qps": qps, "walls": walls}
    return data
