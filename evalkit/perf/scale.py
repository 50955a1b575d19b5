"""Section 6 — scale: a synthetic dated store of growing size through the real shared index and presets.

Two parts per size, in one process (a temporary cache directory per size):

* **Growth** (:func:`growth`, the issue-46 table): the store of :mod:`evalkit.perf.scale_store` — dated notes,
  queries asked days after their note, strict as-of visibility, a fast deterministic stand-in embedder (generated
  vectors, no model: a cost probe, not a quality set). Per size: vectors into the index, BM25 index (stem_en),
  per query the whole run of ``bm25``, ``dense`` and ``hybrid-rrf`` (candidates under strict as-of + the pipeline,
  no cache), bm25s' own retrieval on the same index (numpy backend, one batch, top-100, no as-of mask) and the
  ratio, the process's peak RSS; then the slope per 10× notes and the growth curve as a PNG.
* **Detail** (:func:`one_size`, sizes up to 100 k): Chroma HNSW build and query, the arms alone, presets in latency
  mode.
"""
from __future__ import annotations

import gc
import resource
import time
import tracemalloc
from pathlib import Path

import numpy as np

from evalkit.engine.runner import run_latency, run_quality
from evalkit.perf.common import (
    Section,
    Table,
    dir_mb,
    loadavg,
    perf_presets,
    progress,
    rss_mb,
    temp_dir,
)
from evalkit.perf.scale_store import DIM, SEED, GeneratedEmbedder, generate
from retrievers.index.chroma import LOCAL_DIR
from retrievers.index.lexical import LexicalIndex
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.pipeline import load_preset

PRESETS = tuple(perf_presets()["scale"])  # tune/perf/presets.toml [scale]
GROWTH_PRESETS = ("bm25", "dense", "hybrid-rrf")
DETAIL_MAX = 100_000  # the detail part (Chroma HNSW build) stops at this size
PICTURE = Path("reports/perf/scale-growth.png")


def peak_rss_mb() -> float:
    """This process's peak resident set so far (``getrusage``), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def growth(n: int, n_queries: int, tmp: Path, seed: int = SEED) -> dict:
    """One size of the growth table (see the module docstring)."""
    out: dict = {"docs": n, "queries": n_queries}
    t0 = time.perf_counter()
    ds, emb, qemb = generate(n, n_queries, seed)
    out["generate_s"] = time.perf_counter() - t0
    idx = SharedIndex(ds, embedder=GeneratedEmbedder(ds, emb, qemb, f"{n}-{seed}"), cache_dir=tmp,
                      settings=IndexSettings(backend="exact"))
    t0, c0 = time.perf_counter(), time.process_time()
    idx.ensure_vectors()
    out["vectors_s"], out["vectors_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["store_s"], out["store_cpu_s"] = (idx.stats.get(k, 0.0) for k in ("store_build_seconds", "store_build_cpu_seconds"))
    t0, c0 = time.perf_counter(), time.process_time()
    lex = idx.lexical("", "stem_en")
    out["bm25_index_s"], out["bm25_index_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    for name in GROWTH_PRESETS:
        pipe = load_preset(name)
        idx.visible.clear()  # each preset pays for its own visible sets
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        run_quality(ds, [pipe], idx, use_cache=False, visibility="strict", keep_lexical=True)  # presets in turn
        out[f"{name}_ms"] = (time.perf_counter() - t0) / n_queries * 1000
        out[f"{name}_cpu_ms"] = (time.process_time() - c0) / n_queries * 1000
    ids = [[lex.vocab[t] for t in lex.query_tokens(q.text) if t in lex.vocab] or [0] for q in ds.queries]
    t0, c0 = time.perf_counter(), time.process_time()
    lex.bm25.retrieve(ids, k=min(100, n), show_progress=False, n_threads=1)
    out["bm25s_ms"] = (time.perf_counter() - t0) / n_queries * 1000
    out["bm25s_cpu_ms"] = (time.process_time() - c0) / n_queries * 1000
    out["bm25_vs_bm25s"] = out["bm25_cpu_ms"] / max(out["bm25s_cpu_ms"], 1e-9)
    out["peak_rss_mb"] = peak_rss_mb()
    out["load"] = loadavg().split()[0]
    idx.close()
    del idx, ds, emb, qemb, lex
    gc.collect()
    return out


def slope(sizes: list[int], ms: list[float]) -> float | None:
    """Growth per 10× notes: ``10 ** b`` for the least-squares line ``log10 ms = a + b·log10 n``."""
    if len(sizes) < 2:
        return None
    b = np.polyfit(np.log10(sizes), np.log10(np.maximum(ms, 1e-6)), 1)[0]
    return float(10 ** b)


def picture(rows: list[dict], path: Path = PICTURE) -> Path:
    """The growth curve (per-query ms of each preset vs notes, log–log) as a PNG."""
    import matplotlib  # lazy: optional-dep
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: optional-dep
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    n = [r["docs"] for r in rows]
    for name in GROWTH_PRESETS:
        ax.plot(n, [r[f"{name}_cpu_ms"] for r in rows], marker="o", label=f"{name} (evalkit)")
    ax.plot(n, [r["bm25s_cpu_ms"] for r in rows], marker="x", linestyle="--", label="bm25s retrieve alone")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notes in the store (strict as-of)")
    ax.set_ylabel("CPU ms per query")
    ax.set_title("evalkit perf — scale (synthetic store, generated vectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _p50_best(fn, n: int, passes: int = 3) -> float:
    """p50 over queries of each query's best-of-``passes`` time, in ms."""
    best = np.full(n, np.inf)
    for _ in range(passes):
        for i in range(n):
            t0 = time.perf_counter()
            fn(i)
            best[i] = min(best[i], time.perf_counter() - t0)
    return float(np.median(best)) * 1000


