"""Run arms against the shared index and assemble the shared CandidateSet (with an on-disk cache).

Arm results depend only on (index, arm identity, depth, query text, group): they are cached under the cache
directory so that every preset, every config of a sweep and the next run reuse them. Latency mode bypasses the
cache (``use_cache=False``) and times each arm.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import time

import numpy as np

from evalkit.data.types import Query
from retrievers.arms import QUERY_TRANSFORMS, ArmSpec
from retrievers.candidates import ArmHits, CandidateSet
from retrievers.index import SharedIndex


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


def run_arm(index: SharedIndex, spec: ArmSpec, queries: list[Query], qemb: np.ndarray | None,
            backend: str | None = None) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per query, per variant: (doc indices, raw scores) at ``spec.depth``."""
    out: list[list] = []
    if spec.kind == "vector":
        texts, owners = [], []
        for qi, q in enumerate(queries):
            for v in variants(spec, q):
                texts.append(v)
                owners.append(qi)
        if not texts:
            return [[] for _ in queries]
        if spec.query == "raw" and qemb is not None:
            emb = qemb[owners]
        else:
            emb = index.embed_queries(texts)
        res = index.vector_search(emb, [queries[o].group or "" for o in owners], spec.depth, backend=backend)
        out = [[] for _ in queries]
        for o, r in zip(owners, res):
            out[o].append(r)
        return out
    for q in queries:
        out.append([index.lexical_search(v, q.group or "", spec.tokenizer, spec.depth, spec.match, spec.k1, spec.b)
                    for v in variants(spec, q)])
    return out


def _cache_path(index: SharedIndex, spec: ArmSpec, queries: list[Query]):
    h = hashlib.sha256()
    backend = json.dumps(index.settings.record(), sort_keys=True, default=str) if spec.kind == "vector" else ""
    h.update(json.dumps([index.key, backend, spec.identity(), spec.depth], sort_keys=True).encode())
    for q in queries:
        h.update(json.dumps([q.text, q.group, q.metadata.get("context")], default=str).encode())
    return index.cache_dir / "candidates" / f"{h.hexdigest()[:24]}.pkl"


def build_candidates(index: SharedIndex, queries: list[Query], specs: list[ArmSpec], use_cache: bool = True,
                     timings: dict | None = None, qemb: np.ndarray | None = None) -> CandidateSet:
    """The shared CandidateSet for ``queries``: arms are named by identity key (``key`` / ``key#i``)."""
    merged = merge_specs(specs)
    if qemb is None:
        t0 = time.perf_counter()
        qemb = index.embed_queries([q.text for q in queries])
        if timings is not None:
            timings.setdefault("embed_query", []).append(time.perf_counter() - t0)
    results: dict[str, list] = {}
    for key, spec in merged.items():
        path = _cache_path(index, spec, queries)
        res = None
        if use_cache and path.exists():
            try:
                with open(path, "rb") as fh:
                    res = pickle.load(fh)
            except Exception:  # noqa: BLE001 - corrupt cache entry: recompute
                res = None
        if res is None:
            t0 = time.perf_counter()
            res = run_arm(index, spec, queries, qemb)
            if timings is not None:
                timings.setdefault(f"arm:{spec.kind}", []).append(time.perf_counter() - t0)
            if use_cache:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                with open(tmp, "wb") as fh:
                    pickle.dump(res, fh, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
        results[key] = res
    return assemble(index, queries, merged, results, qemb)


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
    cols: list[dict[int, int]] = [dict() for _ in range(Q)]
    for key in merged:
        for qi, per_var in enumerate(results[key]):
            for docs, _ in per_var:
                for d in docs:
                    cols[qi].setdefault(int(d), len(cols[qi]))
    C = max((len(c) for c in cols), default=0)
    doc = np.full((Q, C), -1, dtype=np.int64)
    for qi, c in enumerate(cols):
        if c:
            doc[qi, :len(c)] = np.fromiter(c.keys(), dtype=np.int64, count=len(c))
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
                    pos = np.fromiter((cols[qi][int(d)] for d in docs), dtype=np.int64, count=len(docs))
                    score[qi, pos] = sc
                    rank[qi, pos] = np.arange(1, len(docs) + 1)
            arms[name] = ArmHits(score, rank)
        if not multi:
            continue
    return CandidateSet(index.corpus, queries, doc, arms, qemb=qemb, meta={"index": index.key})
