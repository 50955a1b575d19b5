"""Tune a preset's stage parameters on a labelled split, report on held-out queries (`evalkit tune`).

The search space's file format (params, ties, simplexes, choices, arms, constraints) is documented in
:mod:`evalkit.tune.space`, where it is parsed.

Methods: ``grid`` (the product of every free dimension), ``tpe`` / ``gp`` / ``random`` (Optuna's
TPE, Gaussian-process and random samplers, seeded with ``seed``: ``init`` startup configs, then batches of
``batch`` configs asked together, evaluated as one sweep and told together; see :mod:`evalkit.tune.search`).
Every config is evaluated with :mod:`evalkit.engine.sweep` on the shared candidates — in process, in
``--workers`` forked processes or on a Dask cluster (``--cluster``); with a journal folder the sweep's results
and the Optuna study are kept on disk so a killed run computes only what is missing when started again.

Protocol (:mod:`evalkit.tune.protocol`): no group (a conversation, a haystack, an identical evidence set, a
near-duplicate question — :mod:`evalkit.data.groups`) is ever on both sides of a split or fold. The estimate is a
held-out split, or cross-validation by group (the default where a dataset has few groups — LoCoMo's 10
conversations: leave-one-conversation-out — or where the held-out split is the dataset's sealed lockbox), or a time
split (``--split-by time``). A declared split that cuts a group is refused in one line (``--resplit`` re-splits). A
dataset's lockbox is never read; ``--final`` scores the chosen config there once and counts the opening
(:mod:`evalkit.tune.lockbox`). ``splits.json`` in the output folder holds the rule, each query's group and the ids
of every split and fold; the tuned file's header states the split, the denominator, every official measure of the
dataset (``info["official_measures"]``, and where a compared preset beats the tuned config on one), the estimate and
the optimism of a by-query split (the same selection cross-validated by query vs by group).

Selection: the best config maximises the objective on the tuning queries among configs meeting every
constraint that can be measured offline (quality, budget, skip metrics: on the tuning queries). Latency
constraints (``p50/p90/p95/p99/mean_latency_ms``) are checked on the ``latency_top`` best configs with a real
latency run (:func:`evalkit.engine.runner.run_latency`, end to end without the query embedding, ``latency_queries``
queries); the first that passes wins. If the runner has no latency mode, they are reported as "not checked".

Output folder: ``summary.json``, ``configs.csv`` (every evaluated config), ``leaderboard.csv`` / ``.md`` (the
best ``top`` configs and the as-shipped preset: tuning and held-out metric, constraint status), ``best.toml``
(a preset that ``extends`` the tuned one with ``[overrides]``: ``evalkit run --retrievers best.toml``),
``report.md``, and ``plots/*.png`` (objective vs each 1-D parameter; a simplex plot when weights vary together).
Significance of best vs as shipped (and vs each baseline) on the estimate (and on the lockbox; computed in
:mod:`evalkit.tune.estimate`) uses :func:`evalkit.measures.stats.compare_pairs` (paired sign-flip randomisation + paired t-test; each interval at the Holm-adjusted level of its row), clustered when the dataset declares clusters (``info["clusters"]``: whole LoCoMo conversations flip sign
and are resampled together — the same code path as ``evalkit compare``)."""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

import evalkit.engine.runner as runner
from evalkit.data.registry import load_dataset
from evalkit.runfolder.claim import claim_folder
from evalkit.engine.context import make_context
from evalkit.engine.evaluate import dataset_labels
from evalkit.engine.experiment import require_judged
from evalkit.engine.sweep import Sweep, SweepConfig, deepest_arms
from evalkit.data.groups import declared
from evalkit.measures import catalogue
from evalkit.measures.arrays import parse_metric
from evalkit.tune import estimate
from evalkit.tune.lockbox import JOURNAL_NAME, LockboxJournal, lockbox_key, space_sha, times
from evalkit.tune.output import (
    best_toml,
    console_summary,
    flat_str,
    json_default,
    leaderboard_markdown,
    leaderboard_rows,
    report_markdown,
    write_configs,
    write_csv,
)
from evalkit.tune.plots import write_plots
from evalkit.tune.protocol import Options, Protocol, declared_clusters, resolve
from evalkit.tune.search import Evaluator, Trial, make_trial, probe_effects, search
from evalkit.tune.space import load_space  # noqa: F401  (load_space: the public entry point)
from evalkit.tune.space_model import LATENCY, Space
from retrievers.candidates.arms import ArmSpec
from retrievers.embed.model import Embedder
from retrievers.errors import ConfigError
from retrievers.index.shared import IndexSettings, SharedIndex, describe_representation
from retrievers.pipeline import load_preset
from retrievers.candidates.search import build_candidates

