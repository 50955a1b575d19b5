"""Search over a tune space on a shared candidate set: :class:`Trial` (one configuration), :class:`Evaluator`
(evaluates configurations through a :class:`~evalkit.engine.sweep.Sweep` — in process, forked or on a Dask
cluster, with an optional resumable journal — caching by config key) and :func:`search` (``grid``: the space's
product; ``tpe`` / ``gp`` / ``random``: Optuna's samplers, seeded, asked and told in batches so that a whole
batch is one sweep), plus :func:`fold_of` (balanced deterministic cross-validation folds).

Optuna (Akiba et al. 2019): ``tpe`` is the Tree-structured Parzen Estimator (Bergstra et al. 2011; multivariate,
with the constant liar for batches), ``gp`` a Gaussian process with log expected improvement, ``random``
independent uniform draws. Studies live in Optuna's ``JournalStorage`` (an append-only file), so a killed search
starts again where it stopped, and several drivers on several machines can share one study through a shared
file system. Constraints that can be measured offline are passed to the samplers as Optuna constraints
(:meth:`optuna.trial.Trial.set_constraint`, ``value - bound`` signed so that ``<= 0`` is feasible).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.tune.space_model import Space

FOLD_SEED = "evalkit-tune-folds-1"
SAMPLERS = ("tpe", "gp", "random")


# ---- search ------------------------------------------------------------------------------------------------------

@dataclass
class Trial:
    key: str
    assign: dict
    config: SweepConfig
    flat: dict
    shipped: bool = False


class Evaluator:
    """Evaluates configs on a tuning candidate set, caching by config key; keeps per-query objective values."""

    def __init__(self, space: Space, sweep: Sweep, workers: int, log: Callable[[str], None], cluster=None,
                 journal=None):
        self.space = space
        self.sweep = sweep
        self.workers = workers
        self.log = log
        self.cluster = cluster  # a distributed.Client, or None
        self.journal = journal  # an evalkit.engine.journal.SweepJournal, or None
        self.resumed = 0  # configs read back from the journal
        self.search_seconds = 0.0  # sampler time (ask / tell / decode), outside the sweep
        self.asked = 0
        self.workers_used = 0
        self.trials: list[Trial] = []
        self.index: dict[str, int] = {}
        self.means: dict[str, list[float]] = {m: [] for m in sweep.metrics}
        self.per_query: list[np.ndarray] = []
        self.seconds = 0.0
        self.cpu = 0.0
        self.stage_calls = 0
        self.naive_calls = 0

    def add(self, trials: list[Trial]) -> list[int]:
        new = []
        seen = set()
        for t in trials:
            if t.key not in self.index and t.key not in seen:
                new.append(t)
                seen.add(t.key)
        if new:
            res = self.sweep.run([t.config for t in new], workers=self.workers, cluster=self.cluster,
                                 journal=self.journal, log=self.log if (self.cluster or self.journal) else None)
            self.resumed += res.resumed
            self.workers_used = max(self.workers_used, res.workers)
            self.seconds += res.seconds
            self.cpu += res.cpu_seconds
            self.stage_calls += res.stage_calls
            self.naive_calls += res.naive_stage_calls
            for j, t in enumerate(new):
                self.index[t.key] = len(self.trials)
                self.trials.append(t)
                for m in self.means:
                    self.means[m].append(float(res.means[m][j]))
                self.per_query.append(res.per_query[self.space.objective][j])
        return [self.index[t.key] for t in trials]

    def objective(self, i: int, mask: np.ndarray | None) -> float:
        v = self.per_query[i]
        return float(v.mean() if mask is None else v[mask].mean()) if (v.size if mask is None else mask.any()) \
            else float("nan")

    def feasible(self, i: int) -> bool:
        return all(c.ok(self.means[c.metric][i]) for c in self.space.constraints if not c.latency)


def make_trial(space: Space, assign: dict, shipped: bool = False) -> Trial:
    cfg, flat = space.config(assign) if not shipped else (SweepConfig(), {})
    return Trial(cfg.key(), assign, cfg, flat, shipped)


def search(space: Space, ev: Evaluator, mask: np.ndarray | None, rng: np.random.Generator,
           progress: Callable[[str], None] | None = None, storage=None, study: str = "tune") -> list[int]:
    """Run the space's method; returns the trial indices it evaluated (scored on ``mask`` of the judged queries).
    ``storage``: an Optuna storage (a journal) that keeps the study ``study`` across restarts."""
    if space.method == "grid":
        return ev.add([make_trial(space, a) for a in space.grid()])
    return optuna_search(space, ev, mask, progress, storage, study)


def probe_effects(space: Space, ev: Evaluator, log: Callable[[str], None] | None = None) -> list[dict]:
    """Find the free parameters that change nothing on these data: each is varied alone over its values (up to 5
    evenly spaced points of a range) at two anchors — the centre of the space (every other coordinate at 0.5) and
    a seeded random point; a parameter whose every value gives the same per-query objective and the same mean of
    every metric at both anchors has no effect there. With ``no_effect = "pin"`` (default) it is pinned to its
    centre value, so the search budget goes to the parameters that matter; with ``"report"`` it is only reported.
    (Two anchors, not all of the space: a parameter that acts only in a corner the anchors miss can be pinned.)"""
    d = space.dims
    if d == 0:
        return []
    rng = np.random.default_rng([space.seed, 21])
    anchors = [np.full(d, 0.5), rng.random(d)]
    out = []
    j = 0
    for p in space.free_params:
        us = [(k + 0.5) / len(p.values) for k in range(len(p.values))] if p.values is not None \
            else [0.02, 0.26, 0.5, 0.74, 0.98]
        seen = []
        same = True
        for a in anchors:
            trials = []
            for u in us:
                x = a.copy()
                x[j] = u
                trials.append(make_trial(space, space.decode(x)))
            idx = list(dict.fromkeys(ev.add(trials)))
            seen.extend(i for i in idx if i not in seen)
            same = same and len(idx) >= 2 and all(_same(ev, idx[0], i) for i in idx[1:])
            if not same:
                break
        j += 1
        if same:
            centre_value = space.decode(anchors[0])[p.id]
            rec = {"param": p.id, "target": p.target,
                   "probed": list(dict.fromkeys(json.dumps(ev.trials[i].flat.get(p.target)) for i in seen)),
                   "pinned_to": centre_value if space.no_effect == "pin" else None}
            out.append(rec)
            if log:
                log(f"  no effect: {p.id} ({p.target}) changes nothing over {len(us)} values at 2 anchor points"
                    + (f" — pinned to {centre_value!r}" if space.no_effect == "pin" else ""))
    if space.no_effect == "pin":
        for rec in out:
            p = next(q for q in space.params if q.id == rec["param"])
            p.values, p.low, p.high, p.steps = [rec["pinned_to"]], None, None, None
    return out


def _same(ev: Evaluator, a: int, b: int) -> bool:
    """Trials ``a`` and ``b`` gave the same per-query objective and the same mean of every metric."""
    return np.array_equal(ev.per_query[a], ev.per_query[b]) and all(
        ev.means[m][a] == ev.means[m][b] or (math.isnan(ev.means[m][a]) and math.isnan(ev.means[m][b]))
        for m in ev.means)


def distributions(space: Space) -> dict[str, Any]:
    """Optuna distributions of the space's free dimensions: ``values`` → categorical, ``low``/``high`` → int or
    float (log if asked), each simplex → ``size − 1`` unit coordinates (decoded by stick breaking)."""
    from optuna.distributions import (  # lazy: startup
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )
    out: dict[str, Any] = {}
    for p in space.free_params:
        if p.values is not None:
            out[p.id] = CategoricalDistribution(p.values)
        elif p.integer:
            out[p.id] = IntDistribution(int(p.low), int(p.high), log=p.log)
        else:
            out[p.id] = FloatDistribution(p.low, p.high, log=p.log)
    for sx in space.simplexes:
        for k in range(sx.size - 1):
            out[f"{sx.id}#u{k}"] = FloatDistribution(0.0, 1.0)
    return out


def assignment(space: Space, params: dict) -> dict:
    """An Optuna trial's params → a space assignment (values tidied as :meth:`Param.decode` does)."""
    out: dict = {}
    for p in space.free_params:
        v = params[p.id]
        out[p.id] = v if p.values is not None else p._fix(v)
    for sx in space.simplexes:
        out[sx.id] = sx.decode(np.array([params[f"{sx.id}#u{k}"] for k in range(sx.size - 1)]))
    return out


