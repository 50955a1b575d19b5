"""Section 6 — scale: generated corpora of growing size through the real shared index and presets.

A corpus of ``n`` documents is generated with a fixed seed: text = Zipf–Mandelbrot draws (``p(r) ∝ 1/(r + 2.7)``)
from a 30,000-word pseudo-word vocabulary, 20–120 words per document (realistic BM25 posting lists); vectors =
random unit vectors (384-d). Queries are 5 words of a random document, their vectors that document's vector plus
noise (cosine ≈ 0.8), so both arms have a real nearest neighbour. The generated vectors reach the index through
a stand-in embedder (text → row lookup, no model), everything else is the production path: ``SharedIndex`` in a
temporary cache directory (Chroma collection with the default HNSW settings, bm25s per tokenizer, pickled), the
arms, and ``run_latency`` for full presets.

Per size: build time and memory (RSS delta of the process, on-disk size) of Chroma and of bm25s; per-query p50
latency (best of 3 passes per query, one thread) of the vector arm through Chroma (raw ``collection.query`` and
evalkit's ``vector_search``), exact numpy (evalkit's exact backend, and a pre-gathered matrix), the lexical arm
(bm25s ``any``, and OpenClaw's ``unicode61`` AND query), and full presets end to end (latency mode, no embedding).
"""
from __future__ import annotations

import gc
import time
import tracemalloc

import numpy as np

from evalkit.engine.runner import run_latency
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
from retrievers.index.chroma import LOCAL_DIR
from retrievers.index.lexical import LexicalIndex
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import load_preset
from retrievers.types import Dataset, Document, Query

DIM = 384
VOCAB = 30000
SEED = 20260226
PRESETS = tuple(perf_presets()["scale"])  # tune/perf/presets.toml [scale]
_SYL = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["an", "el", "or", "is", "um"]


def vocabulary(rng) -> list[str]:
    words: set[str] = set()
    out: list[str] = []
    while len(out) < VOCAB:
        w = "".join(_SYL[i] for i in rng.integers(0, len(_SYL), rng.integers(2, 5)))
        if w not in words:
            words.add(w)
            out.append(w)
    return out


def generate(n: int, n_queries: int, seed: int = SEED):
    """(Dataset, document vectors, query vectors) — deterministic for (n, n_queries, seed)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(rng), dtype=object)
    p = 1.0 / (np.arange(VOCAB) + 2.7)
    p /= p.sum()
    lengths = rng.integers(20, 121, n)
    draws = rng.choice(VOCAB, size=int(lengths.sum()), p=p)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    now = 1_780_000_000.0
    docs = []
    for i in range(n):
        text = " ".join(vocab[draws[bounds[i]:bounds[i + 1]]])
        docs.append(Document(id=f"d{i}", text=text, path=f"memory/topic-{i % 97}.md",
                             timestamp=now - float(rng.uniform(0, 365 * 86400)), metadata={"start_line": 1}))
    emb = rng.standard_normal((n, DIM)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    queries, qemb, qrels = [], [], {}
    for j in range(n_queries):
        d = int(rng.integers(0, n))
        words = draws[bounds[d]:bounds[d + 1]]
        text = " ".join(vocab[rng.choice(words, size=5, replace=False)])
        queries.append(Query(id=f"q{j}", text=text, as_of=now))
        v = emb[d] + rng.standard_normal(DIM).astype(np.float32) * (0.75 / np.sqrt(DIM))
        qemb.append(v / np.linalg.norm(v))
        qrels[f"q{j}"] = {f"d{d}": 1}
    ds = Dataset(f"generated-{n}", docs, queries, qrels, {"test": [q.id for q in queries]},
                 {"representation": "truncate", "generator": f"zipf seed {seed}"})
    return ds, emb, np.stack(qemb).astype(np.float32)


class GeneratedEmbedder:
    """Stand-in for retrievers.embed.model.Embedder over generated vectors: ``encode`` looks texts up, no model."""

    def __init__(self, ds, emb: np.ndarray, qemb: np.ndarray, tag: str):
        self.rows = {d.full_text: i for i, d in enumerate(ds.documents)}
        self.qrows = {q.text: i for i, q in enumerate(ds.queries)}
        self.emb, self.qemb = emb, qemb
        self.model_id = f"generated:{tag}"
        self.model_name = "generated"
        self.dim = emb.shape[1]
        self.model_calls = 0
        self.texts_embedded = 0
        self.model = self  # run_latency embeds the query with index.embedder.model.encode(...)

    def encode(self, texts, *args, **kwargs) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            r = self.rows.get(t)
            out[i] = self.emb[r] if r is not None else self.qemb[self.qrows[t]]
        return out

    def tokenizer(self):  # pragma: no cover - representation "truncate" never splits
        raise RuntimeError("generated corpora use the truncate representation")


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
        out["vector_arm_chroma_ms"] = _p50_best(lambda i: idx.vector_search(qemb[i:i + 1], [""], 100), n_queries)
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


def run(section: Section, sizes: list[int], n_queries: int) -> dict:
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
    return {"sizes": out}
