"""Section 8 of ``evalkit perf``: what the answer workflow costs beyond the model's own time.

Against a loopback chat endpoint in its own process (:mod:`evalkit.perf.echo`, ``/v1/chat/completions`` answering
``CORRECT`` after ``--delay-ms``), with a fresh answer cache so every call is asked:

* **overhead per call** — endpoint answering at once, concurrency 1: the median round trip of a bare keep-alive
  client (``http.client``) against evalkit's wall time per call over the whole answer pass
  (:func:`evalkit.engine.answer.answer_questions`: prompt rendering, request, parsing, the verified cache write,
  the measures); overhead = the difference, also in process CPU time (load-robust). Target <= 1 ms per call.
* **throughput** — endpoint answering in 20 ms, concurrency 8: calls per second of the answer pass against the
  endpoint's capacity measured by 8 bare keep-alive clients over the same number of calls. Target >= 95 %.
"""
from __future__ import annotations

import http.client
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from evalkit.engine.answer import AnswerSpec, Judge, Prompt, answer_questions
from evalkit.engine.llm import Endpoint
from evalkit.engine.runner import QueryResult
from evalkit.perf.common import Section, Table, progress
from evalkit.perf.live import echo_process
from retrievers.types import Dataset, Document, Query

OVERHEAD_TARGET_MS = 1.0
CAPACITY_TARGET = 0.95
DELAY_MS = 20.0
CONCURRENCY = 8


class _Run:
    """A retriever run of the synthetic dataset: every question injects its own note."""

    def __init__(self, ds: Dataset):
        self.results = {q.id: QueryResult([(f"d{i}", 1.0)], [f"d{i}"], False) for i, q in enumerate(ds.queries)}


def synthetic(n: int) -> Dataset:
    docs = [Document(f"d{i}", f"note {i}: the answer is {i}") for i in range(n)]
    qs = [Query(f"q{i}", f"what is answer {i}?", metadata={"answer": str(i)}) for i in range(n)]
    return Dataset("perf-answers", docs, qs, {q.id: {f"d{i}": 1} for i, q in enumerate(qs)},
                   {"all": [q.id for q in qs]}, info={"answers": {"gold": "answer"}})


def bare(port: int, n: int, threads: int) -> tuple[float, list[float], float]:
    """(wall seconds, per-call round trips in ms, process CPU seconds) of ``threads`` bare keep-alive clients making
    ``n`` calls in all."""
    body = json.dumps({"model": "echo", "messages": [{"role": "user", "content": "x"}], "temperature": 0})
    rtts: list[float] = []
    lock = threading.Lock()
    todo = iter(range(n))

    def worker():
        con = http.client.HTTPConnection("127.0.0.1", port)
        while True:
            with lock:
                if next(todo, None) is None:
                    break
            t0 = time.perf_counter()
            con.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            json.loads(con.getresponse().read())
            dt = (time.perf_counter() - t0) * 1000.0
            with lock:
                rtts.append(dt)
        con.close()
    c0, t0 = time.process_time(), time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, rtts, time.process_time() - c0


def driven(port: int, n_questions: int, concurrency: int) -> tuple[float, int, float]:
    """(wall seconds, calls made, process CPU seconds) of an answer pass (reader + one judge per question)."""
    ds = synthetic(n_questions)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"http://127.0.0.1:{port}/v1"
        spec = AnswerSpec(Endpoint(url, "echo", cache_dir=Path(tmp)),
                          [Judge(Endpoint(url, "echo", cache_dir=Path(tmp)), Prompt.load("judge-v1"))],
                          concurrency=concurrency)
        c0, t0 = time.process_time(), time.perf_counter()
        answer_questions(ds, _Run(ds), spec)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        calls = spec.reader.asked + spec.judges[0].endpoint.asked
    return wall, calls, cpu


def run(sec: Section, n_questions: int = 200, repeats: int = 3) -> dict:
    data: dict = {}
    t = sec.table(Table(f"overhead per call (endpoint answers at once, concurrency 1; best of {repeats} passes of "
                        f"{n_questions} questions = {2 * n_questions} calls)", ["measure", "ms per call"]))
    p, port = echo_process(0.0)
    try:
        progress("answers: bare client vs the answer pass against the loopback endpoint")
        runs = [bare(port, 2 * n_questions, 1) for _ in range(repeats)]
        bare_ms = min(statistics.median(r[1]) for r in runs)
        bare_cpu = min(r[2] for r in runs) / (2 * n_questions) * 1000.0
        passes = [driven(port, n_questions, 1) for _ in range(repeats)]
    finally:
        p.kill()
        p.wait()
    per_call = min(w / c for w, c, _ in passes) * 1000.0
    cpu_call = min(cpu / c for _, c, cpu in passes) * 1000.0
    overhead, cpu_over = per_call - bare_ms, cpu_call - bare_cpu
    t.add("bare client round trip (http.client, keep-alive), median", round(bare_ms, 3))
    t.add("evalkit: answer pass wall / calls (render, request, parse, cache write, measures)", round(per_call, 3))
    t.add("overhead = answer pass per call - bare round trip", round(overhead, 3))
    t.add("CPU: bare client per call", round(bare_cpu, 3))
    t.add("CPU: answer pass per call", round(cpu_call, 3))
    t.add("CPU overhead = evalkit - bare (load-robust)", round(cpu_over, 3))
    t.notes.append(f"target <= {OVERHEAD_TARGET_MS:g} ms: {'met' if overhead <= OVERHEAD_TARGET_MS else 'NOT met'}"
                   f" on wall time ({overhead:.3f} ms), {'met' if cpu_over <= OVERHEAD_TARGET_MS else 'NOT met'} on "
                   f"CPU time ({cpu_over:.3f} ms)")
    data["overhead"] = {"bare_ms": bare_ms, "per_call_ms": per_call, "overhead_ms": overhead,
                        "cpu_bare_ms": bare_cpu, "cpu_call_ms": cpu_call}
    t2 = sec.table(Table(f"throughput (endpoint answers in {DELAY_MS:g} ms, concurrency {CONCURRENCY}, "
                         f"{2 * n_questions} calls, best of {repeats})", ["measure", "calls per second"]))
    p, port = echo_process(DELAY_MS)
    try:
        progress(f"answers: throughput at concurrency {CONCURRENCY}")
        cap = max(2 * n_questions / bare(port, 2 * n_questions, CONCURRENCY)[0] for _ in range(repeats))
        ours = max(c / w for w, c, _ in (driven(port, n_questions, CONCURRENCY) for _ in range(repeats)))
    finally:
        p.kill()
        p.wait()
    t2.add(f"endpoint capacity ({CONCURRENCY} bare keep-alive clients)", round(cap, 1))
    t2.add(f"answer pass (--concurrency {CONCURRENCY})", round(ours, 1))
    t2.add("share of capacity", round(ours / cap, 3))
    t2.notes.append(f"target >= {CAPACITY_TARGET:.0%} of capacity: {'met' if ours >= CAPACITY_TARGET * cap else 'NOT met'}"
                    f" ({ours / cap:.1%}; ceiling {CONCURRENCY} in flight / {DELAY_MS:g} ms = "
                    f"{CONCURRENCY / DELAY_MS * 1000:.0f})")
    data["throughput"] = {"capacity": cap, "calls_per_s": ours, "share": ours / cap}
    return data