def _traced_peak_mb(fn) -> float:
    """Peak Python + numpy allocation (tracemalloc) while ``fn`` runs, in MB (an extra, untimed build)."""
    gc.collect()
    tracemalloc.start()
    try:
        keep = fn()  # noqa: F841 - held until the peak is read
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def one_size(n: int, n_queries: int, tmp) -> dict:
    from threadpoolctl import threadpool_limits  # lazy: optional-dep

    out: dict = {"docs": n}
    t0 = time.perf_counter()
    ds, emb, qemb = generate(n, n_queries)
    out["generate_s"] = time.perf_counter() - t0
    fake = GeneratedEmbedder(ds, emb, qemb, f"{n}-{SEED}")
    gc.collect()
    r0 = rss_mb()
    t0 = time.perf_counter()
    idx = SharedIndex(ds, embedder=fake, cache_dir=tmp)
    out["open_s"] = time.perf_counter() - t0
    r1 = rss_mb()
    t0 = time.perf_counter()
    col = idx.collection()
    out["chroma_s"] = time.perf_counter() - t0
    r2 = rss_mb()
    out["chroma_rss_mb"] = r2 - r1
    out["chroma_disk_mb"] = dir_mb(tmp / LOCAL_DIR)
    for tok in ("stem_en", "unicode61"):
        t0 = time.perf_counter()
        idx.lexical("", tok)
        out[f"bm25_{tok}_s"] = time.perf_counter() - t0
    out["bm25_rss_mb"] = rss_mb() - r2
    out["bm25_peak_mb"] = _traced_peak_mb(lambda: LexicalIndex(idx.corpus.texts, "stem_en"))
    out["bm25_disk_mb"] = dir_mb(tmp / "bm25")
    out["index_rss_mb"] = rss_mb() - r0
    texts = [q.text for q in ds.queries]
    with threadpool_limits(limits=1):
        col.query(query_embeddings=qemb[:1], n_results=1, include=["distances"])
        k = min(100, n)
        out["chroma_query_ms"] = _p50_best(lambda i: col.query(query_embeddings=qemb[i:i + 1], n_results=k,
                                                               include=["distances"]), n_queries)
        out["vector_arm_chroma_ms"] = _p50_best(lambda i: idx.vector_search(qemb[i:i + 1], [""], 100,
                                                                            backend="hnsw"), n_queries)
        out["vector_arm_exact_ms"] = _p50_best(lambda i: idx.vector_search(qemb[i:i + 1], [""], 100,
                                                                           backend="exact"), n_queries)
        mat = idx.unit_emb

        def exact(i):
            s = mat @ qemb[i]
            top = np.argpartition(-s, k - 1)[:k] if k < len(s) else np.arange(len(s))
            return top[np.argsort(-s[top])]
        out["exact_pregathered_ms"] = _p50_best(exact, n_queries)
        out["bm25_any_ms"] = _p50_best(lambda i: idx.lexical_search(texts[i], "", "stem_en", 100), n_queries)
        out["bm25_and_ms"] = _p50_best(lambda i: idx.lexical_search(texts[i], "", "unicode61", 24, "all"),
                                       n_queries)
        hits = [idx.vector_search(qemb[i:i + 1], [""], 10)[0][0] for i in range(n_queries)]
        out["vector_r10_of_source_doc"] = float(np.mean([ds.doc_index[next(iter(ds.qrels[q.id]))] in set(h.tolist())
                                                         for q, h in zip(ds.queries, hits)]))
    pipes = [load_preset(p) for p in PRESETS]
    res = run_latency(ds, pipes, idx, repeats=3, warmup=2, threads=1)
    for p in pipes:
        tot = np.asarray(res.stages[p.name]["total"]).reshape(3, len(ds.queries)).min(axis=0)
        out[f"preset:{p.name}"] = float(np.median(tot)) * 1000
    out["load"] = loadavg().split()[0]
    idx.close()  # release this size's HNSW index before the next one
    del idx, col, fake, emb, qemb, ds
    gc.collect()
    return out


