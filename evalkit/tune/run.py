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

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from evalkit.engine.evaluate import dataset_labels
from evalkit.engine.sweep import Sweep
from evalkit.measures import catalogue
from evalkit.report.tune import console_summary, leaderboard_markdown, report_markdown
from evalkit.report.tune_plots import write_plots
from evalkit.runfolder.claim import claim_folder
from evalkit.tune import estimate
from evalkit.tune.official import official_measures, official_report
from evalkit.tune.output import best_toml, json_default, leaderboard_rows, write_configs, write_csv
from evalkit.tune.prepare import check_depths, prepare, sweep_key
from evalkit.tune.protocol import Options, declared_clusters
from evalkit.tune.scoring import DEFAULT_METRICS, open_lockbox, out_of_fold, score_heldout_and_baselines
from evalkit.tune.scoring import latency_check
from evalkit.tune.search import Evaluator, make_trial, probe_effects, search
from evalkit.tune.space import load_space  # noqa: F401  (load_space: the public entry point)
from evalkit.tune.space_model import Space
from retrievers.errors import ConfigError
from retrievers.index.shared import IndexSettings, describe_representation

INJECTED_METRICS = catalogue.names("tune.injected")


# ---- the tuning run ------------------------------------------------------------------------------------------------

@dataclass
class TuneResult:
    out: Path
    summary: dict
    text: str  # the console summary


def run_tune(space: Space, out: str | Path | None = None, workers: int | None = None, settings=None, embedder=None,
             log: Callable[[str], None] = print, progress: bool = False, cluster=None,
             journal: str | Path | None = None, options: Options | None = None,
             lockbox_journal: str | Path | None = None) -> TuneResult:
    """Tune ``space`` and write the output folder (see the module docstring).

    ``cluster``: a ``distributed.Client`` the sweeps run on (see :mod:`evalkit.engine.cluster`); ``journal``: a
    folder for the sweep's results journal and the Optuna study, so a killed run resumes (see
    :mod:`evalkit.engine.journal`); ``options``: the split choices of the command line
    (:class:`evalkit.tune.protocol.Options`: ``split_by``, ``split_date``, ``folds``, ``resplit``, ``final``);
    ``lockbox_journal``: the file that counts lockbox openings (default ``lockbox.jsonl`` beside the space).

    The steps, one function each: prepare the data and candidates (:func:`evalkit.tune.prepare.prepare`) → search
    (:func:`_search`: every config on the tuning queries, per fold too under cross-validation) → choose
    (:func:`_choose`) → score the leaderboard, as shipped and the baselines on held-out queries → the estimate and
    its significance (:func:`_estimate`) → the lockbox with ``--final`` (:func:`_lockbox`) → the summary
    (:func:`_summary`) → the folder, written whole (:func:`_write`)."""
    opts = options or Options()
    t_start = time.perf_counter()
    claim = claim_folder(out or Path("reports") / "tune" / space.name, "tune")  # refuses a user's path before any work
    out = claim.path
    rng = np.random.default_rng(space.seed)
    env = prepare(space, settings, embedder, log, rng, opts)
    sr = _search(space, env, rng, workers, settings, log, progress, cluster, journal)
    ev = sr.ev
    sign = 1.0 if space.maximize else -1.0
    ranking, feas, best_i, latency, latency_note = _choose(space, ev, env, sr.shipped_i, sign, log)

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
    top = list(dict.fromkeys(ranking[:space.top] + [best_i, sr.shipped_i]))
    hm = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS + sr.official
                            + [c.metric for c in space.constraints if not c.latency] + INJECTED_METRICS))
    held, held_ids, base_res = score_heldout_and_baselines(space, env, [ev.trials[i].config for i in top], top,
                                                           hm, sr.labels)
    est = _estimate(space, env, sr, held, held_ids, base_res, best_i, feas, sign)
    lock = (_lockbox(space, env, sr, hm, base_res, ev.trials[best_i], log, lockbox_journal) if opts.final
            else None)
    summary = _summary(space, env, sr, est=est, held=held, held_ids=held_ids, base_res=base_res, best_i=best_i,
                       feas=feas, status=status, latency=latency, latency_note=latency_note, lock=lock,
                       cluster=cluster, t_start=t_start)
    board = leaderboard_rows(space, ev, top, ranking, held, sr.shipped_i, best_i, status, sr.metrics,
                             env.heldout_ds is not None)
    summary["best_preset"] = str(out / "best.toml")
    splits = env.proto.splits_json(sr.judged, opened=lock is not None)
    with claim.staging() as tmp:  # the folder is written whole, then renamed into place
        text = _write(tmp, space, ev, sr.metrics, feas, status, board, summary, splits, sr.shipped_i, best_i,
                      env.ds.name)
    return TuneResult(out, summary, text)