DEFAULT_METRICS = catalogue.names("tune.default")
INJECTED_METRICS = catalogue.names("tune.injected")




# ---- the tuning run ------------------------------------------------------------------------------------------------

@dataclass
class TuneResult:
    out: Path
    summary: dict
    text: str  # the console summary


def _arm_bound(space: Space, rng: np.random.Generator) -> list[SweepConfig]:
    """Configs whose arms cover the deepest depth the search can ask for (the candidates are built that deep)."""
    if not any(p.arm for p in space.params):
        return []
    if space.method == "grid":
        return [space.config(a)[0] for a in space.grid()]
    us = [np.zeros(space.dims), np.ones(space.dims) - 1e-12] + list(rng.random((4096, space.dims)))
    us += [np.asarray(c, dtype=float) for c in itertools.product([0.0, 1.0 - 1e-12], repeat=min(space.dims, 10))]
    cfgs = [space.config(space.decode(u))[0] for u in us]
    depth: dict[str, int] = {}
    for c in cfgs:
        for a, d in c.arms.items():
            depth[a] = max(depth.get(a, 0), int(d.get("depth", 0)))
    return [SweepConfig(arms={a: {"depth": d}}) for a, d in depth.items()]


def _check_depths(space: Space, built: dict[str, int], trials: list[Trial]) -> None:
    for t in trials:
        for a, d in t.config.arms.items():
            if d.get("depth", 0) > built.get(a, 0):
                raise ConfigError(f"{space.path}: config {flat_str(t.flat)} asks arm {a!r} for depth {d['depth']} "
                                  f"but candidates were built to {built.get(a)} (non-monotone tie?)")


def _latency_check(space: Space, ds, index, trials: list[Trial], log) -> dict[str, dict]:
    """{trial key: {metric: value}} from a real latency run, or {} when the runner has none."""
    fn = getattr(runner, "run_latency", None)
    pct = getattr(runner, "percentiles", None)
    if fn is None or pct is None:
        return {}
    pipes = []
    for i, t in enumerate(trials):
        p = t.config.pipeline(space.pipeline)
        pipes.append(dataclasses.replace(p, name=f"{p.name}#lat{i}"))
    log(f"  latency run: {len(pipes)} configs x {min(space.latency_queries, len(ds.queries))} queries "
        f"(x{space.latency_repeats})")
    res = fn(ds, pipes, index, repeats=space.latency_repeats, warmup=3, threads=1, limit=space.latency_queries)
    out = {}
    for t, p in zip(trials, pipes):
        rec = res.stages.get(p.name, {})
        q = pct(rec.get("total", []))
        out[t.key] = {m: q.get(k, float("nan")) for m, k in LATENCY.items()}
    return out


def code_digest() -> str:
    """sha256 of the code a config's metrics depend on (every module of ``retrievers``, ``evalkit.measures`` and
    the sweep engine): a journal written by other code is not reused."""
    import retrievers  # lazy: startup
    from evalkit import measures  # lazy: startup
    from evalkit.engine import sweep as sweep_module  # lazy: startup
    h = hashlib.sha256()
    files = sorted(Path(retrievers.__file__).parent.rglob("*.py")) + sorted(
        Path(measures.__file__).parent.rglob("*.py")) + [Path(sweep_module.__file__)]
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def sweep_key(space: Space, env: "_Env", metrics: list[str], settings) -> dict:
    """What a config's metrics depend on besides the config: the journal of a sweep is keyed by it (preset
    hashes, dataset content hash, split, seed, metrics, index settings, embedding model, the space's parameters).
    The trial budget, batch and sampler are not part of it: a search given more trials resumes the same sweep."""
    raw = {k: v for k, v in space.raw.items() if k not in ("trials", "batch", "init", "method", "top", "workers")}
    return {"kind": "tune-sweep", "code": code_digest(), "preset": space.pipeline.hash,
            "baselines": [b.hash for b in env.baselines], "dataset": env.ds.content_hash(), "split": env.split,
            "pool": hashlib.sha256("\n".join(env.proto.pool).encode()).hexdigest()[:16],
            "seed": space.seed, "metrics": metrics, "keep": [space.objective], "space": raw,
            "index": repr(settings), "embedder": getattr(env.index.embedder, "model_id", None)}


