"""Tune a preset's stage parameters on a labelled split, report on held-out queries (`evalkit tune`).

A **search space** is a TOML file (examples in ``tune/``)::

    preset = "openclaw_core_2026_2_26_decay_mmr"   # a preset name or .toml path
    dataset = "locomo"                             # overridable with --dataset
    split = "train"                                # the queries tuned on
    heldout = "heldout"                            # the queries reported on (default: heldout, else test)
    # folds = 5                                    # instead of heldout: k-fold cross-validation over `split`
    objective = "ndcg@10"                          # any evalkit.fastmetrics metric
    direction = "maximize"                         # or "minimize"
    constraints = ["budget_compliance >= 0.99", "p95_latency_ms <= 50"]
    method = "bayes"                               # grid | random | bayes
    trials = 200                                   # random / bayes: configs to evaluate
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
    step = 0.05                                    # grid resolution (random / bayes: continuous, rounded to it)

``tie`` makes a parameter a function of others (``+ - * / // % **``, ``min max floor ceil round abs log exp
sqrt int float``; names are parameter ids — ``id`` if given, else ``name``). Every value is validated by the
stage's own parameter validation before any work, and unknown presets, stages, parameters, arms, metrics or
keys are rejected with one line (:class:`retrievers.errors.ConfigError`).

Methods: ``grid`` (the product of every free dimension), ``random`` (uniform in the encoded unit cube, seeded),
``bayes`` (Gaussian-process regression — Matérn 5/2 + white noise, scikit-learn — with expected improvement,
seeded: ``init`` random configs, then batches of ``batch`` configs chosen by EI with the kriging-believer
fantasy; Jones, Schonlau & Welch 1998). Every config is evaluated with :mod:`evalkit.sweep` on the shared
candidates.

Selection: the best config maximises the objective on the tuning queries among configs meeting every
constraint that can be measured offline (quality, budget, skip metrics: on the tuning queries). Latency
constraints (``p50/p90/p95/p99/mean_latency_ms``) are checked on the ``latency_top`` best configs with a real
latency run (:func:`evalkit.runner.run_latency`, end to end without the query embedding, ``latency_queries``
queries); the first that passes wins. If the runner has no latency mode, they are reported as "not checked".

Output folder: ``summary.json``, ``configs.csv`` (every evaluated config), ``leaderboard.csv`` / ``.md`` (the
best ``top`` configs and the as-shipped preset: tuning and held-out metric, constraint status), ``best.toml``
(a preset that ``extends`` the tuned one with ``[overrides]``: ``evalkit run --retrievers best.toml``),
``report.md``, and ``plots/*.png`` (objective vs each 1-D parameter; a simplex plot when weights vary together).
Held-out significance of best vs as shipped (and vs each baseline) uses :func:`evalkit.stats.compare_pairs`
(paired sign-flip randomisation + paired t-test, bootstrap CI of the difference).
"""
from __future__ import annotations

import ast
import csv
import re
import dataclasses
import hashlib
import io
import itertools
import json
import math
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from evalkit.fastmetrics import parse_metric
from evalkit.sweep import Sweep, SweepConfig, deepest_arms
from retrievers.errors import ConfigError
from retrievers.pipeline import Pipeline, load_preset, resolve_preset

TOP_KEYS = {"name", "description", "preset", "dataset", "split", "heldout", "folds", "seed", "objective",
            "direction", "constraints", "method", "trials", "batch", "init", "metrics", "baselines", "top",
            "latency_queries", "latency_top", "latency_repeats", "workers", "param", "simplex"}
PARAM_KEYS = {"id", "stage", "arm", "name", "values", "low", "high", "log", "steps", "integer", "tie"}
SIMPLEX_KEYS = {"stage", "names", "name", "size", "step", "total", "min"}
METHODS = ("grid", "random", "bayes")
LATENCY = {"p50_latency_ms": "p50_ms", "p90_latency_ms": "p90_ms", "p95_latency_ms": "p95_ms",
           "p99_latency_ms": "p99_ms", "mean_latency_ms": "mean_ms"}
OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
       "==": lambda a, b: abs(a - b) <= 1e-12}
FOLD_SEED = "evalkit-tune-folds-1"
DEFAULT_METRICS = ["ndcg@10", "recall@10", "mrr@10"]
INJECTED_METRICS = ["injected_ndcg@10", "injected_recall@10", "injection_rate"]


# ---- tie expressions -------------------------------------------------------------------------------------------

_FUNCS: dict[str, Callable] = {"min": min, "max": max, "floor": math.floor, "ceil": math.ceil, "round": round,
                               "abs": abs, "log": math.log, "exp": math.exp, "sqrt": math.sqrt, "int": int,
                               "float": float}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b}


class Expr:
    """A small arithmetic expression over parameter ids, evaluated without ``eval``."""

    def __init__(self, text: str, where: str):
        self.text = text
        try:
            self.tree = ast.parse(str(text), mode="eval").body
        except SyntaxError:
            raise ConfigError(f"{where}: tie {text!r} is not a valid expression") from None
        self.names: set[str] = set()
        self._check(self.tree, where)

    def _check(self, node, where):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                      bool):
            return
        if isinstance(node, ast.Name):
            if node.id not in _FUNCS:
                self.names.add(node.id)
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, where)
            self._check(node.right, where)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            self._check(node.operand, where)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and not node.keywords:
            for a in node.args:
                self._check(a, where)
            return
        raise ConfigError(f"{where}: tie {self.text!r} may only use numbers, parameter ids, + - * / // % ** and "
                          f"{', '.join(sorted(_FUNCS))}")

    def __call__(self, env: dict[str, Any]):
        def ev(node):
            if isinstance(node, ast.Constant):
                return node.value
            if isinstance(node, ast.Name):
                return env[node.id]
            if isinstance(node, ast.BinOp):
                return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
            if isinstance(node, ast.UnaryOp):
                v = ev(node.operand)
                return -v if isinstance(node.op, ast.USub) else v
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        return ev(self.tree)


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

    @property
    def target(self) -> str:
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
        for comp in _compositions(n, self.size):
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


