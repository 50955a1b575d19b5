"""Replay labelled query sets through retrievers (quality mode) and collect what each returned and injected.

Quality mode: the arms every retriever needs are computed once (cached on disk) into one shared candidate set;
each retriever runs its stages over a view of it. Results are plain Python data (ranked ids and scores per
query, the injected ids, budget accounting, skip flags) so they can be written, compared and re-scored.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from evalkit.data.types import Dataset, Query
from retrievers.candidates import CandidateSet, view
from retrievers.index import SharedIndex
from retrievers.pipeline import Pipeline, injected_mask
from retrievers.search import build_candidates
from retrievers.stages import Context


@dataclass
class QueryResult:
    ranked: list[tuple[str, float]]
    injected: list[str]
    skipped: bool
    budget: dict = field(default_factory=dict)  # chunks / tokens / chars of the injected block
    block: str | None = None


@dataclass
class RetrieverRun:
    name: str
    pipeline: Pipeline
    results: dict[str, QueryResult]
    seconds: float
    info: dict = field(default_factory=dict)


def arm_map(p: Pipeline) -> dict[str, tuple[str, int]]:
    """Preset arm names → (shared arm key, depth), variant arms expanded."""
    m: dict[str, tuple[str, int]] = {}
    for a in p.arms:
        k = a.key()
        if a.query == "raw" and a.max_variants <= 1:
            m[a.name] = (k, a.depth)
        else:
            for i in range(a.max_variants):
                m[f"{a.name}#{i}"] = (f"{k}#{i}", a.depth)
    return m


def collect(p: Pipeline, cs: CandidateSet, st, render_blocks: bool = True) -> dict[str, QueryResult]:
    ids = cs.corpus.ids
    inj = injected_mask(st)
    budget = st.info.get("budget") or {}
    blocks = st.info.get("blocks")
    out = {}
    for qi, q in enumerate(cs.queries):
        row = st.col[qi]
        ok = row >= 0
        ranked = [(ids[cs.doc[qi, c]], float(s)) for c, s in zip(row[ok], st.score[qi][ok])]
        injected = [ids[cs.doc[qi, c]] for c, m in zip(row, inj[qi]) if c >= 0 and m]
        b = {k: int(v[qi]) for k, v in budget.items()} if budget else {
            "chunks": len(injected), "chars": sum(len(cs.corpus.texts[cs.doc[qi, c]]) for c, m in zip(row, inj[qi])
                                                  if c >= 0 and m)}
        out[q.id] = QueryResult(ranked, injected, bool(st.skipped[qi]), b,
                                blocks[qi] if (blocks is not None and render_blocks) else None)
    return out


def shared_candidates(index: SharedIndex, queries: list[Query], pipelines: list[Pipeline],
                      use_cache: bool = True) -> CandidateSet:
    specs = [a for p in pipelines for a in p.arms]
    return build_candidates(index, queries, specs, use_cache=use_cache)


def run_quality(dataset: Dataset, pipelines: list[Pipeline], index: SharedIndex, ctx: Context | None = None,
                use_cache: bool = True, progress=None) -> dict[str, RetrieverRun]:
    """Every pipeline over every query of ``dataset`` (already split), candidates shared."""
    ctx = ctx or Context()
    queries = dataset.queries
    cs = shared_candidates(index, queries, pipelines, use_cache=use_cache)
    runs: dict[str, RetrieverRun] = {}
    for p in pipelines:
        t0 = time.perf_counter()
        v = view(cs, arm_map(p))
        st = p.run(v, ctx)
        res = collect(p, v, st)
        runs[p.name] = RetrieverRun(p.name, p, res, time.perf_counter() - t0,
                                    info={k: v_ for k, v_ in st.info.items() if k not in ("injected", "blocks",
                                                                                        "budget")})
        if progress:
            progress(p.name)
    return runs


def skip_rate(run: RetrieverRun) -> float:
    vals = [r.skipped for r in run.results.values()]
    return float(np.mean(vals)) if vals else 0.0
