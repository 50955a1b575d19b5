"""The search space's data model: free parameters (:class:`Param`, tie expressions from :mod:`evalkit.tune.expr`),
weight simplexes (:class:`Simplex`), constraints (:class:`Constraint`) and the :class:`Space` that holds them —
the grid, the unit-cube coordinates a sampler works in, and an assignment turned into a sweep config.

A :class:`Space` is made by :func:`evalkit.tune.space.load_space`, which reads and validates the space file.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.engine.sweep import SweepConfig
from evalkit.measures import catalogue
from evalkit.tune.expr import Expr
from retrievers.errors import ConfigError
from retrievers.pipeline import Pipeline

LATENCY = {str(m): m.family.key for m in catalogue.measures("latency")}  # constraint name -> timing summary key
OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
       "==": lambda a, b: abs(a - b) <= 1e-12}


# ---- the space -------------------------------------------------------------------------------------------------

@dataclass
class Param:
    id: str
    name: str
    stage: str | None = None  # resolved stage label (the key of [overrides])
    arm: str | None = None
    values: list | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    steps: int | None = None
    integer: bool = False
    tie: Expr | None = None
    options: dict | None = None  # a [[choice]]: option name -> stage dict, sequence (list), None (off) or "keep"

    @property
    def target(self) -> str:
        if self.options is not None:
            return f"{self.stage}:stage"
        if self.stage:
            return f"{self.stage}.{self.name}"
        if self.arm:
            return f"arms.{self.arm}.{self.name}"
        return self.name

    @property
    def free(self) -> bool:
        return self.tie is None

    def grid_values(self) -> list:
        if self.values is not None:
            return list(self.values)
        if self.log:
            vals = np.geomspace(self.low, self.high, self.steps)
        else:
            vals = np.linspace(self.low, self.high, self.steps)
        return [self._fix(v) for v in vals]

    def decode(self, u: float):
        """Unit coordinate → value."""
        if self.values is not None:
            return self.values[min(len(self.values) - 1, int(u * len(self.values)))]
        if self.log:
            v = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            v = self.low + u * (self.high - self.low)
        return self._fix(min(max(v, self.low), self.high))

    def encode(self, v) -> float:
        if self.values is not None:
            i = next(i for i, x in enumerate(self.values) if x == v)
            return (i + 0.5) / len(self.values)
        if self.log:
            return (math.log(v) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (v - self.low) / (self.high - self.low) if self.high > self.low else 0.5

    def _fix(self, v):
        v = float(v)
        if self.integer:
            return int(round(v))
        return float(f"{v:.6g}")  # tidy numbers in configs, tables and best.toml


@dataclass
class Simplex:
    id: str
    stage: str
    names: list[str]  # member parameter names, or [name] for a list parameter
    size: int
    list_param: bool
    step: float | None
    total: float
    minimum: float

    @property
    def members(self) -> list[str]:
        return [f"{self.names[0]}[{i}]" for i in range(self.size)] if self.list_param else list(self.names)

    def grid_values(self) -> list[tuple[float, ...]]:
        n = int(round(1.0 / self.step))
        out = []
        for comp in compositions(n, self.size):
            w = tuple(self._tidy(self.minimum + (self.total - self.size * self.minimum) * c / n) for c in comp)
            out.append(w)
        return out

    def decode(self, u: np.ndarray) -> tuple[float, ...]:
        """``size − 1`` unit coordinates → a point of the simplex (stick breaking with Beta(1, k−i) marginals, so a
        uniform cube point gives a uniform simplex point), rounded to ``step`` if given."""
        k = self.size
        w, rest = [], 1.0
        for i in range(k - 1):
            frac = 1.0 - (1.0 - float(u[i])) ** (1.0 / (k - 1 - i))
            w.append(rest * frac)
            rest -= rest * frac
        w.append(rest)
        w = np.asarray(w)
        if self.step:
            n = int(round(1.0 / self.step))
            raw = w * n
            base = np.floor(raw).astype(int)
            left = n - base.sum()
            order = np.argsort(-(raw - base), kind="stable")
            base[order[:left]] += 1
            w = base / n
        span = self.total - k * self.minimum
        return tuple(self._tidy(self.minimum + span * x) for x in w)

    def encode(self, w) -> np.ndarray:
        span = self.total - self.size * self.minimum
        x = [(v - self.minimum) / span if span > 0 else 1.0 / self.size for v in w]
        u, rest = [], 1.0
        for i in range(self.size - 1):
            frac = x[i] / rest if rest > 1e-12 else 0.0
            u.append(1.0 - (1.0 - min(max(frac, 0.0), 1.0)) ** (self.size - 1 - i))
            rest -= x[i]
        return np.asarray(u)

    @staticmethod
    def _tidy(v: float) -> float:
        return float(f"{v:.6g}")


def compositions(n: int, k: int):
    """All k-tuples of non-negative integers summing to n (lexicographic)."""
    if k == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in compositions(n - first, k - 1):
            yield (first,) + rest


@dataclass
class Constraint:
    text: str
    metric: str
    op: str
    value: float

    @property
    def latency(self) -> bool:
        return self.metric in LATENCY

    def ok(self, v: float) -> bool:
        return v is not None and not (isinstance(v, float) and math.isnan(v)) and OPS[self.op](v, self.value)


@dataclass
class Space:
    path: str
    name: str
    description: str
    preset: str
    pipeline: Pipeline
    dataset: str
    split: str | None
    heldout: str | None
    folds: int
    seed: int
    objective: str
    maximize: bool
    constraints: list[Constraint]
    method: str
    trials: int
    batch: int
    init: int
    metrics: list[str]
    baselines: list[str]
    top: int
    latency_queries: int
    latency_top: int
    latency_repeats: int
    workers: int | None
    params: list[Param]
    simplexes: list[Simplex]
    raw: dict = field(default_factory=dict)
    extra_arms: list[dict] = field(default_factory=list)  # [[arm]]: arms the candidate set adds for choices
    no_effect: str = "pin"  # a parameter that changes nothing at the as-shipped config: "pin" it, or "report"
    split_by: str | None = None  # the grouping rule of the splits and folds (evalkit.tune.protocol), or "time"
    split_date: str | None = None  # split_by = "time": the first date held out (default: the median as_of)

    # -- dimensions ----------------------------------------------------------------------------------------------
    @property
    def free_params(self) -> list[Param]:
        return [p for p in self.params if p.free]

    @property
    def dims(self) -> int:
        return len(self.free_params) + sum(s.size - 1 for s in self.simplexes)

    def grid(self) -> list[dict]:
        axes = [[(p.id, v) for v in p.grid_values()] for p in self.free_params]
        axes += [[(s.id, w) for w in s.grid_values()] for s in self.simplexes]
        return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]

    def decode(self, u: np.ndarray) -> dict:
        out, i = {}, 0
        for p in self.free_params:
            out[p.id] = p.decode(float(u[i]))
            i += 1
        for s in self.simplexes:
            out[s.id] = s.decode(u[i:i + s.size - 1])
            i += s.size - 1
        return out

    def encode(self, assign: dict) -> np.ndarray:
        u = [self.free_params[j].encode(assign[p.id]) for j, p in enumerate(self.free_params)]
        for s in self.simplexes:
            u.extend(s.encode(assign[s.id]))
        return np.asarray(u, dtype=np.float64)

    # -- assignment → config ---------------------------------------------------------------------------------------
    def values(self, assign: dict) -> dict[str, Any]:
        """Every parameter's value (ties evaluated) keyed by id, simplex members expanded."""
        env: dict[str, Any] = {}
        for p in self.free_params:
            env[p.id] = assign[p.id]
        for s in self.simplexes:
            w = assign[s.id]
            if s.list_param:
                env[s.names[0]] = list(w)
            else:
                for n, x in zip(s.names, w):
                    env[n] = x
        pending = [p for p in self.params if not p.free]
        for _ in range(len(pending) + 1):
            left = []
            for p in pending:
                if p.tie.names <= set(env):
                    try:
                        v = p.tie(env)
                    except (ArithmeticError, ValueError, TypeError) as exc:
                        raise ConfigError(f"{self.path}: tie {p.tie.text!r} for {p.id}: {exc}") from None
                    env[p.id] = p._fix(v) if isinstance(v, (int, float)) else v
                else:
                    left.append(p)
            pending = left
            if not pending:
                break
        if pending:
            raise ConfigError(f"{self.path}: ties cannot be resolved (cycle or unknown id): "
                              f"{', '.join(p.id for p in pending)}")
        return env

    def config(self, assign: dict) -> tuple[SweepConfig, dict[str, Any]]:
        """The sweep config of an assignment and its flat ``{target: value}`` description."""
        env = self.values(assign)
        overrides: dict[str, dict] = {}
        arms: dict[str, dict] = {}
        replace: dict[str, dict | None] = {}
        flat: dict[str, Any] = {}
        for p in self.params:
            v = env[p.id]
            if p.options is not None:
                opt = p.options[v]
                if opt != "keep":
                    replace[p.stage] = opt
            elif p.stage:
                overrides.setdefault(p.stage, {})[p.name] = v
            elif p.arm:
                arms.setdefault(p.arm, {})[p.name] = v
            flat[p.target] = v
        for s in self.simplexes:
            w = assign[s.id]
            if s.list_param:
                overrides.setdefault(s.stage, {})[s.names[0]] = list(w)
                flat[f"{s.stage}.{s.names[0]}"] = list(w)
            else:
                for n, x in zip(s.names, w):
                    overrides.setdefault(s.stage, {})[n] = x
                    flat[f"{s.stage}.{n}"] = x
        used = set()  # extra arms only where a chosen option reads them (a preset should not fetch unused arms)
        for opt in replace.values():
            for k, v in ((k, v) for cfg in (opt if isinstance(opt, list) else [opt]) if isinstance(cfg, dict)
                         for k, v in cfg.items()):
                if k in ("arm", "vector_arm", "text_arm") and isinstance(v, str):
                    used.add(v)
                elif k == "arms" and isinstance(v, list):
                    used.update(str(a) for a in v)
        return SweepConfig(overrides, arms, replace, [dict(a) for a in self.extra_arms if a["name"] in used]), flat
