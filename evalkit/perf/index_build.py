"""Section 4 — build and reopen the shared index (SharedIndex + Chroma collection + bm25s) in a temp cache.

The vectors come from the content-hash embedding cache (their cost is section 3); everything else is built
from scratch in a temporary cache directory: MaxP units, the Chroma collection (cosine, HNSW settings of
``IndexSettings``) and the bm25s indexes of both lexical tokenizers for every group. The reopen runs in a fresh
Python process — what the next `evalkit run` does — and prints the index's work counters (``index.stats``) and
the embedder's model calls: a reopen must embed nothing, build no collection and no bm25s index.

The full run adds the BM25 indexes of many small groups (the registry's ``perf.groups``: hundreds of haystacks),
built in one pass per tokenizer in a fresh process (:func:`build_groups_twice`).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from evalkit.data.registry import load_dataset
from evalkit.perf.common import (
    Section,
    Table,
    dir_mb,
    load_ready,
    loadavg,
    progress,
    rss_mb,
    temp_dir,
)
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex

TOKENIZERS = ("stem_en", "unicode61")


def open_index(name: str, cache_dir: str, embed_cache: str | None = None) -> dict:
    """Open (or build) the shared index of ``name`` under ``cache_dir``; seconds per step and the work counters."""

    out: dict = {}
    t0 = time.perf_counter()
    import bm25s  # noqa: F401 - imports are timed apart from the index work (they dominate a cold process)  (lazy: startup)
    import chromadb  # noqa: F401  (lazy: startup)
    out["imports_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ds = load_dataset(name)
    out["load_dataset_s"] = time.perf_counter() - t0
    emb = Embedder(cache_dir=Path(embed_cache) if embed_cache else None, progress=False)
    rss0 = rss_mb()
    t0 = time.perf_counter()
    idx = SharedIndex(ds, embedder=emb, cache_dir=Path(cache_dir))
    out["units_and_vectors_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    col = idx.collection()
    out["chroma_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for tok in TOKENIZERS:
        for g in idx.group_names:
            idx.lexical(g, tok)
    out["bm25s_s"] = time.perf_counter() - t0
    out["rss_delta_mb"] = rss_mb() - rss0
    out["stats"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in idx.stats.items()}
    out["model_calls"] = emb.model_calls
    out["units"] = len(idx.unit_doc)
    out["groups"] = len(idx.group_names)
    out["collection_count"] = col.count()
    return out


def _child(name: str, cache_dir: str) -> dict:
    code = ("import json, sys; from evalkit.perf.index_build import open_index; "
            f"print('PERFJSON' + json.dumps(open_index({name!r}, {cache_dir!r})))")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PERFJSON")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"reopen process failed: {proc.stderr.strip().splitlines()[-1:]}")
    got = json.loads(line[len("PERFJSON"):])
    got["process_s"] = wall
    return got


def build_groups_twice(name: str) -> dict:
    """Seconds of :func:`retrievers.index.lexical.build_many` over every group of ``name``, per tokenizer, twice
    in this process (the first build of the first tokenizer also pays the one-off costs: numba, the kernels, the
    code-point tables); the documents' texts only, no vectors."""
    from retrievers.index.lexical import build_many  # lazy: startup
    ds = load_dataset(name)
    idx = SharedIndex(ds)
    texts = idx.corpus.texts
    groups = {g: [texts[d] for d in docs] for g, docs in idx.group_docs.items()}
    out: dict = {"groups": len(groups), "documents": sum(map(len, groups.values())),
                 "characters": sum(len(t) for v in groups.values() for t in v)}
    for tok in TOKENIZERS:
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            built = build_many(groups, tok)
            times.append(time.perf_counter() - t0)
            del built
        out[tok] = times
    return out


