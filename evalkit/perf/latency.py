"""Section 2 — per-query latency of every local preset (latency mode, warm, one thread).

Uses :func:`evalkit.engine.runner.run_latency` as is: no candidate cache, every query goes embed → arms → stages,
each stage timed with ``perf_counter``, torch and BLAS pools fixed to one thread. Reported per preset:

* ``p50`` / ``p95`` of the end-to-end wall time without the query embedding (target: p95 <= 10 ms) and with it
  (target: p95 <= 25 ms) over all timed runs. Query embedding includes Phase-3's expansion texts, embedded live
  one per pass; an expansion whose pass the early stop never ran is not charged (a live system would not embed
  it), see :func:`evalkit.engine.runner.variants_used`;
* ``best p50`` / ``best p95``: the same over each query's fastest of the ``repeats`` runs — on a loaded machine a
  run that waited for a core is not the code's cost, its minimum over repeats is closer to it;
* ``cpu ms/q``: process CPU time per query run (warm-up included, embedding included), which counts work, not
  waiting, and so barely moves with the load average;
* the p50 of every stage (best-of-repeats), in pipeline order.
"""
from __future__ import annotations

import time

import numpy as np

from evalkit.data.registry import load_dataset
from evalkit.engine.runner import run_latency
from evalkit.perf.common import (
    Section,
    Table,
    load_ready,
    loadavg,
    progress,
    subset,
    test_split,
)
from evalkit.workflows.bench import runnable_presets
from retrievers.embed.model import Embedder, single_text_encoder
from retrievers.index.shared import LATENCY_EXACT_BELOW, IndexSettings, SharedIndex

TARGET_MS = 10.0
TARGET_WITH_EMBEDDING_MS = 25.0


def _best_of(vals: list[float], repeats: int, n: int) -> np.ndarray:
    """Per-query minimum over repeats (run_latency records repeat-major: repeat r, then every query)."""
    a = np.asarray(vals, dtype=np.float64)
    if repeats > 1 and a.size == repeats * n:
        return a.reshape(repeats, n).min(axis=0)
    return a


def _embedding_cost(embedder, texts: list[str], repeats: int) -> tuple[float, float]:
    """(p50 wall ms of the best repeat per query, CPU ms per query) of embedding one query, one thread."""
    import torch  # lazy: startup
    from threadpoolctl import threadpool_limits  # lazy: optional-dep

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            encode = single_text_encoder(embedder.model)  # what run_latency embeds a query with
            encode(texts[0])  # warm-up
            best = np.full(len(texts), np.inf)
            c0 = time.process_time()
            for _ in range(repeats):
                for i, t in enumerate(texts):
                    t0 = time.perf_counter()
                    encode(t)
                    best[i] = min(best[i], time.perf_counter() - t0)
            cpu = (time.process_time() - c0) * 1000.0 / (repeats * len(texts))
    finally:
        torch.set_num_threads(old)
    return float(np.median(best)) * 1000, cpu