def _compositions(n: int, k: int):
    """All k-tuples of non-negative integers summing to n (lexicographic)."""
    if k == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in _compositions(n - first, k - 1):
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
        flat: dict[str, Any] = {}
        for p in self.params:
            v = env[p.id]
            if p.stage:
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
        return SweepConfig(overrides, arms), flat


def _num(v, where: str, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}: {what} must be a finite number, got {v!r}")
    return float(v)


def _stage_for(p: Pipeline, ref: str, where: str):
    """Resolve a stage reference (label, else type) to exactly one stage; ambiguity is an error."""
    by_label = [s for s in p.stages if s.display == ref]
    cands = by_label or [s for s in p.stages if s.name == ref]
    if not cands:
        labels = ", ".join(dict.fromkeys(s.display for s in p.stages))
        raise ConfigError(f"{where}: preset {p.name!r} has no stage {ref!r} (stages: {labels})")
    touched = [s for s in p.stages if s.display == cands[0].display or s.name == cands[0].display]
    if len(cands) > 1 or len(touched) > 1:
        labels = ", ".join(s.display for s in (cands if len(cands) > 1 else touched))
        raise ConfigError(f"{where}: stage {ref!r} matches several stages ({labels}): use a stage label")
    return cands[0]


def _check_value(stage, name: str, value, where: str):
    try:
        type(stage).from_dict({**stage.params(), name: value})
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _field_type(stage, name: str) -> str:
    f = {f.name: f for f in dataclasses.fields(stage)}[name]
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))


def load_space(path: str | Path, dataset: str | None = None, method: str | None = None,
               trials: int | None = None) -> Space:
    """Parse and validate a search-space TOML (ConfigError with one line on any problem); ``dataset``,
    ``method`` and ``trials`` override the file's values."""
    path = Path(path)
    where = str(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"search space {where} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML ({exc})") from None
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(TOP_KEYS))})")
    if "preset" not in raw:
        raise ConfigError(f"{where}: 'preset' is required (the preset to tune)")
    preset = str(raw["preset"])
    if preset.endswith(".toml") and not Path(preset).is_absolute() and not Path(preset).exists():
        alt = path.parent / preset
        if alt.exists():
            preset = str(alt)
    pipeline = load_preset(preset)
    ds = dataset or raw.get("dataset")
    if not ds:
        raise ConfigError(f"{where}: no dataset (set 'dataset' in the space or pass --dataset)")
    folds = raw.get("folds", 0)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds == 1 or folds < 0 or folds > 50:
        raise ConfigError(f"{where}: folds must be 0 (use a held-out split) or an integer in 2..50, got {folds!r}")
    if folds and "heldout" in raw:
        raise ConfigError(f"{where}: give either 'heldout' or 'folds', not both")
    objective = str(raw.get("objective", "ndcg@10"))
    om = parse_metric(objective)
    if om.run_level:
        raise ConfigError(f"{where}: objective {objective!r} is a run-level rate; use a ranking metric (ndcg@10 …)")
    direction = str(raw.get("direction", "maximize")).lower()
    if direction not in ("maximize", "minimize", "max", "min"):
        raise ConfigError(f"{where}: direction must be 'maximize' or 'minimize', got {direction!r}")
    constraints = []
    for c in raw.get("constraints", []):
        constraints.append(_parse_constraint(c, where))
    if method:
        raw["method"] = method
    if trials:
        raw["trials"] = trials
    method = str(raw.get("method", "grid"))
    if method not in METHODS:
        raise ConfigError(f"{where}: method {method!r} is not one of: {', '.join(METHODS)}")
    ints = {}
    for key, default, lo in (("trials", 100, 1), ("batch", 8, 1), ("init", 0, 0), ("top", 20, 1), ("seed", 0, 0),
                             ("latency_queries", 50, 1), ("latency_top", 5, 1), ("latency_repeats", 1, 1)):
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{where}: {key} must be an integer >= {lo}, got {v!r}")
        ints[key] = v
    workers = raw.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"{where}: workers must be an integer >= 1, got {workers!r}")
    metrics = [str(m) for m in raw.get("metrics", [])]
    for m in metrics:
        parse_metric(m)
    baselines = [str(b) for b in raw.get("baselines", [])]
    for b in baselines:
        resolve_preset(b)
    plist = raw.get("param", [])
    names = [str(d.get("name")) for d in plist if isinstance(d, dict) and not d.get("id")]
    twice = {n for n in names if names.count(n) > 1}
    params = [_parse_param(p, i, pipeline, where, method, twice) for i, p in enumerate(plist)]
    simplexes = [_parse_simplex(s, i, pipeline, where, method) for i, s in enumerate(raw.get("simplex", []))]
    ids = [p.id for p in params] + [n for s in simplexes for n in (s.names if not s.list_param else s.names)]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"{where}: duplicate parameter id(s) {', '.join(dup)} (give each an 'id')")
    targets = [p.target for p in params if p.stage or p.arm] + [f"{s.stage}.{n}" for s in simplexes for n in s.names]
    dup = sorted({t for t in targets if targets.count(t) > 1})
    if dup:
        raise ConfigError(f"{where}: parameter(s) {', '.join(dup)} set twice")
    if not params and not simplexes:
        raise ConfigError(f"{where}: no [[param]] or [[simplex]]: nothing to tune")
    known = set(ids)
    for p in params:
        if p.tie is not None:
            missing = sorted(p.tie.names - known)
            if missing:
                raise ConfigError(f"{where}: tie {p.tie.text!r} for {p.id} uses unknown id(s) {', '.join(missing)} "
                                  f"(ids: {', '.join(sorted(known))})")
    name = str(raw.get("name") or path.stem)
    sp = Space(where, name, str(raw.get("description", "")), preset, pipeline, str(ds), raw.get("split"),
               raw.get("heldout"), folds, ints["seed"], objective, direction in ("maximize", "max"), constraints,
               method, ints["trials"], ints["batch"], ints["init"], metrics, baselines, ints["top"],
               ints["latency_queries"], ints["latency_top"], ints["latency_repeats"], workers, params, simplexes, raw)
    _validate_configs(sp)
    return sp


