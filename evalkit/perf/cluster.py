"""Section 9 — what `evalkit run --cluster local:N` costs against one process, and that it changes no byte.

The same `evalkit run` (a dataset, bm25 / dense / hybrid-rrf) four times, each in its own process: one process and
``--cluster local:N`` from an empty cache (the cluster embeds the corpus on its workers), then both again over the
cache the first pass of each left (no embedding: what remains is the cluster's start-up, the candidate set's trip
to the workers and the query blocks). Printed: wall time of each, the cluster/one-process ratio, the size of what
was shipped, and whether ``metrics.csv`` and ``per_query.csv`` are byte-identical.

On a 2-core machine N = 2 workers share the cores the driver uses: no speed-up is possible, only the cost of
shipping work and the proof that the numbers do not move. A cluster pays off with more cores or machines than one
process can use, for corpora whose embedding dominates a run.

Usage::

    evalkit perf --sections 9 --quick
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from evalkit.perf.common import Section, Table, loadavg, progress, temp_dir

PRESETS = "bm25,dense,hybrid-rrf"
_SHIPPED = re.compile(r"(\d+)/(\d+) (query blocks|embedding chunks) done \(([\d.]+)s; shared data ([\d.]+) MB")


def _run(dataset: str, cache: Path, out: Path, limit: int | None, cluster: str | None) -> tuple[float, str]:
    argv = [sys.executable, "-m", "evalkit.cli", "run", "--dataset", dataset, "--retrievers", PRESETS,
            "--out", str(out)] + (["--limit", str(limit)] if limit else [])
    argv += ["--cluster", cluster] if cluster else []
    env = {**os.environ, "EVALKIT_CACHE": str(cache), "CI": "1"}
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"`evalkit run` failed: {r.stderr.strip().splitlines()[-1:]}")
    return wall, r.stdout + r.stderr


def _shipped(said: str) -> str:
    """The last progress line of each kind: ``blocks, MB shipped`` as one cell."""
    last: dict[str, tuple] = {}
    for m in _SHIPPED.finditer(said):
        last[m.group(3)] = (m.group(2), m.group(5))
    return "; ".join(f"{n} {kind}, {mb} MB" for kind, (n, mb) in sorted(last.items())) or "-"


def run(sec: Section, dataset: str, limit: int | None = None, workers: int = 2) -> dict:
    """One process vs ``local:workers`` on ``dataset`` (first ``limit`` queries), cold and warm cache."""
    spec = f"local:{workers}"
    t = sec.table(Table(f"evalkit run, one process vs --cluster {spec}",
                        ["pass", "one process s", f"{spec} s", "ratio", "shipped to the workers", "identical"]))
    data: dict = {"dataset": dataset, "limit": limit, "workers": workers, "passes": {}}
    with temp_dir("evalkit-perf-cluster-") as tmp:
        for cache_state in ("cold", "warm"):
            walls, outs, said = {}, {}, ""
            for who, cl in (("one", None), ("cluster", spec)):
                progress(f"cluster: {cache_state} cache, {who}")
                outs[who] = tmp / f"{who}-{cache_state}"
                walls[who], text = _run(dataset, tmp / f"cache-{who}", outs[who], limit, cl)
                said = text if cl else said
            same = all((outs["one"] / f).read_bytes() == (outs["cluster"] / f).read_bytes()
                       for f in ("metrics.csv", "per_query.csv"))
            ratio = walls["cluster"] / walls["one"]
            t.add(f"{cache_state} cache", round(walls["one"], 1), round(walls["cluster"], 1), f"{ratio:.2f}x",
                  _shipped(said), "yes" if same else "NO")
            data["passes"][cache_state] = {"one_s": round(walls["one"], 2), "cluster_s": round(walls["cluster"], 2),
                                           "ratio": round(ratio, 3), "identical": same, "shipped": _shipped(said)}
    sec.note(f"{dataset}{f', first {limit} queries' if limit else ''}, {PRESETS}; each pass a new `evalkit run` "
             f"process (model load and cluster start-up included); load average at the end {loadavg()}")
    sec.note(f"{os.cpu_count()} core(s): {spec} shares them with the driver, so the ratio is the cost of shipping "
             "work (start-up, the candidate set per worker, a model per worker), not a speed-up")
    return data
