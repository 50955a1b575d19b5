"""Run arms against the shared index and assemble the shared CandidateSet (with an on-disk cache).

Arm results depend only on (index, arm identity, depth, query text, group, visible set): they are cached under
the cache directory (verified cache files, ``retrievers/cachefile.py``) so that every preset, every config of a
sweep and the next run reuse them. Each arm's entry is written as soon as that arm is computed, so a run stopped
half-way (a Chroma server that stopped answering, Ctrl-C) keeps what it finished; ``index.stats`` counts entries
loaded (``candidates_loaded``) and computed (``candidates_computed``). Latency mode bypasses the cache
(``use_cache=False``) and times each arm.

As-of visibility (:mod:`retrievers.index.visibility`): under the ``strict`` protocol every arm of a query searches only
the documents visible at its ``as_of``, inside the search (exact depth); the candidate cache key then names each
query's visible set, so a sweep still pays once per (query, visibility).
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from retrievers import cachefile
from retrievers.candidates.arms import QUERY_TRANSFORMS, ArmSpec
from retrievers.candidates.table import ArmHits, CandidateSet
from retrievers.index.shared import SharedIndex
from retrievers.types import Query


def merge_specs(specs: list[ArmSpec]) -> dict[str, ArmSpec]:
    """Unique arms by identity key, each at the largest depth any preset asked for."""
    out: dict[str, ArmSpec] = {}
    for s in specs:
        k = s.key()
        if k not in out or out[k].depth < s.depth or out[k].max_variants < s.max_variants:
            out[k] = ArmSpec(**{**s.__dict__, "name": k, "depth": max(s.depth, out[k].depth if k in out else 0),
                                "max_variants": max(s.max_variants, out[k].max_variants if k in out else 1)})
    return out


def variants(spec: ArmSpec, q: Query) -> list[str]:
    return list(QUERY_TRANSFORMS[spec.query](q))[:spec.max_variants]


def search_times(queries: list[Query], protocol: str) -> list[float | None]:
    """Per query, the ``as_of`` its searches are cut at: its own under ``strict``, None (no cut) under ``all``."""
    return [q.as_of if protocol == "strict" else None for q in queries]


def run_arm(index: SharedIndex, spec: ArmSpec, queries: list[Query], qemb: np.ndarray | None,
            backend: str | None = None, visibility: str = "all") -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per query, per variant: (doc indices, raw scores) at ``spec.depth`` among the documents the query sees
    under the ``visibility`` protocol."""
    if spec.kind == "vector":
        return run_vector_arms(index, [spec], queries, qemb, backend, visibility=visibility)[0]
    cut = search_times(queries, visibility)
    return [[index.lexical_search(v, q.group or "", spec.tokenizer, spec.depth, spec.match, spec.k1, spec.b, t,
                                  q.id) for v in variants(spec, q)] for q, t in zip(queries, cut)]


def run_vector_arms(index: SharedIndex, specs: list[ArmSpec], queries: list[Query], qemb: np.ndarray | None,
                    backend: str | None = None, encode=None, timings: dict | None = None, visibility: str = "all"
                    ) -> list[list[list[tuple[np.ndarray, np.ndarray]]]]:
    """:func:`run_arm` of several vector arms, their searches sent to the backend together (one Chroma call per
    group, visible set and result size instead of one per arm: a query's hits do not depend on the rest of the
    call).
    Each arm's variant texts are embedded by their own call, as one arm alone would: with the cached embedder, or
    with ``encode(texts)`` (latency mode: no cache, as a live system embeds them). In latency mode each variant
    text is embedded alone and searched alone, both timed: ``timings["embed_variants"]`` and
    ``timings["search_variants"]`` get one time per variant, in variant order (a live Phase-3 system embeds and
    searches expansion ``i`` only when pass ``i`` runs, so the runner charges only those the early stop let run)."""
    embs, owners, depths, spans, solo = [], [], [], [], []
    for spec in specs:
        texts, own = [], []
        for qi, q in enumerate(queries):
            for v in variants(spec, q):
                texts.append(v)
                own.append(qi)
        spans.append((len(owners), len(own)))
        if own:
            if spec.query == "raw" and qemb is not None:
                embs.append(qemb[own])
            elif encode is not None:
                parts = []
                for text in texts:
                    t0 = time.perf_counter()
                    parts.append(encode([text]))
                    if timings is not None:
                        timings.setdefault("embed_variants", []).append(time.perf_counter() - t0)
                embs.append(np.concatenate(parts))
            else:
                embs.append(index.embed_queries(texts))
            owners += own
            depths += [spec.depth] * len(own)
            solo += [encode is not None and not (spec.query == "raw" and qemb is not None)] * len(own)
    groups = [queries[o].group or "" for o in owners]
    who = [queries[o].id for o in owners]
    cut = search_times(queries, visibility)
    times = [cut[o] for o in owners] if any(t is not None for t in cut) else None
    res: list = []
    if any(solo):  # latency mode: each variant searched alone (a live pass searches only its own expansion), timed
        allv = np.concatenate(embs)
        res = [None] * len(owners)
        batch = [i for i, x in enumerate(solo) if not x]
        if batch:
            for i, r in zip(batch, index.vector_search(allv[batch], [groups[i] for i in batch],
                                                         [depths[i] for i in batch], backend=backend,
                                                         as_of=_pick(times, batch), query_ids=_pick(who, batch))):
                res[i] = r
        for i in (i for i, x in enumerate(solo) if x):
            t0 = time.perf_counter()
            res[i] = index.vector_search(allv[i:i + 1], [groups[i]], [depths[i]], backend=backend,
                                         as_of=_pick(times, [i]), query_ids=[who[i]])[0]
            if timings is not None:
                timings.setdefault("search_variants", []).append(time.perf_counter() - t0)
    elif len({e.dtype for e in embs}) > 1:  # never mix precisions in one search: one call per arm
        for e, (s0, n) in zip(embs, [sp for sp in spans if sp[1]]):
            res += index.vector_search(e, groups[s0:s0 + n], depths[s0:s0 + n], backend=backend,
                                       as_of=_pick(times, range(s0, s0 + n)), query_ids=who[s0:s0 + n])
    elif embs:
        res = index.vector_search(np.concatenate(embs), groups, depths, backend=backend, as_of=times, query_ids=who)
    out = []
    for s0, n in spans:
        per: list[list] = [[] for _ in queries]
        for o, r in zip(owners[s0:s0 + n], res[s0:s0 + n]):
            per[o].append(r)
        out.append(per)
    return out