def _parse_constraint(c, where: str) -> Constraint:
    m = re.match(r"^\s*([A-Za-z0-9_@.]+)\s*(>=|<=|==|>|<)\s*([-+0-9.eE]+)\s*$", str(c))
    if not m:
        raise ConfigError(f"{where}: constraint {c!r} must look like 'metric >= value' (ops: >= <= > < ==)")
    metric, op, val = m.groups()
    if metric not in LATENCY:
        parse_metric(metric)
    try:
        value = float(val)
    except ValueError:
        raise ConfigError(f"{where}: constraint {c!r}: {val!r} is not a number") from None
    return Constraint(str(c), metric, op, value)


def _parse_param(d: dict, i: int, p: Pipeline, space_where: str, method: str, twice: set = frozenset()) -> Param:
    where = f"{space_where}: [[param]] #{i + 1}"
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(d) - PARAM_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(PARAM_KEYS))})")
    if "name" not in d:
        raise ConfigError(f"{where}: 'name' is required")
    name = str(d["name"])
    if d.get("stage") and d.get("arm"):
        raise ConfigError(f"{where}: give 'stage' or 'arm', not both")
    pid = str(d.get("id") or name)
    if not d.get("id") and name in twice:  # the same name on two stages: ids default to <stage>_<name>
        pid = re.sub(r"\W", "_", f"{d.get('stage') or d.get('arm') or 'var'}_{name}")
    where = f"{space_where}: param {pid!r}"
    stage = None
    integer = bool(d.get("integer", False))
    if d.get("stage"):
        stage = _stage_for(p, str(d["stage"]), where)
        fields = [f.name for f in dataclasses.fields(stage) if f.name != "label"]
        if name not in fields:
            raise ConfigError(f"{where}: stage {stage.display!r} ({stage.name}) has no parameter {name!r} "
                              f"(valid: {', '.join(sorted(fields))})")
        if _field_type(stage, name).startswith("int"):
            integer = True
    elif d.get("arm"):
        arms = {a.name: a for a in p.arms}
        if d["arm"] not in arms:
            raise ConfigError(f"{where}: preset {p.name!r} has no arm {d['arm']!r} (arms: {', '.join(arms)})")
        if name != "depth":
            raise ConfigError(f"{where}: only an arm's 'depth' can be tuned (other arm keys change the candidates)")
        integer = True
    kinds = [k for k in ("values", "low", "tie") if k in d]
    if "high" in d and "low" not in d:
        kinds.append("high")
    if len(kinds) != 1 and not (kinds == ["low"] and "high" in d):
        raise ConfigError(f"{where}: give exactly one of 'values', 'low'/'high' or 'tie'")
    par = Param(pid, name, stage.display if stage else None, str(d["arm"]) if d.get("arm") else None,
                integer=integer, log=bool(d.get("log", False)))
    if "values" in d:
        vals = d["values"]
        if not isinstance(vals, list) or not vals:
            raise ConfigError(f"{where}: values must be a non-empty list")
        if integer:
            vals = [int(v) if isinstance(v, float) and v.is_integer() else v for v in vals]
        elif stage is not None and _field_type(stage, name).startswith("float"):
            vals = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in vals]
        par.values = vals
    elif "tie" in d:
        par.tie = Expr(str(d["tie"]), where)
    else:
        if "high" not in d:
            raise ConfigError(f"{where}: 'low' needs 'high'")
        par.low, par.high = _num(d["low"], where, "low"), _num(d["high"], where, "high")
        if not par.low < par.high:
            raise ConfigError(f"{where}: low ({par.low:g}) must be < high ({par.high:g})")
        if par.log and par.low <= 0:
            raise ConfigError(f"{where}: log scale needs low > 0")
        steps = d.get("steps")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 2):
            raise ConfigError(f"{where}: steps must be an integer >= 2")
        if method == "grid" and steps is None:
            raise ConfigError(f"{where}: a grid search needs 'values' or 'steps' for a low/high range")
        par.steps = steps
    # every value the search can produce is validated by the stage itself
    probe = par.values if par.values is not None else ([par._fix(par.low), par._fix(par.high)]
                                                       if par.low is not None else [])
    for v in probe:
        if stage is not None:
            _check_value(stage, name, v, where)
        elif par.arm is not None:
            _check_depth(v, where)
    if par.low is not None and par.steps:
        for v in par.grid_values():
            if stage is not None:
                _check_value(stage, name, v, where)
    return par


def _check_depth(v, where: str):
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10000:
        raise ConfigError(f"{where}: an arm depth must be an integer in [1, 10000], got {v!r}")


def _parse_simplex(d: dict, i: int, p: Pipeline, space_where: str, method: str) -> Simplex:
    where = f"{space_where}: [[simplex]] #{i + 1}"
    unknown = sorted(set(d) - SIMPLEX_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(SIMPLEX_KEYS))})")
    if "stage" not in d:
        raise ConfigError(f"{where}: 'stage' is required")
    stage = _stage_for(p, str(d["stage"]), where)
    fields = [f.name for f in dataclasses.fields(stage) if f.name != "label"]
    if "names" in d:
        names = [str(n) for n in d["names"]]
        if len(names) < 2:
            raise ConfigError(f"{where}: a simplex needs at least 2 names")
        size, list_param = len(names), False
    elif "name" in d:
        names = [str(d["name"])]
        size = d.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise ConfigError(f"{where}: a list-parameter simplex needs size >= 2")
        list_param = True
    else:
        raise ConfigError(f"{where}: give 'names' (one parameter per weight) or 'name' + 'size' (a list parameter)")
    for n in names:
        if n not in fields:
            raise ConfigError(f"{where}: stage {stage.display!r} ({stage.name}) has no parameter {n!r} "
                              f"(valid: {', '.join(sorted(fields))})")
    step = d.get("step")
    if step is not None:
        step = _num(step, where, "step")
        if not 0 < step <= 0.5 or abs(round(1 / step) * step - 1) > 1e-9:
            raise ConfigError(f"{where}: step must divide 1 (e.g. 0.05, 0.1, 0.25), got {step:g}")
    elif method == "grid":
        raise ConfigError(f"{where}: a grid search needs 'step'")
    total = _num(d.get("total", 1.0), where, "total")
    minimum = _num(d.get("min", 0.0), where, "min")
    if total <= 0 or minimum < 0 or minimum * size >= total:
        raise ConfigError(f"{where}: need total > 0 and 0 <= min < total/size")
    sx = Simplex(f"simplex:{stage.display}:{'+'.join(names)}", stage.display, names, size, list_param, step, total,
                 minimum)
    corners = [tuple(total - (size - 1) * minimum if j == k else minimum for j in range(size)) for k in range(size)]
    for w in corners:
        upd = {names[0]: list(w)} if list_param else dict(zip(names, w))
        try:
            type(stage).from_dict({**stage.params(), **upd})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return sx


