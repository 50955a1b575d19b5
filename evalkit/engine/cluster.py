"""Run a sweep's configs on a Dask cluster (``--cluster local[:N]`` or ``--cluster tcp://HOST:PORT``).

What moves to the workers and what stays on the machine that runs the command:

* the **candidate set** (with its warm ``memo``), the judgments, the pipeline and the stage context travel once
  per worker: the driver pickles the :class:`~evalkit.engine.sweep.Sweep` after a warm-up config and
  broadcasts the bytes with ``Client.scatter(..., broadcast=True)``; each worker thread unpickles its own copy
  once per sweep (so threads never share a mutable memo) and keeps it for every slice it is given;
* **configs** travel in contiguous slices of the sweep's sorted order (the order that shares stage prefixes), a
  few slices per worker so progress is visible and a slow worker does not hold the rest;
* only per-config **metrics** come back (means, and the per-query values of the metrics the caller keeps).

The dataset, the shared index (Chroma, bm25s), the embedding model, the journal, the leaderboard and every
output file stay on the driver: workers never read the data folders or the cache, so a worker machine needs
only the same evalkit/retrievers code and Python packages.

Byte-identical: a config's metrics are a function of the candidate set and the config only (the sweep's memos
are exact), so the leaderboard does not depend on how the configs were split (``tests/system/test_cluster.py``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import pickle
import re
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from retrievers.errors import ConfigError

SPEC_HELP = "local[:N] (N in-machine worker processes) or tcp://HOST:PORT (a running Dask scheduler)"
_LOCAL = re.compile(r"^local(?::(\d+))?$")
_TCP = re.compile(r"^(tcp|tls)://[^\s:/]+:\d+$")


def parse_spec(spec: str) -> tuple[str, Any]:
    """``("local", n_workers)`` or ``("address", "tcp://host:port")``; ConfigError (one line) otherwise."""
    s = str(spec).strip()
    m = _LOCAL.match(s)
    if m:
        n = int(m.group(1)) if m.group(1) else 2
        if n < 1:
            raise ConfigError(f"--cluster {spec!r}: the worker count must be >= 1")
        return "local", n
    if _TCP.match(s):
        return "address", s
    raise ConfigError(f"--cluster {spec!r}: expected {SPEC_HELP}")


def _probe(address: str, timeout: float) -> None:
    """Raise ``OSError`` at once when nothing listens at ``tcp://host:port``: a refused connection is final, but
    ``distributed.Client`` retries it until its timeout (20 s of waiting for a mistyped port)."""
    import socket  # lazy: startup

    host, _, port = address.split("://", 1)[1].rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


@contextmanager
def open_client(spec, processes: bool = True, timeout: float = 20.0) -> Iterator[Any]:
    """A ``distributed.Client`` for ``spec`` (a spec string or an existing Client, passed through).

    ``local[:N]``: a ``LocalCluster`` of N single-threaded workers (worker processes unless ``processes=False``,
    which tests use: in-process workers on threads), no dashboard, closed on exit."""
    if spec is None or not isinstance(spec, str):
        yield spec
        return
    from distributed import Client, LocalCluster  # lazy: startup
    kind, arg = parse_spec(spec)
    if kind == "local":
        cluster = LocalCluster(n_workers=arg, threads_per_worker=1, processes=processes, dashboard_address=None)
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
    else:
        try:
            _probe(arg, timeout)
            client = Client(arg, timeout=timeout)
        except OSError as exc:
            raise ConfigError(f"--cluster {arg}: cannot reach the Dask scheduler ({exc})") from None
        try:
            yield client
        finally:
            client.close()


def n_workers(client) -> int:
    """Worker threads the scheduler knows of (at least 1)."""
    info = client.scheduler_info()
    return max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))


# ---- what travels ---------------------------------------------------------------------------------------------

class Portable:
    """A stage Context made picklable: the embedder (a model and an SQLite cache handle) is replaced by what opens
    the same model again on the worker (its class, model name and sequence length)."""

    def __init__(self, ctx):
        emb = ctx.embedder
        self.ctx = dataclasses.replace(ctx, embedder=None, timings=None)
        self.embedder = (type(emb), emb.model_name, emb.max_seq_length) if emb is not None else None

    def context(self):
        if self.embedder is None:
            return self.ctx
        cls, model, seq = self.embedder
        return dataclasses.replace(self.ctx, embedder=cls(model, max_seq_length=seq, progress=False))


def ship(client, obj) -> tuple[str, Any, int]:
    """Broadcast ``obj`` (cloudpickled: memos may hold closures) to every worker once: (token, future, bytes)."""
    import cloudpickle  # lazy: startup (a dependency of distributed)
    blob = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    token = hashlib.blake2b(blob, digest_size=12).hexdigest()
    return token, client.scatter(blob, broadcast=True, hash=False), len(blob)


def map_shared(client, shared, fn: Callable, items: list, log: Callable[[str], None] | None = None,
               what: str = "items") -> list:
    """``[fn(shared, item) for item in items]`` on the workers, ``shared`` sent once per worker (each worker
    thread unpickles its own copy once); results in the order of ``items``."""
    from distributed import as_completed  # lazy: startup
    token, fut, size = ship(client, shared)
    futs = {client.submit(_apply_shared, token, fut, fn, it, pure=False): k for k, it in enumerate(items)}
    out: list = [None] * len(items)
    t0 = time.perf_counter()
    for n, f in enumerate(as_completed(list(futs)), 1):
        out[futs[f]] = f.result()
        if log:
            log(f"  cluster: {n}/{len(items)} {what} done ({time.perf_counter() - t0:.1f}s; shared data "
                f"{size / 1e6:.1f} MB sent once per worker)")
    client.cancel(fut)
    return out


def _apply_shared(token: str, blob: bytes, fn: Callable, item):
    return fn(_local_copy(token, blob), item)


# ---- worker side -------------------------------------------------------------------------------------------------

_COPIES: dict[tuple[str, int], Any] = {}
_COPIES_LOCK = threading.Lock()


def _local_copy(token: str, blob: bytes):
    """This thread's own Sweep for ``token`` (unpickled once; copies of older sweeps are dropped)."""
    key = (token, threading.get_ident())
    with _COPIES_LOCK:
        sw = _COPIES.get(key)
        if sw is None:
            for k in [k for k in _COPIES if k[0] != token]:
                del _COPIES[k]
    if sw is None:
        sw = pickle.loads(blob)
        with _COPIES_LOCK:
            _COPIES[key] = sw
    return sw


