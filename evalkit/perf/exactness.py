"""Section 5 — HNSW recall of the Chroma collection against exact numpy search, and what each setting costs.

For every available dataset whose vectors are cached, a sample of its test queries is searched

* exactly: ``qemb @ unit_emb[group units].T`` and the top ``k`` units (the ground truth);
* in the shared Chroma collection evalkit uses (``SharedIndex.collection()``, default HNSW settings:
  ef_search 200, ef_construction 200, max_neighbors 32), one query per call with the group ``where`` filter,
  ``n_results = k`` — for k = 10 and k = 100 separately (HNSW explores ``max(ef_search, k)`` candidates, so a
  k = 10 query is not the head of a k = 100 query);
* in a temporary copy of the collection (same vectors, same construction settings) re-opened with lower and,
  when the default misses recall@100 >= 0.99, higher ``ef_search`` values (Chroma loads ``ef_search`` when it
  opens a collection, so each value is written with ``modify`` and the client's system cache is cleared).

``recall@k = |HNSW top k ∩ exact top k| / |exact top k|`` (k capped at the group's size). The latency columns
are the p50 of one-query calls (best of 2 passes). ``arm R@100`` is the document-level recall of evalkit's
vector arm (``SharedIndex.vector_search``, MaxP with its over-fetch) against the exact backend at depth 100.
"""
from __future__ import annotations

import time

import numpy as np

from evalkit.data.registry import DEFAULT, load_dataset
from evalkit.perf.common import (
    Section,
    Table,
    loadavg,
    progress,
    readiness,
    temp_dir,
    test_split,
)
from retrievers.embed.model import Embedder
from retrievers.index.chroma import chroma_settings
from retrievers.index.shared import HNSWSettings, SharedIndex

DEFAULT_EF = 200
TARGET_RECALL_100 = 0.99


def _exact(idx, qemb, groups, k):
    """Exact top-``k`` units per query, one query at a time on one BLAS thread over a pre-gathered group matrix
    (the cost of exact search itself; SharedIndex.vector_search also gathers the group's rows on every call)."""
    from threadpoolctl import threadpool_limits  # lazy: optional-dep
    mats = {g: idx.unit_emb[idx.group_units[g]] for g in set(groups)}
    out, secs = [], []
    with threadpool_limits(limits=1):
        for i, g in enumerate(groups):
            out_i, s = _exact_one(idx.group_units[g], mats[g], qemb[i], k)
            out.append(out_i)
            secs.append(s)
    return out, secs


def _exact_one(units, mat, q, k):
    t0 = time.perf_counter()
    sims = mat @ q
    kk = min(k, len(units))
    top = np.argpartition(-sims, kk - 1)[:kk] if kk < len(units) else np.arange(len(units))
    top = top[np.argsort(-sims[top], kind="stable")]
    return set(units[top].tolist()), time.perf_counter() - t0


def _hnsw(col, idx, qemb, groups, k, passes: int = 2):
    """Per query: the unit ids Chroma returns, and the best-of-``passes`` seconds of the one-query call."""
    multi = len(idx.group_names) > 1
    got, best = [None] * len(groups), [np.inf] * len(groups)
    for _ in range(passes):
        for i, g in enumerate(groups):
            kk = min(k, len(idx.group_units[g]))
            where = {"g": idx.group_code[g]} if multi else None
            t0 = time.perf_counter()
            r = col.query(query_embeddings=qemb[i:i + 1], n_results=kk, where=where, include=["distances"])
            best[i] = min(best[i], time.perf_counter() - t0)
            got[i] = {int(x) for x in r["ids"][0]}
    return got, best


def _recall(hnsw: list[set], exact: list[set]) -> float:
    return float(np.mean([len(h & e) / max(1, len(e)) for h, e in zip(hnsw, exact)]))


def _measure(col, idx, qemb, groups, exact) -> dict:
    col.query(query_embeddings=qemb[:1], n_results=1, include=["distances"])  # load the index before timing
    out = {}
    for k in (10, 100):
        got, secs = _hnsw(col, idx, qemb, groups, k)
        out[f"r{k}"] = _recall(got, exact[k])
        out[f"ms{k}"] = float(np.median(secs)) * 1000
    return out


def _temp_collection(client, idx, hnsw):
    col = client.create_collection("perf-ef", configuration=hnsw.as_config(), embedding_function=None)
    step = max(1, min(client.get_max_batch_size(), 5000))
    n = len(idx.unit_doc)
    for i in range(0, n, step):
        j = min(n, i + step)
        col.add(ids=[str(u) for u in range(i, j)], embeddings=idx.unit_emb[i:j],
                metadatas=[{"g": int(idx.unit_group[u]), "d": int(idx.unit_doc[u])} for u in range(i, j)])
    return col


def _reopen_with_ef(path, ef: int):
    import chromadb  # lazy: startup

    client = chromadb.PersistentClient(path=str(path), settings=chroma_settings())
    col = client.get_collection("perf-ef")
    col.modify(configuration={"hnsw": {"ef_search": ef}})
    client.clear_system_cache()  # Chroma reads ef_search when it loads the collection
    client = chromadb.PersistentClient(path=str(path), settings=chroma_settings())
    return client.get_collection("perf-ef")