def _validate_configs(sp: Space) -> None:
    """Build the pipelines of a few assignments (grid corners / random draws) so bad ties fail now."""
    rng = np.random.default_rng(sp.seed)
    probes = [np.zeros(sp.dims), np.ones(sp.dims) - 1e-9, np.full(sp.dims, 0.5)] + list(rng.random((5, sp.dims)))
    for u in probes:
        cfg, _ = sp.config(sp.decode(u))
        try:
            p = cfg.pipeline(sp.pipeline)
        except ConfigError as exc:
            raise ConfigError(f"{sp.path}: {exc}") from None
        for a in p.arms:
            _check_depth(a.depth, f"{sp.path}: arm {a.name!r}")


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


def _trial(space: Space, assign: dict, shipped: bool = False) -> Trial:
    cfg, flat = space.config(assign) if not shipped else (SweepConfig(), {})
    return Trial(cfg.key(), assign, cfg, flat, shipped)


def search(space: Space, ev: Evaluator, mask: np.ndarray | None, rng: np.random.Generator,
           progress: Callable[[str], None] | None = None) -> list[int]:
    """Run the space's method; returns the trial indices it evaluated (scored on ``mask`` of the judged queries)."""
    if space.method == "grid":
        return ev.add([_trial(space, a) for a in space.grid()])
    if space.method == "random":
        return ev.add([_trial(space, space.decode(u)) for u in rng.random((space.trials, space.dims))])
    return _bayes(space, ev, mask, rng, progress)


def _expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    """EI for maximisation: ``(μ − f* − ξ)Φ(z) + σφ(z)``, ``z = (μ − f* − ξ)/σ`` (0 where σ = 0)."""
    from scipy.stats import norm
    imp = mu - best - xi
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sigma > 0, imp / sigma, 0.0)
    return np.where(sigma > 0, imp * norm.cdf(z) + sigma * norm.pdf(z), 0.0)


def _bayes(space: Space, ev: Evaluator, mask, rng, progress) -> list[int]:
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

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
    record(ev.add([_trial(space, space.decode(u)) for u in us]), us)
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
                t = _trial(space, space.decode(pool[j]))
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
        record(ev.add([_trial(space, space.decode(u)) for u in picks]), picks)
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


# ---- the tuning run ------------------------------------------------------------------------------------------------

@dataclass
class TuneResult:
    out: Path
    summary: dict
    text: str  # the console summary


def _fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _flat_str(flat: dict) -> str:
    if not flat:
        return "(as shipped)"
    return ", ".join(f"{k}={_short(v)}" for k, v in flat.items())


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    return str(v)


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
                raise ConfigError(f"{space.path}: config {_flat_str(t.flat)} asks arm {a!r} for depth {d['depth']} "
                                  f"but candidates were built to {built.get(a)} (non-monotone tie?)")


def _latency_check(space: Space, ds, index, trials: list[Trial], log) -> dict[str, dict]:
    """{trial key: {metric: value}} from a real latency run, or {} when the runner has none."""
    import evalkit.runner as runner
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