def run_tune(space: Space, out: str | Path | None = None, workers: int | None = None, settings=None, embedder=None,
             log: Callable[[str], None] = print, progress: bool = False, cluster=None,
             journal: str | Path | None = None, options: Options | None = None,
             lockbox_journal: str | Path | None = None) -> TuneResult:
    """Tune ``space`` and write the output folder (see the module docstring).

    ``cluster``: a ``distributed.Client`` the sweeps run on (see :mod:`evalkit.engine.cluster`); ``journal``: a
    folder for the sweep's results journal and the Optuna study, so a killed run resumes (see
    :mod:`evalkit.engine.journal`); ``options``: the split choices of the command line
    (:class:`evalkit.tune.protocol.Options`: ``split_by``, ``split_date``, ``folds``, ``resplit``, ``final``);
    ``lockbox_journal``: the file that counts lockbox openings (default ``lockbox.jsonl`` beside the space)."""
    from evalkit.engine.journal import SweepJournal  # lazy: startup
    from evalkit.tune.search import journal_storage  # lazy: startup

    opts = options or Options()
    t_start = time.perf_counter()
    claim = claim_folder(out or Path("reports") / "tune" / space.name, "tune")  # refuses a user's path before any work
    out = claim.path
    rng = np.random.default_rng(space.seed)
    env = _prepare(space, settings, embedder, log, rng, opts)
    ds, split, pool, heldout, heldout_ds, proto = env.ds, env.split, env.pool, env.heldout, env.heldout_ds, env.proto
    labels = dataset_labels(ds)  # harm labels (secret_leak_rate) of the whole corpus: every split shares it
    index, specs_all, built, baselines, cs, ctx = env.index, env.specs, env.built, env.baselines, env.cs, env.ctx
    official = official_measures(ds, space.objective)
    metrics = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS
                                 + [c.metric for c in space.constraints if not c.latency] + official))
    sw = Sweep(space.pipeline, cs, pool.qrels, metrics, ctx=ctx, keep=[space.objective], labels=labels)
    n_workers = workers or space.workers or 1
    sj = storage = None
    if journal is not None:
        sj = SweepJournal(journal, sweep_key(space, env, metrics, settings or IndexSettings()))
        storage = journal_storage(Path(journal) / f"{sj.id}.optuna.jsonl")
    study = f"{space.name}:{space.method}:seed{space.seed}"
    ev = Evaluator(space, sw, n_workers, log, cluster=cluster, journal=sj)
    judged = list(sw.judg.judged_ids)
    if not judged:
        raise ConfigError(f"{space.path}: no judged queries in {ds.name}/{split}")
    shipped_i = ev.add([make_trial(space, {}, shipped=True)])[0]

    def note(msg):
        if progress:
            log("  " + msg)

    no_effect = probe_effects(space, ev, log)
    folds = []
    fold = proto.fold_of(judged) if proto.mode == "cv" else None
    if fold is not None:
        for f in range(int(fold.max()) + 1):
            idx = search(space, ev, fold != f, rng, note, storage, f"{study}:{proto.grouping.rule}:fold{f}")
            _check_depths(space, built, [ev.trials[i] for i in idx])
            folds.append((f, idx))
    search(space, ev, None, rng, note, storage, study)
    _check_depths(space, built, ev.trials)
    where = f"cluster of {ev.workers_used}" if cluster is not None else f"{n_workers}"
    log(f"  evaluated {len(ev.trials)} configs in {ev.seconds:.2f}s ({len(ev.trials) / max(ev.seconds, 1e-9):.0f} "
        f"configs/s, {len(ev.trials) * cs.Q / max(ev.seconds, 1e-9):.0f} query-evals/s, {where} worker(s); "
        f"stage runs {ev.stage_calls} of {ev.naive_calls} without sharing"
        + (f"; {ev.resumed} read back from the journal" if sj is not None else "")
        + (f"; sampler overhead {1e3 * ev.search_seconds / ev.asked:.2f} ms per config" if ev.asked else "") + ")")

    sign = 1.0 if space.maximize else -1.0
    obj = np.array([ev.objective(i, None) for i in range(len(ev.trials))])
    feas = np.array([ev.feasible(i) for i in range(len(ev.trials))])
    key = np.where(np.isnan(obj), -np.inf, sign * obj)
    ranking = sorted(range(len(ev.trials)), key=lambda i: (not feas[i], -key[i], i))

    # latency constraints on the best few (and the as-shipped preset)
    lat_cons = [c for c in space.constraints if c.latency]
    latency: dict[str, dict] = {}
    latency_note = None
    best_i = ranking[0]
    if lat_cons:
        cands = [i for i in ranking if feas[i]][:space.latency_top]
        check = [ev.trials[i] for i in dict.fromkeys(cands + [shipped_i])]
        try:
            latency = _latency_check(space, pool, index, check, log)
        except Exception as exc:  # noqa: BLE001 - a failed latency run must not lose the tuning result
            latency_note = f"not checked: latency run failed ({type(exc).__name__}: {exc})"
        if not latency and latency_note is None:
            latency_note = "not checked: evalkit.engine.runner has no latency mode (run_latency)"
        if latency:
            passing = [i for i in cands if all(c.ok(latency[ev.trials[i].key][c.metric]) for c in lat_cons)]
            if passing:
                best_i = passing[0]
            else:
                latency_note = (f"no config among the best {len(cands)} meets the latency constraints: the best "
                                f"offline config is reported")
    best = ev.trials[best_i]

    def status(i: int) -> dict[str, str]:
        st = {}
        for c in space.constraints:
            if c.latency:
                lat = latency.get(ev.trials[i].key)
                st[c.text] = ("pass" if c.ok(lat[c.metric]) else "fail") if lat else "not checked"
            else:
                st[c.text] = "pass" if c.ok(ev.means[c.metric][i]) else "fail"
        return st

    # held-out scoring of the leaderboard, the best config, the as-shipped preset and the baselines
    top = list(dict.fromkeys(ranking[:space.top] + [best_i, shipped_i]))
    held: dict[int, tuple[dict, np.ndarray]] = {}
    base_res: dict[str, dict] = {}
    # held-out and baseline scoring is a handful of configs: also report what the model actually sees (the
    # injected block), which compares systems whose ranked lists have different lengths fairly
    hm = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS + official
                            + [c.metric for c in space.constraints if not c.latency] + INJECTED_METRICS))
    held_ids: list[str] = []
    if heldout_ds is not None:
        hcs = build_candidates(index, heldout_ds.queries, specs_all)
        hsw = Sweep(space.pipeline, hcs, heldout_ds.qrels, hm, ctx=ctx, keep=[space.objective], labels=labels)
        hres = hsw.run([ev.trials[i].config for i in top], workers=1)
        for j, i in enumerate(top):
            held[i] = ({m: float(hres.means[m][j]) for m in hm}, hres.per_query[space.objective][j])
        held_ids = hres.query_ids
    for b in baselines:
        rec = {}
        bsw = Sweep(b, cs, pool.qrels, hm, ctx=ctx, keep=[space.objective], labels=labels)
        r = bsw.run([SweepConfig()])
        rec["train"] = {m: float(r.means[m][0]) for m in hm}
        rec["train_pq"] = r.per_query[space.objective][0]
        if heldout_ds is not None:
            r = Sweep(b, hcs, heldout_ds.qrels, hm, ctx=ctx, keep=[space.objective],
                      labels=labels).run([SweepConfig()])
            rec["heldout"] = {m: float(r.means[m][0]) for m in hm}
            rec["heldout_pq"] = r.per_query[space.objective][0]
        base_res[b.name] = rec

    # the estimate: held-out split, or cross-validation by group
    obj_name = space.objective
    versus = [f"{space.pipeline.name} (as shipped)"] + list(base_res)
    cv_summary = None
    if heldout_ds is not None:
        pairs = [(held[shipped_i][1], held[best_i][1])] + [(r["heldout_pq"], held[best_i][1])
                                                           for r in base_res.values()]
        sig_ids = held_ids
        gap = ev.means[obj_name][best_i] - held[best_i][0][obj_name]
        where_tested = (f"time split: the queries asked at or after {proto.time_date}" if proto.mode == "time"
                        else f"held-out split {heldout!r}")
    else:
        cv, fold_rows, gaps, fold_best = estimate.cross_validate(ev, fold, folds, shipped_i, feas, sign)
        pairs = [(ev.per_query[shipped_i], cv)] + [(r["train_pq"], cv) for r in base_res.values()]
        sig_ids = judged
        gap = float(np.mean(gaps))
        where_tested = (f"{proto.fold_text(judged)} over {split!r} (each query scored by the config tuned without "
                        f"its fold)")
        oof = _out_of_fold(space, cs, pool, ctx, labels, ev, fold, fold_best, best_i, shipped_i, official, judged)
        fm = np.array([r["heldout"] for r in fold_rows])
        cv_summary = {"rows": fold_rows, "heldout_mean": float(cv.mean()), "folds": len(fold_rows),
                      "fold_rule": proto.fold_text(judged), "fold_mean": float(fm.mean()),
                      "fold_sd": float(fm.std(ddof=1)) if len(fm) > 1 else 0.0, "fold_min": float(fm.min()),
                      "fold_max": float(fm.max()), "out_of_fold": oof}
    sig_rows = estimate.significance(pairs, versus, space.maximize, declared_clusters(ds, sig_ids))
    stats_note = estimate.stats_note(ds, sig_ids, obj_name, where_tested, space.maximize)
    optimism = estimate.optimism(ev, judged, proto, shipped_i, feas, sign, space.seed)

    # the lockbox (--final): the chosen config, as shipped and the baselines, once
    lock = None
    if opts.final:
        lock = _open_lockbox(space, env, hm, labels, [best, ev.trials[shipped_i]], baselines, log, lockbox_journal,
                             best, obj_name)
        lock["significance"] = estimate.significance(
            [(lock["pq"]["shipped"], lock["pq"]["best"])] + [(lock["pq"][b], lock["pq"]["best"]) for b in base_res],
            versus, space.maximize, declared_clusters(ds, lock["query_ids"]))
        lock["significance_method"] = estimate.stats_note(ds, lock["query_ids"], obj_name,
                                                          f"lockbox {proto.lockbox!r}", space.maximize)

    # ---- write -------------------------------------------------------------------------------------------------
    summary = {
        "space": space.path, "name": space.name, "description": space.description, "preset": space.pipeline.name,
        "preset_hash": space.pipeline.hash, "dataset": ds.name, "dataset_hash": ds.content_hash(),
        "split": split, "heldout": heldout, "folds": cv_summary["folds"] if cv_summary else None, "seed": space.seed,
        "objective": obj_name, "direction": "maximize" if space.maximize else "minimize", "method": space.method,
        "constraints": [c.text for c in space.constraints], "index": describe_representation(index.manifest()),
        "queries": {"tuning": len(pool.queries), "tuning_judged": len(judged),
                    "outside_splits": _outside_splits(ds),
                    "heldout": len(heldout_ds.queries) if heldout_ds else None,
                    "heldout_judged": len(held_ids) if heldout_ds else None},
        "protocol": {"mode": proto.mode, "rule": proto.grouping.rule, "group_is": proto.grouping.what,
                     "notes": proto.notes, "resplit": proto.resplit, "time_split_date": proto.time_date,
                     "lockbox": proto.lockbox, "lockbox_queries": len(proto.lockbox_ids),
                     "split_summary": proto.summary,
                     "fold_check": proto.fold_check(ds, judged) if proto.mode == "cv" else None},
        "sweep": {"configs": len(ev.trials), "seconds": ev.seconds, "cpu_seconds": ev.cpu,
                  "configs_per_second": len(ev.trials) / max(ev.seconds, 1e-9),
                  "query_evals_per_second": len(ev.trials) * cs.Q / max(ev.seconds, 1e-9),
                  "stage_calls": ev.stage_calls, "naive_stage_calls": ev.naive_calls, "workers": n_workers,
                  "cluster_workers": ev.workers_used if cluster is not None else None,
                  "resumed_from_journal": ev.resumed, "journal": str(sj.path) if sj is not None else None,
                  "sampler_seconds": ev.search_seconds, "sampler_ms_per_config":
                      1e3 * ev.search_seconds / ev.asked if ev.asked else None,
                  "budget_stage_run": sw.run_budget},
        "shipped": {"train": {m: ev.means[m][shipped_i] for m in metrics},
                    "heldout": held[shipped_i][0] if heldout_ds else None, "constraints": status(shipped_i)},
        "best": {"config": best.flat, "overrides": best.config.overrides, "arms": best.config.arms,
                 "train": {m: ev.means[m][best_i] for m in metrics},
                 "heldout": held[best_i][0] if heldout_ds else None, "constraints": status(best_i),
                 "feasible": bool(feas[best_i])},
        "gap": gap, "gap_note": ("train − held-out objective of the best config" if heldout_ds else
                                 "mean over folds of (tuning-fold − held-out-fold objective) of each fold's best"),
        "significance": sig_rows, "significance_method": stats_note, "no_effect": no_effect,
        "optimism": optimism,
        "baselines": {n: {k: v for k, v in r.items() if not k.endswith("_pq")} for n, r in base_res.items()},
        "latency": ({ev.trials[i].key: latency[ev.trials[i].key] for i in range(len(ev.trials))
                     if ev.trials[i].key in latency} if latency else None),
        "latency_note": latency_note if lat_cons else None,
        "seconds": time.perf_counter() - t_start,
    }
    if cv_summary:
        summary["cv"] = cv_summary
    if lock:
        summary["lockbox"] = {k: v for k, v in lock.items() if k not in ("pq", "query_ids")}
    summary["official"] = official_report(summary, official, obj_name)
    board = leaderboard_rows(space, ev, top, ranking, held, shipped_i, best_i, status, metrics, heldout_ds is not None)
    summary["best_preset"] = str(out / "best.toml")
    with claim.staging() as tmp:  # the folder is written whole, then renamed into place
        (tmp / "plots").mkdir()
        write_configs(tmp / "configs.csv", ev, metrics, feas, status)
        write_csv(tmp / "leaderboard.csv", board)
        (tmp / "leaderboard.md").write_text(leaderboard_markdown(board), encoding="utf-8")
        (tmp / "best.toml").write_text(best_toml(space, best, summary), encoding="utf-8")
        (tmp / "splits.json").write_text(json.dumps(proto.splits_json(judged, opened=lock is not None), indent=1,
                                                    sort_keys=True) + "\n", encoding="utf-8")
        plots = write_plots(space, ev, tmp / "plots", shipped_i, best_i, feas)
        summary["plots"] = [p.relative_to(tmp).as_posix() for p in plots]
        text = console_summary(space, summary, ds.name)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=json_default)
                                          + "\n", encoding="utf-8")
        (tmp / "report.md").write_text(report_markdown(space, summary, board, text), encoding="utf-8")
    return TuneResult(out, summary, text)


