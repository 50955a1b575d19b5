"""Replay a logged-query file (DESIGN.md §4, "Contract — logged queries") through retrievers, in quality mode.

Every valid event becomes a query with its own "now" (``as_of`` = ``ts``) and its follow-up ``context``; all
retrievers run over one shared candidate set (:func:`evalkit.engine.runner.run_quality`). A replay declares the
``strict`` as-of visibility protocol whatever the corpus: production, at ``ts``, held only the notes created by
then, so each event searches only those (``--as-of-visibility all`` replays over the final store instead); the
manifest, ``replay.md`` and the printed header state the protocol and how many notes each event could see.

A log has no relevance judgements, so what a replay can say is *behavioural*: how often each retriever skips or
injects, whether it keeps its budget, how much the retrievers agree with each other and with production, and —
through the agent's logged ``response`` — which notes production injected that the agent actually used.

Metric rows (``dataset`` = the replay label, e.g. ``memory-workspace:querylog``), per retriever:

* ``skip_rate`` — share of events a gate skipped; ``injection_rate`` — share with >= 1 injected note;
  ``injected_{chunks,tokens,chars}_{mean,max}`` — the injected block. A preset without a budget packer injects
  its whole ranked list (the harness convention, :func:`retrievers.pipeline.injected_mask`); its ``tokens`` are
  then the sum of the injected chunks' BPE tokens (cl100k_base, no formatting).
* ``budget_compliance`` (the preset's own ``[budget]`` table) and one ``<policy>_compliance`` per common policy
  of ``evalkit/measures/policies.toml`` — share of events within every limit
  (:func:`evalkit.measures.budget.compliance`).
* ``negative_age_{candidates,share,queries}`` (pipelines with a time stage) — candidates a decay / recency stage
  scored with a date after the event's ``ts`` (:func:`evalkit.engine.evaluate.age_metrics`).
* Overlap with every other retriever ``X`` (the same value is written under both retrievers of a pair):
  ``jaccard@k:X`` = mean |A_k ∩ B_k| / |A_k ∪ B_k| of the top-k ranked ids, and ``rbo:X`` = mean extrapolated
  rank-biased overlap (:func:`rbo_ext`, p = 0.9) of the full ranked lists; both over the events where at least
  one of the two lists is non-empty (one empty list scores 0).
* Agreement with production (events whose ``injected`` is logged; an id not in the corpus is counted and keeps its
  place as a note no retriever can match — :func:`evalkit.engine.trec_runs.place_foreign_ids`):
  ``prod_jaccard`` and ``prod_recall`` (share of production's injected notes the retriever also injected) over
  events where production injected >= 1 note; ``prod_precision`` (share of the retriever's injected notes
  production also injected) over those events where the retriever injected >= 1; ``prod_decision_agreement`` =
  share of logged events where both injected something or both injected nothing.
* Citation pseudo-labels: a production-injected note is *cited* when the logged ``response`` cites it under
  HookClaw's rule (PIPELINES.md §C.4, :func:`retrievers.stages.helpers.feedback.is_citation`, threshold configurable,
  default 0.3). Pseudo-qrels = the cited notes (grade 1). ``pseudo_ndcg@k`` / ``pseudo_recall@k`` (ranx, over the
  ranked list) and ``pseudo_injected_recall`` (over the injected list) are averaged over events with >= 1 cited
  note (``pseudo_events``). **These labels are biased toward production**: only notes production injected can
  be cited, so a retriever that finds a better note the agent never saw gets no credit for it.

Production itself is one more ``retriever`` row (``production``): events, injection rate, injected chunks,
cited events and the log's own ``latency_ms`` percentiles (p50/p90/p95/p99, mean, max). The replay's wall time is
not a latency measurement and is not reported as one (latency mode measures stages for real).

Bad log lines (not JSON, no ``query``, no/invalid ``ts``; :func:`evalkit.data.readers.querylog.load_querylog`) are skipped,
counted and listed in ``replay_skipped.json`` with the log's field notes and the unknown injected ids; a log with
zero valid events is a one-line :class:`DataError`.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Iterable

import numpy as np

from evalkit.data.groups import jaccard  # one definition: near-duplicate queries are clustered by it too
from evalkit.data.readers.querylog import QueryLog, load_querylog
from evalkit.data.registry import load_dataset
from evalkit.runfolder.claim import file_sha256
from evalkit.engine.context import make_context
from evalkit.engine.evaluate import age_metrics, dataset_labels, fill_tokens
from evalkit.measures import catalogue
from evalkit.measures.harms import harm_means
from evalkit.measures.budget import compliance
from evalkit.engine.experiment import load_retrievers
from evalkit.engine.live.retriever import run_system
from evalkit.engine.live.text import live_means, summary_line
from evalkit.engine.run_warnings import PREFIX, line
from evalkit.engine.trec_runs import place_foreign_ids
from evalkit.engine.runner import ResultRows, RetrieverRun, run_quality
from evalkit.measures.lists import evaluate
from evalkit.report import replay as render
from evalkit.measures.overlap import RBO_P, jaccard_at_k, rbo_ext
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex
from retrievers.stages.helpers.feedback import CITATION_RATIO, CITATION_RULE, CITATION_RULE_SOURCE, is_citation
from retrievers.types import DataError, Dataset, Query, declare_visibility

DEFAULT_K = 10
PRODUCTION = "production"
LATENCY_PERCENTILES = (50, 90, 95, 99)


# ---- citations ----------------------------------------------------------------------------------------------------

def cited_notes(injected: Iterable[str], texts: dict[str, str], response: str | None,
                threshold: float = CITATION_RATIO) -> list[str]:
    """The injected notes the response cites under HookClaw's 30 % significant-word rule (PIPELINES.md §C.4),
    via the shared :func:`retrievers.stages.helpers.feedback.is_citation`. Ids without a text are ignored."""
    if not response:
        return []
    return [d for d in dict.fromkeys(injected) if d in texts and is_citation(texts[d], response, threshold)]


# ---- the replay set -----------------------------------------------------------------------------------------------

@dataclass
class ReplaySet:
    """A log turned into queries over one corpus, with production's injections and the citation pseudo-qrels."""

    label: str
    base: Dataset
    log: QueryLog
    dataset: Dataset  # base corpus + the log's queries; qrels = pseudo-qrels
    production: dict[str, list[str] | None]  # query id → injected ids, unknown ones kept (None = not logged)
    cited: dict[str, list[str]]  # query id → cited notes (events with a response and injections)
    unknown_injected: dict[str, int] = field(default_factory=dict)  # id → occurrences
    unknown_events: int = 0
    threshold: float = CITATION_RATIO