def run_tune(space: Space, out: str | Path | None = None, workers: int | None = None, settings=None, embedder=None,
             log: Callable[[str], None] = print, progress: bool = False) -> TuneResult:
    """Tune ``space`` and write the output folder (see the module docstring)."""
    from evalkit.stats import compare_pairs
    from retrievers.search import build_candidates

    t_start = time.perf_counter()
    out = Path(out) if out else Path("reports") / "tune" / space.name
    rng = np.random.default_rng(space.seed)
    env = _prepare(space, settings, embedder, log, rng)
    ds, split, pool, heldout, heldout_ds = env.ds, env.split, env.pool, env.heldout, env.heldout_ds
    index, specs_all, built, baselines, cs, ctx = env.index, env.specs, env.built, env.baselines, env.cs, env.ctx
    metrics = list(dict.fromkeys([space.objective] + space.metrics + DEFAULT_METRICS
                                 + [c.metric for c in space.constraints if not c.latency]))
    sw = Sweep(space.pipeline, cs, pool.qrels, metrics, ctx=ctx, keep=[space.objective])
    n_workers = workers or space.workers or 1
    ev = Evaluator(space, sw, n_workers, log)
    judged = list(sw.judg.judged_ids)
    if not judged:
        raise ConfigError(f"{space.path}: no judged queries in {ds.name}/{split}")
    shipped_i = ev.add([_trial(space, {}, shipped=True)])[0]

    def note(msg):
        if progress:
            log("  " + msg)

    folds = []
    if space.folds:
        fold = fold_of(judged, space.folds, space.seed)
        for f in range(space.folds):
            idx = search(space, ev, fold != f, rng, note)
            _check_depths(space, built, [ev.trials[i] for i in idx])
            folds.append((f, idx))
    search(space, ev, None, rng, note)
    _check_depths(space, built, ev.trials)
    log(f"  evaluated {len(ev.trials)} configs in {ev.seconds:.2f}s ({len(ev.trials) / max(ev.seconds, 1e-9):.0f} "
        f"configs/s, {len(ev.trials) * cs.Q / max(ev.seconds, 1e-9):.0f} query-evals/s, {n_workers} worker(s); "
        f"stage runs {ev.stage_calls} of {ev.naive_calls} without sharing)")

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
            latency_note = "not checked: evalkit.runner has no latency mode (run_latency)"
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
        hsw = Sweep(space.pipeline, hcs, heldout_ds.qrels, hm, ctx=ctx, keep=[space.objective])
        hres = hsw.run([ev.trials[i].config for i in top], workers=1)
        for j, i in enumerate(top):
            held[i] = ({m: float(hres.means[m][j]) for m in hm}, hres.per_query[space.objective][j])
        held_ids = hres.query_ids
    for b in baselines:
        rec = {}
        bsw = Sweep(b, cs, pool.qrels, hm, ctx=ctx, keep=[space.objective])
        r = bsw.run([SweepConfig()])
        rec["train"] = {m: float(r.means[m][0]) for m in hm}
        rec["train_pq"] = r.per_query[space.objective][0]
        if heldout_ds is not None:
            r = Sweep(b, hcs, heldout_ds.qrels, hm, ctx=ctx, keep=[space.objective]).run([SweepConfig()])
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
            fold_rows.append({"fold": f, "queries": int(te.sum()), "best": _flat_str(ev.trials[bf].flat),
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
    stats_note = ("evalkit.stats.compare_pairs: paired sign-flip randomisation (p_randomization, Holm-adjusted over "
                  "the comparisons in p_holm), paired t-test (p_ttest), 95% bootstrap CI of the mean difference; "
                  f"per-query {obj_name} on the {where_tested}"
                  + ("; delta = shipped − tuned (minimised objective)" if not space.maximize else ""))

    # ---- write -------------------------------------------------------------------------------------------------
    summary = {
        "space": space.path, "name": space.name, "description": space.description, "preset": space.pipeline.name,
        "preset_hash": space.pipeline.hash, "dataset": ds.name, "dataset_hash": ds.content_hash(),
        "split": split, "heldout": heldout, "folds": space.folds or None, "seed": space.seed,
        "objective": obj_name, "direction": "maximize" if space.maximize else "minimize", "method": space.method,
        "constraints": [c.text for c in space.constraints],
        "queries": {"tuning": len(pool.queries), "tuning_judged": len(judged),
                    "heldout": len(heldout_ds.queries) if heldout_ds else None,
                    "heldout_judged": len(held_ids) if heldout_ds else None},
        "sweep": {"configs": len(ev.trials), "seconds": ev.seconds, "cpu_seconds": ev.cpu,
                  "configs_per_second": len(ev.trials) / max(ev.seconds, 1e-9),
                  "query_evals_per_second": len(ev.trials) * cs.Q / max(ev.seconds, 1e-9),
                  "stage_calls": ev.stage_calls, "naive_stage_calls": ev.naive_calls, "workers": n_workers,
                  "budget_stage_run": sw.run_budget},
        "shipped": {"train": {m: ev.means[m][shipped_i] for m in metrics},
                    "heldout": held[shipped_i][0] if heldout_ds else None, "constraints": status(shipped_i)},
        "best": {"config": best.flat, "overrides": best.config.overrides, "arms": best.config.arms,
                 "train": {m: ev.means[m][best_i] for m in metrics},
                 "heldout": held[best_i][0] if heldout_ds else None, "constraints": status(best_i),
                 "feasible": bool(feas[best_i])},
        "gap": gap, "gap_note": ("train − held-out objective of the best config" if heldout_ds else
                                 "mean over folds of (tuning-fold − held-out-fold objective) of each fold's best"),
        "significance": sig_rows, "significance_method": stats_note,
        "baselines": {n: {k: v for k, v in r.items() if not k.endswith("_pq")} for n, r in base_res.items()},
        "latency": ({ev.trials[i].key: latency[ev.trials[i].key] for i in range(len(ev.trials))
                     if ev.trials[i].key in latency} if latency else None),
        "latency_note": latency_note if lat_cons else None,
        "seconds": time.perf_counter() - t_start,
    }
    if space.folds:
        summary["cv"] = {"rows": fold_rows, "heldout_mean": float(cv.mean())}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(exist_ok=True)
    _write_configs(out / "configs.csv", ev, metrics, feas, status)
    board = _leaderboard(space, ev, top, ranking, held, shipped_i, best_i, status, metrics, heldout_ds is not None)
    _write_csv(out / "leaderboard.csv", board)
    (out / "leaderboard.md").write_text(_markdown(board), encoding="utf-8")
    best_toml = _best_toml(space, best, summary)
    (out / "best.toml").write_text(best_toml, encoding="utf-8")
    summary["best_preset"] = str(out / "best.toml")
    plots = _plots(space, ev, out / "plots", shipped_i, best_i, feas)
    summary["plots"] = [str(p.relative_to(out)) for p in plots]
    text = _console(space, summary, ds.name)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=_json_default) + "\n",
                                      encoding="utf-8")
    (out / "report.md").write_text(_report_md(space, summary, board, text), encoding="utf-8")
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
    from evalkit.data.registry import load_dataset
    from retrievers.embed import Embedder
    from retrievers.index import IndexSettings, SharedIndex
    from retrievers.search import build_candidates
    from retrievers.stages import Context

    ds = load_dataset(space.dataset)
    split = space.split or ("train" if "train" in ds.splits else None)
    pool = ds.split(split) if split else ds
    heldout_ds = None
    heldout = None
    if not space.folds:
        heldout = space.heldout or next((s for s in ("heldout", "test") if s in ds.splits and s != split), None)
        if heldout is None or heldout == split:
            raise ConfigError(f"{space.path}: dataset {ds.name!r} has no held-out split different from {split!r} "
                              f"(splits: {', '.join(sorted(ds.splits))}); set 'heldout' or use 'folds'")
        heldout_ds = ds.split(heldout)
        overlap = {q.id for q in pool.queries} & {q.id for q in heldout_ds.queries}
        if overlap:
            raise ConfigError(f"{space.path}: splits {split!r} and {heldout!r} share {len(overlap)} queries")
    embedder = embedder or Embedder()
    settings = settings or IndexSettings()
    index = SharedIndex(pool, embedder=embedder, settings=settings)
    bound = _arm_bound(space, rng)
    specs = deepest_arms(space.pipeline, bound)
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
                Context(embedder=embedder))