def run(section: Section, datasets: list[str], n_queries: int, low_ef: list[int], high_ef: list[int],
        sweep_datasets: list[str] | None = None) -> dict:
    import chromadb  # lazy: startup

    embedder = Embedder(progress=False)
    t = section.table(Table(f"HNSW recall vs exact numpy search ({n_queries} test queries per dataset, one query per "
                            f"call, group filter; latency = p50 ms per query)",
                            ["dataset", "units", "collection", "ef_search", "R@10", "R@100", "ms k=10",
                             "ms k=100", "exact ms", "arm R@100", "load"]))
    out: dict = {}
    ready = []
    for name in datasets:
        r = readiness(name, embedder)
        if r.ready:
            ready.append(name)
        else:
            section.note(f"{name}: skipped, {r.why}")
    if not ready:  # e.g. a fresh cache: the registry's small default dataset is embedded on the spot
        ready = [DEFAULT]
        section.note(f"no dataset had cached vectors: using {DEFAULT} (embedded now)")
    for name in ready:
        progress(f"exactness: {name}")
        ds = test_split(load_dataset(name))
        pick = np.linspace(0, len(ds.queries) - 1, num=min(n_queries, len(ds.queries))).astype(int)
        qs = [ds.queries[i] for i in pick]
        idx = SharedIndex(ds, embedder=embedder)
        qemb = embedder.encode([q.text for q in qs])
        groups = [q.group or "" for q in qs]
        keep = [i for i, g in enumerate(groups) if g in idx.group_code]
        qemb, groups = qemb[keep], [groups[i] for i in keep]
        exact, esecs = {}, []
        for k in (10, 100):
            exact[k], s = _exact(idx, qemb, groups, k)
            esecs += s
        exact_ms = float(np.median(esecs)) * 1000
        arm_ch = idx.vector_search(qemb, groups, 100)
        arm_ex = idx.vector_search(qemb, groups, 100, backend="exact")
        arm_r = float(np.mean([len(set(a[0].tolist()) & set(b[0].tolist())) / max(1, len(b[0]))
                               for a, b in zip(arm_ch, arm_ex)]))
        m = _measure(idx.collection(), idx, qemb, groups, exact)
        h = idx.settings.hnsw
        t.add(name, len(idx.unit_doc), "shared (evalkit)", h.ef_search, m["r10"], m["r100"], m["ms10"], m["ms100"],
              exact_ms, arm_r, loadavg().split()[0])
        res = {"shared": m, "arm_recall_100": arm_r, "exact_ms": exact_ms}
        if sweep_datasets is None or name in sweep_datasets:
            efs = sorted(set(low_ef + [h.ef_search] + (high_ef if m["r100"] < TARGET_RECALL_100 else [])))
            with temp_dir("evalkit-perf-hnsw-") as tmp:
                client = chromadb.PersistentClient(path=str(tmp), settings=chroma_settings())
                t0 = time.perf_counter()
                _temp_collection(client, idx, HNSWSettings(ef_search=h.ef_search, ef_construction=h.ef_construction,
                                                           max_neighbors=h.max_neighbors))
                build_s = time.perf_counter() - t0
                for ef in efs:
                    col = _reopen_with_ef(tmp, ef)
                    mm = _measure(col, idx, qemb, groups, exact)  # idx: group layout only
                    t.add(name, None, "temp copy", ef, mm["r10"], mm["r100"], mm["ms10"], mm["ms100"], exact_ms, None,
                          loadavg().split()[0])
                    res[f"ef{ef}"] = mm
                chromadb.PersistentClient(path=str(tmp), settings=chroma_settings()).clear_system_cache()
            res["temp_build_s"] = build_s
        idx.close()  # the system cache was cleared: never reuse that client
        out[name] = res
        if res["shared"]["r100"] < TARGET_RECALL_100:
            better = [(int(k[2:]), v) for k, v in res.items() if k.startswith("ef") and v["r100"] >= TARGET_RECALL_100]
            if better:
                ef, v = min(better)
                section.note(f"{name}: default recall@100 {res['shared']['r100']:.3f} < {TARGET_RECALL_100}; "
                             f"ef_search {ef} reaches {v['r100']:.3f} at {v['ms100']:.2f} ms vs "
                             f"{res['shared']['ms100']:.2f} ms per k=100 query")
            else:
                section.note(f"{name}: default recall@100 {res['shared']['r100']:.3f} < {TARGET_RECALL_100} and no "
                             f"tried ef_search reaches it: use the exact backend (--backend exact, "
                             f"{exact_ms:.2f} ms per query here)")
    t.notes.append("temp copy = the same vectors in a fresh collection with the same construction settings "
                   "(ef_construction, max_neighbors), reopened with each ef_search; HNSW explores max(ef_search, k) "
                   "candidates, so ef_search values below k do not change a k-query")
    return out