def log_label(base_name: str, log_path: Path) -> str:
    stem = Path(log_path).name
    for suf in (".gz", ".jsonl", ".json", ".ndjson"):
        if stem.endswith(suf):
            stem = stem[: -len(suf)]
    return f"{base_name}:{stem or 'querylog'}"


def _group_for(base: Dataset) -> str | None:
    groups = {d.group or "" for d in base.documents}
    if len(groups) != 1:
        return None
    return next(iter(groups)) or None


def build_replay_set(base: Dataset, log: QueryLog, threshold: float = CITATION_RATIO,
                     label: str | None = None) -> ReplaySet:
    """Queries from the log events (id ``log:<line>``, ``as_of`` = ts, context kept), production's injected ids
    filtered to the corpus, and the pseudo-qrels from citations.

    Groups: a single-group corpus (the memory workspace) gives every event its group; a multi-group corpus needs
    a ``group`` key on each event (unknown keys are kept by the log reader)."""
    if not 0.0 < threshold <= 1.0:
        raise DataError(f"citation threshold must be in (0, 1], got {threshold}")
    label = label or log_label(base.name, log.path)
    only = _group_for(base)
    groups = {d.group or "" for d in base.documents}
    texts = {d.id: d.text for d in base.documents}
    queries: list[Query] = []
    production: dict[str, list[str] | None] = {}
    cited: dict[str, list[str]] = {}
    unknown: dict[str, int] = {}
    unknown_events = 0
    no_group = 0
    for ev in log.events:
        q = ev.to_query()
        g = ev.extra.get("group")
        if isinstance(g, str) and g in groups:
            q.group = g or None
        elif len(groups) == 1:
            q.group = only
        else:
            no_group += 1
        cat = ev.extra.get("category")
        if isinstance(cat, str):
            q.category = cat
        queries.append(q)
        if ev.injected is None:
            production[q.id] = None
            continue
        # an id the corpus lacks keeps its slot, as a note no retriever can match (the one rule for foreign ids:
        # evalkit.engine.trec_runs.place_foreign_ids) — dropping it would raise the agreement with production
        listed, bad = place_foreign_ids([(d, 0.0) for d in dict.fromkeys(ev.injected)], texts)
        for d, _ in listed:
            if d not in texts:
                unknown[d] = unknown.get(d, 0) + 1
        unknown_events += bad > 0
        production[q.id] = [d for d, _ in listed]
        known = [d for d in production[q.id] if d in texts]
        c = cited_notes(known, texts, ev.response, threshold)
        if c:
            cited[q.id] = c
    if no_group:
        raise DataError(f"dataset {base.name!r} has {len(groups)} groups: {no_group} log event(s) carry no valid "
                        f"'group' key, so they cannot be replayed against one memory store")
    info = {"querylog": str(log.path), "base": base.name}
    declare_visibility(info, "strict", "a logged event could only retrieve what the store held at its ts")
    ds = Dataset(name=label, documents=base.documents, queries=queries,
                 qrels={q: {d: 1 for d in c} for q, c in cited.items()}, splits={"all": [q.id for q in queries]},
                 info=info, unit=base.unit)
    ds.share_doc_index(base)
    return ReplaySet(label, base, log, ds, production, cited, unknown, unknown_events, threshold)