def run(section: Section, datasets: list[str], n_queries: int, repeats: int, warmup: int,
        presets: list[str] | None = None, exact_below: int = LATENCY_EXACT_BELOW) -> dict:

    embedder = Embedder(progress=False)
    names, notes = load_ready(datasets, embedder)
    for n in notes:
        section.note(n)
    skipped: dict[str, str] = {}
    pipes, skipped = runnable_presets(presets, log=lambda *_: None)
    for name, why in skipped.items():
        section.note(f"preset {name} not timed: {why}")
    summary = section.table(Table(
        f"end to end per query, threads=1, warm ({n_queries} queries x {repeats} repeats after {warmup} warm-up; "
        f"ms); vector search exact for groups of <= {exact_below:,} units (one user's store), HNSW above", ["dataset", "preset", "p50", "p95", "best p50", "best p95", f"<= {TARGET_MS:g}",
                 "p50 +emb", "p95 +emb", "best p50 +emb", "best p95 +emb", f"<= {TARGET_WITH_EMBEDDING_MS:g}",
                 "cpu ms/q", "cpu -emb", "load"]))
    stages = section.table(Table("per-stage p50 (best of repeats, ms), pipeline order",
                                 ["dataset", "preset", "stages"]))
    out: dict = {"exact_below_units": exact_below}
    embed_cpu = section.table(Table("query embedding alone (one query as run_latency embeds it, threads=1, best of "
                                    "repeats)",
                                    ["dataset", "p50 ms", "cpu ms/q", "load"]))
    for name in names:
        ds = subset(test_split(load_dataset(name)), n_queries)
        # a memory store of one user's size: groups (visible sets) up to exact_below units are searched exactly,
        # as a per-user store would be; HNSW's recall against exact search is section 5's
        index = SharedIndex(ds, embedder=embedder, settings=IndexSettings(exact_below=exact_below))
        index.collection()  # open (or build) outside the timed runs
        nq = len(ds.queries)
        e_p50, e_cpu = _embedding_cost(embedder, [q.text for q in ds.queries], repeats)
        embed_cpu.add(name, e_p50, e_cpu, loadavg().split()[0])
        progress(f"latency: {name}, {len(pipes)} presets x {nq} queries")
        for p in pipes:
            c0 = time.process_time()
            res = run_latency(ds, [p], index, repeats=repeats, warmup=warmup, threads=1)
            cpu_per_q = (time.process_time() - c0) * 1000.0 / max(1, (repeats * nq + min(warmup, nq)))
            cpu_excl = cpu_per_q - e_cpu
            st = res.stages[p.name]
            tot = np.asarray(st["total"]) * 1000
            tot_e = np.asarray(st["total_with_embedding"]) * 1000
            best = _best_of(st["total"], repeats, nq) * 1000
            best_e = _best_of(st["total_with_embedding"], repeats, nq) * 1000
            p50b, p95b = float(np.percentile(best, 50)), float(np.percentile(best, 95))
            p50be, p95be = float(np.percentile(best_e, 50)), float(np.percentile(best_e, 95))
            summary.add(name, p.name, float(np.percentile(tot, 50)), float(np.percentile(tot, 95)), p50b, p95b,
                        p95b <= TARGET_MS, float(np.percentile(tot_e, 50)), float(np.percentile(tot_e, 95)),
                        p50be, p95be, p95be <= TARGET_WITH_EMBEDDING_MS, cpu_per_q, cpu_excl,
                        loadavg().split()[0])
            parts = []
            per_stage = {}
            for k, v in st.items():
                if k.startswith("total"):
                    continue
                ms = float(np.percentile(_best_of(v, repeats, nq), 50)) * 1000
                per_stage[k] = ms
                parts.append(f"{k} {ms:.2f}")
            stages.add(name, p.name, " | ".join(parts))
            out.setdefault(name, {})[p.name] = {"p50_ms": float(np.percentile(tot, 50)),
                                                "best_p50_ms": p50b, "best_p95_ms": p95b,
                                                "best_p50_with_embedding_ms": p50be,
                                                "best_p95_with_embedding_ms": p95be, "cpu_ms_per_query": cpu_per_q,
                                                "cpu_ms_per_query_without_embedding": cpu_excl,
                                                "stages_p50_ms": per_stage}
    summary.notes.append("end to end = wall time from the query text to the packed block; p50/p95 over all timed "
                         "runs; 'best' = each query's fastest repeat; the target columns test best p95; cpu ms/q = process CPU time per query run (embedding included), cpu -emb = "
                         "the same minus the query embedding's CPU time measured alone (table above); with one "
                         "thread, CPU time is what the wall time would be on an idle machine; presets with "
                         "expansion passes embed every expansion text (one per pass) but are charged only for the "
                         "passes their early stop let run, so their CPU columns exceed their wall figures")
    return out