def bench_space(space: Space, n: int = 240, workers: int = 1, settings=None, embedder=None,
                log: Callable[[str], None] = print) -> dict:
    """Sweep throughput on the space's tuning queries: the grid (method grid) or ``n`` seeded random configs,
    after one warm-up config; wall and CPU time, configs/s, query-pipeline evaluations/s, prefix sharing."""
    import os
    rng = np.random.default_rng(space.seed)
    env = _prepare(space, settings, embedder, log, rng)
    metrics = list(dict.fromkeys([space.objective] + [c.metric for c in space.constraints if not c.latency]))
    sw = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective])
    if space.method == "grid":
        assigns, how = space.grid(), "grid"
    else:
        assigns, how = [space.decode(u) for u in rng.random((n, space.dims))], "random"
    configs = [space.config(a)[0] for a in assigns]
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sw.run([SweepConfig()])  # warm-up: the shared memo (token sets, similarities, gains) is built once
    res = sw.run(configs, workers=workers)
    prof = Sweep(space.pipeline, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[space.objective], timings=True)
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
           "shared_outputs": res.shared_outputs, "budget_stage_run": sw.run_budget, "load_average": [load0, load1],
           "stage_share": {k: v / total for k, v in sorted(pres.stage_seconds.items(), key=lambda x: -x[1])}}
    log(f"  {out['configs']} {how} configs x {out['queries']} queries: {res.seconds:.2f}s wall, "
        f"{res.cpu_seconds:.2f}s CPU, {res.workers} worker(s) -> {res.configs_per_second:.1f} configs/s, "
        f"{res.query_evals_per_second:.0f} query-pipeline evals/s ({out['query_evals_per_cpu_second']:.0f} per CPU "
        f"second); stage runs {res.stage_calls} of {res.naive_stage_calls} ({res.shared_outputs} shared outputs); "
        f"load average {load0:.1f}->{load1:.1f}")
    log("  time by stage: " + ", ".join(f"{k} {v:.0%}" for k, v in list(out["stage_share"].items())[:6]))
    return out


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, cols, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6f}" if isinstance(v, float) else v) for k, v in r.items()})


def _write_configs(path: Path, ev: Evaluator, metrics, feas, status) -> None:
    rows = []
    targets = list(dict.fromkeys(k for t in ev.trials for k in t.flat))
    for i, t in enumerate(ev.trials):
        r = {"config": f"c{i}", "as_shipped": t.shipped}
        for k in targets:
            v = t.flat.get(k)
            r[k] = _short(v) if v is not None else ""
        for m in metrics:
            r[m] = ev.means[m][i]
        r["feasible"] = bool(feas[i])
        rows.append(r)
    _write_csv(path, rows)


def _leaderboard(space, ev, top, ranking, held, shipped_i, best_i, status, metrics, has_heldout) -> list[dict]:
    order = [i for i in ranking if i in set(top)]
    rows = []
    obj = space.objective
    for rank, i in enumerate(order, start=1):
        t = ev.trials[i]
        r = {"rank": rank, "config": f"c{i}", "params": _flat_str(t.flat)}
        for m in [obj] + [m for m in metrics if m != obj]:
            r[f"train_{m}"] = ev.means[m][i]
            if has_heldout:
                r[f"heldout_{m}"] = held[i][0].get(m, float("nan")) if i in held else float("nan")
        st = status(i)
        r["constraints"] = "; ".join(f"{k}: {v}" for k, v in st.items()) if st else "none"
        r["note"] = ("best" if i == best_i else "") + (" as shipped" if i == shipped_i else "")
        rows.append(r)
    return rows


def _markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0].keys())
    mcols = [c for c in cols if c.startswith(("train_", "heldout_"))]
    per = 2 if any(c.startswith("heldout_") for c in mcols) else 1
    keep = ["rank", "config", "params"] + mcols[:3 * per] + ["constraints", "note"]
    buf = io.StringIO()
    buf.write("| " + " | ".join(keep) + " |\n|" + "|".join("---" for _ in keep) + "|\n")
    for r in rows:
        buf.write("| " + " | ".join(_fmt(r.get(c)) if isinstance(r.get(c), float) else str(r.get(c, "")).replace(
            "|", "\\|") for c in keep) + " |\n")
    return buf.getvalue()


# ---- best preset ---------------------------------------------------------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ConfigError(f"cannot write non-finite value {v!r} to a preset")
        r = repr(v)
        return r if any(c in r for c in ".en") else r + ".0"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ConfigError(f"cannot write {v!r} to a preset")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _best_toml(space: Space, best: Trial, summary: dict) -> str:
    from retrievers.pipeline import preset_names
    base = space.preset
    if base not in preset_names():
        base = str(Path(base).resolve())
    obj = space.objective
    tr = summary["best"]["train"][obj]
    ho = summary["best"]["heldout"][obj] if summary["best"]["heldout"] else None
    lines = [f"# Generated by `evalkit tune --space {space.path}` on {summary['dataset']} "
             f"({summary['split']}), {summary['method']} search over {summary['sweep']['configs']} configs.",
             f"# {obj}: tuning {tr:.6f}" + (f", held-out {ho:.6f}" if ho is not None else "")
             + f" (as shipped: {summary['shipped']['train'][obj]:.6f} tuning).",
             f"extends = {_toml_value(base)}",
             f"name = {_toml_value(space.pipeline.name + '_tuned_' + space.name)}",
             f"description = {_toml_value(f'{space.pipeline.name} tuned by evalkit tune ({space.name}) for {obj} on ' + summary['dataset'] + ': ' + _flat_str(best.flat))}",
             'tags = ["tuned"]', ""]
    for arm, upd in sorted(best.config.arms.items()):
        lines.append("[[arms]]")
        lines.append(f"name = {_toml_value(arm)}")
        for k, v in sorted(upd.items()):
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        lines.append("")
    for stage, upd in sorted(best.config.overrides.items()):
        lines.append(f"[overrides.{_toml_key(stage)}]")
        for k, v in sorted(upd.items()):
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        lines.append("")
    return "\n".join(lines)


