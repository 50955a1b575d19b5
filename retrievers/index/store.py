"""The store of record under exact search: an index's vectors and metadata in an embedded Chroma collection.

Under the default ``exact`` backend (:mod:`retrievers.index.exact`) top-k is computed in numpy, but Chroma stays the
store of record: every vector unit is one record (id = the unit's position, its float32 vector, and the metadata
``doc`` = the document's id, ``g`` = its group, ``t`` = its creation time in seconds, :data:`UNDATED` for an undated
note), written once per index content (the collection is named by the index's content key and persisted under the
cache like the HNSW backend's, so a warm run reopens it) by :meth:`retrievers.index.shared.SharedIndex.record_store`.

The exact search reads its matrix from the same vectors, verifiably: the build reads probe records back from the
store bit for bit before it marks the collection complete with the sha256 of the float32 matrix it was filled with
(:func:`digest`); the folder is then sealed (every file's sha256, :mod:`retrievers.index.chroma`), and every later
open checks the seal, the record count, probe records' metadata and that digest against the matrix the search uses
(:func:`check`). Indexes below :data:`MIN_UNITS` vector units write no store (its fixed cost, measured in
docs/performance.md, would be most of a small run's); those above :data:`MAX_UNITS` are written by a child process
(:func:`write_apart`: Chroma's memory while it writes would break exact search's documented size bound). Either way
Chroma's writer runs on one CPU while it fills the store (:func:`one_cpu`: half the time, measured). The store's
own ``where`` filter on ``g`` and ``t`` (:func:`visible_where`) selects the notes an as-of cut leaves visible — the
same notes as exact's prefix (tests/unit/retrievers/index/test_store.py checks it on a sample).

Why this configuration (measured with chromadb 1.5.9, 100 k random 384-d unit vectors + 3 metadata keys, embedded
``PersistentClient``, batches of ``get_max_batch_size()`` = 5,461, this 2-core machine at load ~9 from other work;
the table is in docs/performance.md):

* HNSW is never searched here, so its graph is the cheapest Chroma accepts: ``ef_construction`` 1, ``max_neighbors``
  2. The default graph (200 / 32) cost 27.8 CPU s for 20 k vectors (83 s wall), the cheap one 2.5 CPU s.
* ``space = "ip"``: under ``cosine`` Chroma normalises each vector before it stores it, so the vectors read back
  differ from the ones written in the last bits; under ``ip`` they come back bit-identical.
* ``sync_threshold`` ≤ every batch: each ``add`` then persists the HNSW files and lets Chroma purge its SQLite log
  (12.5 CPU s for 100 k). A threshold of the whole store (one persist at the end) keeps the log, which every later
  ``add`` re-reads: 21.8 CPU s and twice the disk. The last batch must reach it too, else its records stay in the log
  only (5,461 + 10 records: 11 log rows, the HNSW segment at sequence 5,461; equal batches: 1 row, both segments at
  5,471) — so :func:`batches` splits the store into equal batches, and the sealed HNSW files hold every record.
* ``num_threads`` 1 or 2 made no difference (12.8 vs 12.5 CPU s); the metadata is about half the cost (6.3 CPU s
  without it), which is why it is three keys.
* The writer's threads on one CPU (:func:`one_cpu`; measured later on a 2-core AVX2 VM, alone): Chroma passes every
  SQLite statement between a tokio worker and sqlx's SQLite thread, and ``perf`` put a third of the writer's CPU in
  the scheduler's cross-core wake-ups; pinned, 100 k records took 22.7 s wall / 21.9 CPU s instead of 48.5 / 40.5.
  Only for this cheap graph: a searchable one (200 / 32) is compute-bound and uses both cores (20 k vectors without
  metadata: 25.5 s wall, 48.1 pinned), so the HNSW backend's build is left alone.

Example::

    >>> batches(12_000, 5_461)
    [(0, 4000), (4000, 8000), (8000, 12000)]
    >>> visible_where("conv-1", 1.7e9)
    {'$and': [{'g': 'conv-1'}, {'t': {'$lte': 1700000000.0}}]}
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np

from retrievers.index.chroma import LOCAL_DIR, ChromaStore
from retrievers.types import DataError

#: the smallest index (vector units) whose vectors go into the store: below it the store's fixed cost — importing
#: chromadb, ~2 CPU s here — would be most of a small run's (docs/performance.md: the memory workspace, 286 units,
#: 4.3 → 6.6 CPU s); a store written there holds 286 records nobody reads
MIN_UNITS = 10_000
#: the largest index written to the store in this process: Chroma holds ~1.9 KB a record in memory while it writes
#: (1 M records of 384-d: 162 CPU s, peak RSS 4,067 MB, an estimated ~2.1 GB of it the caller's vectors and
#: lists), which above this would leave exact search's documented bound (one group up to ~2 M units in a 4 GB
#: peak); a larger store is written by a child process (:func:`write_apart`), its memory apart from the run's
MAX_UNITS = 250_000
VERSION = 1  # bump when the records' layout changes (it names the collection)
UNDATED = -sys.float_info.max  # ``t`` of an undated note: created before any as_of, always visible
SYNC_THRESHOLD = 1000  # records per HNSW persist (at most every batch, see the module docstring)
#: the collection's configuration: HNSW is never searched under exact search, so the cheapest graph
HNSW = {"space": "ip", "ef_construction": 1, "max_neighbors": 2, "ef_search": 1}


def configuration(n: int) -> dict:
    """The Chroma collection configuration of a store of ``n`` records."""
    return {"hnsw": {**HNSW, "sync_threshold": max(1, min(SYNC_THRESHOLD, n))}}


def batches(n: int, max_batch: int) -> list[tuple[int, int]]:
    """``n`` records in the fewest equal batches of at most ``max_batch`` (each at least :data:`SYNC_THRESHOLD`
    when ``max_batch`` ≥ twice it, so every ``add`` persists)."""
    k = max(1, math.ceil(n / max(1, max_batch)))
    edges = [n * i // k for i in range(k + 1)]
    return list(zip(edges[:-1], edges[1:]))


def digest(vectors: np.ndarray) -> str:
    """sha256 of the float32 matrix (its shape and bytes, row-major): what a store was filled with."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    h = hashlib.sha256(repr(v.shape).encode())
    h.update(memoryview(v).cast("B"))
    return h.hexdigest()


