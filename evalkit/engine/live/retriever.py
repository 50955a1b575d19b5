"""A live system as one more retriever of a run (see :mod:`evalkit.engine.live`): a name → its system file
(:func:`find`, :func:`split_retrievers`), the system in the place of a preset's pipeline (:class:`SystemPipeline`),
and :func:`run_system` — drive it, map its hits, measure what it injects — returning a
:class:`~evalkit.engine.runner.RetrieverRun`; :func:`beyond_depth` leaves empty the measures deeper than its ``k``."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from evalkit.data.registry import REPO_ROOT
from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.driver import Driver
from evalkit.engine.live.mapping import HitMapper, map_answer
from evalkit.engine.live.text import LATENCY_KEYS, live_warnings
from evalkit.engine.run_warnings import warning
from evalkit.engine.runner import QueryResult, RetrieverRun, percentiles
from evalkit.errors import LiveError
from retrievers.index.visibility import VISIBLE_TO, audience
from retrievers.pipeline import Pipeline
from retrievers.tokens import count_tokens
from retrievers.systems.file import SystemSpec, find_system, load_system
from retrievers.types import DataError, Dataset

SYSTEMS_DIR = REPO_ROOT / "systems"  # the shipped system files (`evalkit systems` lists them)


def system_folders() -> list[Path]:
    """Where system names are looked up: ``$EVALKIT_SYSTEMS`` (os.pathsep-separated folders), then the repository's
    ``systems/``."""
    extra = [Path(p) for p in os.environ.get("EVALKIT_SYSTEMS", "").split(os.pathsep) if p]
    return extra + [SYSTEMS_DIR]


def find(name: str) -> SystemSpec | None:
    """The system ``name`` names (a system file path, or a shipped / $EVALKIT_SYSTEMS name), else None."""
    path = find_system(name, system_folders())
    return load_system(str(path)) if path is not None else None


def split_retrievers(names: list[str]) -> tuple[list[str], list[SystemSpec]]:
    """``--retrievers`` items → (preset names / paths, system specs), each system file validated now; ConfigError
    on a name used twice."""
    presets, systems = [], []
    for n in names:
        spec = find(n)
        if spec is None:
            presets.append(n)
        else:
            systems.append(spec)
    seen = [s.name for s in systems]
    dup = sorted({x for x in seen if seen.count(x) > 1})
    if dup:
        raise DataError(f"system {dup[0]!r} given twice")
    return presets, systems



class SystemPipeline(Pipeline):
    """A live system in the place of a preset's pipeline (no arms, no stages): its identity is the system file's."""

    def __init__(self, spec: SystemSpec, version: str | None):
        super().__init__(spec.name, spec.description or f"live system ({spec.kind})", [], [], {},
                         {k: v for k, v in {"system": spec.system or None, "kind": f"live system ({spec.kind})",
                                            "system_file": spec.path, "system_version": version}.items()
                          if v is not None})
        self.spec = spec

    def canonical(self) -> dict:
        return {"system": self.spec.canonical()}

    @property
    def hash(self) -> str:
        return self.spec.hash


def run_system(spec: SystemSpec, ds: Dataset, protocol: str, *, refresh: bool = False,
               cache: ResponseCache | None = None, log=print) -> RetrieverRun:
    """Drive ``spec`` over ``ds`` (already split) under the as-of ``protocol`` (strict | all); the run, with the
    live counters, latency percentiles and warnings in ``info``. LiveError (one line) when the run had to stop."""
    scoped = next((d for d in ds.documents if audience(d) is not None), None)
    if scoped is not None:  # a live system holds one store per group: it cannot hide a note from the other queries
        raise LiveError(f"system {spec.name}: dataset {ds.name!r} has scoped notes (metadata {VISIBLE_TO}, e.g. "
                        f"{scoped.id!r}: an `evalkit poison --isolate` planting) that a live system cannot hide from "
                        f"the other queries of its group; plant a shared store for it (without --isolate)")
    cache = cache or ResponseCache()
    t0 = time.perf_counter()
    drv = Driver(spec, ds, protocol, cache, refresh=refresh, log=log)
    before = dict(cache.stats)
    outcomes = drv.run()
    mapper = HitMapper(ds)
    results: dict[str, QueryResult] = {}
    totals = {"unmapped": 0, "duplicate": 0, "future": 0, "id": 0, "text": 0, "normalised": 0}
    future_queries = 0
    for q in ds.queries:
        o = outcomes.get(q.id)
        if o is None or o.answer is None:
            results[q.id] = QueryResult([], [], False, {"chunks": 0, "chars": 0, "tokens": 0}, "")
            continue
        m = map_answer(mapper, q, o.answer)
        for k_, v in m.counts.items():
            totals[k_] += v
        future_queries += m.counts["future"] > 0
        results[q.id] = QueryResult(m.ranked, m.injected, False,
                                    {"chunks": len(m.injected), "chars": len(m.block), "tokens": count_tokens(m.block)},
                                    m.block)
    s = drv.stats
    lat = [o.ms / 1000.0 for o in outcomes.values() if o.answer is not None and math.isfinite(o.ms)]
    ingest_docs = s.ingested or s.ingest_cached_docs
    ingest_s = s.ingest_seconds if s.ingested else s.ingest_cached_seconds
    refused = len(s.refused)
    faults = sum(s.faults.values()) + refused
    info: dict[str, Any] = {
        "live_queries": float(s.queries), "live_asked": float(s.asked), "live_cached": float(s.cached),
        "live_faults": float(faults), "live_retries": float(s.retries), "live_ingested_docs": float(s.ingested),
        "live_notes_sent": float(ingest_docs), "live_notes_accepted": float(ingest_docs - refused),
        "live_unmapped_hits": float(totals["unmapped"]), "live_duplicate_hits": float(totals["duplicate"]),
        "live_future_hits": float(totals["future"]),
        "live_mapped_by_text": float(totals["text"] + totals["normalised"]),
        **{f"live_fault_{k}": float(v) for k, v in sorted(s.faults.items())},
        **({"live_fault_note_refused": float(refused)} if refused else {}),
    }
    if ingest_docs and ingest_s > 0:
        info["ingest_docs_per_s"] = ingest_docs / ingest_s
    for k_, v in percentiles(lat).items():
        if k_ in LATENCY_KEYS:  # end to end (query text in, hits out): the presets' latency_with_embedding_*
            info[f"latency_with_embedding_{k_}"] = v
    info["warnings"] = live_warnings(spec, s, totals, future_queries, ingest_docs, protocol)
    info["live"] = {"protocol": "preloaded" if s.preloaded else protocol,
                    "ingest": "none: the system was asked as loaded" if s.preloaded else
                    "strict: documents created by each query's as_of" if protocol == "strict"
                    else "all documents first", "version": s.version, "run_token": drv.run_token,
                    "cache": {k: cache.stats[k] - before.get(k, 0) for k in cache.stats},
                    "groups_from_cache": s.groups_skipped, "ingest_seconds": round(ingest_s, 3),
                    "ingest_docs": ingest_docs, "notes_sent": ingest_docs,
                    "notes_accepted": ingest_docs - refused, "refused": dict(list(s.refused.items())[:50]),
                    "code": s.code, "stderr_log": s.stderr_log, "latency_from": "the answering request's wall time (cached answers: "
                                                                "as measured when asked)"}
    if s.indexed and all(v is not None for v in s.indexed.values()):
        # what the system reports it indexed of what it was given (e.g. OpenClaw skips non-memory files)
        info["indexed_ids"] = sorted({i for v in s.indexed.values() for i in v})
        info["live"]["indexed"] = len(info["indexed_ids"])
    pipe = SystemPipeline(spec, s.version)
    run = RetrieverRun(spec.name, pipe, results, time.perf_counter() - t0, info)
    run.info["latency_s"] = lat
    return run


def beyond_depth(ev, spec: SystemSpec) -> dict | None:
    """Leave empty the ranking measures deeper than the ``k`` hits a system was asked for (recall@100 of a system
    answering 10 hits would repeat recall@10): removed from ``ev`` (means, per-query values, breakdowns); the run
    warning that says why, None when nothing was deeper.

    >>> from evalkit.engine.evaluate import Evaluation
    >>> ev = Evaluation("d", "s", {"recall@10": 0.5, "recall@100": 0.5, "mrr": 1.0}, {"recall@100": {"q": 0.5}})
    >>> beyond_depth(ev, SystemSpec("s", "http", {}, k=10))["text"][:57], sorted(ev.means)
    ('system s answers 10 hits per query: recall@100 left empty', ['mrr', 'recall@10'])
    """
    from evalkit.measures.catalogue import parse  # lazy: startup
    deep = []
    for name in list(ev.means):
        try:
            m = parse(name)
        except ValueError:
            continue
        if m.kind == "ranking" and m.k is not None and m.k > spec.k:
            deep.append(name)
    if not deep:
        return None
    for name in deep:
        ev.means.pop(name, None)
        ev.per_query.pop(name, None)
    ev.breakdown[:] = [r for r in ev.breakdown if r.get("metric") not in deep]
    return warning("live_depth", f"system {spec.name} answers {spec.k} hits per query: {', '.join(deep)} left empty "
                                 f"(deeper than its k; they would repeat the measure at {spec.k}) — raise `k` in the "
                                 f"system file to measure them", spec.name, len(deep))



__all__ = ["SystemPipeline", "beyond_depth", "find", "run_system", "split_retrievers", "system_folders"]