def _pick(times: list | None, rows) -> list | None:
    return None if times is None else [times[i] for i in rows]


def cache_path(index: SharedIndex, spec: ArmSpec, queries: list[Query], visibility: str = "all"):
    """The candidate-cache file of one arm over ``queries``. Visibility: each query's visible set (its key,
    :meth:`retrievers.index.visibility.VisibleSets.key`, with the digest of the corpus's creation times) is part of
    the key; when every query sees its whole group the key is the one a search without the rule has, so those
    caches are shared."""
    h = hashlib.sha256()
    rec = {k: v for k, v in index.settings.record().items() if k != "as_of_visibility"}
    backend = json.dumps(rec, sort_keys=True, default=str) if spec.kind == "vector" else ""
    h.update(json.dumps([index.key, backend, spec.identity(), spec.depth], sort_keys=True).encode())
    keys = index.visible.keys(queries, visibility)
    cut = any(k is not None for k in keys)
    if cut:
        h.update(json.dumps(["as_of_visibility", visibility, index.visible.digest]).encode())
    for q, k in zip(queries, keys):
        row = [q.text, q.group, q.metadata.get("context")]
        h.update(json.dumps(row + [k] if cut else row, default=str).encode())
    return index.cache_dir / "candidates" / f"{h.hexdigest()[:24]}{cachefile.SUFFIX}"


def _bad_arm_result(res, n_queries: int) -> str | None:
    if not isinstance(res, list) or len(res) != n_queries:
        return "not these queries' candidates"
    return None


def _keep(index: SharedIndex, path, res) -> None:
    """Write one arm's candidates to the cache as soon as they exist, and count it."""
    if path is not None:
        cachefile.write(path, res)
        index.stats["candidates_computed"] += 1


def build_candidates(index: SharedIndex, queries: list[Query], specs: list[ArmSpec], use_cache: bool = True,
                     timings: dict | None = None, qemb: np.ndarray | None = None, encode=None,
                     visibility: str | None = None) -> CandidateSet:
    """The shared CandidateSet for ``queries``: arms are named by identity key (``key`` / ``key#i``).
    ``visibility``: the as-of protocol (``strict`` / ``all``); None = :meth:`SharedIndex.visibility` of the indexed
    dataset.
    ``encode(texts)`` embeds query variants without the embedding cache (latency mode): one time per variant in
    ``timings["embed_variants"]`` (left out of ``timings["arm:vector"]``) and one per variant search in
    ``timings["search_variants"]`` (part of ``arm:vector``)."""
    merged = merge_specs(specs)
    visibility = visibility or index.visibility().protocol
    if qemb is None:  # embedded when a vector arm or a stage first needs them: a lexical-only run embeds nothing
        def embed_queries() -> np.ndarray:
            t0 = time.perf_counter()
            out = index.embed_queries([q.text for q in queries])
            if timings is not None:
                timings.setdefault("embed_query", []).append(time.perf_counter() - t0)
            return out
        qemb = _Once(embed_queries)
    results: dict[str, list] = {}
    missing: list[tuple[str, ArmSpec, object]] = []
    for key, spec in merged.items():
        path = cache_path(index, spec, queries, visibility) if use_cache else None
        res = cachefile.read(path, check=lambda r: _bad_arm_result(r, len(queries))) if use_cache else None
        if res is None:
            missing.append((key, spec, path))
        else:
            results[key] = res
            index.stats["candidates_loaded"] += 1
    vec = [m for m in missing if m[1].kind == "vector"]
    if vec:
        t0 = time.perf_counter()
        emb_t: dict[str, list[float]] = {}
        for (key, _, path), res in zip(vec, run_vector_arms(index, [m[1] for m in vec], queries, _value(qemb),
                                                            encode=encode, timings=emb_t, visibility=visibility)):
            results[key] = res
            _keep(index, path, res)
        if timings is None:  # a quality run over HNSW states its recall against exact on a sample
            _check_hnsw(index, [m[1] for m in vec], queries, _value(qemb), visibility)
        if timings is not None:
            per_variant = emb_t.get("embed_variants", [])
            timings.setdefault("arm:vector", []).append(time.perf_counter() - t0 - sum(per_variant))
            for k in ("embed_variants", "search_variants"):
                if emb_t.get(k):
                    timings.setdefault(k, []).extend(emb_t[k])
    for key, spec, path in missing:
        if spec.kind != "vector":
            t0 = time.perf_counter()
            results[key] = run_arm(index, spec, queries, None, visibility=visibility)
            if timings is not None:
                timings.setdefault(f"arm:{spec.kind}", []).append(time.perf_counter() - t0)
            _keep(index, path, results[key])
    t0 = time.perf_counter()
    cs = assemble(index, queries, merged, results, qemb)
    cs.meta["visibility"] = visibility  # a stage that looks past the candidates applies the same as-of rule
    if timings is not None:
        timings.setdefault("assemble", []).append(time.perf_counter() - t0)
    return cs


