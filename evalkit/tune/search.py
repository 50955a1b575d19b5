"""Search over a tune space on a shared candidate set: :class:`Trial` (one configuration), :class:`Evaluator`
(evaluates configurations through a :class:`~evalkit.engine.sweep.Sweep`, caching by config key) and
:func:`search` (grid, random or Bayesian: a Gaussian process with expected improvement), plus :func:`fold_of`
(balanced deterministic cross-validation folds).
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.tune.space import Space

FOLD_SEED = "evalkit-tune-folds-1"


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

    def __init__(self, space: Space, sweep: Sweep, workers: int, log: Callable[[str], None]):
        self.space = space
        self.sweep = sweep
        self.workers = workers
        self.log = log
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
            res = self.sweep.run([t.config for t in new], workers=self.workers)
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
           progress: Callable[[str], None] | None = None) -> list[int]:
    """Run the space's method; returns the trial indices it evaluated (scored on ``mask`` of the judged queries)."""
    if space.method == "grid":
        return ev.add([make_trial(space, a) for a in space.grid()])
    if space.method == "random":
        return ev.add([make_trial(space, space.decode(u)) for u in rng.random((space.trials, space.dims))])
    return _bayes(space, ev, mask, rng, progress)


def _expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    """EI for maximisation: ``(μ − f* − ξ)Φ(z) + σφ(z)``, ``z = (μ − f* − ξ)/σ`` (0 where σ = 0)."""
    from scipy.stats import norm  # lazy: startup
    imp = mu - best - xi
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sigma > 0, imp / sigma, 0.0)
    return np.where(sigma > 0, imp * norm.cdf(z) + sigma * norm.pdf(z), 0.0)


def _bayes(space: Space, ev: Evaluator, mask, rng, progress) -> list[int]:

    from sklearn.exceptions import ConvergenceWarning  # lazy: startup
    from sklearn.gaussian_process import GaussianProcessRegressor  # lazy: startup
    from sklearn.gaussian_process.kernels import (  # lazy: startup
        ConstantKernel,
        Matern,
        WhiteKernel,
    )

    d = space.dims
    sign = 1.0 if space.maximize else -1.0
    done: list[int] = []
    X: list[np.ndarray] = []
    y: list[float] = []

    def record(idx: list[int], us: list[np.ndarray]):
        for i, u in zip(idx, us):
            if i in done:
                continue
            done.append(i)
            X.append(u)
            y.append(sign * ev.objective(i, mask))
        feas = [ev.feasible(i) for i in done]
        return feas

    n_init = space.init or max(5, min(20, space.trials // 5))
    us = list(rng.random((min(n_init, space.trials), d)))
    record(ev.add([make_trial(space, space.decode(u)) for u in us]), us)
    stall = 0
    while len(done) < space.trials and stall < 5:
        feas = [ev.feasible(i) for i in done]
        Y = np.asarray(y)
        worst = Y.min() - (Y.max() - Y.min() + 1e-6) * 0.1
        Yf = np.where(feas, Y, worst)  # infeasible configs look worse than anything observed
        kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=np.full(d, 0.3), length_scale_bounds=(1e-2, 1e1),
                                                            nu=2.5) + WhiteKernel(1e-4, (1e-8, 1e-1))
        gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1,
                                      random_state=int(rng.integers(2 ** 31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", UserWarning)
            gp.fit(np.asarray(X), Yf)
        fixed = GaussianProcessRegressor(gp.kernel_, normalize_y=True, optimizer=None)
        Xs, Ys = list(X), list(Yf)
        n_pool = 2048
        pool = rng.random((n_pool, d))
        local = np.clip(np.asarray(X)[np.argsort(-Yf)[:5]].repeat(64, axis=0)
                        + rng.normal(0, 0.05, (5 * 64 if len(X) >= 5 else len(X) * 64, d)), 0, 1)
        pool = np.vstack([pool, local])
        picks: list[np.ndarray] = []
        keys = {ev.trials[i].key for i in done}
        want = min(space.batch, space.trials - len(done))
        model = gp
        for _ in range(want):
            mu, sd = model.predict(pool, return_std=True)
            ei = _expected_improvement(mu, sd, max(Ys))
            for j in np.argsort(-ei, kind="stable"):
                t = make_trial(space, space.decode(pool[j]))
                if t.key not in keys:
                    keys.add(t.key)
                    picks.append(pool[j])
                    Xs.append(pool[j])
                    Ys.append(float(mu[j]))  # kriging believer: pretend the mean was observed
                    break
            else:
                break
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = fixed.fit(np.asarray(Xs), np.asarray(Ys))
        if not picks:
            stall += 1
            continue
        n_before = len(done)
        record(ev.add([make_trial(space, space.decode(u)) for u in picks]), picks)
        stall = stall + 1 if len(done) == n_before else 0
        if progress:
            progress(f"bayes: {len(done)}/{space.trials} configs, best {sign * max(y):.4f}")
    return done


# ---- folds ---------------------------------------------------------------------------------------------------------

def fold_of(ids: list[str], k: int, seed: int) -> np.ndarray:
    """Balanced deterministic folds: queries ranked by ``sha256(seed:id)``, fold = rank mod k."""
    ranked = sorted(range(len(ids)), key=lambda i: hashlib.sha256(f"{FOLD_SEED}:{seed}:{ids[i]}".encode()).hexdigest())
    out = np.empty(len(ids), dtype=np.int64)
    for r, i in enumerate(ranked):
        out[i] = r % k
    return out