# ---- plots -----------------------------------------------------------------------------------------------------------

def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)


def _plots(space: Space, ev: Evaluator, folder: Path, shipped_i: int, best_i: int, feas) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    obj = space.objective
    y = np.asarray(ev.means[obj])
    idx = [i for i, t in enumerate(ev.trials) if not t.shipped]
    out: list[Path] = []
    shipped_y = y[shipped_i]
    varying = list(dict.fromkeys(k for i in idx for k in ev.trials[i].flat))
    # one plot per free dimension: tied parameters follow another one, simplex weights get their own plot
    free = {p.target for p in space.params if p.free}
    varying = [t for t in varying if t in free]
    for target in varying:
        vals = [ev.trials[i].flat.get(target) for i in idx]
        if any(isinstance(v, (list, tuple)) for v in vals) or len({json.dumps(v) for v in vals}) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        ys = y[idx]
        if numeric:
            x = np.asarray(vals, dtype=float)
        else:
            cats = list(dict.fromkeys(str(v) for v in vals))
            x = np.asarray([cats.index(str(v)) for v in vals], dtype=float)
            ax.set_xticks(range(len(cats)), cats, rotation=20)
        ax.scatter(x, ys, s=10, alpha=0.4, color="0.5", label="configs")
        ux = np.unique(x)
        if len(ux) <= 60:
            prof = [np.nanmax(ys[x == u]) if space.maximize else np.nanmin(ys[x == u]) for u in ux]
            ax.plot(ux, prof, color="C0", lw=1.5, label="best at this value")
        bx = ev.trials[best_i].flat.get(target)
        if bx is not None:
            bxv = float(bx) if numeric else float(cats.index(str(bx)))
            ax.scatter([bxv], [y[best_i]], marker="*", s=160, color="C3", zorder=5, label="best")
        ax.axhline(shipped_y, ls="--", color="k", lw=1, label="as shipped")
        p = next((p for p in space.params if p.target == target), None)
        if numeric and ((p is not None and p.log) or (x.min() > 0 and x.max() / x.min() >= 20)):
            ax.set_xscale("log")
        ax.set_xlabel(target)
        ax.set_ylabel(f"{obj} (tuning split)")
        ax.set_title(f"{space.pipeline.name}: {obj} vs {target}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = folder / f"objective_vs_{_safe(target)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    # weight pairs / simplexes
    groups: list[tuple[str, list[str]]] = []
    for s in space.simplexes:
        groups.append((s.stage, [f"{s.stage}.{n}" for n in s.names] if not s.list_param else [f"{s.stage}.{s.names[0]}"]))
    by_stage: dict[str, list[str]] = {}
    for p in space.params:
        if p.stage and "weight" in p.name:
            by_stage.setdefault(p.stage, []).append(p.target)
    for st_name, targets in by_stage.items():
        if len(targets) >= 2 and not any(st_name == g[0] for g in groups):
            groups.append((st_name, targets))
    for st_name, targets in groups:
        W = []
        for i in idx:
            f = ev.trials[i].flat
            if len(targets) == 1:
                W.append(list(f.get(targets[0]) or []))
            else:
                W.append([f.get(t) for t in targets])
        try:
            W = np.asarray(W, dtype=float)
        except (TypeError, ValueError):
            continue
        if W.ndim != 2 or W.shape[1] < 2:
            continue
        names = targets if len(targets) > 1 else [f"{targets[0]}[{j}]" for j in range(W.shape[1])]
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        ys = y[idx]
        if W.shape[1] == 3:
            # ternary projection: corners (0,0), (1,0), (0.5, sqrt(3)/2)
            px = W[:, 1] + 0.5 * W[:, 2]
            py = (math.sqrt(3) / 2) * W[:, 2]
            sc = ax.scatter(px, py, c=ys, cmap="viridis", s=25)
            ax.plot([0, 1, 0.5, 0], [0, 0, math.sqrt(3) / 2, 0], color="k", lw=0.8)
            for (cx, cy), n in zip([(0, 0), (1, 0), (0.5, math.sqrt(3) / 2)], names):
                ax.annotate(n, (cx, cy), fontsize=7, ha="center", va="top" if cy == 0 else "bottom")
            bw = W[idx.index(best_i)] if best_i in idx else None
            if bw is not None:
                ax.scatter([bw[1] + 0.5 * bw[2]], [(math.sqrt(3) / 2) * bw[2]], marker="*", s=160, color="C3")
            ax.set_axis_off()
        elif W.shape[1] == 2 and np.ptp(W.sum(axis=1)) < 1e-9:
            # two weights on a simplex: one free coordinate; objective of every config and the best per point
            sc = None
            ax.scatter(W[:, 0], ys, s=10, alpha=0.4, color="0.5", label="configs")
            ux = np.unique(W[:, 0])
            prof = [np.nanmax(ys[W[:, 0] == u]) if space.maximize else np.nanmin(ys[W[:, 0] == u]) for u in ux]
            ax.plot(ux, prof, color="C0", lw=1.5, label="best at this mixture")
            if best_i in idx:
                bw = W[idx.index(best_i)]
                ax.scatter([bw[0]], [y[best_i]], marker="*", s=160, color="C3", zorder=5, label="best")
            ax.axhline(y[shipped_i], ls="--", color="k", lw=1, label="as shipped")
            tot = float(W[0].sum())
            ax.set_xlabel(f"{names[0]}   ({names[1]} = {tot:g} − {names[0].rsplit('.', 1)[-1]})")
            ax.set_ylabel(f"{obj} (tuning split)")
            sec = ax.secondary_xaxis("top", functions=(lambda x, t=tot: t - x, lambda x, t=tot: t - x))
            sec.set_xlabel(names[1], fontsize=8)
            ax.legend(fontsize=7)
        else:
            # best objective per distinct weight point, drawn best last so it stays visible
            pts: dict[tuple, float] = {}
            for w, v in zip(map(tuple, W[:, :2]), ys):
                if w not in pts or (v > pts[w] if space.maximize else v < pts[w]):
                    pts[w] = v
            order = sorted(pts, key=lambda w: pts[w] if space.maximize else -pts[w])
            sc = ax.scatter([w[0] for w in order], [w[1] for w in order], c=[pts[w] for w in order], cmap="viridis",
                            s=30)
            ax.set_xlabel(names[0])
            ax.set_ylabel(names[1] + (" (+ others)" if W.shape[1] > 2 else ""))
            if best_i in idx:
                bw = W[idx.index(best_i)]
                ax.scatter([bw[0]], [bw[1]], marker="*", s=160, color="C3", label="best")
                ax.legend(fontsize=7)
        if sc is not None:
            fig.colorbar(sc, ax=ax, label=f"{obj} (tuning split, best per point)")
        ax.set_title(f"{space.pipeline.name}: weights of {st_name}", fontsize=9)
        fig.tight_layout()
        path = folder / f"weights_{_safe(st_name)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out


# ---- text --------------------------------------------------------------------------------------------------------------

def _console(space: Space, s: dict, dsname: str) -> str:
    obj = s["objective"]
    sw = s["sweep"]
    L = []
    L.append(f"evalkit tune {s['name']}: {s['preset']} on {dsname} — {s['method']} search, {sw['configs']} configs in "
             f"{sw['seconds']:.2f}s ({sw['configs_per_second']:.0f} configs/s, "
             f"{sw['query_evals_per_second']:.0f} query-pipeline evals/s, {sw['workers']} worker(s))")
    q = s["queries"]
    if s["heldout"]:
        L.append(f"  tuned on {s['split']} ({q['tuning_judged']} judged queries), reported on {s['heldout']} "
                 f"({q['heldout_judged']} judged)")
    else:
        L.append(f"  {s['folds']}-fold cross-validation over {s['split']} ({q['tuning_judged']} judged queries)")
    sh, b = s["shipped"], s["best"]
    if s["heldout"]:
        L.append(f"  {obj}: as shipped {_fmt(sh['train'][obj])} tuning / {_fmt(sh['heldout'][obj])} held-out; "
                 f"best {_fmt(b['train'][obj])} tuning / {_fmt(b['heldout'][obj])} held-out "
                 f"(train-heldout gap {s['gap']:+.4f})")
    else:
        L.append(f"  {obj}: as shipped {_fmt(sh['train'][obj])}; best (all folds) {_fmt(b['train'][obj])}; "
                 f"cross-validated {_fmt(s['cv']['heldout_mean'])} (mean fold gap {s['gap']:+.4f})")
    L.append(f"  best: {_flat_str(b['config'])}" + ("" if b["feasible"] else "  [violates constraints]"))
    if b["constraints"]:
        L.append("  constraints: " + "; ".join(f"{k}: {v}" for k, v in b["constraints"].items()))
    if s.get("latency_note"):
        L.append(f"  latency: {s['latency_note']}")
    for r in s["significance"]:
        L.append(f"  vs {r['versus']} ({_fmt(r['mean_a'])}): delta {r['delta']:+.4f} [{r['ci_low']:+.4f}, "
                 f"{r['ci_high']:+.4f}], "
                 f"p = {r['p_randomization']:.4g} (randomisation), {r['p_ttest']:.4g} (t-test), "
                 f"Holm {r['p_holm']:.4g}; W/T/L {r['wins']}/{r['ties']}/{r['losses']}")
    L.append(f"  best preset: {s.get('best_preset', '')}")
    return "\n".join(L)


def _report_md(space: Space, s: dict, board: list[dict], text: str) -> str:
    parts = [f"# evalkit tune: {s['name']}", "", f"Space `{s['space']}` — preset `{s['preset']}` (hash {s['preset_hash']}),"
             f" dataset `{s['dataset']}` (hash {s['dataset_hash']}).", "", "```", text, "```", "",
             "## Leaderboard", "", _markdown(board), "", "## Significance", "", s["significance_method"], ""]
    obj = s["objective"]
    part = "heldout" if s["heldout"] else "train"
    if s["heldout"] or s["baselines"]:
        cols = [obj, "injected_ndcg@10", "injected_recall@10", "injection_rate"]
        parts += [f"## Best vs as shipped and baselines ({'held-out' if s['heldout'] else 'tuning'} queries)", "",
                  "| system | " + " | ".join(cols) + " | tuned − system | 95% CI | p (randomisation) | p (Holm) |",
                  "|---" * (len(cols) + 5) + "|"]
        sig = {r["versus"]: r for r in s["significance"]}
        rows = [("tuned best", (s["best"].get(part) or {}), None),
                (f"{s['preset']} (as shipped)", (s["shipped"].get(part) or {}), sig.get(f"{s['preset']} (as shipped)"))]
        rows += [(n, r.get(part) or {}, sig.get(n)) for n, r in s["baselines"].items()]
        for name, vals, r in rows:
            cells = [_fmt(vals.get(c)) for c in cols]
            extra = ([f"{r['delta']:+.4f}", f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]", f"{r['p_randomization']:.3g}",
                      f"{r['p_holm']:.3g}"] if r else ["", "", "", ""])
            parts.append(f"| {name} | " + " | ".join(cells + extra) + " |")
        if s.get("cv"):
            parts.append("")
            parts.append("(k-fold: the tuned column is the cross-validated procedure; baselines on all queries)")
        parts.append("")
    if s.get("cv"):
        parts += ["## Folds", "", "| fold | queries | best | train | held-out | as shipped (held-out) |",
                  "|---|---|---|---|---|---|"]
        for r in s["cv"]["rows"]:
            parts.append(f"| {r['fold']} | {r['queries']} | {r['best']} | {_fmt(r['train'])} | {_fmt(r['heldout'])} | "
                         f"{_fmt(r['shipped_heldout'])} |")
        parts.append("")
    if s.get("plots"):
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in s["plots"]]
    return "\n".join(parts) + "\n"