def _groups_child(name: str) -> dict:
    code = ("import json; from evalkit.perf.index_build import build_groups_twice; "
            f"print('PERFJSON' + json.dumps(build_groups_twice({name!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("PERFJSON")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"BM25 group build process failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(line[len("PERFJSON"):])


def many_groups(section: Section, names: list[str]) -> dict:
    """A table: BM25 indexes of every group of each dataset of ``names`` (one pass per tokenizer), built twice in a
    fresh process; a dataset that is not in the data directory is a note."""
    out: dict = {}
    t = None
    for name in names:
        try:
            load_dataset(name)
        except Exception as exc:  # noqa: BLE001 - a missing dataset is a note, as load_ready's
            section.note(f"{name}: skipped, {exc}")
            continue
        progress(f"index: BM25 of every group of {name}, each tokenizer, twice in a fresh process")
        r = _groups_child(name)
        if t is None:
            t = section.table(Table("BM25 of many small groups: every group's bm25s index built in one pass "
                                    "(build_many), per tokenizer, in a fresh process; seconds",
                                    ["dataset", "groups", "documents", "tokenizer", "first build", "second build",
                                     "groups/s (second)", "load"]))
        for tok in TOKENIZERS:
            first, second = r[tok]
            t.add(name, r["groups"], r["documents"], tok, first, second, r["groups"] / second,
                  loadavg().split()[0])
        out[name] = r
    if t is not None:
        t.notes.append(f"the first build in the process also pays one-off costs (numba, the kernels, the code-point "
                       f"tables); tokenizers in the order {', '.join(TOKENIZERS)}")
    return out


def run(section: Section, datasets: list[str], reopens: int = 2, groups: list[str] = ()) -> dict:
    names, notes = load_ready(datasets, Embedder(progress=False))
    for n in notes:
        section.note(n)
    name = names[0]
    t = section.table(Table(f"shared index of {name} in a temporary cache directory (vectors from the embedding "
                            f"cache); seconds", ["run", "units+vectors", "chroma", f"bm25s ({'+'.join(TOKENIZERS)})",
                                                 "total", "embedded", "model calls", "chroma built", "bm25 built",
                                                 "RSS +MB", "load"]))
    out = {}
    with temp_dir("evalkit-perf-index-") as tmp:
        progress(f"index: building {name} in {tmp}")
        b = open_index(name, str(tmp))
        disk = dir_mb(tmp)
        progress("index: reopening in a fresh process")
        again = [_child(name, str(tmp)) for _ in range(reopens)]
    r = again[0]
    runs = [("build (this process)", b)] + [(f"reopen #{i + 1} (new process)", x) for i, x in enumerate(again)]
    for label, x in runs:
        s = x["stats"]
        total = x["units_and_vectors_s"] + x["chroma_s"] + x["bm25s_s"]
        t.add(label, x["units_and_vectors_s"], x["chroma_s"], x["bm25s_s"], total, s.get("embedded_texts"),
              x["model_calls"], bool(s.get("chroma_built")), s.get("bm25_built"), x["rss_delta_mb"],
              loadavg().split()[0])
        out[label] = x
    t.notes.append(f"{b['units']:,} vector units in {b['groups']} group(s); collection count {b['collection_count']:,}; "
                   f"on disk {disk:.1f} MB (Chroma + bm25s pickles + units)")
    t.notes.append(f"a reopen in a new process takes {r['process_s']:.1f}s wall in all: Python start-up, imports of "
                   f"chromadb + bm25s {r['imports_s']:.1f}s (not in the table), dataset load "
                   f"{r['load_dataset_s']:.1f}s, then the columns above")
    ok = all(x["stats"].get("embedded_texts") == 0 and not x["stats"].get("chroma_built")
             and x["stats"].get("bm25_built") == 0 and x["model_calls"] == 0 for x in again)
    t.notes.append(f"reopen did no re-embedding and no re-indexing: {'yes' if ok else 'NO'} "
                   f"(work counters from index.stats: embedded_texts, chroma_built, bm25_built)")
    out["reopen_does_no_work"] = ok
    if groups:
        out["many_groups"] = many_groups(section, list(groups))
    return out
