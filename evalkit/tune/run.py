"""Tune a preset's stage parameters on a labelled split, report on held-out queries (`evalkit tune`).

A **search space** is a TOML file (examples in ``tune/``)::

    preset = "openclaw_core_2026_2_26_decay_mmr"   # a preset name or .toml path
    dataset = "locomo"                             # overridable with --dataset
    split = "train"                                # the queries tuned on
    heldout = "heldout"                            # the queries reported on (default: heldout, else test)
    # folds = 5                                    # instead of heldout: k-fold cross-validation over `split`
    objective = "ndcg@10"                          # any evalkit.measures.arrays metric
    direction = "maximize"                         # or "minimize"
    constraints = ["budget_compliance >= 0.99", "p95_latency_ms <= 50"]
    method = "tpe"                                 # grid | tpe | gp | random  (bayes = tpe)
    trials = 200                                   # tpe / gp / random: configs to evaluate
    batch = 8                                      # tpe / gp: configs asked per batch (one sweep per batch)
    seed = 7
    metrics = ["recall@10", "mrr@10"]              # also reported
    baselines = ["openclaw_core_2026_2_26"]        # also scored on the held-out queries and compared

    [[param]]                                      # a stage parameter (stage = label or type)
    stage = "decay"
    name = "half_life_days"
    low = 1
    high = 365
    log = true                                     # grid: add `steps = 12`; or give `values = [...]`

    [[param]]                                      # an arm depth, derived from a free variable
    arm = "vec"
    name = "depth"
    tie = "min(200, 6 * multiplier)"

    [[param]]                                      # a free variable (no stage / arm): only used in ties
    name = "multiplier"
    values = [1, 2, 4, 8]

    [[simplex]]                                    # weights that sum to `total` (default 1)
    stage = "merge"
    names = ["vector_weight", "text_weight"]       # or name = "weights", size = 4 for a list parameter
    step = 0.05                                    # grid resolution (tpe / gp / random: continuous, rounded to it)

``tie`` makes a parameter a function of others (``+ - * / // % **``, ``min max floor ceil round abs log exp
sqrt int float``; names are parameter ids — ``id`` if given, else ``name``). Every value is validated by the
stage's own parameter validation before any work, and unknown presets, stages, parameters, arms, metrics or
keys are rejected with one line (:class:`retrievers.errors.ConfigError`).

Methods: ``grid`` (the product of every free dimension), ``tpe`` / ``gp`` / ``random`` (Optuna's
TPE, Gaussian-process and random samplers, seeded with ``seed``: ``init`` startup configs, then batches of
``batch`` configs asked together, evaluated as one sweep and told together; see :mod:`evalkit.tune.search`).
Every config is evaluated with :mod:`evalkit.engine.sweep` on the shared candidates — in process, in
``--workers`` forked processes or on a Dask cluster (``--cluster``); with a journal folder the sweep's results
and the Optuna study are kept on disk so a killed run computes only what is missing when started again.

Selection: the best config maximises the objective on the tuning queries among configs meeting every
constraint that can be measured offline (quality, budget, skip metrics: on the tuning queries). Latency
constraints (``p50/p90/p95/p99/mean_latency_ms``) are checked on the ``latency_top`` best configs with a real
latency run (:func:`evalkit.engine.runner.run_latency`, end to end without the query embedding, ``latency_queries``
queries); the first that passes wins. If the runner has no latency mode, they are reported as "not checked".

Output folder: ``summary.json``, ``configs.csv`` (every evaluated config), ``leaderboard.csv`` / ``.md`` (the
best ``top`` configs and the as-shipped preset: tuning and held-out metric, constraint status), ``best.toml``
(a preset that ``extends`` the tuned one with ``[overrides]``: ``evalkit run --retrievers best.toml``),
``report.md``, and ``plots/*.png`` (objective vs each 1-D parameter; a simplex plot when weights vary together).
Held-out significance of best vs as shipped (and vs each baseline) uses :func:`evalkit.measures.stats.compare_pairs`
(paired sign-flip randomisation + paired t-test, bootstrap CI of the difference).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
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
from evalkit.measures import catalogue
from evalkit.measures.stats import compare_pairs
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
    write_plots,
)
from evalkit.tune.search import Evaluator, Trial, fold_of, make_trial, probe_effects, search
from evalkit.tune.space import LATENCY, Space, load_space  # noqa: F401  (load_space: the public entry point)
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
    import hashlib  # lazy: startup
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
            "seed": space.seed, "metrics": metrics, "keep": [space.objective], "space": raw,
            "index": repr(settings), "embedder": getattr(env.index.embedder, "model_id", None)}


def run_tune(space: Space, out: str | Path | None = None, workers: int | None = None, settings=None, embedder=None,
             log: Callable[[str], None] = print, progress: bool = False, cluster=None,
             journal: str | Path | None = None) -> TuneResult:
    """Tune ``space`` and write the output folder (see the module docstring).

    ``cluster``: a ``distributed.Client`` the sweeps run on (see :mod:`evalkit.engine.cluster`); ``journal``: a
    folder for the sweep's results journal and the Optuna study, so a killed run resumes (see
    :mod:`evalkit.engine.journal`)."""
    from evalkit.engine.journal import SweepJournal  # lazy: startup
    from evalkit.tune.search import journal_storage  # lazy: startup

    t_start = time.perf_counter()
    claim = claim_folder(out or Path("reports") / "tune" / space.name, "tune")  # refuses a user's path before any work
    out = claim.path
    rng = np.random.default_rng(space.seed)
    env = _prepare(space, settings, embedder, log, rng)
    ds, split, pool, heldout, heldout_ds = env.ds, env.split, env.pool, env.heldout, env.heldout_ds
    labels = dataset_labels(ds)  # harm labels (secret_leak_rate) of the whole corpus: every split shares it
    index, specs_all, built, baselines, cs, ctx = env.index, env.specs, env.built, env.baselines, env.cs, env.ctx
    metrics = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS
                                 + [c.metric for c in space.constraints if not c.latency]))
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
    if space.folds:
        fold = fold_of(judged, space.folds, space.seed)
        for f in range(space.folds):
            idx = search(space, ev, fold != f, rng, note, storage, f"{study}:fold{f}")
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
    hm = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS
                            + [c.metric for c in space.constraints if not c.latency] + INJECTED_METRICS))
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

    # significance and gaps
    obj_name = space.objective
    pairs, labels = [], []
    if heldout_ds is not None:
        pairs.append((held[shipped_i][1], held[best_i][1]))
        labels.append(f"{space.pipeline.name} (as shipped)")
        for name, rec in base_res.items():
            pairs.append((rec["heldout_pq"], held[best_i][1]))
            labels.append(name)
        gap = ev.means[obj_name][best_i] - held[best_i][0][obj_name]
        where_tested = f"held-out split {heldout!r}"
    else:
        fold = fold_of(judged, space.folds, space.seed)
        cv = np.zeros(len(judged))
        gaps, fold_rows = [], []
        for f, idx in folds:
            tr, te = fold != f, fold == f
            cand = sorted(set(idx) | {shipped_i})
            scored = sorted(cand, key=lambda i: (not feas[i], -sign * ev.objective(i, tr), i))
            bf = scored[0]
            cv[te] = ev.per_query[bf][te]
            gaps.append(ev.objective(bf, tr) - ev.objective(bf, te))
            fold_rows.append({"fold": f, "queries": int(te.sum()), "best": flat_str(ev.trials[bf].flat),
                              "train": ev.objective(bf, tr), "heldout": ev.objective(bf, te),
                              "shipped_heldout": ev.objective(shipped_i, te)})
        pairs.append((ev.per_query[shipped_i], cv))
        labels.append(f"{space.pipeline.name} (as shipped)")
        for name, rec in base_res.items():
            pairs.append((rec["train_pq"], cv))
            labels.append(name)
        gap = float(np.mean(gaps))
        where_tested = f"{space.folds}-fold cross-validation over {split!r} (each query scored by the config tuned " \
                       f"without its fold)"
    sig_rows = []
    if pairs:
        if not space.maximize:
            pairs = [(b, a) for a, b in pairs]  # positive delta = better
        res = compare_pairs(pairs)
        for lab, r in zip(labels, res):
            d = r.to_dict()
            d["versus"] = lab
            sig_rows.append(d)
    stats_note = ("evalkit.measures.stats.compare_pairs: paired sign-flip randomisation (p_randomization, Holm-adjusted over "
                  "the comparisons in p_holm), paired t-test (p_ttest), 95% bootstrap CI of the mean difference; "
                  f"per-query {obj_name} on the {where_tested}"
                  + ("; delta = shipped − tuned (minimised objective)" if not space.maximize else ""))

    # ---- write -------------------------------------------------------------------------------------------------
    summary = {
        "space": space.path, "name": space.name, "description": space.description, "preset": space.pipeline.name,
        "preset_hash": space.pipeline.hash, "dataset": ds.name, "dataset_hash": ds.content_hash(),
        "split": split, "heldout": heldout, "folds": space.folds or None, "seed": space.seed,
        "objective": obj_name, "direction": "maximize" if space.maximize else "minimize", "method": space.method,
        "constraints": [c.text for c in space.constraints], "index": describe_representation(index.manifest()),
        "queries": {"tuning": len(pool.queries), "tuning_judged": len(judged),
                    "heldout": len(heldout_ds.queries) if heldout_ds else None,
                    "heldout_judged": len(held_ids) if heldout_ds else None},
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
        "baselines": {n: {k: v for k, v in r.items() if not k.endswith("_pq")} for n, r in base_res.items()},
        "latency": ({ev.trials[i].key: latency[ev.trials[i].key] for i in range(len(ev.trials))
                     if ev.trials[i].key in latency} if latency else None),
        "latency_note": latency_note if lat_cons else None,
        "seconds": time.perf_counter() - t_start,
    }
    if space.folds:
        summary["cv"] = {"rows": fold_rows, "heldout_mean": float(cv.mean())}
    board = leaderboard_rows(space, ev, top, ranking, held, shipped_i, best_i, status, metrics, heldout_ds is not None)
    summary["best_preset"] = str(out / "best.toml")
    with claim.staging() as tmp:  # the folder is written whole, then renamed into place
        (tmp / "plots").mkdir()
        write_configs(tmp / "configs.csv", ev, metrics, feas, status)
        write_csv(tmp / "leaderboard.csv", board)
        (tmp / "leaderboard.md").write_text(leaderboard_markdown(board), encoding="utf-8")
        (tmp / "best.toml").write_text(best_toml(space, best, summary), encoding="utf-8")
        plots = write_plots(space, ev, tmp / "plots", shipped_i, best_i, feas)
        summary["plots"] = [p.relative_to(tmp).as_posix() for p in plots]
        text = console_summary(space, summary, ds.name)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=json_default)
                                          + "\n", encoding="utf-8")
        (tmp / "report.md").write_text(report_markdown(space, summary, board, text), encoding="utf-8")
    return TuneResult(out, summary, text)


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


def _prepare(space: Space, settings, embedder, log, rng) -> _Env:
    """Dataset, splits, shared index and the tuning candidate set (built for the deepest arms the search uses)."""

    ds = load_dataset(space.dataset)
    split = space.split or ("train" if "train" in ds.splits else None)
    pool = ds.split(split) if split else ds
    require_judged(pool, split)
    heldout_ds = None
    heldout = None
    if not space.folds:
        heldout = space.heldout or next((s for s in ("heldout", "test") if s in ds.splits and s != split), None)
        if heldout is None or heldout == split:
            raise ConfigError(f"{space.path}: dataset {ds.name!r} has no held-out split different from {split!r} "
                              f"(splits: {', '.join(sorted(ds.splits))}); set 'heldout' or use 'folds'")
        heldout_ds = ds.split(heldout)
        require_judged(heldout_ds, heldout)
        overlap = {q.id for q in pool.queries} & {q.id for q in heldout_ds.queries}
        if overlap:
            raise ConfigError(f"{space.path}: splits {split!r} and {heldout!r} share {len(overlap)} queries")
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
    log(f"tune {space.name}: {space.pipeline.name} on {ds.name} ({split or 'all'}: {len(pool.queries)} queries"
        + (f"; held out {heldout}: {len(heldout_ds.queries)}" if heldout_ds else f"; {space.folds}-fold CV") + ")")
    t0 = time.perf_counter()
    cs = build_candidates(index, pool.queries, specs_all)
    log(f"  candidates: {cs.Q} queries x {cs.C} columns in {time.perf_counter() - t0:.1f}s")
    return _Env(ds, split, pool, heldout, heldout_ds, index, specs_all, built, baselines, cs,
                make_context([space.pipeline, *baselines], embedder))


def leaderboard_digest(res) -> str:
    """sha256 of a sweep's leaderboard: config keys in rank order with the bits of every metric's mean and of the
    kept per-query values — equal digests mean byte-identical results."""
    import hashlib  # lazy: startup
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
