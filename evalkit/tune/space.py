"""The tuning search space file: TOML parsing and validation (params, weight simplexes, tie expressions
(:mod:`evalkit.tune.expr`), stage choices, arms, constraints) into a :class:`~evalkit.tune.space_model.Space` (the
data model, :mod:`evalkit.tune.space_model`) — the file format's one home.

A **search space** is a TOML file (examples in ``tune/``)::

    preset = "openclaw_core_2026_2_26_decay_mmr"   # a preset name or .toml path
    dataset = "locomo"                             # overridable with --dataset
    split = "train"                                # the queries tuned on
    heldout = "heldout"                            # the queries reported on (default: heldout, else test)
    # folds = 5                                    # instead of heldout: k-fold cross-validation by group over
                                                   # `split` ("loo": one fold per group)
    # split_by = "auto"                            # how queries are grouped (evalkit.data.groups), or "time"
    # split_date = "2026-06-01"                    # split_by = "time": the first date held out
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

Usage::

    space = load_space("tune/workspace_structural.toml")   # -> Space; ConfigError (one line) on a bad file
    len(space.grid())                                      # the grid's configs (method = "grid")
"""
from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.data.groups import RULES as SPLIT_RULES
from evalkit.measures.arrays import parse_metric
from evalkit.tune.expr import Expr
from evalkit.tune.space_model import LATENCY, Constraint, Param, Simplex, Space
from retrievers.errors import ConfigError
from retrievers.pipeline import Pipeline, load_preset, resolve_preset

TOP_KEYS = {"name", "description", "preset", "dataset", "split", "heldout", "folds", "split_by", "split_date", "seed",
            "objective",
            "direction", "constraints", "method", "trials", "batch", "init", "metrics", "baselines", "top",
            "latency_queries", "latency_top", "latency_repeats", "workers", "param", "simplex", "choice", "arm",
            "no_effect"}
CHOICE_KEYS = {"id", "stage", "options", "names"}
PARAM_KEYS = {"id", "stage", "arm", "name", "values", "low", "high", "log", "steps", "integer", "tie"}
SIMPLEX_KEYS = {"stage", "names", "name", "size", "step", "total", "min"}
METHODS = ("grid", "tpe", "gp", "random", "bayes")  # bayes: the former name of tpe


def _reject_unknown(table: dict, valid: set, where: str) -> None:
    unknown = sorted(set(table) - valid)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(valid))})")


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
    _reject_unknown(raw, TOP_KEYS, where)
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
    folds = parse_folds(raw.get("folds", 0), where)
    if folds and "heldout" in raw:
        raise ConfigError(f"{where}: give either 'heldout' or 'folds', not both")
    split_by = raw.get("split_by")
    if split_by is not None:
        split_by = str(split_by)
        if split_by not in ("auto", "time") and not all(p.strip() in SPLIT_RULES for p in split_by.split("+")):
            raise ConfigError(f"{where}: split_by must be auto, time or rules from {', '.join(SPLIT_RULES)} joined "
                              f"with '+', got {split_by!r}")
    split_date = raw.get("split_date")
    if split_date is not None:
        split_date = str(split_date)
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
        raise ConfigError(f"{where}: method {method!r} is not one of: {', '.join(METHODS[:-1])}")
    method = "tpe" if method == "bayes" else method
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
    extra_arms = _parse_arms(raw.get("arm", []), pipeline, where)
    choices = [_parse_choice(c, i, pipeline, where, extra_arms) for i, c in enumerate(raw.get("choice", []))]
    clash = sorted({c.stage for c in choices} & ({p.stage for p in params if p.stage} | {x.stage for x in simplexes}))
    if clash:
        raise ConfigError(f"{where}: stage(s) {', '.join(clash)} are both a [[choice]] slot and tuned by [[param]] / "
                          f"[[simplex]] (put the parameter values into the choice's options)")
    params += choices
    no_effect = str(raw.get("no_effect", "pin"))
    if no_effect not in ("pin", "report"):
        raise ConfigError(f"{where}: no_effect must be 'pin' or 'report', got {no_effect!r}")
    ids = [p.id for p in params] + [n for s in simplexes for n in (s.names if not s.list_param else s.names)]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"{where}: duplicate parameter id(s) {', '.join(dup)} (give each an 'id')")
    targets = [p.target for p in params if p.stage or p.arm] + [f"{s.stage}.{n}" for s in simplexes for n in s.names]
    dup = sorted({t for t in targets if targets.count(t) > 1})
    if dup:
        raise ConfigError(f"{where}: parameter(s) {', '.join(dup)} set twice")
    if not params and not simplexes:
        raise ConfigError(f"{where}: no [[param]], [[simplex]] or [[choice]]: nothing to tune")
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
               ints["latency_queries"], ints["latency_top"], ints["latency_repeats"], workers, params, simplexes, raw,
               extra_arms, no_effect, split_by, split_date)
    _validate_configs(sp)
    return sp


FOLDS_LOO = 1_000_000  # folds = "loo": one fold per group (evalkit.tune.protocol.LOO)


def parse_folds(folds, where: str) -> int:
    """``folds``: 0 (a held-out split), an integer 2..50 (k-fold by group) or ``"loo"`` (one fold per group)."""
    if isinstance(folds, str) and folds.strip().lower() in ("loo", "leave-one-out", "logo"):
        return FOLDS_LOO
    if isinstance(folds, str) and folds.strip().isdigit():
        folds = int(folds)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds == 1 or folds < 0 or folds > 50:
        raise ConfigError(f"{where}: folds must be 0 (use a held-out split), an integer in 2..50 or 'loo' (one fold "
                          f"per group), got {folds!r}")
    return folds


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
    _reject_unknown(d, PARAM_KEYS, where)
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


