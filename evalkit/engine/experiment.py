"""Run datasets × retrievers in quality mode and write one run folder (used by `evalkit run` and `make bench`)."""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
from dataclasses import dataclass, field
from pathlib import Path

from evalkit import __version__
from evalkit.data.groups import declared
from evalkit.data.registry import load_dataset
from evalkit.engine.context import make_context
from evalkit.engine.evaluate import Evaluation, evaluate_run, fill_tokens
from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.retriever import beyond_depth, run_system, split_retrievers
from evalkit.engine.live.text import live_means, summary_line
from evalkit.runfolder.write import RunWriter, package_versions
from evalkit.runfolder.history import link_latest, new_run_folder
from evalkit.engine.options import RunOptions
from evalkit.engine.run_warnings import emit
from evalkit.engine.trec_runs import COUNTERS, external_run
from evalkit.engine.runner import ResultRows, RetrieverRun, run_quality
from evalkit.measures.budget_curve import budget_curve
from evalkit.measures.chance import chance_level
from evalkit.measures.poison import PoisonLabels
from retrievers.embed.model import Embedder
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.index.lexical import tokenizer_info
from retrievers.tokens import tokenizer_info as llm_tokenizer_info
from retrievers.pipeline import Pipeline, load_preset
from retrievers.systems.file import SystemSpec
from retrievers.types import DataError, Dataset
from retrievers.text import plural


@dataclass
class DatasetRun:
    dataset: Dataset
    index: SharedIndex
    runs: dict[str, RetrieverRun]
    evals: dict[str, Evaluation]
    seconds: float
    visibility: dict | None = None  # the as-of visibility summary (retrievers.index.visibility.VisibleSets.summary)
    warnings: list[dict] = field(default_factory=list)  # evalkit.engine.run_warnings records, printed once
    vectors_used: bool = True  # a retriever needs embeddings (Pipeline.uses_vectors, or a live system)


def load_pipelines(names: list[str]) -> list[Pipeline]:
    return [load_preset(n) for n in names]


def load_retrievers(names: list[str]) -> tuple[list[Pipeline], list[SystemSpec]]:
    """``--retrievers`` items → (presets, live systems): a name or ``.toml`` path that is a system file
    (:mod:`evalkit.engine.live`) is a system, anything else a preset; every one validated before any work."""
    presets, systems = split_retrievers(names)
    pipes = load_pipelines(presets)
    clash = {p.name for p in pipes} & {s.name for s in systems}
    if clash:
        raise DataError(f"retriever name {sorted(clash)[0]!r} is both a preset and a system")
    return pipes, systems


def ungated(p: Pipeline) -> Pipeline | None:
    """The same pipeline without its gate stages (to measure what a gate's wrong skips cost)."""
    gates = [s for s in p.stages if s.kind == "gate"]
    if not gates:
        return None
    return Pipeline(p.name + "~ungated", p.description, p.arms, [s for s in p.stages if s.kind != "gate"],
                    p.budget, p.meta)


def run_dataset(name: str, pipelines: list[Pipeline], options: RunOptions, embedder: Embedder,
                dataset: Dataset | None = None, log=print, warn=emit,
                live_cache: ResponseCache | None = None, client=None) -> DatasetRun:
    """Every pipeline (and every external run file, every live system of ``options``) over the queries of
    ``options.split`` of dataset ``name`` (read with ``options.load_opts`` unless ``dataset`` is given).

    Live systems (:mod:`evalkit.engine.live`) are ingested as of each query under the run's as-of protocol and
    asked (answers from ``live_cache`` unless ``options.refresh``). Every warning of the run — the loader's, the run files',
    degenerate stages' (:mod:`evalkit.engine.degenerate`), the live systems' — is passed to ``warn`` (default: one
    ``evalkit: warning:`` line each on stderr) and kept in ``DatasetRun.warnings``. ``client``: a Dask client that
    embeds the corpus's missing texts and runs the pipelines' query blocks (:mod:`evalkit.engine.distribute`)."""
    t0 = time.perf_counter()
    o = options
    full = dataset or load_dataset(name, **o.load_opts)
    ds = select_queries(full, o.split, o.limit)
    warnings = [dict(w) for w in full.info.get("warnings") or []]
    warn(warnings)
    index = SharedIndex(ds, embedder=embedder, settings=o.settings)
    vis = index.visibility(ds)
    seen = index.visible.summary(ds.queries, vis)
    extra = [u for u in (ungated(p) for p in pipelines) if u is not None]
    runs = run_quality(ds, pipelines + extra, index, make_context(pipelines + extra, embedder), visibility=vis.protocol,
                       diagnose=o.diagnose, client=client, log=log) if pipelines else {}
    evals = {}
    texts = {d.id: d.text for d in ds.documents}
    for p in pipelines:
        fill_tokens(runs[p.name], texts)  # every retriever gets a token column (the live systems' is measured)
        evals[p.name] = evaluate_run(ds, runs[p.name], ungated=runs.get(p.name + "~ungated"))
        found = [dict(w, text=f"{ds.name}: {w['text']}") for w in runs[p.name].info.get("degenerate") or []]
        warn(found)
        warnings += found
    for u in extra:
        runs.pop(u.name, None)
    for rname, path in o.run_files.items():  # external TREC runs: scored as one more retriever
        run = runs[rname] = external_run(rname, path, ds, {q.id for q in full.queries}, o.run_file_missing,
                                         vis.protocol)
        scored = ds if o.run_file_missing == "zero" else ds.subset(run.info["answered"])
        evals[rname] = evaluate_run(scored, run)
        evals[rname].means.update({k: run.info[k] for k in COUNTERS})
        found = [dict(w, text=f"{ds.name}: {w['text']}") for w in run.info["warnings"]]
        warn(found)
        warnings += found
    for spec in o.systems:  # live systems: ingested as of each query, asked, scored as one more retriever
        run = runs[spec.name] = run_system(spec, ds, vis.protocol, refresh=o.refresh, cache=live_cache, log=log)
        evals[spec.name] = evaluate_run(ds, run)
        deep = beyond_depth(evals[spec.name], spec)
        evals[spec.name].means.update(live_means(run))
        log(summary_line(run))
        found = [dict(w, text=f"{ds.name}: {w['text']}") for w in run.info["warnings"] + ([deep] if deep else [])]
        warn(found)
        warnings += found
    log(f"  {ds.name}: {plural(len(ds.queries), 'query')}, {plural(len(ds.documents), 'document')}, "
        f"{plural(len(pipelines) + len(o.systems), 'retriever')} in {time.perf_counter() - t0:.1f}s "
        f"(embedded {plural(index.stats.get('embedded_texts', 0), 'new text')})")
    return DatasetRun(ds, index, runs, evals, time.perf_counter() - t0, seen, warnings,
                      vectors_used=bool(o.systems) or any(p.uses_vectors() for p in pipelines))