def run(section: Section, sizes: list[int], n_queries: int, detail: bool = True, seed: int = SEED,
        picture_path: Path = PICTURE) -> dict:
    grow = section.table(Table(
        f"growth: synthetic dated store, strict as-of, {n_queries} queries, generated vectors (no model: a cost "
        f"probe), exact vector search; per query = the whole run of the preset / queries",
        ["notes", "vectors s", "of which store s", "store CPU s", "bm25 index s", "bm25 index CPU s", "bm25 ms/q", "dense ms/q", "hybrid-rrf ms/q", "bm25s alone ms/q",
         "bm25 / bm25s", "bm25 CPU ms/q", "dense CPU ms/q", "hybrid CPU ms/q", "bm25s CPU ms/q", "peak RSS MB",
         "load"]))
    rows = []
    progress("scale: warm-up (imports, bm25s, presets) on 200 notes, not reported")
    with temp_dir("evalkit-perf-scale-") as tmp:
        growth(200, 3, tmp, seed)
    for n in sorted(sizes):
        progress(f"scale: growth at {n:,} notes")
        t0 = time.perf_counter()
        with temp_dir("evalkit-perf-scale-") as tmp:
            r = growth(n, n_queries, tmp, seed)
        r["seconds"] = time.perf_counter() - t0
        rows.append(r)
        grow.add(n, r["vectors_s"], r["store_s"], r["store_cpu_s"], r["bm25_index_s"], r["bm25_index_cpu_s"], r["bm25_ms"], r["dense_ms"], r["hybrid-rrf_ms"],
                 r["bm25s_ms"], r["bm25_vs_bm25s"], r["bm25_cpu_ms"], r["dense_cpu_ms"], r["hybrid-rrf_cpu_ms"],
                 r["bm25s_cpu_ms"], r["peak_rss_mb"], r["load"])
    ns = [r["docs"] for r in rows]
    slopes = {name: slope(ns, [r[f"{name}_cpu_ms"] for r in rows]) for name in GROWTH_PRESETS}
    if all(v is not None for v in slopes.values()):
        grow.notes.append("CPU time per query grows ×" + ", ×".join(f"{v:.2f} ({k})" for k, v in slopes.items())
                          + " per 10× notes (least squares over the sizes)")
    grow.notes.append("sizes took " + ", ".join(f"{r['docs']:,}: {r['seconds']:.0f}s" for r in rows)
                      + "; CPU ms are load-robust, wall ms are not on a shared machine; bm25 / bm25s = CPU ratio; "
                        "peak RSS is the process's (getrusage), so it only grows")
    out: dict = {"growth": rows, "slope_per_10x": slopes}
    try:
        out["picture"] = str(picture(rows, picture_path)) if rows else None
        if out["picture"]:
            grow.notes.append(f"growth curve: {out['picture']}")
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        out["picture"] = None
    if detail:
        out["sizes"] = _detail(section, [n for n in sizes if n <= DETAIL_MAX], min(n_queries, 30))
    return out