# ---- metrics ------------------------------------------------------------------------------------------------------

def _mean(vals: list[float]) -> float:
    vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(vals)) if vals else float("nan")


def behaviour_metrics(run: RetrieverRun) -> dict[str, float]:
    res = list(run.results.values())
    n = len(res) or 1
    out = {"events": float(len(res)),
           "skip_rate": sum(r.skipped for r in res) / n,
           "injection_rate": sum(1 for r in res if r.injected) / n}
    b = [r.budget for r in res]
    for k in ("chunks", "tokens", "chars"):
        vals = [x[k] for x in b if x.get(k) is not None]
        if vals:
            out[f"injected_{k}_mean"] = float(np.mean(vals))
            out[f"injected_{k}_max"] = float(np.max(vals))
    out["budget_compliance"] = compliance(b, run.pipeline.budget or {})  # the [budget] table only, as logged
    for pol in catalogue.POLICIES:
        out[pol.measure] = compliance(b, pol.limit_dict)
    out.update(age_metrics(run))
    return out


def agreement_metrics(run: RetrieverRun, production: dict[str, list[str] | None]) -> tuple[dict, dict]:
    """(means, per-event values) of the agreement with production's injected sets."""
    jac, rec, prec, dec = {}, {}, {}, {}
    for q, r in run.results.items():
        prod = production.get(q)
        if prod is None:
            continue
        mine = set(r.injected)
        ps = set(prod)
        dec[q] = float(bool(mine) == bool(ps))
        if not ps:
            continue
        jac[q] = jaccard(ps, mine)
        rec[q] = len(ps & mine) / len(ps)
        if mine:
            prec[q] = len(ps & mine) / len(mine)
    per = {"prod_jaccard": jac, "prod_recall": rec, "prod_precision": prec, "prod_decision_agreement": dec}
    means = {m: _mean(list(v.values())) for m, v in per.items()}
    means["prod_events"] = float(len(jac))
    return means, per


def pseudo_metrics(run: RetrieverRun, qrels: dict[str, dict[str, int]], k: int) -> tuple[dict, dict]:
    """pseudo-nDCG@k / pseudo-recall@k (ranx, ranked list) and pseudo_injected_recall, over cited events."""
    names = [f"ndcg@{k}", f"recall@{k}"]
    if not qrels:
        return {f"pseudo_{m}": float("nan") for m in names} | {"pseudo_injected_recall": float("nan"),
                                                             "pseudo_events": 0.0}, {}
    pq = evaluate(qrels, {q: r.ranked for q, r in run.results.items()}, names)
    per = {f"pseudo_{m}": v for m, v in pq.items()}
    per["pseudo_injected_recall"] = {q: len(set(rel) & set(run.results[q].injected)) / len(rel)
                                     for q, rel in qrels.items() if q in run.results}
    means = {m: _mean(list(v.values())) for m, v in per.items()}
    means["pseudo_events"] = float(len(qrels))
    return means, per