# ---- out-of-fold means, the lockbox, the official measures ---------------------------------------------------------

def _out_of_fold(space, cs, pool, ctx, labels, ev, fold, fold_best, best_i, shipped_i, official, judged) -> dict:
    """Out-of-fold means of every ranking metric of the report (each query scored by its fold's config), by one
    small sweep over the folds' configs; run-level rates (leaks, abstention) are the config chosen on all tuning
    queries, measured on them (in-sample: they are not per query)."""
    ranking = [m for m in dict.fromkeys([space.objective] + official + DEFAULT_METRICS + space.metrics)
               if not parse_metric(m).run_level]
    uniq = list(dict.fromkeys(fold_best))
    res = Sweep(space.pipeline, cs, pool.qrels, ranking, ctx=ctx, keep=ranking, labels=labels).run(
        [ev.trials[i].config for i in uniq])
    if res.query_ids != judged:
        raise RuntimeError("out-of-fold scoring: the judged queries changed order")
    out = {}
    for m in ranking:
        v = np.zeros(len(judged))
        for f, i in enumerate(fold_best):
            te = fold == f
            v[te] = res.per_query[m][uniq.index(i)][te]
        out[m] = float(v.mean())
    return out




def _open_lockbox(space, env, hm, labels, trials, baselines, log, journal_path, best, obj_name) -> dict:
    """Score the chosen config, the as-shipped preset and the baselines on the lockbox, once; record the opening."""
    proto, ds = env.proto, env.ds
    lds = ds.subset(proto.lockbox_ids)
    require_judged(lds, proto.lockbox)
    lcs = build_candidates(env.index, lds.queries, env.specs)
    sw = Sweep(space.pipeline, lcs, lds.qrels, hm, ctx=env.ctx, keep=[obj_name], labels=labels)
    res = sw.run([t.config for t in trials], workers=1)
    out = {"split": proto.lockbox, "queries": len(lds.queries), "judged": len(res.query_ids),
           "best": {m: float(res.means[m][0]) for m in hm}, "shipped": {m: float(res.means[m][1]) for m in hm},
           "baselines": {}, "pq": {"best": res.per_query[obj_name][0], "shipped": res.per_query[obj_name][1]},
           "query_ids": res.query_ids}
    for b in baselines:
        r = Sweep(b, lcs, lds.qrels, hm, ctx=env.ctx, keep=[obj_name], labels=labels).run([SweepConfig()])
        out["baselines"][b.name] = {m: float(r.means[m][0]) for m in hm}
        out["pq"][b.name] = r.per_query[obj_name][0]
    path = Path(journal_path) if journal_path else Path(space.path).parent / JOURNAL_NAME
    jr = LockboxJournal(path)
    k = lockbox_key(space.path, space.raw, ds.name, ds.content_hash(), proto.lockbox)
    n = jr.record(k, {"space": Path(space.path).as_posix(), "space_sha256": space_sha(space.raw),
                      "dataset": ds.name, "dataset_hash": ds.content_hash(), "lockbox": proto.lockbox,
                      "queries": len(lds.queries), "config": flat_str(best.flat), "objective": obj_name,
                      "value": out["best"][obj_name]})
    out.update({"opened": n, "journal": str(path), "key": k})
    log(f"  lockbox {proto.lockbox!r} ({len(lds.queries)} queries) {times(n)} for this space "
        f"(journal {path})" + ("" if n == 1 else " — every opening after the first is one more validation look"))
    return out