def _detail(section: Section, sizes: list[int], n_queries: int) -> list[dict]:
    build = section.table(Table("build (generated vectors, no embedding) and memory",
                                ["docs", "vectors MB", "chroma build s", "chroma RSS +MB", "chroma disk MB",
                                 "bm25s stem_en s", "bm25s unicode61 s", "bm25s RSS +MB", "bm25s peak MB", "bm25s disk MB",
                                 "index RSS +MB", "load"]))
    lat = section.table(Table(f"per-query p50 latency, ms (best of 3 passes per query, {n_queries} queries, "
                              f"1 thread)", ["docs", "chroma query k=100", "vector arm (chroma)",
                                             "vector arm (exact)", "exact pre-gathered", "bm25s any k=100",
                                             "bm25s AND k=24"] + [f"{p} e2e" for p in PRESETS] + ["load"]))
    out = []
    progress("scale: warm-up (imports, first Chroma client, bm25s, presets) on 200 documents, not reported")
    with temp_dir("evalkit-perf-scale-") as tmp:
        one_size(200, 3, tmp)
    for n in sorted(sizes):
        progress(f"scale: {n:,} documents")
        t0 = time.perf_counter()
        with temp_dir("evalkit-perf-scale-") as tmp:
            r = one_size(n, n_queries, tmp)
        r["seconds"] = time.perf_counter() - t0
        out.append(r)
        build.add(n, n * DIM * 4 / 2**20, r["chroma_s"], r["chroma_rss_mb"], r["chroma_disk_mb"],
                  r["bm25_stem_en_s"], r["bm25_unicode61_s"], r["bm25_rss_mb"], r["bm25_peak_mb"], r["bm25_disk_mb"],
                  r["index_rss_mb"], r["load"])
        lat.add(n, r["chroma_query_ms"], r["vector_arm_chroma_ms"], r["vector_arm_exact_ms"],
                r["exact_pregathered_ms"], r["bm25_any_ms"], r["bm25_and_ms"],
                *[r[f"preset:{p}"] for p in PRESETS], r["load"])
    build.notes.append("RSS deltas are of this process (Chroma's HNSW lives in-process; freed memory is reused, so "
                       "small deltas read 0); bm25s peak = tracemalloc peak of one stem_en index build (Python + "
                       "numpy); bm25s times include tokenising and pickling the index; sizes took " +
                       ", ".join(f"{r['docs']:,}: {r['seconds']:.0f}s" for r in out))
    lat.notes.append("e2e = latency mode end to end without the query embedding (generated query vectors); "
                     "vector arm = SharedIndex.vector_search at depth 100 (Chroma over-fetch + metadata, or the exact "
                     "backend, which gathers the group's rows on every call); exact pre-gathered = one matvec + "
                     "argpartition; source-document recall@10 of the vector arm: " +
                     ", ".join(f"{r['docs']:,}: {r['vector_r10_of_source_doc']:.2f}" for r in out))
    return out