def make_sampler(space: Space, resumed: int = 0):
    """The space's Optuna sampler seeded with ``seed`` (a study resumed after ``resumed`` trials gets a seed
    derived from both, so it does not replay the draws it already made)."""
    import optuna  # lazy: startup
    seed = space.seed if not resumed else (space.seed * 1_000_003 + resumed) % (2 ** 32)
    n_startup = space.init or max(5, min(20, space.trials // 5))
    if space.method == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                          n_startup_trials=n_startup, warn_independent_sampling=False)
    if space.method == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_startup,
                                         warn_independent_sampling=False)
    return optuna.samplers.RandomSampler(seed=seed)


def _violations(space: Space, ev: Evaluator, i: int) -> list[float]:
    """Optuna constraint values (``<= 0`` feasible) of trial ``i``'s offline constraints."""
    out = []
    for c in space.constraints:
        if c.latency:
            continue
        v = ev.means[c.metric][i]
        if v is None or math.isnan(v):
            out.append(1.0)
        elif c.op in (">=", ">"):
            out.append(c.value - v)
        elif c.op in ("<=", "<"):
            out.append(v - c.value)
        else:
            out.append(abs(v - c.value))
    return out


@dataclass
class _Batch:
    trials: list = field(default_factory=list)
    picks: list = field(default_factory=list)