def overlap_metrics(runs: dict[str, RetrieverRun], k: int, p: float = RBO_P) -> dict[tuple[str, str], dict]:
    """Mean Jaccard@k and RBO_ext for every unordered pair of retrievers (over events where either list is
    non-empty)."""
    out: dict[tuple[str, str], dict] = {}
    names = list(runs)
    lists = {n: {q: [d for d, _ in r.ranked] for q, r in runs[n].results.items()} for n in names}
    for a, b in combinations(names, 2):
        js, rs = [], []
        for q, la in lists[a].items():
            lb = lists[b].get(q, [])
            if not la and not lb:
                continue
            js.append(jaccard_at_k(la, lb, k))
            rs.append(rbo_ext(la, lb, p))
        out[(a, b)] = {f"jaccard@{k}": _mean(js), "rbo": _mean(rs), "events": len(js)}
    return out


def production_metrics(rs: ReplaySet) -> dict[str, float]:
    evs = rs.log.events
    out: dict[str, float] = {"events": float(len(evs)), "skipped_lines": float(len(rs.log.skipped)),
                             "unknown_injected_ids": float(sum(rs.unknown_injected.values())),
                             "unknown_injected_events": float(rs.unknown_events)}
    logged = [v for v in rs.production.values() if v is not None]
    out["injected_logged_events"] = float(len(logged))
    if logged:
        out["injection_rate"] = sum(1 for v in logged if v) / len(logged)
        out["injected_chunks_mean"] = float(np.mean([len(v) for v in logged]))
    outcomes = [e.extra["outcome"] for e in evs if isinstance(e.extra.get("outcome"), str)]
    if outcomes:  # an imported plugin log states each call's outcome (skipped / injected / ...)
        out["outcome_events"] = float(len(outcomes))
        out["skip_rate"] = sum(o == "skipped" for o in outcomes) / len(outcomes)
    out["response_events"] = float(sum(1 for e in evs if e.response))
    out["cited_events"] = float(len(rs.cited))
    injected_any = sum(1 for q, v in rs.production.items() if v)
    if injected_any:
        out["cited_share_of_injecting_events"] = len(rs.cited) / injected_any
    lat = np.array([e.latency_ms for e in evs if e.latency_ms is not None], dtype=np.float64)
    out["latency_events"] = float(len(lat))
    if len(lat):
        for pc in LATENCY_PERCENTILES:
            out[f"latency_ms_p{pc}"] = float(np.percentile(lat, pc))
        out["latency_ms_mean"] = float(lat.mean())
        out["latency_ms_max"] = float(lat.max())
    return out


@dataclass
class ReplayResult:
    replay: ReplaySet
    runs: dict[str, RetrieverRun]
    means: dict[str, dict[str, float]]  # retriever (and "production") → metric → value
    per_query: dict[str, dict[str, dict[str, float]]]  # retriever → metric → query → value
    overlap: dict[tuple[str, str], dict]
    k: int
    seconds: float = 0.0
    index_manifest: dict = field(default_factory=dict)
    visibility: dict | None = None  # the as-of visibility summary (retrievers.index.visibility.VisibleSets.summary)

    @property
    def production(self) -> dict[str, float]:
        """Production's own means (from the log: injection, cited events, latency percentiles, harms)."""
        return self.means[PRODUCTION]

    # -- its forms, rendered by evalkit.report.replay ---------------------------------------------------------
    def to_text(self) -> str:
        """The terminal table: one row per retriever, then production's line."""
        return render.render_text(self)

    def to_markdown(self) -> str:
        """replay.md: the log, the table and its notes, production, pairwise overlap."""
        return render.render_markdown(self)


def score_replay(rs: ReplaySet, runs: dict[str, RetrieverRun], k: int = DEFAULT_K) -> ReplayResult:
    texts = {d.id: d.text for d in rs.base.documents}
    means: dict[str, dict[str, float]] = {}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    for name, run in runs.items():
        fill_tokens(run, texts)
        m = behaviour_metrics(run)
        am, ap = agreement_metrics(run, rs.production)
        pm, pp = pseudo_metrics(run, rs.dataset.qrels, k)
        hm, hp = _harms(rs, {q: r.injected for q, r in run.results.items()})
        means[name] = {**m, **am, **pm, **hm}
        per_query[name] = {**ap, **pp, **hp}
    overlap = overlap_metrics(runs, k)
    for (a, b), v in overlap.items():
        for x, y in ((a, b), (b, a)):
            means[x][f"jaccard@{k}:{y}"] = v[f"jaccard@{k}"]
            means[x][f"rbo:{y}"] = v["rbo"]
    means[PRODUCTION] = production_metrics(rs)
    means[PRODUCTION].update(_harms(rs, {q: v for q, v in rs.production.items() if v is not None})[0])
    return ReplayResult(rs, runs, means, per_query, overlap, k)


