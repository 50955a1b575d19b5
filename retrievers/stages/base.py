"""Stage base class, typed parameters and the stage registry.

A stage is a small pure function over the candidate table: ``apply(state, cs, ctx) -> state``.
Parameters are dataclass fields declared with :func:`param`, validated when the stage is built from a
preset dict (unknown names and out-of-range values are rejected with the valid choices listed).
Every stage's docstring states its formula, its defaults and which seed system uses it.

What the harness needs to know about a stage is declared on the stage, so no harness module names a seed system:

* ``ablation_off`` — the parameters that switch the stage off while keeping it in the pipeline, for stages whose
  removal would not turn their effect off (the ablation applies them instead of dropping the stage);
* ``st.info["variants_used"]`` — a stage that runs query-variant passes (expansions) and may stop early writes a
  (Q,) integer array: how many of the query's variants, in order, it consumed (the latency runner charges only
  those variants' embedding and search). Without it every variant counts as used.
* ``compares`` — the parameters the stage compares with a score (a filter's floor, a gate's threshold, a
  reranker's ``min_p``), which score, and which side is kept (:class:`Compared`): the harness sweeps them (the
  threshold sensitivity of ``evalkit run``'s report) and names a value outside the range of the scores it meets
  ("filter.min_score threshold 7 is above every score seen (max 0.83): it removes all candidates").
"""
from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from retrievers.candidates.table import CandidateSet, State
from retrievers.errors import ConfigError, did_you_mean

_MISSING = object()


def param(default: Any = _MISSING, *, ge: float | None = None, le: float | None = None, gt: float | None = None,
          lt: float | None = None, choices: tuple | list | None = None, doc: str = "") -> Any:
    """Declare a stage parameter with validation metadata."""
    meta = {"ge": ge, "le": le, "gt": gt, "lt": lt, "choices": tuple(choices) if choices else None, "doc": doc}
    if default is _MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Context:
    """Per-run services a stage may need (never the wall clock)."""

    embedder: Any = None  # retrievers.embed.model.Embedder, for stages that embed text (prototypes, context)
    trace: bool = False
    timings: dict | None = None  # latency mode: stage name -> list of seconds
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Compared:
    """A stage parameter compared with a score (declared in :attr:`Stage.compares`).

    ``score``: ``"rows"`` — the running score of the rows entering the stage; ``"info:<key>"`` — a per-query score
    the stage writes to ``st.info[<key>]``; ``"output"`` — the stage's own output score (a reranker's floor).
    ``keeps``: the side that stays, ``">="`` (a floor: rows / queries with ``score >= value`` are kept), ``">"``,
    ``"<="`` or ``"<"``; for a gate, what is kept is the query (the others are skipped)."""

    score: str = "rows"
    keeps: str = ">="

    def kept_when_above(self) -> bool:
        """True when a score above the value is kept (a floor), False when it is dropped (a ceiling)."""
        return self.keeps in (">=", ">")


REGISTRY: dict[str, type["Stage"]] = {}


def register(cls: type["Stage"]) -> type["Stage"]:
    """Class decorator: make a stage available to presets under ``cls.name``."""
    cls = dataclass(cls) if not dataclasses.is_dataclass(cls) or "__dataclass_fields__" not in cls.__dict__ else cls
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__qualname__} has no stage name")
    old = REGISTRY.get(cls.name)
    if old is not None and old is not cls and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        # the same class defined again (a notebook cell run twice) replaces itself; another class may not take the name
        raise TypeError(f"stage name {cls.name!r} registered twice ({old.__module__}.{old.__qualname__} and "
                        f"{cls.__module__}.{cls.__qualname__})")
    REGISTRY[cls.name] = cls
    return cls