def optuna_search(space: Space, ev: Evaluator, mask, progress, storage, study_name: str) -> list[int]:
    """Ask ``batch`` trials (all of them for ``random``), evaluate the batch as one sweep, tell the values.
    Trials a resumed study already finished are re-read (their metrics come from the sweep journal)."""
    import optuna  # lazy: startup
    from optuna.trial import TrialState  # lazy: startup
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = distributions(space)
    direction = "maximize" if space.maximize else "minimize"
    t0 = time.perf_counter()
    study = optuna.create_study(study_name=study_name, storage=storage, sampler=make_sampler(space),
                                direction=direction, load_if_exists=True)
    done: list[int] = []
    trials = study.get_trials(deepcopy=False)
    old = [t for t in trials if t.state == TrialState.COMPLETE]
    pending = [t for t in trials if t.state == TrialState.RUNNING]  # asked by a run that was killed before telling
    for t in [t for t in pending if set(t.params) != set(dists)]:  # killed while it was being asked
        study.tell(t.number, state=TrialState.FAIL)
    pending = [t for t in pending if set(t.params) == set(dists)]
    if trials:
        study.sampler = make_sampler(space, len(trials))
    ev.search_seconds += time.perf_counter() - t0
    if old:
        idx = ev.add([make_trial(space, assignment(space, t.params)) for t in old])
        done.extend(dict.fromkeys(idx))
    if pending:  # evaluate what the killed run asked for (the sweep journal holds what it finished) and tell it
        picks = [make_trial(space, assignment(space, t.params)) for t in pending]
        for t, i in zip(pending, ev.add(picks)):
            _tell(study, space, ev, t.number, i, mask)
            if i not in done:
                done.append(i)
    if progress and (old or pending):
        progress(f"{space.method}: study {study_name!r} resumed: {len(old)} finished and {len(pending)} asked "
                 f"but untold trials")
    n = len(old) + len(pending)
    step = space.trials if space.method == "random" else space.batch
    sign = 1.0 if space.maximize else -1.0
    while n < space.trials:
        t0 = time.perf_counter()
        b = _Batch()
        for _ in range(min(step, space.trials - n)):
            tr = study.ask(dists)
            b.trials.append(tr)
            b.picks.append(make_trial(space, assignment(space, tr.params)))
        ev.search_seconds += time.perf_counter() - t0
        idx = ev.add(b.picks)
        t0 = time.perf_counter()
        for tr, i in zip(b.trials, idx):
            _tell(study, space, ev, tr, i, mask)
            if i not in done:
                done.append(i)
        ev.search_seconds += time.perf_counter() - t0
        ev.asked += len(b.trials)
        n += len(b.trials)
        if progress:
            best = max((sign * ev.objective(i, mask) for i in done), default=float("nan"))
            progress(f"{space.method}: {n}/{space.trials} trials, {len(done)} distinct configs, best "
                     f"{sign * best:.4f}, sampler overhead {1e3 * ev.search_seconds / max(ev.asked, 1):.2f} ms/config")
    return done


def _tell(study, space: Space, ev: Evaluator, trial, i: int, mask) -> None:
    """Tell ``trial`` (a Trial or a trial number) the objective of evaluated config ``i`` and its constraints."""
    from optuna.trial import TrialState  # lazy: startup
    v = ev.objective(i, mask)
    if not isinstance(trial, int):
        for k, c in enumerate(_violations(space, ev, i)):
            trial.set_constraint(f"c{k}", c)
        trial.set_user_attr("config", ev.trials[i].key)
    if math.isnan(v):
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, v)


def journal_storage(path: str | Path):
    """Optuna's append-only journal storage in ``path`` (a file every driver of the study can open)."""
    from optuna.storages import JournalStorage  # lazy: startup
    from optuna.storages.journal import JournalFileBackend  # lazy: startup
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


# ---- folds ---------------------------------------------------------------------------------------------------------

def fold_of(ids: list[str], k: int, seed: int) -> np.ndarray:
    """Balanced deterministic folds: queries ranked by ``sha256(seed:id)``, fold = rank mod k."""
    ranked = sorted(range(len(ids)), key=lambda i: hashlib.sha256(f"{FOLD_SEED}:{seed}:{ids[i]}".encode()).hexdigest())
    out = np.empty(len(ids), dtype=np.int64)
    for r, i in enumerate(ranked):
        out[i] = r % k
    return out