def metadata(doc_ids, groups, created, unit_doc: np.ndarray, i: int, j: int) -> list[dict]:
    """The metadata of records ``i``..``j`` (units): ``doc`` id, group ``g``, creation time ``t``."""
    docs = unit_doc[i:j].tolist()
    return [{"doc": doc_ids[d], "g": groups[d], "t": UNDATED if math.isnan(created[d]) else float(created[d])}
            for d in docs]


@contextlib.contextmanager
def one_cpu():
    """Run every thread of this process — and every thread started meanwhile — on one of the CPUs it may use (picked
    by the process id, so concurrent writers spread over them) while inside; then each thread gets its own CPU set
    back (threads started meanwhile get the process's). Yields that CPU (None where the OS has no affinity call).

    Why: Chroma's embedded writer hands every SQLite statement from a tokio worker thread to sqlx's SQLite thread
    and back; on two cores each hand-off is a cross-core wake-up, and in a VM those cost more than the statements
    (``perf``: a third of the writer's CPU in the scheduler's futex wake-ups). On one core the same 100 k records
    (384-d, three metadata keys) went in in 22.7 s wall / 21.9 CPU s instead of 48.5 / 40.5 (2-core AVX2 VM;
    docs/performance.md). Work of other threads of the process meanwhile shares that CPU.

    Example (a plain block, not a doctest: it would move the doctest process's threads)::

        with one_cpu() as cpu:
            col.add(ids=ids, embeddings=vectors)  # Chroma's threads all on ``cpu``
    """
    tasks = Path("/proc/self/task")
    if not hasattr(os, "sched_setaffinity") or not tasks.is_dir():
        yield None
        return
    allowed = os.sched_getaffinity(0)
    cpu = sorted(allowed)[os.getpid() % len(allowed)]

    def threads():
        return [int(t) for t in os.listdir(tasks)]

    before = {}
    for t in threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            before[t] = os.sched_getaffinity(t)
            os.sched_setaffinity(t, {cpu})
    try:
        yield cpu
    finally:
        for t in threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(t, before.get(t, allowed))


def fill(col, vectors: np.ndarray, doc_ids, groups, created, unit_doc: np.ndarray, max_batch: int, call,
         advance=None) -> int | None:
    """Write every unit of ``vectors`` (record id = its position) with its metadata into ``col``, in
    :func:`batches`, then mark the collection complete with the matrix's :func:`digest` (``call``: the wrapper every
    Chroma call goes through; ``advance(k)``: progress). Chroma's threads run on one CPU meanwhile (:func:`one_cpu`),
    which it returns."""
    created = np.asarray(created, dtype=np.float64)
    with one_cpu() as cpu:
        for i, j in batches(len(vectors), max_batch):
            call(col.add, ids=[str(u) for u in range(i, j)], embeddings=vectors[i:j],
                 metadatas=metadata(doc_ids, groups, created, unit_doc, i, j))
            if advance:
                advance(j - i)
        why = check(col, vectors, doc_ids, groups, created, unit_doc, call, read_vectors=True)
        if why:
            raise DataError(f"the Chroma store just written does not read back: {why}")
        call(col.modify, metadata={"complete": 1, "records": int(len(vectors)), "sha256": digest(vectors),
                                   "version": VERSION})
    return cpu