def _parse_arms(tables, p: Pipeline, where: str) -> list[dict]:
    """``[[arm]]``: arms added to the candidate set so that [[choice]] options can fuse them (e.g. an AND
    keyword query beside the preset's OR one, or a query-expansion arm)."""
    from retrievers.candidates.arms import ArmSpec  # lazy: startup
    out = []
    have = {a.name for a in p.arms}
    for i, d in enumerate(tables):
        w = f"{where}: [[arm]] #{i + 1}"
        try:
            spec = ArmSpec.from_dict(dict(d))
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"{w}: {exc}") from None
        if spec.name in have:
            raise ConfigError(f"{w}: arm {spec.name!r} exists already (arms: {', '.join(sorted(have))})")
        have.add(spec.name)
        out.append(dict(d))
    return out


def _parse_choice(d: dict, i: int, p: Pipeline, space_where: str, extra_arms: list[dict]) -> Param:
    """``[[choice]]``: a categorical over whole stages for one slot — each option a stage table (``type`` +
    parameters; the slot's label is kept), ``"off"`` (the stage removed), ``"keep"`` (as in the preset) or a
    sequence: a list of stage tables and ``"keep"`` that takes the slot's place (``["keep", {type = …}]`` inserts
    a stage after the slot; :func:`evalkit.engine.sweep.sequence_stages`)."""
    where = f"{space_where}: [[choice]] #{i + 1}"
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must be a table")
    _reject_unknown(d, CHOICE_KEYS, where)
    if "stage" not in d or "options" not in d:
        raise ConfigError(f"{where}: 'stage' and 'options' are required")
    stage = _stage_for(p, str(d["stage"]), where)
    opts = d["options"]
    if not isinstance(opts, list) or len(opts) < 2:
        raise ConfigError(f"{where}: options must be a list of at least 2 (stage tables, sequences, \"off\", "
                          f"\"keep\")")
    names = d.get("names")
    if names is None:
        names = []
        for k, o in enumerate(opts):
            n = o if isinstance(o, str) else str(o.get("type", "?")) if isinstance(o, dict) else "+".join(
                x if isinstance(x, str) else str(x.get("type", "?")) if isinstance(x, dict) else "?"
                for x in o) if isinstance(o, list) else "?"
            names.append(n if n not in names else f"{n}#{k}")
    names = [str(n) for n in names]
    if len(names) != len(opts) or len(set(names)) != len(names):
        raise ConfigError(f"{where}: names must be {len(opts)} distinct strings, one per option")
    arms = {a.name for a in p.arms} | {a["name"] for a in extra_arms}
    options: dict[str, Any] = {}
    for n, o in zip(names, opts):
        if o == "keep":
            options[n] = "keep"
        elif o == "off":
            options[n] = None
        elif isinstance(o, dict):
            options[n] = _choice_stage(o, n, stage, arms, where, keep_label=False)
        elif isinstance(o, list) and o and all(x == "keep" or isinstance(x, dict) for x in o) and o.count("keep") <= 1:
            options[n] = [x if x == "keep" else _choice_stage(x, n, stage, arms, where, keep_label="keep" in o)
                          for x in o]
            if options[n] == ["keep"]:
                options[n] = "keep"
        else:
            raise ConfigError(f"{where}: option {o!r} must be a stage table, a sequence (a list of stage tables and "
                              f"at most one \"keep\"), \"off\" or \"keep\"")
    pid = str(d.get("id") or f"choice_{re.sub(r'[^0-9A-Za-z_]', '_', stage.display)}")
    return Param(pid, "stage", stage=stage.display, values=names, options=options)


def _choice_stage(o: dict, n: str, slot, arms: set, where: str, keep_label: bool) -> dict:
    """A choice option's stage table, checked (it builds; the arms it reads exist). It takes the slot's label
    unless it sits beside ``"keep"`` in a sequence (then its own label, if any, is kept)."""
    from retrievers.stages import build_stage  # lazy: startup
    cfg = dict(o) if keep_label else {k: v for k, v in o.items() if k != "label"}
    try:
        st = build_stage(cfg if keep_label else dict(cfg, label=slot.display))
    except ConfigError as exc:
        raise ConfigError(f"{where}: option {n!r}: {exc}") from None
    used = {v for k, v in st.params().items() if k in ("arm", "vector_arm", "text_arm") and isinstance(v, str)}
    used |= {a for k, v in st.params().items() if k == "arms" and isinstance(v, list) for a in v}
    missing = sorted(used - arms)
    if missing:
        raise ConfigError(f"{where}: option {n!r} reads arm(s) {', '.join(missing)} that neither the preset "
                          f"nor an [[arm]] table defines (arms: {', '.join(sorted(arms))})")
    return cfg


def _check_depth(v, where: str):
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10000:
        raise ConfigError(f"{where}: an arm depth must be an integer in [1, 10000], got {v!r}")


def _parse_simplex(d: dict, i: int, p: Pipeline, space_where: str, method: str) -> Simplex:
    where = f"{space_where}: [[simplex]] #{i + 1}"
    _reject_unknown(d, SIMPLEX_KEYS, where)
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
