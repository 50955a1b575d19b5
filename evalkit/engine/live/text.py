"""What a live run says (see :mod:`evalkit.engine.live`): its run warnings (:func:`live_warnings`), its one
summary line (:func:`summary_line`) and its counters as metric rows (:func:`live_means`)."""
from __future__ import annotations

from evalkit.engine.live.driver import TRANSIENT, LiveStats
from evalkit.engine.run_warnings import warning
from evalkit.engine.runner import RetrieverRun
from retrievers.systems.file import SystemSpec

LATENCY_KEYS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms")


def live_warnings(spec: SystemSpec, s: LiveStats, totals: dict[str, int], future_queries: int, ingest_docs: int,
                  protocol: str) -> list[dict]:
    """The run warnings of one live run: refused notes, faults, an unreachable system answered from the cache, cached
    answers of a system that reports no version, unmapped / duplicate / future hits (``totals``: the summed
    :attr:`~evalkit.engine.live.mapping.Mapped.counts`)."""
    refused = len(s.refused)
    warns = []
    who = f"system {spec.name}"
    if refused:
        first = next(iter(s.refused.items()))
        ids = ", ".join(list(s.refused)[:5]) + (" …" if refused > 5 else "")
        warns.append(warning("live_refused_notes", f"{who}: {refused} of {ingest_docs} notes refused by the system: "
                                                   f"{ids} (first: {first[0]}: {first[1]}); its answers were "
                                                   f"scored as they are, without them", spec.name, refused))
    if s.faults:
        n, kinds = sum(s.faults.values()), ", ".join(f"{k} {v}" for k, v in sorted(s.faults.items()))
        again = "run again to re-ask them" if any(k in TRANSIENT for k in s.faults) else \
            "they are asked again on the next run"
        warns.append(warning("live_faults", f"{who}: {n} of {s.queries} queries failed ({kinds}; last: "
                                            f"{s.last_fault}); scored as empty lists — {again}", spec.name, n))
    if s.unreachable:
        warns.append(warning("live_unreachable", f"{who}: not reachable ({s.unreachable}); every answer came from "
                                                 f"the cache (version {s.version or 'none'}, as last reported)",
                             spec.name, s.cached))
    if s.cached and s.version is None and s.code is None:
        dates = sorted(d for d in s.cached_on if d != "?")
        when = (dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}") if dates else "an earlier run"
        if dates and "?" in s.cached_on:
            when += " and earlier"
        warns.append(warning("live_cached_unversioned", f"{who} reports no version: {s.cached} of {s.queries} "
                                                        f"answers cached on {when}; `--refresh` to ask again",
                             spec.name, s.cached))
    if totals["unmapped"]:
        warns.append(warning("live_unmapped_hits", f"{who}: {totals['unmapped']} hit(s) match no document of the "
                                                   f"dataset (by id, text or normalised text); each keeps its rank "
                                                   f"as a non-relevant hit", spec.name, totals["unmapped"]))
    if totals["duplicate"]:
        warns.append(warning("live_duplicate_hits", f"{who}: {totals['duplicate']} hit(s) repeat a document "
                                                    f"already listed for the query; each keeps its rank as a "
                                                    f"non-relevant hit", spec.name, totals["duplicate"]))
    if totals["future"] and protocol == "strict":
        warns.append(warning("live_future_hits", f"{who}: {totals['future']} returned document(s) on "
                                                 f"{future_queries} queries were created after the query's as_of, "
                                                 f"although only earlier ones were ingested", spec.name,
                             totals["future"]))
    return warns


LIVE_COUNTERS = ("live_queries", "live_asked", "live_cached", "live_faults", "live_retries", "live_ingested_docs",
                 "live_notes_sent", "live_notes_accepted",
                 "live_unmapped_hits", "live_duplicate_hits", "live_future_hits", "live_mapped_by_text",
                 "ingest_docs_per_s", *(f"latency_with_embedding_{k}" for k in LATENCY_KEYS))


def live_means(run: RetrieverRun) -> dict[str, float]:
    """The live counters and latency percentiles of ``run`` as metric rows."""
    return {k: float(v) for k, v in run.info.items()
            if (k in LIVE_COUNTERS or k.startswith("live_fault_")) and isinstance(v, (int, float))}


def summary_line(run: RetrieverRun) -> str:
    """One line: what the system was asked, what came from the cache, faults, latency."""
    i = run.info
    lat = (f"p50 {i['latency_with_embedding_p50_ms']:.1f} ms, p95 {i['latency_with_embedding_p95_ms']:.1f} ms"
           if "latency_with_embedding_p50_ms" in i else "n/a")
    ing = f"{i['ingest_docs_per_s']:.1f} docs/s" if "ingest_docs_per_s" in i else "n/a"
    c = i["live"]["cache"]
    refused = i.get("live_fault_note_refused", 0)
    sent = f"{i['live_notes_sent']:.0f} notes sent, {i['live_notes_accepted']:.0f} accepted" + (
        "" if i["live_ingested_docs"] or not i["live_notes_sent"] else " (as recorded when they were sent)")
    return (f"  system {run.name} ({i['live']['version'] or 'no version'}): {i['live_queries']:.0f} queries, "
            f"{i['live_asked']:.0f} asked, {i['live_cached']:.0f} from cache (cache hits {c['hits']}, misses "
            f"{c['misses']}, written {c['written']}), {sent}, {i['live_faults']:.0f} faults"
            f"{f' ({refused:.0f} notes refused)' if refused else ''}; latency {lat}; ingest {ing}")



__all__ = ["LATENCY_KEYS", "LIVE_COUNTERS", "live_means", "live_warnings", "summary_line"]