@dataclass
class _Searched:
    """What the search leaves for the steps after it: the evaluator with every config, the sweep, the measures,
    the judged tuning queries, the as-shipped config's index, the folds (cross-validation) and the journal."""
    ev: Evaluator
    sw: Sweep
    metrics: list[str]
    official: list[str]
    labels: dict
    judged: list[str]
    shipped_i: int
    fold: np.ndarray | None
    folds: list[tuple[int, list[int]]]
    no_effect: list
    journal: object | None
    workers: int


def _search(space: Space, env, rng, workers, settings, log, progress: bool, cluster, journal) -> _Searched:
    """Every config of the space on the tuning queries (one sweep over the shared candidates), searched per fold
    under cross-validation and then over all tuning queries; logs the sweep's throughput."""
    from evalkit.engine.journal import SweepJournal  # lazy: startup
    from evalkit.tune.search import journal_storage  # lazy: startup

    ds, pool, proto, cs, ctx = env.ds, env.pool, env.proto, env.cs, env.ctx
    labels = dataset_labels(ds)  # harm labels (secret_leak_rate) of the whole corpus: every split shares it
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
        raise ConfigError(f"{space.path}: no judged queries in {ds.name}/{env.split}")
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
            check_depths(space, env.built, [ev.trials[i] for i in idx])
            folds.append((f, idx))
    search(space, ev, None, rng, note, storage, study)
    check_depths(space, env.built, ev.trials)
    where = f"cluster of {ev.workers_used}" if cluster is not None else f"{n_workers}"
    log(f"  evaluated {len(ev.trials)} configs in {ev.seconds:.2f}s ({len(ev.trials) / max(ev.seconds, 1e-9):.0f} "
        f"configs/s, {len(ev.trials) * cs.Q / max(ev.seconds, 1e-9):.0f} query-evals/s, {where} worker(s); "
        f"stage runs {ev.stage_calls} of {ev.naive_calls} without sharing"
        + (f"; {ev.resumed} read back from the journal" if sj is not None else "")
        + (f"; sampler overhead {1e3 * ev.search_seconds / ev.asked:.2f} ms per config" if ev.asked else "") + ")")
    return _Searched(ev, sw, metrics, official, labels, judged, shipped_i, fold, folds, no_effect, sj, n_workers)