@dataclass
class Stage(ABC):
    name: ClassVar[str] = ""
    kind: ClassVar[str] = "score"  # gate | query | fusion | rerank | score | filter | diversity | cutoff | budget
    label: str | None = param(None, doc="optional display name used in traces and timings")
    #: name of the parameter holding a query-log path the stage learns from. A stage never opens a file: the
    #: harness loads every log a pipeline names (``Pipeline.query_logs()``) and passes the events in
    #: ``ctx.options["query_logs"][path]``.
    query_log_param: ClassVar[str | None] = None
    #: whether a query's output may depend on other queries of the batch (a cache carried across queries in time
    #: order); False = each query's row is decided from that row alone, so the batch may be split into blocks
    #: (``evalkit run --cluster``)
    cross_query: ClassVar[bool] = False
    #: parameters that turn the stage off while it stays in the pipeline (ablations); None = off means removed,
    #: or ``enabled = false`` when the stage has that switch.
    ablation_off: ClassVar[dict | None] = None
    #: parameters compared with a score: ``{param: Compared(score, keeps)}`` (see :class:`Compared`).
    compares: ClassVar[dict[str, Compared]] = {}
    #: the stage reads document or query vectors, or embeds text (:meth:`uses_vectors`): a run none of whose
    #: retrievers has such a stage or a vector arm never embeds, and its report says so
    vectors: ClassVar[bool] = False
    #: a guard: what a planted note must show for the stage to drop it by construction — ``payload`` (an
    #: instruction or bait for the agent), ``echo-lead`` (opens with the query), ``echo-inside`` (holds the query
    #: further in), ``near-copy`` (a near-copy of another note with a fact changed); an attack declares what its
    #: notes show (evalkit.data.poison.attacks ``Attack.shows``), so a report can say which attacks a guard cannot
    #: catch. () for every other stage.
    reads: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        self.validate()

    def query_logs(self) -> list[str]:
        """Query-log paths this stage needs loaded into ``ctx.options["query_logs"]`` (none by default)."""
        v = getattr(self, self.query_log_param) if self.query_log_param else ""
        return [v] if v else []

    # -- validation ----------------------------------------------------------------------------------
    def validate(self) -> None:
        for name, choices, bounds in _checks(type(self)):
            v = getattr(self, name)
            if choices and v not in choices:
                raise ConfigError(f"stage {self.name!r} parameter {name!r} = {v!r} is not one of: "
                                  f"{', '.join(map(str, choices))}")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if isinstance(v, float) and math.isnan(v):
                raise ConfigError(f"stage {self.name!r} parameter {name!r} is NaN")
            for key, bound in bounds:
                ok, sym = _BOUNDS[key]
                if not ok(v, bound):
                    raise ConfigError(f"stage {self.name!r} parameter {name!r} = {v} is out of range "
                                      f"(must be {sym} {bound})")

    @classmethod
    def from_dict(cls, cfg: dict) -> "Stage":
        fields = _fields(cls)
        unknown = sorted(set(cfg) - set(fields))
        if unknown:
            raise ConfigError(f"stage {cls.name!r}: unknown parameter(s) {', '.join(unknown)} "
                              f"(valid: {', '.join(sorted(fields))})"
                              + "".join(did_you_mean(u, fields) for u in unknown))
        kwargs = {}
        for k, v in cfg.items():
            f = fields[k]
            # a value already of the declared plain type passes _coerce unchanged: skip its string tests
            kwargs[k] = v if _PLAIN.get(f.type) is type(v) else _coerce(cls.name, f, v)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a required parameter is missing
            raise ConfigError(f"stage {cls.name!r}: {exc}") from None

    def uses_vectors(self) -> bool:
        """Whether this stage, as configured, reads vectors or embeds text (default: the class's ``vectors``; a stage
        whose parameters decide it overrides this)."""
        return self.vectors

    def params(self) -> dict:
        return {name: getattr(self, name) for name in _fields(type(self))}

    @property
    def display(self) -> str:
        return self.label or self.name

    # -- behaviour -------------------------------------------------------------------------------------
    @abstractmethod
    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        """The stage's effect on the list state ``st`` of every query of ``cs``: a new :class:`State`, or ``st``
        itself when the stage changes nothing."""


_BOUNDS = {"ge": (lambda a, b: a >= b, ">="), "le": (lambda a, b: a <= b, "<="),
           "gt": (lambda a, b: a > b, ">"), "lt": (lambda a, b: a < b, "<")}
# declared type -> the value type _coerce returns unchanged (exact type: bool is no int here)
_PLAIN = {"float": float, "int": int, "str": str, "bool": bool}
_FIELDS: dict[type, dict] = {}
_CHECKS: dict[type, list] = {}


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    """``{name: field}`` of a stage class, once per class (a sweep builds thousands of stages)."""
    f = _FIELDS.get(cls)
    if f is None:
        f = _FIELDS[cls] = {x.name: x for x in dataclasses.fields(cls)}
    return f


def _checks(cls: type) -> list[tuple[str, tuple | None, list]]:
    """Per field of a stage class, in order: (name, choices, [(bound key, bound)]) — what :meth:`Stage.validate`
    checks, read from the field metadata once per class."""
    c = _CHECKS.get(cls)
    if c is None:
        c = []
        for f in dataclasses.fields(cls):
            m = f.metadata or {}
            c.append((f.name, m.get("choices") or None,
                      [(k, m[k]) for k in ("ge", "le", "gt", "lt") if m.get(k) is not None]))
        _CHECKS[cls] = c
    return c


def _coerce(stage: str, f: dataclasses.Field, v: Any) -> Any:
    """Coerce TOML values to the declared field type (int → float), reject wrong types clearly."""
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    where = f"stage {stage!r} parameter {f.name!r}"
    if t in ("float", "float | None") and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if t.startswith("float") and not (isinstance(v, (int, float)) and not isinstance(v, bool)) and not (
            v is None and "None" in t):
        raise ConfigError(f"{where} must be a number, got {v!r}")
    if t.startswith("int") and not (isinstance(v, int) and not isinstance(v, bool)) and not (v is None and "None" in t):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise ConfigError(f"{where} must be an integer, got {v!r}")
    if t.startswith("bool") and not isinstance(v, bool):
        raise ConfigError(f"{where} must be true or false, got {v!r}")
    if t.startswith("str") and not isinstance(v, str) and not (v is None and "None" in t):
        raise ConfigError(f"{where} must be a string, got {v!r}")
    if t.startswith("tuple") and isinstance(v, list):
        return tuple(v)
    return v


def build_stage(cfg: dict) -> Stage:
    """Build a stage from a preset dict ``{"type": NAME, **params}``."""
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise ConfigError(f"a stage needs a 'type' (got {cfg!r})")
    name = cfg["type"]
    cls = REGISTRY.get(name)
    if cls is None:
        raise ConfigError(f"unknown stage {name!r} (valid: {', '.join(sorted(REGISTRY))})" + did_you_mean(name, REGISTRY))
    return cls.from_dict({k: v for k, v in cfg.items() if k != "type"})