def _outside_splits(ds) -> int:
    """Queries of the dataset that no split holds (e.g. LoCoMo's evidence-less items): never tuned on or scored."""
    held = set().union(*map(set, ds.splits.values())) if ds.splits else {q.id for q in ds.queries}
    return sum(1 for q in ds.queries if q.id not in held)


ARRAYS_NAME = {"abstention_accuracy": "correct_abstention"}  # a harm measure's name in the sweep's engine


def official_measures(ds, objective: str) -> list[str]:
    """The dataset's official measures (``info["official_measures"]``) in the sweep engine's names, the objective
    first; a measure the sweep cannot compute is left out."""
    out = [objective]
    for m in declared(ds, "official_measures") or []:
        m = ARRAYS_NAME.get(m, m)
        try:
            parse_metric(m)
        except ConfigError:
            continue
        out.append(m)
    return list(dict.fromkeys(out))


def official_report(s: dict, official: list[str], obj: str) -> dict:
    """Each official measure on the headline set (the lockbox when opened, else the held-out split, else the
    cross-validation) for the tuned config and every compared preset, and the presets that beat it there."""
    lock = s.get("lockbox")
    if lock:
        where, best, others = f"lockbox {lock['split']!r}", lock["best"], {
            f"{s['preset']} (as shipped)": lock["shipped"], **lock["baselines"]}
    elif s["heldout"] is not None and s["best"].get("heldout"):
        where, best = f"held-out {s['heldout']!r}", s["best"]["heldout"]
        others = {f"{s['preset']} (as shipped)": s["shipped"]["heldout"],
                  **{n: r.get("heldout") or {} for n, r in s["baselines"].items()}}
    else:
        oof = (s.get("cv") or {}).get("out_of_fold", {})
        where = "cross-validation (out-of-fold; run-level rates: the config chosen on all tuning queries)"
        best = {m: oof.get(m, s["best"]["train"].get(m)) for m in official}
        others = {f"{s['preset']} (as shipped)": s["shipped"]["train"],
                  **{n: r.get("train") or {} for n, r in s["baselines"].items()}}
    rows = []
    for m in official:
        v = best.get(m)
        hib = catalogue.parse(m).higher_is_better
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        beat = []
        for name, vals in others.items():
            o = vals.get(m) if vals else None
            if o is None or (isinstance(o, float) and math.isnan(o)) or hib is None:
                continue
            if (o > v + 1e-12) if hib else (o < v - 1e-12):
                beat.append((name, o))
        beat.sort(key=lambda x: -x[1] if hib else x[1])
        rows.append({"metric": DISPLAY_NAME.get(m, m), "value": v, "beaten_by": [n for n, _ in beat],
                     "best_other": ({"name": beat[0][0], "value": beat[0][1]} if beat else None),
                     "objective": m == obj})
    return {"where": where, "rows": rows}