def select_queries(ds: Dataset, split: str | None, limit: int | None = None) -> Dataset:
    """The queries a quality run scores: ``split`` (default ``test`` when present, else ``all``), its first
    ``limit`` queries. DataError when none of them is judged (an empty qrels file, or a split nobody labelled):
    every ranking metric would be undefined and the run would print dashes."""
    sp = split or ("test" if "test" in ds.splits else ("all" if "all" in ds.splits else None))
    if sp:
        ds = ds.split(sp)
    if limit:
        ds = ds.head(limit)
    require_judged(ds, sp, limited=bool(limit))
    return ds


def require_judged(ds: Dataset, split: str | None, limited: bool = False) -> None:
    """DataError (one line) when no query of ``ds`` has a qrels row: nothing could be scored."""
    if not any(q.id in ds.qrels for q in ds.queries):
        which = f"the first {len(ds.queries)}" if limited else f"the {len(ds.queries)}"
        raise DataError(f"{ds.name}: none of {which} queries of split {split or 'all'!r} is judged (no qrels row "
                        f"names any of them), so there is nothing to score; check the dataset's qrels or the split")


def record(writer: RunWriter, dr: DatasetRun) -> None:
    ds = dr.dataset
    cats = {q.id: q.category for q in ds.queries}
    for name, ev in dr.evals.items():
        for m, v in ev.means.items():
            writer.add_metric(ds.name, name, m, v)
        for r in ev.breakdown:
            writer.by_category.append(dict(r, dataset=ds.name, retriever=name))
        for m, vals in ev.per_query.items():
            for q, v in vals.items():
                writer.per_query.append({"dataset": ds.name, "retriever": name, "query_id": q,
                                         "category": cats.get(q), "metric": m, "value": v})
        run = dr.runs[name]
        # the rendered block (a formatting budget stage's, a live system's) is kept, so `evalkit answer FOLDER`
        # answers exactly what was injected without running the retriever again
        writer.results[(ds.name, name)] = ResultRows(run.results)  # made when the folder is written
    writer.manifest["injected_blocks"] = True  # results carry every rendered block (older folders did not)
    live_latency(writer, ds.name, dr.runs)
    texts = {d.id: d.text for d in ds.documents}
    diag = {name: diagnostics(run, ds.qrels, texts) for name, run in dr.runs.items() if "funnel" in run.info}
    if diag:
        writer.diagnostics[ds.name] = diag
    man = writer.manifest
    man["vectors_used"] = bool(man.get("vectors_used")) or dr.vectors_used  # the header names embeddings only then
    man.setdefault("datasets", {})[ds.name] = {
        "hash": ds.content_hash(), "split": ds.info.get("split"), "queries": len(ds.queries),
        "documents": len(ds.documents), "unit": ds.unit, "index": dict(dr.index.manifest(),
                                                                      vectors_used=dr.vectors_used),
        "as_of_visibility": dr.visibility,
        "loader_info": {k: v for k, v in ds.info.items() if isinstance(v, (int, float, str, bool))}}
    # chance levels of the ranking measures (a random ranking of what each query can see) and the median pool
    strict = (dr.visibility or {}).get("protocol") == "strict"
    protocol = "strict" if strict else "all"
    visible = {q.id: dr.index.visible.visible_count(q.group or "", q.as_of, q.id, protocol) for q in ds.queries}
    names = sorted({m for ev in dr.evals.values() for m in ev.means})
    man["datasets"][ds.name]["chance"] = {m: round(v, 6) for m in names
                                          if (v := chance_level(m, ds.qrels, visible)) == v}
    man["datasets"][ds.name]["visible_median"] = float(np.median(list(visible.values()))) if visible else None
    cl = declared(ds, "clusters")  # an exported folder keeps its loader's clusters (evalkit.json)
    if cl:  # dependent queries (one conversation / haystack): the report's statistics resample these clusters
        man["datasets"][ds.name]["clusters"] = {"what": cl.get("what", cl.get("by")), "by": cl.get("by"),
                                                "of": {q.id: str(getattr(q, cl.get("by", "group")) or q.id)
                                                       for q in ds.queries}}
    planted = PoisonLabels.from_documents(ds.documents)
    if planted is not None:  # a poisoned dataset: its attacks and targets, for the report's robustness section
        man["datasets"][ds.name]["poison"] = {**planted.record(q.id for q in ds.queries),
                                              "planting": ds.info.get("poison")}
    for name, run in dr.runs.items():
        man.setdefault("retrievers", {})[name] = {"hash": run.pipeline.hash, "description": run.pipeline.description,
                                                  "config": run.pipeline.canonical(), **run.pipeline.meta}
        if "answered" in run.info:  # an external run file: what it answered and what was counted, per dataset
            man["datasets"][ds.name].setdefault("run_files", {})[name] = {
                **{k: int(run.info[k]) for k in COUNTERS}, "missing": run.info["missing_policy"],
                "scored_queries": len(run.results), "queries": len(ds.queries)}
        if "live" in run.info:  # a live system: its protocol, version, cache counters, ingest
            man["datasets"][ds.name].setdefault("live", {})[name] = run.info["live"]
    # everything the run warned about (evalkit.engine.run_warnings), for the report and for later readers
    man["datasets"][ds.name]["warnings"] = list(dr.warnings)


