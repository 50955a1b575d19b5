"""`make bench`: every runnable preset × every available dataset → one comparison report under reports/bench/.

Datasets: the registry's ``bench`` suite (:data:`evalkit.data.registry.SUITES`: the project's own dataset always,
the public ones when the data directory has them); ``--full`` adds the ``bench.full`` suite. Each dataset's run
is written to ``reports/bench/datasets/<name>/`` with a *bench key* (preset hashes, dataset hash, index settings,
evalkit version) in its manifest: an interrupted bench resumes by reusing every finished dataset whose key still
matches; embeddings, indexes and candidate sets come from the cache, so an unfinished dataset restarts cheaply.
A latency pass (latency mode, warm, fixed threads) runs on the ``bench.latency`` suite.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import resource
import signal
import sys
import threading
import time
from pathlib import Path

from evalkit import __version__
from evalkit.data.registry import DATASETS, load_dataset, locate, suite
from evalkit.engine.experiment import record, run_dataset, select_queries, start_manifest
from evalkit.engine.options import RunOptions
from evalkit.engine.live.retriever import split_retrievers
from evalkit.engine.runner import percentiles, run_latency
from evalkit.measures.stats import Standing
from evalkit.report import write_reports
from evalkit.report.analysis import tie_standing
from evalkit.report.console import bench_leaderboard, headline_rows, mean_rank_lines, phase_table
from evalkit.report.format import fmt_mmss
from evalkit.runfolder.claim import claim_folder
from evalkit.runfolder.read import PER_QUERY_DECIMALS, coarser, per_query_decimals, read_run, safe
from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter
from retrievers.embed.model import Embedder
from retrievers.index.corpus import Corpus
from retrievers.memory import release_memory
from retrievers.index.shared import (LATENCY_EXACT_BELOW, IndexSettings, SharedIndex, text_lengths,
                                     user_lines)
from retrievers.pipeline import Pipeline, load_preset, preset_names
from retrievers.systems.file import SystemSpec
from retrievers.errors import did_you_mean
from retrievers.types import DataError

BENCH_DATASETS = suite("bench")
FULL_EXTRA = suite("bench.full")
LATENCY_DATASETS = suite("bench.latency")


def needs_external_model(p: Pipeline) -> str | None:
    """Why a preset cannot run offline on real data (e.g. it needs injected reranker probabilities)."""
    for s in p.stages:
        prm = s.params()
        if prm.get("provider") == "injected":
            return f"stage {s.display} needs reranker scores (a local model path or an HTTP reranker)"
        if prm.get("provider") == "local" and not prm.get("model_path"):
            return f"stage {s.display} needs a local reranker model path"
    return None


def how_to_run(p: Pipeline) -> str | None:
    """What to write to run a preset :func:`needs_external_model` rejects: a preset extending it with the stage's
    ``provider`` set (a local CrossEncoder folder or an HTTP reranker), or `evalkit score` on candidate files that
    carry the scores. None when the preset runs as it is."""
    for s in p.stages:
        prm = s.params()
        if prm.get("provider") not in ("injected", "local") or (prm.get("provider") == "local"
                                                                 and prm.get("model_path")):
            continue
        f = next((f for f in dataclasses.fields(s) if f.name == "provider"), None)
        http = [c for c in ((f.metadata.get("choices") if f else None) or ()) if c not in ("injected", "local")]
        label = s.display if "." not in s.display else f'"{s.display}"'
        return (f'a preset with extends = "{p.name}" and [overrides.{label}] provider = "local", model_path = '
                f'"<CrossEncoder folder>"' + (f" (or provider = {' | '.join(chr(34) + c + chr(34) for c in http)} with endpoint, "
                                              f"model, api_key_env)" if http else "")
                + "; or `evalkit score` on candidate files carrying metadata.rerank_p")
    return None


def runnable_presets(names: list[str] | None = None, log=print) -> tuple[list[Pipeline], dict[str, str]]:
    pipes, skipped = [], {}
    for n in names or preset_names():
        p = load_preset(n)
        why = needs_external_model(p)
        if why:
            skipped[n] = why
        else:
            pipes.append(p)
    for n, why in skipped.items():
        log(f"  skipping preset {n}: {why}")
    return pipes, skipped


def bench_key(ds_hash: str, pipes: list[Pipeline], settings: IndexSettings, embedding: str = "",
              diagnose: bool = False, systems: list[SystemSpec] = ()) -> str:
    """Identity of a finished dataset run: evalkit version, dataset, presets, index settings and the embedding
    model id (backend + model + max length), so a dataset finished with another embedder is never reused."""
    parts = [__version__, ds_hash, sorted((p.name, p.hash) for p in pipes), settings.record(), embedding]
    if diagnose:  # a finished dataset without funnels is not reused for a --diagnostics bench
        parts.append("diagnostics")
    if systems:  # live systems (their answers come from the response cache anyway)
        parts.append(sorted((s.name, s.hash) for s in systems))
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_bench(out: Path = Path("reports/bench"), full: bool = False, datasets: list[str] | None = None,
              presets: list[str] | None = None, latency: bool = True, latency_queries: int = 50,
              settings: IndexSettings | None = None, embedder: Embedder | None = None, log=print,
              diagnose: bool = False) -> Path:
    t_start, c_start = time.perf_counter(), time.process_time()
    phases = Phases(t_start)
    claim_folder(out, "bench")  # only a new/empty folder or an earlier bench's: refuses a user's path before any work
    settings = settings or IndexSettings()
    names = datasets or (BENCH_DATASETS + (FULL_EXTRA if full else []))
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise DataError(f"bench: unknown dataset(s) {', '.join(unknown)} (valid: {', '.join(DATASETS)})"
                        + "".join(did_you_mean(u, DATASETS) for u in unknown))
    avail = [n for n in names if locate(n) is not None]
    missing = [n for n in names if n not in avail]
    if not avail:
        raise DataError(f"bench: none of {', '.join(names)} is in the data directory (set EVALKIT_DATA)")
    for n in missing:
        log(f"  dataset {n}: not in the data directory, skipped (set EVALKIT_DATA)")
    names_, systems = split_retrievers(presets) if presets else (None, [])
    pipes, skipped = runnable_presets(names_, log) if names_ or not presets else ([], {})
    embedder = embedder or Embedder()
    combined = RunWriter(out / "latest", kind="bench-run")
    start_manifest(combined, sys.argv, settings, embedder)
    combined.manifest["skipped_presets"] = skipped
    combined.manifest["missing_datasets"] = missing
    timings: dict[str, float] = {}
    latency_json: dict = {}
    rate: list[float] = [0.0, 0.0]  # word pieces embedded, seconds spent embedding, in this run (for the estimates)
    done: list[str] = []
    ties: dict[str, Standing | None] = {}  # rank ranges per dataset (and how they were decided), computed once
    path = out / "latest"
    pending = ""  # a dataset whose quality run is written but whose latency pass is not finished
    restore = _sigterm_interrupts()
    try:
        # seconds after the start, before any model loads: the presets that embed nothing, on the first dataset
        first_answer(avail[0], pipes, systems, settings, embedder, out, log, phases, (t_start, c_start), full,
                     diagnose)
        for i, name in enumerate(avail, start=1):
            t0 = time.perf_counter()
            phases.close("reports" if i > 1 else "set-up")  # the previous dataset's reports; before the first: set-up
            ds = load_dataset(name)
            if full and ds.info.get("representation") == "maxp-user":
                ds.info["representation"] = "maxp"  # bench-full embeds every turn of every session
            tokens = corpus_tokens(ds, embedder) if rate[1] > 0 else None  # the model is loaded by then
            phases.close("set-up")
            log(progress_line(i, len(avail), ds, rate, time.perf_counter() - t_start, avail[i:], tokens))
            key = bench_key(ds.content_hash() + str(ds.info.get("representation")), pipes, settings,
                            embedder.model_id, diagnose, systems)
            folder = out / "datasets" / safe(name)
            reused = False
            if folder.exists():
                try:
                    prev = read_run(folder)
                    reused = prev["manifest"].get("bench_key") == key
                except Exception:  # noqa: BLE001 - a damaged folder is recomputed
                    reused = False
            want_latency = latency and name in LATENCY_DATASETS
            if reused and want_latency and prev["manifest"].get("bench_latency") == "pending":
                reused = False  # interrupted during its latency pass: recomputed (from the caches)
            if reused:
                log(f"  {name}: finished earlier (bench key {key}), reusing {folder}")
            else:
                w = RunWriter(folder, kind="bench-run")
                start_manifest(w, sys.argv, settings, embedder)
                w.manifest["bench_key"] = key
                # diagnose (--diagnostics): recall funnels, threshold sweeps and the budget curve in the report, as
                # `evalkit run` records them; off by default (measured: +41 % CPU time on memory-workspace)
                dr = run_dataset(name, pipes, RunOptions(settings=settings, diagnose=diagnose, systems=systems),
                                 embedder, dataset=ds, log=log)
                st = dr.index.stats
                phases.split_run(st)
                if st.get("embedded_texts") and st.get("embed_seconds"):
                    # the word pieces of what was embedded: the corpus's, in the share of its units that were new
                    share = min(1.0, st["embedded_texts"] / max(1, st.get("units") or st["embedded_texts"]))
                    rate[0] += (tokens if tokens is not None else corpus_tokens(ds, embedder)) * share
                    rate[1] += st["embed_seconds"]
                    phases.close("set-up")  # the corpus's word pieces counted just above (the model's tokenizer)
                record(w, dr)
                if want_latency:
                    # the quality numbers are the answer: written (without this folder's own report) and shown
                    # before the latency pass, which then adds its figures and rewrites both reports
                    w.manifest["bench_latency"] = "pending"
                else:
                    write_reports(w)
                w.write()
            _merge(combined, folder, name, latency_json)
            timings[name] = time.perf_counter() - t0
            done.append(name)
            # the combined report and leaderboards are rewritten after every dataset: the first answer comes
            # after the first (smallest) dataset, not after the last
            path = _write_combined(combined, timings, latency_json)
            summary(combined, log, only=name, ties=ties)
            log(f"\n  report updated after {len(done)}/{len(avail)} dataset(s) at "
                f"+{_since(t_start, c_start)}: {path}/report.html, {path}/report.md")
            if want_latency and not reused:
                pending = name
                phases.close("reports")
                lat = _latency(dr.dataset, pipes, dr.index, latency_queries, log) if pipes else {}
                phases.close("latency pass")
                # live systems: every query's end-to-end time from the live run itself (no separate pass)
                lat.update({n: {"total_with_embedding": [round(x, 7) for x in r.info["latency_s"]]}
                            for n, r in dr.runs.items() if r.info.get("latency_s")})
                latency_json[name] = lat
                w.extra_files["latency.json"] = json.dumps({name: lat}, indent=1, sort_keys=True)
                w.manifest["latency_exact_below"] = LATENCY_EXACT_BELOW
                w.manifest["bench_latency"] = "done"
                _add_latency(w, name, lat)
                write_reports(w)
                w.write()
                _add_latency(combined, name, lat)
                timings[name] = time.perf_counter() - t0
                path = _write_combined(combined, timings, latency_json)
                log(f"  {name}: latency figures added to the report at +{_since(t_start, c_start)}")
                pending = ""
            # this dataset's index (vectors, BM25 indexes, candidate sets), runs and rows are on disk now: they leave
            # memory before the next dataset loads, so the peak is one dataset's, not two
            if not reused:
                dr.index.close()
            dr = w = ds = prev = None
            release_memory()
    except KeyboardInterrupt:
        log(f"\nbench interrupted after {len(done)}/{len(avail)} dataset(s) "
            f"({', '.join(done) or 'none finished'}); finished datasets are kept in {out / 'datasets'}"
            + (f" and in {path}/report.html" if done else "")
            + (f" ({pending}'s latency pass was not finished: a resume redoes it)" if pending else "")
            + ". To resume, run the same command again (`make bench` for make's): finished datasets are reused "
              "and the embeddings, indexes and candidates already computed come from the cache.")
        raise
    finally:
        restore()
    if len(avail) > 1:
        summary(combined, log, ties=ties)
    phases.close("reports")
    log(f"\nbench finished in {time.perf_counter() - t_start:.0f}s: {path}/report.html, {path}/report.md")
    log(phases.render())
    return path


def first_answer(name: str, pipes: list[Pipeline], systems: list, settings: IndexSettings, embedder: Embedder,
                 out: Path, log, phases: "Phases", start: tuple[float, float], full: bool = False,
                 diagnose: bool = False) -> Path | None:
    """The first answer of a bench in seconds: the presets that read no vectors (BM25 alone, FTS-only), on the first
    dataset, before any model is loaded or anything embedded — their leaderboard on the console and a report in
    ``out/latest``, which the first full dataset then replaces with every preset. Nothing when every preset reads
    vectors (or none does: the first dataset's own run is as quick), when live systems are asked, or when the first
    dataset's run is already finished (it is reused at once). The numbers are those the full run writes for the same
    presets (the same candidates, the same code). Returns the report folder, or None when there is nothing to do."""
    lexical = [p for p in pipes if not p.uses_vectors()]
    if not lexical or len(lexical) == len(pipes) or systems:
        return None
    ds = load_dataset(name)
    if full and ds.info.get("representation") == "maxp-user":
        ds.info["representation"] = "maxp"
    key = bench_key(ds.content_hash() + str(ds.info.get("representation")), pipes, settings, embedder.model_id,
                    diagnose, systems)
    try:
        if read_run(out / "datasets" / safe(name))["manifest"].get("bench_key") == key:
            return None
    except Exception:  # noqa: BLE001 - missing or damaged: the full run recomputes it
        pass
    phases.close("set-up")
    w = RunWriter(out / "latest", kind="bench-run")
    start_manifest(w, sys.argv, settings, embedder)
    w.manifest["first_answer"] = [p.name for p in lexical]
    # its warnings are the full run's too: said there, once
    dr = run_dataset(name, lexical, RunOptions(settings=settings), embedder, dataset=ds, log=log,
                     warn=lambda found: None)
    phases.split_run(dr.index.stats)
    record(w, dr)
    write_reports(w)
    path = w.write()
    summary(w, log, only=name)
    log(f"\n  first answer at +{_since(*start)}: the {len(lexical)} presets that embed nothing on {name} "
        f"({', '.join(p.name for p in lexical)}): {path}/report.html, {path}/report.md; the "
        f"{len(pipes) - len(lexical)} presets that read vectors follow (the report is rewritten with every preset)")
    phases.close("reports")
    return path


def peak_rss_bytes() -> tuple[int, int]:
    """The peak resident memory of this process and of its largest finished child process (``getrusage``'s
    ``ru_maxrss``: kilobytes on Linux, bytes on macOS)."""
    scale = 1 if sys.platform == "darwin" else 1024
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale)


class Phases:
    """Where a bench's wall time went: every second between ``start`` and the last :meth:`close` belongs to one
    phase (set-up, embedding, indexing, runs, latency pass, reports), so the phases add up to the total.

    :meth:`close` gives the time since the previous close to a phase; :meth:`split_run` divides a dataset's
    ``run_dataset`` between embedding and indexing (the shared index's own clocks) and the runs (the rest).

    >>> p = Phases(0.0)
    >>> p.split_run({"embed_seconds": 2.0, "chroma_build_seconds": 1.0}, now=5.0)
    >>> p.close("reports", now=6.0)
    >>> p.seconds
    {'set-up': 0.0, 'embedding': 2.0, 'indexing': 1.0, 'runs': 2.0, 'latency pass': 0.0, 'reports': 1.0}
    """

    NAMES = ("set-up", "embedding", "indexing", "runs", "latency pass", "reports")

    def __init__(self, start: float):
        self.start = self.mark = start
        self.seconds = dict.fromkeys(self.NAMES, 0.0)

    def close(self, phase: str, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self.seconds[phase] += now - self.mark
        self.mark = now

    def split_run(self, stats: dict, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        span = now - self.mark
        embed = min(span, float(stats.get("embed_seconds") or 0.0))
        index = min(span - embed, float(stats.get("chroma_build_seconds") or 0.0)
                    + float(stats.get("bm25_build_seconds") or 0.0))
        self.seconds["embedding"] += embed
        self.seconds["indexing"] += index
        self.seconds["runs"] += span - embed - index
        self.mark = now

    def render(self) -> str:
        """The closing table: each phase's seconds and share of the total, then the peak memory."""
        return phase_table(self.seconds, *peak_rss_bytes())


def _sigterm_interrupts():
    """SIGTERM (``kill``, a CI timeout) is handled as Ctrl-C while the bench runs, so it too keeps every finished
    dataset and says how to resume; returns the function that puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, before)


def _add_latency(writer: RunWriter, name: str, lat: dict) -> None:
    """The latency pass's percentiles as metric rows (``latency_p50`` …, ``latency_with_embedding_p50`` …)."""
    for ret, stages in lat.items():
        if "total" not in stages:  # a live system: its latency_with_embedding_* rows come from its live run
            continue
        for k, v in percentiles(stages["total"]).items():
            writer.add_metric(name, ret, f"latency_{k}", v)
        for k, v in percentiles(stages["total_with_embedding"]).items():
            writer.add_metric(name, ret, f"latency_with_embedding_{k}", v)


def _write_combined(combined: RunWriter, timings: dict, latency_json: dict) -> Path:
    combined.manifest["bench_seconds"] = {k: round(v, 1) for k, v in timings.items()}
    if latency_json:
        combined.extra_files["latency.json"] = json.dumps(latency_json, indent=1, sort_keys=True)
    write_reports(combined)
    return combined.write()


def _since(t_start: float, c_start: float) -> str:
    """``m:ss`` of wall time since the start, with this process's CPU time (all threads) beside it: on a shared
    machine the wall time measures the neighbours too, the CPU time only this bench's work."""
    return f"{fmt_mmss(time.perf_counter() - t_start)} (CPU {fmt_mmss(time.process_time() - c_start)})"


def corpus_tokens(ds, embedder: Embedder) -> int:
    """Word pieces the embedding model reads for ``ds``'s corpus under its representation: every piece of every
    document for MaxP (the user side only for ``maxp-user``), at most the model's window per document for
    ``truncate``. The embedding time of a corpus follows this, not its number of documents (a LongMemEval session
    is ~100× a memory-workspace chunk)."""
    rep = ds.info.get("representation", "maxp")
    texts = Corpus(ds).texts
    if rep == "maxp-user":
        texts = [user_lines(t) for t in texts]
    window = embedder.max_seq_length - 2
    # the counts the MaxP split of this corpus reads too (remembered in this process: tokenized once for both)
    lengths = text_lengths(texts, embedder.tokenizer())
    return sum(min(n, window) for n in lengths) if rep == "truncate" else sum(lengths)


def progress_line(i: int, n: int, ds, rate: list[float], elapsed: float, after: list[str],
                  tokens: int | None = None) -> str:
    """``bench [i/n] <dataset>: what is embedded, and a time estimate``: the corpus's word pieces (``tokens``,
    :func:`corpus_tokens`) at the word pieces per second this run measured so far (``rate``)."""
    docs = len(ds.documents)
    rep = ds.info.get("representation", "maxp")
    est = ""
    if rate[1] > 0 and rate[0] > 0 and tokens:
        tps = rate[0] / rate[1]
        est = (f"; {tokens:,} word pieces to embed at the {tps:,.0f}/s measured so far: about "
               f"{fmt_mmss(tokens / tps)} when cold (nothing for cached vectors)")
    nxt = f"; then {', '.join(after)}" if after else "; the last dataset"
    scored = len(select_queries(ds, None).queries)  # the queries the quality run scores (its default split)
    queries = (f"{scored:,} queries" if scored == len(ds.queries)
               else f"{scored:,} of its {len(ds.queries):,} queries scored (the default split)")
    return (f"\nbench [{i}/{n}] +{fmt_mmss(elapsed)} {ds.name}: {docs:,} documents ({rep}), {queries}"
            f"{est}{nxt}")


def _latency(ds, pipes, index: SharedIndex, n: int, log) -> dict:
    """Latency mode over a memory store of one user's size: groups (visible sets) of up to
    ``LATENCY_EXACT_BELOW`` vector units are searched exactly, as a per-user store would be (recorded in the
    manifest as ``latency_exact_below``); the quality numbers above were computed with the run's own settings."""
    sub = ds.head(n)
    t0 = time.perf_counter()
    before = index.settings.exact_below
    index.settings.exact_below = max(before, LATENCY_EXACT_BELOW)
    try:
        res = run_latency(sub, pipes, index, repeats=1, warmup=5, threads=1)
    finally:
        index.settings.exact_below = before
    log(f"  {ds.name}: latency pass ({len(sub.queries)} queries × {len(pipes)} presets) in "
        f"{time.perf_counter() - t0:.0f}s")
    return {ret: {k: [round(x, 7) for x in v] for k, v in st.items()} for ret, st in res.stages.items()}


def _merge(combined: RunWriter, folder: Path, name: str, latency_json: dict) -> None:
    run = read_run(folder)
    for r in run["metrics"]:
        combined.add_metric(r["dataset"], r["retriever"], r["metric"], r["value"] if r["value"] is not None
                            else float("nan"))
    with open(folder / "metrics_by_category.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            combined.by_category.append({**r, "value": float(r["value"]) if r["value"] else float("nan"),
                                         "n": int(r["n"])})
    # its per-query rows and results (a million rows, hundreds of MB with the injected blocks) stay on disk: the
    # combined folder streams them from there when it is written and when its report reads them
    combined.include(folder)
    man = run["manifest"]
    for k in ("datasets", "retrievers"):
        combined.manifest.setdefault(k, {}).update(man.get(k, {}))
    # a folder from before per-query values kept full precision: the combined file holds its rounded values
    combined.manifest[PER_QUERY_DECIMALS] = coarser(per_query_decimals(combined.manifest), per_query_decimals(man))
    diag = folder / "diagnostics.json"
    if diag.exists():
        combined.diagnostics.update(json.loads(diag.read_text(encoding="utf-8")))
    lat = folder / "latency.json"
    if lat.exists() and name not in latency_json:
        latency_json.update(json.loads(lat.read_text()))


def summary(writer: RunWriter, log=print, only: str | None = None,
            ties: dict[str, Standing | None] | None = None) -> None:
    """Leaderboard per dataset (top 10 by nDCG@10, ``#`` a rank range as on the report's leaderboard: "1–3" = not
    significantly different from the best) and an overall ranking by the mean best and worst rank across datasets
    (``only``: that dataset's leaderboard alone; ``ties``: standings already computed, filled in place). Where no
    test can separate any pair (:func:`evalkit.measures.stats.standing`), the leaderboard says so once, ranks by the
    mean and names the clusters the best wins against each."""
    rows = headline_rows(writer.metrics)
    ties = {} if ties is None else ties
    run = RunData.from_writer(writer)
    ranks: dict[str, list[tuple[int, int]]] = {}
    for ds, lst in rows.items():
        if only is not None and ds != only:
            continue
        if ds not in ties:
            ties[ds] = tie_standing(run, ds, [r for r, _ in lst], "ndcg@10")
        st = ties[ds]
        rng = {r: (st.ranks if st else {}).get(r, (i, i)) for i, (r, _) in enumerate(lst, start=1)}
        for ret, _ in lst:
            ranks.setdefault(ret, []).append(rng[ret])
        for line in bench_leaderboard(ds, lst, st, rng):
            log(line)
    if len(rows) > 1 and only is None:
        for line in mean_rank_lines(ranks):
            log(line)