def check(col, vectors: np.ndarray, doc_ids, groups, created, unit_doc: np.ndarray, call, probes: int = 8,
          vectors_digest: str | None = None, read_vectors: bool = False) -> str | None:
    """Why ``col`` is not the store of exactly these records (``None`` = it is): record count, the "complete" flag,
    the digest of the matrix it was filled with against ``vectors``'s, and ``probes`` records spread over it read
    back with their metadata — and, with ``read_vectors`` (what :func:`fill` does before it marks the store
    complete), their vectors bit for bit. Reading vectors loads Chroma's whole HNSW segment into memory (~1.6 KB a
    record), so a reopen relies on the digest and on the sealed files instead (:func:`retrievers.index.chroma.
    check_folder`: every file but ``chroma.sqlite3`` matches its sha256)."""
    n = len(vectors)
    count = call(col.count)
    if count != n:
        return f"{count} records, expected {n}"
    meta = col.metadata or {}
    if not read_vectors:
        if meta.get("complete") != 1:
            return "its build never finished"
        if meta.get("sha256") != (vectors_digest or digest(vectors)):
            return "it holds other vectors than the index's (sha256 differs)"
    at = np.unique(np.linspace(0, n - 1, num=min(n, probes)).astype(np.int64))
    got = call(col.get, ids=[str(u) for u in at], include=["embeddings", "metadatas"] if read_vectors
               else ["metadatas"])
    want = dict(zip((str(u) for u in at), metadata(doc_ids, groups, np.asarray(created, dtype=np.float64),
                                                   unit_doc[at], 0, len(at))))
    if sorted(got["ids"]) != sorted(want):
        return f"probe records missing ({len(got['ids'])} of {len(want)})"
    for k, (rid, m) in enumerate(zip(got["ids"], got["metadatas"])):
        if m != want[rid]:
            return f"record {rid}: wrong metadata {m}"
        if read_vectors and not np.array_equal(np.asarray(got["embeddings"][k], dtype=np.float32), vectors[int(rid)]):
            return f"record {rid}: stored vector differs from the index's"
    return None


def visible_where(group: str, as_of: float | None = None) -> dict:
    """The store's ``where`` filter for the notes of ``group`` visible at ``as_of`` under strict as-of visibility
    (created at or before it, undated ones always; None = the whole group) — in a group without scoped notes or
    revised versions, the notes of exact search's prefix (:meth:`retrievers.index.visibility.VisibleSets.prefix`)."""
    if as_of is None:
        return {"g": group}
    return {"$and": [{"g": group}, {"t": {"$lte": float(as_of)}}]}


def write_apart(name: str, cache_dir: Path, vectors: np.ndarray, doc_ids, groups, created, unit_doc: np.ndarray
                ) -> int | None:
    """Build the store ``name`` under ``cache_dir`` in a child process (``python -m retrievers.index.store``): the
    same :class:`ChromaStore` build (lock, temporary folder, seal) and the same :func:`fill`, reading the vectors
    from an ``.npy`` file it maps — Chroma's copy of them lives in the child's memory, not the caller's. Returns the
    CPU its writer ran on (:func:`one_cpu`). One :class:`DataError` line when it fails."""
    root = Path(cache_dir) / LOCAL_DIR
    job = root / f".{name}.input-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    job.mkdir(parents=True)
    try:
        np.save(job / "vectors.npy", np.ascontiguousarray(vectors, dtype=np.float32))
        np.savez(job / "columns.npz", created=np.asarray(created, dtype=np.float64), unit_doc=unit_doc)
        (job / "job.json").write_text(json.dumps({"name": name, "cache_dir": str(cache_dir), "doc_ids": list(doc_ids),
                                                  "groups": list(groups)}))
        proc = subprocess.run([sys.executable, "-m", "retrievers.index.store", str(job)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise DataError(f"writing the Chroma store {name} in a child process failed: {last}")
        return json.loads(proc.stdout.strip().splitlines()[-1])["cpu"]
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _build_job(job: Path) -> None:
    """The child of :func:`write_apart`."""
    spec = json.loads((job / "job.json").read_text())
    vectors = np.load(job / "vectors.npy", mmap_mode="r")
    cols = np.load(job / "columns.npz")
    args = (vectors, spec["doc_ids"], spec["groups"], cols["created"], cols["unit_doc"])
    cs = ChromaStore(spec["name"], Path(spec["cache_dir"]), None, configuration(len(vectors)))
    cpu = []
    cs.open(lambda col, mb: cpu.append(fill(col, *args, mb, cs.call)), lambda col: check(col, *args, cs.call))
    cs.close()
    print(json.dumps({"cpu": cpu[0] if cpu else None}))  # None: another process had built it meanwhile


__all__ = ["HNSW", "MAX_UNITS", "MIN_UNITS", "UNDATED", "VERSION", "batches", "check", "configuration", "digest",
           "fill", "metadata",
           "one_cpu", "visible_where", "write_apart"]


if __name__ == "__main__":
    _build_job(Path(sys.argv[1]))