def _estimate(space: Space, env, sr: _Searched, held, held_ids, base_res, best_i: int, feas, sign: float) -> dict:
    """The estimate of the chosen config: on the held-out split, or cross-validated by group (each query scored by
    the config tuned without its fold); its significance against as shipped and each baseline, the train − held-out
    gap and the optimism of a by-query split. A dict: ``significance``, ``stats_note``, ``optimism``, ``gap``,
    ``cv`` (the cross-validation summary, or None)."""
    ev, obj_name = sr.ev, space.objective
    versus = [f"{space.pipeline.name} (as shipped)"] + list(base_res)
    cv_summary = None
    if env.heldout_ds is not None:
        pairs = [(held[sr.shipped_i][1], held[best_i][1])] + [(r["heldout_pq"], held[best_i][1])
                                                              for r in base_res.values()]
        sig_ids = held_ids
        gap = ev.means[obj_name][best_i] - held[best_i][0][obj_name]
        where_tested = (f"time split: the queries asked at or after {env.proto.time_date}" if env.proto.mode == "time"
                        else f"held-out split {env.heldout!r}")
    else:
        cv, fold_rows, gaps, fold_best = estimate.cross_validate(ev, sr.fold, sr.folds, sr.shipped_i, feas, sign)
        pairs = [(ev.per_query[sr.shipped_i], cv)] + [(r["train_pq"], cv) for r in base_res.values()]
        sig_ids = sr.judged
        gap = float(np.mean(gaps))
        where_tested = (f"{env.proto.fold_text(sr.judged)} over {env.split!r} (each query scored by the config tuned "
                        f"without its fold)")
        oof = out_of_fold(space, env.cs, env.pool, env.ctx, sr.labels, ev, sr.fold, fold_best, best_i, sr.shipped_i,
                          sr.official, sr.judged)
        fm = np.array([r["heldout"] for r in fold_rows])
        cv_summary = {"rows": fold_rows, "heldout_mean": float(cv.mean()), "folds": len(fold_rows),
                      "fold_rule": env.proto.fold_text(sr.judged), "fold_mean": float(fm.mean()),
                      "fold_sd": float(fm.std(ddof=1)) if len(fm) > 1 else 0.0, "fold_min": float(fm.min()),
                      "fold_max": float(fm.max()), "out_of_fold": oof}
    return {"significance": estimate.significance(pairs, versus, space.maximize,
                                                  declared_clusters(env.ds, sig_ids)),
            "stats_note": estimate.stats_note(env.ds, sig_ids, obj_name, where_tested, space.maximize),
            "optimism": estimate.optimism(ev, sr.judged, env.proto, sr.shipped_i, feas, sign, space.seed),
            "gap": gap, "cv": cv_summary}


def _lockbox(space: Space, env, sr: _Searched, hm: list[str], base_res, best, log, lockbox_journal) -> dict:
    """``--final``: the chosen config, as shipped and the baselines scored once on the dataset's lockbox (the
    opening counted), with their significance."""
    obj_name = space.objective
    versus = [f"{space.pipeline.name} (as shipped)"] + list(base_res)
    lock = open_lockbox(space, env, hm, sr.labels, [best, sr.ev.trials[sr.shipped_i]], env.baselines, log,
                        lockbox_journal, best, obj_name)
    lock["significance"] = estimate.significance(
        [(lock["pq"]["shipped"], lock["pq"]["best"])] + [(lock["pq"][b], lock["pq"]["best"]) for b in base_res],
        versus, space.maximize, declared_clusters(env.ds, lock["query_ids"]))
    lock["significance_method"] = estimate.stats_note(env.ds, lock["query_ids"], obj_name,
                                                      f"lockbox {env.proto.lockbox!r}", space.maximize)
    return lock


