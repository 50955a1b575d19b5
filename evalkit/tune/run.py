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
    ``lockbox_journal``: the file that counts lockbox openings (default ``lockbox.jsonl`` beside the space)."""
    from evalkit.engine.journal import SweepJournal  # lazy: startup
    from evalkit.tune.search import journal_storage  # lazy: startup

    opts = options or Options()
    t_start = time.perf_counter()
    claim = claim_folder(out or Path("reports") / "tune" / space.name, "tune")  # refuses a user's path before any work
    out = claim.path
    rng = np.random.default_rng(space.seed)
    env = prepare(space, settings, embedder, log, rng, opts)
    ds, split, pool, heldout, heldout_ds, proto = env.ds, env.split, env.pool, env.heldout, env.heldout_ds, env.proto
    labels = dataset_labels(ds)  # harm labels (secret_leak_rate) of the whole corpus: every split shares it
    index, built, baselines, cs, ctx = env.index, env.built, env.baselines, env.cs, env.ctx
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
            check_depths(space, built, [ev.trials[i] for i in idx])
            folds.append((f, idx))
    search(space, ev, None, rng, note, storage, study)
    check_depths(space, built, ev.trials)
    where = f"cluster of {ev.workers_used}" if cluster is not None else f"{n_workers}"
    log(f"  evaluated {len(ev.trials)} configs in {ev.seconds:.2f}s ({len(ev.trials) / max(ev.seconds, 1e-9):.0f} "
        f"configs/s, {len(ev.trials) * cs.Q / max(ev.seconds, 1e-9):.0f} query-evals/s, {where} worker(s); "
        f"stage runs {ev.stage_calls} of {ev.naive_calls} without sharing"
        + (f"; {ev.resumed} read back from the journal" if sj is not None else "")
        + (f"; sampler overhead {1e3 * ev.search_seconds / ev.asked:.2f} ms per config" if ev.asked else "") + ")")

    sign = 1.0 if space.maximize else -1.0
    ranking, feas, best_i, latency, latency_note = _choose(space, ev, env, shipped_i, sign, log)
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
    hm = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS + official
                            + [c.metric for c in space.constraints if not c.latency] + INJECTED_METRICS))
    held, held_ids, base_res = score_heldout_and_baselines(space, env, [ev.trials[i].config for i in top], top,
                                                           hm, labels)

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
        oof = out_of_fold(space, cs, pool, ctx, labels, ev, fold, fold_best, best_i, shipped_i, official, judged)
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
        lock = open_lockbox(space, env, hm, labels, [best, ev.trials[shipped_i]], baselines, log, lockbox_journal,
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
        "latency_note": latency_note if any(c.latency for c in space.constraints) else None,
        "seconds": time.perf_counter() - t_start,
    }
    if cv_summary:
        summary["cv"] = cv_summary
    if lock:
        summary["lockbox"] = {k: v for k, v in lock.items() if k not in ("pq", "query_ids")}
    summary["official"] = official_report(summary, official, obj_name)
    board = leaderboard_rows(space, ev, top, ranking, held, shipped_i, best_i, status, metrics, heldout_ds is not None)
    summary["best_preset"] = str(out / "best.toml")
    splits = proto.splits_json(judged, opened=lock is not None)
    with claim.staging() as tmp:  # the folder is written whole, then renamed into place
        text = _write(tmp, space, ev, metrics, feas, status, board, summary, splits, shipped_i, best_i, ds.name)
    return TuneResult(out, summary, text)


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