DISPLAY_NAME = {v: k for k, v in ARRAYS_NAME.items()}


@dataclass
class _Env:
    ds: Any
    split: str | None
    pool: Any
    heldout: str | None
    heldout_ds: Any
    index: Any
    specs: list
    built: dict
    baselines: list
    cs: Any
    ctx: Any
    proto: Protocol


def _prepare(space: Space, settings, embedder, log, rng, opts: Options | None = None) -> _Env:
    """Dataset, the protocol's splits (:mod:`evalkit.tune.protocol`), shared index and the tuning candidate set
    (built for the deepest arms the search uses). The lockbox is never part of any of them."""
    ds = load_dataset(space.dataset)
    proto = resolve(space, ds, opts)
    pool = ds.subset(proto.pool)
    split = proto.split
    require_judged(pool, split)
    heldout_ds = None
    heldout = proto.heldout_name
    if proto.heldout:
        heldout_ds = ds.subset(proto.heldout)
        require_judged(heldout_ds, heldout)
    embedder = embedder or Embedder()
    settings = settings or IndexSettings()
    index = SharedIndex(pool, embedder=embedder, settings=settings)
    bound = _arm_bound(space, rng)
    specs = deepest_arms(space.pipeline, bound) + [ArmSpec.from_dict(dict(a)) for a in space.extra_arms]
    built: dict[str, int] = {}
    for c in bound:
        for a, d in c.arms.items():
            built[a] = max(built.get(a, 0), d["depth"])
    for a in space.pipeline.arms:
        built[a.name] = max(built.get(a.name, 0), a.depth)
    baselines = [load_preset(b) for b in space.baselines]
    specs_all = specs + [a for b in baselines for a in b.arms]
    how = (f"held out {heldout}: {len(heldout_ds.queries)}" if heldout_ds is not None
           else proto.fold_text(proto.pool))
    log(f"tune {space.name}: {space.pipeline.name} on {ds.name} ({split or 'all'}: {len(pool.queries)} queries; "
        f"{how})")
    for line in proto.describe():
        log("  " + line)
    t0 = time.perf_counter()
    cs = build_candidates(index, pool.queries, specs_all)
    log(f"  candidates: {cs.Q} queries x {cs.C} columns in {time.perf_counter() - t0:.1f}s")
    return _Env(ds, split, pool, heldout, heldout_ds, index, specs_all, built, baselines, cs,
                make_context([space.pipeline, *baselines], embedder), proto)


