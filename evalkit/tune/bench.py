"""Sweep throughput of a search space (`evalkit tune --bench`, and `evalkit perf`): configs/s, query-pipeline
evaluations/s, prefix sharing, time by stage, and a digest of the leaderboard that must be equal on one process,
forked workers or a Dask cluster."""
from __future__ import annotations

import hashlib
import os
from typing import Callable

import numpy as np

from evalkit.engine.evaluate import dataset_labels
from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.tune.prepare import prepare
from evalkit.tune.space_model import Space


def leaderboard_digest(res) -> str:
    """sha256 of a sweep's leaderboard: config keys in rank order with the bits of every metric's mean and of the
    kept per-query values — equal digests mean byte-identical results."""
    h = hashlib.sha256()
    for i in res.order(res.metrics[0]):
        h.update(res.configs[i].key().encode())
        for m in res.metrics:
            h.update(np.float64(res.means[m][i]).tobytes())
        for m in sorted(res.per_query):
            h.update(np.ascontiguousarray(res.per_query[m][i]).tobytes())
    return h.hexdigest()


def bench_space(space: Space, n: int = 240, workers: int = 1, settings=None, embedder=None,
                log: Callable[[str], None] = print, cluster=None) -> dict:
    """Sweep throughput on the space's tuning queries: the grid (method grid) or ``n`` seeded random configs,
    after one warm-up config; wall and CPU time, configs/s, query-pipeline evaluations/s, prefix sharing, and the
    :func:`leaderboard_digest` (equal on one process, forked workers or a Dask ``cluster``)."""
    rng = np.random.default_rng(space.seed)
    env = prepare(space, settings, embedder, log, rng)
    metrics = list(dict.fromkeys([space.objective] + [c.metric for c in space.constraints if not c.latency]))
    labels = dataset_labels(env.ds)
    sw = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective], labels=labels)
    if space.method == "grid":
        assigns, how = space.grid(), "grid"
    else:
        assigns, how = [space.decode(u) for u in rng.random((n, space.dims))], "random"
    configs = [space.config(a)[0] for a in assigns]
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sw.run([SweepConfig()])  # warm-up: the shared memo (token sets, similarities, gains) is built once
    res = sw.run(configs, workers=workers, cluster=cluster, log=log if cluster is not None else None)
    prof = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective], timings=True,
                 labels=labels)
    prof.run([SweepConfig()])
    pres = prof.run(configs[:min(len(configs), 60)])
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    total = sum(pres.stage_seconds.values()) or 1.0
    out = {"space": space.name, "preset": space.pipeline.name, "dataset": env.ds.name, "split": env.split,
           "configs": len(configs), "sampling": how, "queries": env.cs.Q, "columns": env.cs.C, "workers": res.workers,
           "seconds": res.seconds, "cpu_seconds": res.cpu_seconds, "configs_per_second": res.configs_per_second,
           "query_evals_per_second": res.query_evals_per_second,
           "query_evals_per_cpu_second": len(configs) * env.cs.Q / max(res.cpu_seconds, 1e-9),
           "stage_calls": res.stage_calls, "naive_stage_calls": res.naive_stage_calls,
           "shared_outputs": res.shared_outputs, "leaderboard_sha256": leaderboard_digest(res),
           "cluster": cluster is not None, "budget_stage_run": sw.run_budget, "load_average": [load0, load1],
           "stage_share": {k: v / total for k, v in sorted(pres.stage_seconds.items(), key=lambda x: -x[1])}}
    log(f"  {out['configs']} {how} configs x {out['queries']} queries: {res.seconds:.2f}s wall, "
        f"{res.cpu_seconds:.2f}s CPU, {res.workers} worker(s) -> {res.configs_per_second:.1f} configs/s, "
        f"{res.query_evals_per_second:.0f} query-pipeline evals/s ({out['query_evals_per_cpu_second']:.0f} per CPU "
        f"second); stage runs {res.stage_calls} of {res.naive_stage_calls} ({res.shared_outputs} shared outputs); "
        f"load average {load0:.1f}->{load1:.1f}")
    log(f"  leaderboard sha256 {out['leaderboard_sha256']}")
    log("  time by stage: " + ", ".join(f"{k} {v:.0%}" for k, v in list(out["stage_share"].items())[:6]))
    return out