def _summary(space: Space, env, sr: _Searched, *, est: dict, held, held_ids, base_res, best_i: int, feas, status,
             latency, latency_note, lock, cluster, t_start: float) -> dict:
    """``summary.json``'s content (all but the plots and the best preset's path, added when the folder is
    written)."""
    ds, proto, pool, heldout_ds = env.ds, env.proto, env.pool, env.heldout_ds
    ev, sw, metrics, judged, shipped_i = sr.ev, sr.sw, sr.metrics, sr.judged, sr.shipped_i
    best, obj_name, sj, n_workers, cv_summary = ev.trials[best_i], space.objective, sr.journal, sr.workers, est["cv"]
    summary = {
        "space": space.path, "name": space.name, "description": space.description, "preset": space.pipeline.name,
        "preset_hash": space.pipeline.hash, "dataset": ds.name, "dataset_hash": ds.content_hash(),
        "split": env.split, "heldout": env.heldout, "folds": cv_summary["folds"] if cv_summary else None,
        "seed": space.seed,
        "objective": obj_name, "direction": "maximize" if space.maximize else "minimize", "method": space.method,
        "constraints": [c.text for c in space.constraints], "index": describe_representation(env.index.manifest()),
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
                  "query_evals_per_second": len(ev.trials) * env.cs.Q / max(ev.seconds, 1e-9),
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
        "gap": est["gap"], "gap_note": ("train − held-out objective of the best config" if heldout_ds else
                                        "mean over folds of (tuning-fold − held-out-fold objective) of each fold's "
                                        "best"),
        "significance": est["significance"], "significance_method": est["stats_note"], "no_effect": sr.no_effect,
        "optimism": est["optimism"],
        "baselines": {n: {k: v for k, v in r.items() if not k.endswith("_pq")} for n, r in base_res.items()},
        "latency": ({ev.trials[i].key: latency[ev.trials[i].key] for i in range(len(ev.trials))
                     if ev.trials[i].key in latency} if latency else None),
        "latency_note": latency_note if any(c.latency for c in space.constraints) else None,
        "seconds": time.perf_counter() - t_start,
    }
    if cv_summary:
        summary["cv"] = cv_summary
    if lock:
        summary["lockbox"] = {k: v for k, v in lock.items() if k not in ("pq", "query_ids")}
    summary["official"] = official_report(summary, sr.official, obj_name)
    return summary


def _write(tmp: Path, space: Space, ev: Evaluator, metrics: list[str], feas, status, board: list[dict],
           summary: dict, splits: dict, shipped_i: int, best_i: int, dataset: str) -> str:
    """The output folder's files into ``tmp`` (configs, leaderboard, best.toml, splits, plots, summary, report);
    returns the console summary."""
    (tmp / "plots").mkdir()
    write_configs(tmp / "configs.csv", ev, metrics, feas, status)
    write_csv(tmp / "leaderboard.csv", board)
    (tmp / "leaderboard.md").write_text(leaderboard_markdown(board), encoding="utf-8")
    (tmp / "best.toml").write_text(best_toml(space, ev.trials[best_i], summary), encoding="utf-8")
    (tmp / "splits.json").write_text(json.dumps(splits, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    plots = write_plots(space, ev, tmp / "plots", shipped_i, best_i, feas)
    summary["plots"] = [p.relative_to(tmp).as_posix() for p in plots]
    text = console_summary(space, summary, dataset)
    (tmp / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=json_default) + "\n",
                                      encoding="utf-8")
    (tmp / "report.md").write_text(report_markdown(space, summary, board, text), encoding="utf-8")
    return text


def _choose(space: Space, ev: Evaluator, env, shipped_i: int, sign: float, log):
    """The configs ranked (feasible first, objective, then evaluation order) and the best one: the first that meets
    every constraint measurable offline, then — with latency constraints — the first of the ``latency_top`` best that
    passes a real latency run. Returns ``(ranking, feasible, best_i, latency, latency_note)``."""
    obj = np.array([ev.objective(i, None) for i in range(len(ev.trials))])
    feas = np.array([ev.feasible(i) for i in range(len(ev.trials))])
    key = np.where(np.isnan(obj), -np.inf, sign * obj)
    ranking = sorted(range(len(ev.trials)), key=lambda i: (not feas[i], -key[i], i))
    lat_cons = [c for c in space.constraints if c.latency]
    latency: dict[str, dict] = {}
    latency_note = None
    best_i = ranking[0]
    if lat_cons:
        cands = [i for i in ranking if feas[i]][:space.latency_top]
        check = [ev.trials[i] for i in dict.fromkeys(cands + [shipped_i])]
        try:
            latency = latency_check(space, env.pool, env.index, check, log)
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
    return ranking, feas, best_i, latency, latency_note


def _outside_splits(ds) -> int:
    """Queries of the dataset that no split holds (e.g. LoCoMo's evidence-less items): never tuned on or scored."""
    held = set().union(*map(set, ds.splits.values())) if ds.splits else {q.id for q in ds.queries}
    return sum(1 for q in ds.queries if q.id not in held)