def live_latency(writer: RunWriter, dataset: str, runs: dict[str, RetrieverRun]) -> None:
    """The live systems' per-query end-to-end times into the run's ``latency.json`` (stage ``total_with_embedding``,
    as a preset's latency pass names the same quantity), so the report's latency table shows them."""
    lat = {name: {"total_with_embedding": [round(x, 7) for x in run.info["latency_s"]]}
           for name, run in runs.items() if run.info.get("latency_s")}
    if not lat:
        return
    data = json.loads(writer.extra_files.get("latency.json") or "{}")
    data.setdefault(dataset, {}).update(lat)
    writer.extra_files["latency.json"] = json.dumps(data, indent=1, sort_keys=True)


def diagnostics(run: RetrieverRun, qrels: dict, texts: dict[str, str]) -> dict:
    """The run folder's ``diagnostics.json`` entry of one retriever: recall funnel, threshold sensitivity and
    quality at a token budget (:mod:`evalkit.measures.budget_curve`)."""
    f = run.info["funnel"]
    r6 = lambda x: None if x is None or x != x else round(float(x), 6)  # noqa: E731 (NaN → null)
    curve = budget_curve(qrels, {q: [d for d, _ in r.ranked] for q, r in run.results.items()}, texts)
    return {"budget_curve": [{k: (v if k == "budget" else r6(v)) for k, v in row.items()} for row in curve],
            "funnel": {"k": f.k, "queries": f.n,
                       "steps": [{"step": a, "type": t, "kept": r6(v)} for a, t, v in f.steps]},
            "thresholds": [dict(t, as_shipped=r6(t["as_shipped"]), as_shipped_quantile=r6(t["as_shipped_quantile"]),
                                points=[[r6(a), q, r6(v)] for a, q, v in t["points"]]) for t in f.thresholds]}


def start_manifest(writer: RunWriter, argv: list[str], settings: IndexSettings, embedder: Embedder) -> None:
    man = writer.manifest
    man.update({"evalkit_version": __version__, "command": argv, "packages": package_versions(),
                "embedding_model": embedder.model_id, "index_settings": settings.record(),
                "lexical": tokenizer_info(), "seeds": {"split": "evalkit-split-1"},
                "data_dir": os.environ.get("EVALKIT_DATA")})
    try:
        man["llm_tokenizer"] = llm_tokenizer_info()
    except Exception:  # noqa: BLE001 - optional until the packer exists
        pass


def out_dir(out: str | None, stem: str = "run", args=None, log=print) -> Path:
    """``--out`` as given, else a new run folder ``reports/runs/<stem>/<UTC time>-<hash>/`` (runs never replace
    runs: :mod:`evalkit.runfolder.history`; the hash names the command's parsed arguments ``args``; call
    :func:`finish_out` after writing to move ``latest``)."""
    if out:
        return Path(out)
    parts = [f"{k}={v}" for k, v in sorted(vars(args).items()) if k != "fn"] if args is not None else sys.argv[1:]
    return new_run_folder(stem, parts, log=log)


def finish_out(out: str | None, written: Path, log=print) -> None:
    """After a default run folder is written: ``reports/runs/<stem>/latest`` → it."""
    if not out:
        link_latest(written, log)