def _harms(rs: ReplaySet, injected: dict[str, list[str]]) -> tuple[dict, dict]:
    """Secret leak and junk rate of what was injected per event, from the base dataset's labels (the same
    computation as a run's, evalkit.measures.harms; the other harms need query labels a log does not have)."""
    means, pq = harm_means(dataset_labels(rs.base), {}, {q: list(v) for q, v in injected.items()}, injected)
    keep = catalogue.names("replay.harms")
    return {m: means[m] for m in keep}, {m: v for m, v in pq.items() if m in keep}


# ---- running ------------------------------------------------------------------------------------------------------

def serve_from_cache(run: RetrieverRun, qids: list[str]) -> int:
    """A stage that answers an event from another event's results (``info["served_from"][i]`` = index of the
    event whose list answers event i, -1 = its own; e.g. a prompt cache) — put that event's results in place.
    Returns how many events were answered so."""
    served = run.info.get("served_from")
    if served is None:
        return 0
    own = {qid: run.results[qid] for qid in qids if qid in run.results}
    n = 0
    for i, src in enumerate(np.asarray(served).tolist()):
        if src >= 0 and qids[i] in own and qids[src] in own:
            r = own[qids[src]]
            run.results[qids[i]] = type(r)(list(r.ranked), list(r.injected), False, dict(r.budget), r.block)
            n += 1
    return n


def run_replay(log_path: Path, dataset: str, retrievers: list[str], settings=None, embedder=None,
               threshold: float = CITATION_RATIO, k: int = DEFAULT_K, use_cache: bool = True,
               warn=None, log=print, load_opts: dict | None = None, refresh: bool = False) -> ReplayResult:
    """Load the log and the dataset, run every retriever over the log's events, score the replay.

    A live system (a system file among ``retrievers``, :mod:`evalkit.engine.live`) is sent every logged query at its
    own time: it ingests the corpus as it was at each event's ``ts`` (strict protocol) and is asked the event's query
    with its logged context; its answers are compared with what production logged like any preset's, and its
    end-to-end latency percentiles sit beside the log's own. ``refresh``: ask it again instead of the cache.

    Inputs are validated (presets, system files, threshold, k, log) before the index is built. ``warn`` gets the
    one-line summary of skipped log lines / unknown ids (default: stderr)."""

    warn = warn or (lambda msg: print(msg, file=sys.stderr))
    if k < 1:
        raise DataError(f"--k must be >= 1, got {k}")
    if not retrievers:
        raise DataError("no retrievers given")
    if len(set(retrievers)) != len(retrievers):
        raise DataError(f"retriever listed twice: {', '.join(retrievers)}")
    pipelines, systems = load_retrievers(retrievers)
    if PRODUCTION in {p.name for p in pipelines} | {s.name for s in systems}:
        raise DataError(f"a retriever may not be called {PRODUCTION!r} (reserved for the log's own numbers)")
    qlog = load_querylog(Path(log_path))  # zero valid events → DataError
    t0 = time.perf_counter()
    base = load_dataset(dataset, **(load_opts or {}))
    for w in base.info.get("warnings") or []:
        warn(line(w))
    rs = build_replay_set(base, qlog, threshold)
    if qlog.skipped or rs.unknown_injected:
        parts = []
        if qlog.skipped:
            parts.append(f"{len(qlog.skipped)} bad log line(s) skipped ({render.skipped_summary(qlog)}), "
                         f"{len(qlog.events)} events replayed")
        if rs.unknown_injected:
            parts.append(f"{sum(rs.unknown_injected.values())} injected id(s) not in the corpus, kept as notes no "
                         f"retriever can match ({rs.unknown_events} event(s))")
        warn(f"{PREFIX}replay {qlog.path.name}: " + "; ".join(parts) + " — listed in replay_skipped.json")
    embedder = embedder or Embedder()
    index = SharedIndex(base, embedder=embedder, settings=settings)
    vis = index.visibility(rs.dataset)
    ctx = make_context(pipelines, embedder)
    ctx.options["query_order"] = "log"  # stages that carry state across events (a prompt cache) may act
    runs = run_quality(rs.dataset, pipelines, index, ctx, use_cache=use_cache, visibility=vis.protocol) \
        if pipelines else {}
    for run in runs.values():
        serve_from_cache(run, [q.id for q in rs.dataset.queries])
        for w in run.info.get("degenerate") or []:
            warn(line(w))
    for spec in systems:  # the logged queries at their own time, against the memory as it was then
        runs[spec.name] = run_system(spec, rs.dataset, vis.protocol, refresh=refresh, log=log)
        log(summary_line(runs[spec.name]))
        for w in runs[spec.name].info["warnings"]:
            warn(line(w))
    result = score_replay(rs, runs, k)
    for spec in systems:
        result.means[spec.name].update(live_means(runs[spec.name]))
    result.seconds = time.perf_counter() - t0
    result.index_manifest = index.manifest()
    result.visibility = index.visible.summary(rs.dataset.queries, vis)
    log(f"  {rs.label}: {len(qlog.events)} events ({len(qlog.skipped)} bad lines), {len(base.documents)} documents, "
        f"{len(pipelines) + len(systems)} retrievers in {result.seconds:.1f}s")
    return result