def _check_hnsw(index: SharedIndex, specs: list[ArmSpec], queries: list[Query], qemb: np.ndarray | None,
                visibility: str) -> None:
    """Under an approximate backend, ``index.hnsw_check`` = recall@k of the deepest raw-query vector arm against exact
    search on a sample of the queries (:meth:`SharedIndex.hnsw_recall`), once per index."""
    raw = [s for s in specs if s.query == "raw"]
    if index.settings.backend == "exact" or index.hnsw_check is not None or not raw or qemb is None or not queries:
        return
    cut = search_times(queries, visibility)
    index.hnsw_check = index.hnsw_recall(qemb, [q.group or "" for q in queries], max(s.depth for s in raw),
                                         as_of=cut if any(t is not None for t in cut) else None,
                                         query_ids=[q.id for q in queries])


class _Once:
    """A value computed by ``fn`` on the first call and kept (a lazily embedded query matrix)."""

    def __init__(self, fn):
        self.fn, self.done, self.value = fn, False, None

    def __call__(self):
        if not self.done:
            self.value, self.done = self.fn(), True
        return self.value


def _value(x):
    return x() if callable(x) else x


def assemble(index: SharedIndex, queries: list[Query], merged: dict[str, ArmSpec], results: dict[str, list],
             qemb: np.ndarray | None) -> CandidateSet:
    Q = len(queries)
    arm_names: list[str] = []
    for key, spec in merged.items():
        nv = max([len(r) for r in results[key]] + [1])
        if spec.query == "raw" and spec.max_variants <= 1:
            arm_names.append(key)
        else:
            arm_names.extend(f"{key}#{i}" for i in range(max(nv, spec.max_variants)))
    # columns per query: the union of every arm's documents in first-seen order (arms in ``merged`` order, then
    # variant, then rank); pos[qi][(key, vi)] = the column of each hit of that arm variant
    col_docs: list[np.ndarray] = []
    pos: list[dict[tuple[str, int], np.ndarray]] = []
    for qi in range(Q):
        segs = [((key, vi), np.asarray(docs, dtype=np.int64)) for key in merged
                for vi, (docs, _) in enumerate(results[key][qi])]
        seq = np.concatenate([d for _, d in segs]) if segs else np.zeros(0, dtype=np.int64)
        uniq, first, inv = np.unique(seq, return_index=True, return_inverse=True)
        seen = np.argsort(first)  # unique documents in first-seen order
        colpos = np.empty(len(uniq), dtype=np.int64)
        colpos[seen] = np.arange(len(uniq))
        where = colpos[inv.reshape(-1)]
        col_docs.append(uniq[seen])
        bounds = np.cumsum([0] + [len(d) for _, d in segs])
        pos.append({name: where[bounds[i]:bounds[i + 1]] for i, (name, _) in enumerate(segs)})
    C = max((len(c) for c in col_docs), default=0)
    doc = np.full((Q, C), -1, dtype=np.int64)
    for qi, c in enumerate(col_docs):
        doc[qi, :len(c)] = c
    arms: dict[str, ArmHits] = {}
    for key, spec in merged.items():
        multi = not (spec.query == "raw" and spec.max_variants <= 1)
        names = [n for n in arm_names if n == key or n.startswith(key + "#")]
        for vi, name in enumerate(names):
            score = np.full((Q, C), np.nan)
            rank = np.zeros((Q, C), dtype=np.int32)
            for qi, per_var in enumerate(results[key]):
                if vi >= len(per_var):
                    continue
                docs, sc = per_var[vi]
                if len(docs):
                    p = pos[qi][(key, vi)]
                    score[qi, p] = sc
                    rank[qi, p] = np.arange(1, len(docs) + 1)
            arms[name] = ArmHits(score, rank)
        if not multi:
            continue
    return CandidateSet(index.corpus, queries, doc, arms, qemb=qemb, meta={"index": index.key})
