"""The store of record under exact search (issue 46): the index's vectors and metadata in a real embedded Chroma
collection, bit for bit, reused by the next index over the same content, and its own ``where`` filter on created-at
selecting the very notes exact search's as-of prefix selects."""
from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest

from evalkit.perf.scale_store import GeneratedEmbedder
from retrievers.index import store
from retrievers.index.chroma import ChromaStore, check_folder
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.types import Dataset, Document, Query

DAY = 86400.0
T0 = 1.7e9


def _dataset(n: int = 1200, seed: int = 3):
    """``n`` notes in three groups: every 7th undated, creation times on whole days (so ties), random unit vectors."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        created = None if i % 7 == 0 else T0 + float(rng.integers(0, 60)) * DAY
        docs.append(Document(id=f"note-{i}", text=f"note {i} about topic {i % 13}", group=f"g{i % 3}",
                             timestamp=created, created=created))
    queries = [Query(id=f"q{j}", text=f"question {j}", group=f"g{j % 3}", as_of=T0 + (j * 5 + 0.5) * DAY)
               for j in range(6)]
    ds = Dataset("store-test", docs, queries, {q.id: {"note-1": 1} for q in queries},
                 {"test": [q.id for q in queries]}, {"representation": "truncate", "as_of_visibility": "strict"})
    emb = rng.standard_normal((n, 384)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    qemb = emb[:len(queries)].copy()
    return ds, GeneratedEmbedder(ds, emb, qemb, f"store-test-{n}-{seed}")


def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def _index(ds, embedder, cache):
    idx = SharedIndex(ds, embedder=embedder, cache_dir=cache, settings=IndexSettings(backend="exact"))
    idx.store_min_units = 0  # every index writes its store (the default skips those below store.MIN_UNITS)
    return idx


def test_small_indexes_write_no_store_by_default(cache):
    ds, emb = _dataset(200)
    idx = SharedIndex(ds, embedder=emb, cache_dir=cache)
    assert idx.store_min_units == store.MIN_UNITS > 200 and idx.store_max_units == store.MAX_UNITS
    idx.ensure_vectors()
    assert "store_records" not in idx.stats and idx.manifest()["store"] is None
    assert not (cache / "chroma-collections").exists()


def test_vectors_and_metadata_are_in_the_store_bit_for_bit_and_reused(cache):
    ds, emb = _dataset()
    idx = _index(ds, emb, cache)
    idx.ensure_vectors()
    assert idx.stats["store_built"] and idx.stats["store_records"] == len(ds.documents)
    assert idx.manifest()["store"] == idx.store_name
    col = idx.record_store()
    got = col.get(include=["embeddings", "metadatas"])
    order = np.argsort(np.array(got["ids"], dtype=np.int64))
    vectors = np.asarray(got["embeddings"], dtype=np.float32)[order]
    assert np.array_equal(vectors, idx.unit_emb)  # ip space: what was written comes back bit for bit
    metas = [got["metadatas"][i] for i in order]
    for d, m in zip(ds.documents, metas):
        assert m == {"doc": d.id, "g": d.group, "t": store.UNDATED if d.created is None else d.created}
    assert (col.metadata or {})["sha256"] == store.digest(idx.unit_emb)
    idx.close()
    again = _index(ds, emb, cache)  # a warm run: the store is opened and checked, not rebuilt
    again.ensure_vectors()
    assert "store_built" not in again.stats and again.stats["store_records"] == len(ds.documents)
    assert check_folder(cache / "chroma-collections" / again.store_name) is None  # opening rewrote no sealed file
    again.close()


def test_store_where_filter_selects_the_notes_of_exacts_prefix(cache):
    ds, emb = _dataset()
    idx = _index(ds, emb, cache)
    idx.ensure_vectors()
    col = idx.record_store()
    vis = idx.visible
    created = idx.corpus.created
    checked = 0
    for g in idx.group_names:
        docs = idx.group_docs[g]
        times = np.unique(created[docs][np.isfinite(created[docs])])
        # before every note, exactly at a (tied) creation time, between two, after every note, and no as_of
        for as_of in [T0 - DAY, times[0], times[len(times) // 3], times[len(times) // 2] + 0.5 * DAY, times[-1],
                      times[-1] + DAY, None]:
            key = vis.key(g, as_of)
            n_prefix = vis.prefix(g, key)
            want = {ds.documents[d].id for d in vis.order(g)[:n_prefix].tolist()}
            got = col.get(where=store.visible_where(g, as_of), include=["metadatas"])
            assert {m["doc"] for m in got["metadatas"]} == want
            # record id = unit position: the same units exact search reads as its prefix slice
            assert {int(r) for r in got["ids"]} == {int(u) for u in np.flatnonzero(np.isin(idx.unit_doc,
                                                                                        vis.order(g)[:n_prefix]))}
            checked += 1
    assert checked == 21
    # and the exact search over that prefix ranks only those notes
    hits = idx.vector_search(emb.qemb, [q.group for q in ds.queries], 50, as_of=[q.as_of for q in ds.queries])
    for q, (docs, _) in zip(ds.queries, hits):
        allowed = {m["doc"] for m in col.get(where=store.visible_where(q.group, q.as_of),
                                             include=["metadatas"])["metadatas"]}
        assert docs.size and {ds.documents[d].id for d in docs.tolist()} <= allowed
    idx.close()


def test_a_store_of_other_vectors_is_refused_and_rebuilt(cache):
    ds, emb = _dataset(300)
    idx = _index(ds, emb, cache)
    idx.ensure_vectors()
    col = idx.record_store()
    args = (idx.unit_emb, idx.corpus.ids, idx.corpus.groups, idx.corpus.created, idx.unit_doc)
    assert store.check(col, *args, _call) is None
    other = args[0].copy()
    other[5, 0] = np.nextafter(other[5, 0], np.float32(2))  # one bit of one vector
    why = store.check(col, other, *args[1:], _call)
    assert why and "sha256" in why
    # a store whose digest matches but whose records do not (written over): the vectors read back catch it
    col.update(ids=["0"], embeddings=other[[1]])
    assert store.check(col, *args, _call) is None  # a reopen trusts the digest and the sealed files …
    assert "stored vector differs" in store.check(col, *args, _call, read_vectors=True)  # … the build reads back
    idx.close()


@pytest.mark.parametrize("n,max_batch", [(5_471, 5_461), (12_000, 5_461), (1, 5_461), (999, 5_461), (10_923, 5_461)])
def test_batches_are_equal_and_each_reaches_the_sync_threshold(n, max_batch):
    b = store.batches(n, max_batch)
    sizes = [j - i for i, j in b]
    assert b[0][0] == 0 and b[-1][1] == n and all(x[1] == y[0] for x, y in zip(b, b[1:]))
    assert max(sizes) <= max_batch and max(sizes) - min(sizes) <= 1
    assert min(sizes) >= store.configuration(n)["hnsw"]["sync_threshold"]


def test_equal_batches_leave_nothing_in_chromas_log(cache):
    """5,471 records: in batches of 5,461 + 10 the 10 stay in Chroma's SQLite log (below the sync threshold: measured,
    11 log rows, the HNSW segment's max_seq_id 5,461); equal batches persist every record into the sealed HNSW
    files, and reopening rewrites no sealed file."""
    n = 5_471
    rng = np.random.default_rng(1)
    v = rng.standard_normal((n, 384)).astype(np.float32)
    ids, groups, created = [f"d{i}" for i in range(n)], [""] * n, np.full(n, np.nan)
    unit_doc = np.arange(n)
    cs = ChromaStore("ek-rec-test-tail", cache, None, store.configuration(n))
    col, built = cs.open(lambda c, mb: store.fill(c, v, ids, groups, created, unit_doc, mb, _call),
                         lambda c: store.check(c, v, ids, groups, created, unit_doc, _call))
    assert built and col.count() == n
    cs.close()
    con = sqlite3.connect(f"file:{cs.folder / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        # Chroma's purge keeps the last record's row; the 5,461 + 10 split keeps 11
        assert con.execute("SELECT COUNT(*) FROM embeddings_queue").fetchone()[0] <= 1
        assert sorted(r[0] for r in con.execute("SELECT seq_id FROM max_seq_id")) == [n, n]
    finally:
        con.close()
    for _ in range(2):
        col, built = cs.open(None, lambda c: store.check(c, v, ids, groups, created, unit_doc, _call))
        assert not built
        cs.close()
        assert check_folder(cs.folder) is None


@pytest.mark.slow  # a child Python process imports chromadb (> 5 s)
def test_a_store_above_max_units_is_written_by_a_child_process_with_the_same_records(cache, tmp_path):
    ds, emb = _dataset(600)
    here = _index(ds, emb, tmp_path / "here")
    here.ensure_vectors()
    apart = _index(ds, emb, cache)
    apart.store_max_units = 599  # above the largest store written in this process
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    apart.ensure_vectors()
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > before  # a child did the work
    assert apart.stats["store_writer_cpu"] in os.sched_getaffinity(0)  # its writer on one CPU, as this process's
    assert here.stats["store_writer_cpu"] in os.sched_getaffinity(0)
    assert apart.stats["store_built"] and apart.stats["store_records"] == 600
    # the run's process never opens a store above max units (Chroma would load its copy of the vectors here)
    assert apart.stats["store_check"] == "sealed folder" and here.stats["store_check"] == "opened and probed"
    assert not list((cache / "chroma-collections").glob(".*"))  # its input files and temporary folders are gone
    a = apart.record_store().get(include=["embeddings", "metadatas"])
    b = here.record_store().get(include=["embeddings", "metadatas"])
    assert a["ids"] == b["ids"] and a["metadatas"] == b["metadatas"]
    assert np.array_equal(np.asarray(a["embeddings"]), np.asarray(b["embeddings"]))
    again = _index(ds, emb, cache)
    again.store_max_units = 599
    again.ensure_vectors()  # sealed and sound: neither a child nor this process writes it again
    assert "store_built" not in again.stats
    for idx in (here, apart, again):
        idx.close()


def _masks() -> dict[int, set[int]]:
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            out[int(t)] = os.sched_getaffinity(int(t))
        except OSError:  # the thread ended meanwhile
            pass
    return out


def test_the_writer_runs_every_thread_on_one_cpu_and_gives_each_its_own_back(cache):
    """Chroma's embedded writer hands each statement between its threads: on one CPU half the time (measured in
    store.one_cpu's docstring). While the store fills, every thread of the process — Chroma's included — is on the
    CPU fill() returns; afterwards each has its own CPU set back."""
    n = 2_500
    v = np.random.default_rng(2).standard_normal((n, 8)).astype(np.float32)
    args = (v, [f"d{i}" for i in range(n)], ["g"] * n, np.full(n, np.nan), np.arange(n))
    before = _masks()
    seen, cpus = [], []
    cs = ChromaStore("ek-rec-test-one-cpu", cache, None, store.configuration(n))
    col, built = cs.open(lambda c, mb: cpus.append(store.fill(c, *args, 1_000, _call, lambda k: seen.append(_masks()))),
                         lambda c: store.check(c, *args, _call))
    assert built and col.count() == n and len(seen) == 3  # three batches, each seen from inside the writer
    cpu = cpus[0]
    assert cpu in os.sched_getaffinity(0)
    assert all(m == {cpu} for s in seen for m in s.values())
    assert len(seen[-1]) > len(before)  # Chroma's threads were among them
    after = _masks()
    assert all(after[t] == before[t] for t in before if t in after)
    assert all(after[t] == os.sched_getaffinity(0) for t in after if t not in before)
    cs.close()