def run_slice(sw, items: list) -> tuple[dict, dict, float]:
    """Evaluate one contiguous slice ``[(global index, SweepConfig), …]`` on this worker's copy of the sweep."""
    c0 = time.process_time()
    plans = sw.plan([c for _, c in items])
    stats: dict = {}
    res = sw.evaluate_plans(plans, list(range(len(items))), stats)
    return {items[j][0]: v for j, v in res.items()}, stats, time.process_time() - c0


# ---- driver side -------------------------------------------------------------------------------------------------

def slices_of(order: list[int], parts: int) -> list[list[int]]:
    """``order`` cut into at most ``parts`` contiguous, near-equal, non-empty slices."""
    parts = max(1, min(parts, len(order)))
    n = len(order)
    bounds = [i * n // parts for i in range(parts + 1)]
    return [order[bounds[i]:bounds[i + 1]] for i in range(parts) if bounds[i + 1] > bounds[i]]


def run_on_cluster(client, sweep, configs: list, order: list[int], per_worker: int = 4,
                   on_slice: Callable[[dict], None] | None = None,
                   log: Callable[[str], None] | None = None) -> tuple[dict, list, float]:
    """Evaluate ``configs`` (indices ``order``, already sorted by the sweep) on ``client``'s workers.

    Returns ({index: (per-query, means)}, each slice's stats, worker CPU seconds); ``on_slice`` gets each finished
    slice's results (the journal appends them), ``log`` a progress line per slice (slices done / total, configs/s).
    """
    from distributed import as_completed  # lazy: startup
    workers = n_workers(client)
    t0 = time.perf_counter()
    # one broadcast per sweep and client: later batches of a Bayesian search reuse what the workers hold (their
    # copies keep their own memos, so results do not depend on when the copy was made)
    held = getattr(sweep, "shipped", None)
    if held is not None and held[0] == client.id and held[2].status == "finished":
        _, token, blob_f, size = held
        fresh = False
    else:
        token, blob_f, size = ship(client, sweep)
        sweep.shipped = (client.id, token, blob_f, size)
        fresh = True
    slices = slices_of(order, workers * per_worker)
    futs = [client.submit(_apply_shared, token, blob_f, run_slice, [(i, configs[i]) for i in sl], pure=False)
            for sl in slices]
    results: dict = {}
    stats: list[dict] = []
    cpu = 0.0
    done = 0
    if log:
        log(f"  cluster: {workers} worker thread(s), candidate set {size / 1e6:.1f} MB "
            + ("sent once per worker" if fresh else "already on the workers")
            + f", {len(order)} configs in {len(slices)} contiguous slices")
    for n, fut in enumerate(as_completed(futs), 1):
        res, st, c = fut.result()
        results.update(res)
        cpu += c
        stats.append(st)
        done += len(res)
        if on_slice:
            on_slice(res)
        if log:
            dt = time.perf_counter() - t0
            log(f"  cluster: slice {n}/{len(slices)} done, {done}/{len(order)} configs, {done / max(dt, 1e-9):.0f} "
                f"configs/s")
    return results, stats, cpu


__all__ = ["SPEC_HELP", "Portable", "parse_spec", "open_client", "n_workers", "ship", "map_shared", "run_on_cluster",
           "slices_of"]