def leaderboard_digest(res) -> str:
    """sha256 of a sweep's leaderboard: config keys in rank order with the bits of every metric's mean and of the
    kept per-query values — equal digests mean byte-identical results."""
    h = hashlib.sha256()
    for i in res.order(res.metrics[0]):
        h.update(res.configs[i].key().encode())
        for m in res.metrics:
            h.update(np.float64(res.means[m][i]).tobytes())
        for m in sorted(res.per_query):
            h.update(np.ascontiguousarray(res.per_query[m][i]).tobytes())
    return h.hexdigest()


def bench_space(space: Space, n: int = 240, workers: int = 1, settings=None, embedder=None,
                log: Callable[[str], None] = print, cluster=None) -> dict:
    """Sweep throughput on the space's tuning queries: the grid (method grid) or ``n`` seeded random configs,
    after one warm-up config; wall and CPU time, configs/s, query-pipeline evaluations/s, prefix sharing, and the
    :func:`leaderboard_digest` (equal on one process, forked workers or a Dask ``cluster``)."""
    rng = np.random.default_rng(space.seed)
    env = _prepare(space, settings, embedder, log, rng)
    metrics = list(dict.fromkeys([space.objective] + [c.metric for c in space.constraints if not c.latency]))
    labels = dataset_labels(env.ds)
    sw = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective], labels=labels)
    if space.method == "grid":
        assigns, how = space.grid(), "grid"
    else:
        assigns, how = [space.decode(u) for u in rng.random((n, space.dims))], "random"
    configs = [space.config(a)[0] for a in assigns]
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sw.run([SweepConfig()])  # warm-up: the shared memo (token sets, similarities, gains) is built once
    res = sw.run(configs, workers=workers, cluster=cluster, log=log if cluster is not None else None)
    prof = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective], timings=True,
                 labels=labels)
    prof.run([SweepConfig()])
    pres = prof.run(configs[:min(len(configs), 60)])
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    total = sum(pres.stage_seconds.values()) or 1.0
    out = {"space": space.name, "preset": space.pipeline.name, "dataset": env.ds.name, "split": env.split,
           "configs": len(configs), "sampling": how, "queries": env.cs.Q, "columns": env.cs.C, "workers": res.workers,
           "seconds": res.seconds, "cpu_seconds": res.cpu_seconds, "configs_per_second": res.configs_per_second,
           "query_evals_per_second": res.query_evals_per_second,
           "query_evals_per_cpu_second": len(configs) * env.cs.Q / max(res.cpu_seconds, 1e-9),
           "stage_calls": res.stage_calls, "naive_stage_calls": res.naive_stage_calls,
           "shared_outputs": res.shared_outputs, "leaderboard_sha256": leaderboard_digest(res),
           "cluster": cluster is not None, "budget_stage_run": sw.run_budget, "load_average": [load0, load1],
           "stage_share": {k: v / total for k, v in sorted(pres.stage_seconds.items(), key=lambda x: -x[1])}}
    log(f"  {out['configs']} {how} configs x {out['queries']} queries: {res.seconds:.2f}s wall, "
        f"{res.cpu_seconds:.2f}s CPU, {res.workers} worker(s) -> {res.configs_per_second:.1f} configs/s, "
        f"{res.query_evals_per_second:.0f} query-pipeline evals/s ({out['query_evals_per_cpu_second']:.0f} per CPU "
        f"second); stage runs {res.stage_calls} of {res.naive_stage_calls} ({res.shared_outputs} shared outputs); "
        f"load average {load0:.1f}->{load1:.1f}")
    log(f"  leaderboard sha256 {out['leaderboard_sha256']}")
    log("  time by stage: " + ", ".join(f"{k} {v:.0%}" for k, v in list(out["stage_share"].items())[:6]))
    return out