# ---- output -------------------------------------------------------------------------------------------------------

def skipped_report(rs: ReplaySet) -> dict:
    log = rs.log
    return {"log": str(log.path), "events": len(log.events), "skipped_count": len(log.skipped),
            "skipped_by_reason": log.summary()["skipped_by_reason"],
            "skipped": [{"line": n, "reason": r} for n, r in log.skipped],
            "field_notes": [{"line": n, "note": r} for n, r in log.notes],
            "unknown_injected": {"count": sum(rs.unknown_injected.values()), "events": rs.unknown_events,
                                 "ids": dict(sorted(rs.unknown_injected.items()))}}


def record_replay(writer, result: ReplayResult) -> None:
    """Metric rows, per-event rows, per-retriever results and the replay's manifest entries into a RunWriter."""
    rs = result.replay
    label = rs.label
    for name, m in result.means.items():
        for metric, v in m.items():
            writer.add_metric(label, name, metric, v)
    cats = {q.id: q.category for q in rs.dataset.queries}
    for name, per in result.per_query.items():
        for metric, vals in per.items():
            for q, v in vals.items():
                writer.per_query.append({"dataset": label, "retriever": name, "query_id": q,
                                         "category": cats.get(q), "metric": metric, "value": v})
    for name, run in result.runs.items():
        writer.results[(label, name)] = ResultRows(run.results, blocks=False)
    man = writer.manifest
    base = rs.base
    man.setdefault("datasets", {})[label] = {
        "hash": rs.dataset.content_hash(), "base_dataset": base.name, "corpus_hash": base.corpus_hash(),
        "documents": len(base.documents), "queries": len(rs.dataset.queries), "unit": base.unit,
        "index": result.index_manifest, "as_of_visibility": result.visibility,
        "querylog": {"path": str(rs.log.path), "sha256": file_sha256(rs.log.path), **rs.log.summary()}}
    for name, run in result.runs.items():
        man.setdefault("retrievers", {})[name] = {"hash": run.pipeline.hash, "description": run.pipeline.description,
                                                  "config": run.pipeline.canonical(), **run.pipeline.meta}
    man["replay"] = {"citation_threshold": rs.threshold, "k": result.k, "rbo_p": RBO_P,
                     "citation_rule": f"{CITATION_RULE_SOURCE} via retrievers.stages.helpers.feedback.is_citation",
                     **{pol.name: pol.limit_dict for pol in catalogue.POLICIES}}
    writer.extra_files["replay_skipped.json"] = json.dumps(skipped_report(rs), indent=1, ensure_ascii=False) + "\n"
    writer.extra_files["replay.md"] = result.to_markdown()




__all__ = ["cited_notes", "build_replay_set", "score_replay", "run_replay", "record_replay", "ReplaySet",
           "ReplayResult"]
