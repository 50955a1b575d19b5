"""What every config front end shares: JavaScript value semantics and the :class:`Resolution` it returns.

The seed systems are JavaScript: a config value that is not what the schema says is coerced the way JS coerces
it at the point of use. ``js_number`` is ``Number(v)`` (shared with :mod:`retrievers.stages.rerank.http`) (what
``Math.max``/``Math.min``/``Math.floor`` and arithmetic do to their arguments); ``js_truthy`` is ``Boolean(v)``;
``is_finite_number`` is ``Number.isFinite(v)``, which does *not* coerce (``Number.isFinite("30")`` is false).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from retrievers.errors import ConfigError
from retrievers.stages.rerank.http import js_number, js_string

MISSING = object()
#: a value the original derives (no config key of its own): printed as ``key = value``
DERIVED = object()


def js_truthy(v: Any) -> bool:
    """JavaScript ``Boolean(v)``: false for null, false, 0, NaN and ``""``; true for everything else, including
    the string ``"false"``, ``[]`` and ``{}``."""
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return not (v == 0 or math.isnan(v))
    if isinstance(v, str):
        return v != ""
    return True


def is_finite_number(v: Any) -> bool:
    """``Number.isFinite(v)``: a number (not a string, not a boolean) that is finite."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def coalesce(*values: Any) -> Any:
    """JavaScript ``a ?? b ?? c``: the first value that is neither null nor absent (:data:`MISSING`)."""
    for v in values:
        if v is not None and v is not MISSING:
            return v
    return values[-1] if values else None


def get(obj: Any, *path: str) -> Any:
    """``obj?.a?.b`` for JSON: :data:`MISSING` when a step is absent or not an object."""
    cur = obj
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return MISSING
        cur = cur[p]
    return cur


def check_keys(obj: Any, valid: set[str], where: str) -> None:
    """One-line error for a block that is not an object or carries keys the original's schema does not know."""
    if obj is MISSING or obj is None:
        return
    if not isinstance(obj, dict):
        raise ConfigError(f"{where} must be an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - valid)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(valid))})")


def show(v: Any) -> str:
    """A value as the printed resolution shows it (JSON-like, NaN/Infinity spelled as JS does)."""
    if v is MISSING:
        return "(absent)"
    if isinstance(v, float):
        return js_string(v)
    if isinstance(v, str):
        return repr(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@dataclass
class Rule:
    """One resolution step: the key, what the file said, what the original runs with, the rule, its citation."""

    key: str
    given: Any
    value: Any
    rule: str
    cite: str

    def line(self) -> str:
        if self.given is DERIVED:
            return f"{self.key} = {show(self.value)}   [{self.rule}; {self.cite}]"
        arrow = "" if self.given is MISSING or _same(self.given, self.value) else f"{show(self.given)} → "
        given = "(absent) → " if self.given is MISSING else arrow
        return f"{self.key} = {given}{show(self.value)}   [{self.rule}; {self.cite}]"


def _same(a: Any, b: Any) -> bool:
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return type(a) is type(b) and a == b


@dataclass
class Resolution:
    """A system's config resolved the way the original resolves it, and the preset that runs it.

    ``resolved`` maps the original's own key names to the values it would run with; ``rules`` say how each was
    obtained (with the PIPELINES.md section or source file that states the rule); ``notes`` are warnings (values
    the original's schema would reject, behaviour the preset cannot express exactly). The preset ``extends`` an
    as-shipped preset and only overrides stage parameters, arm depths and the budget, so its results differ from
    the as-shipped preset's exactly where the configuration differs from the defaults."""

    system: str
    extends: str
    resolved: dict = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    overrides: dict = field(default_factory=dict)
    arms: list[dict] = field(default_factory=list)
    budget: dict = field(default_factory=dict)
    after: list[dict] = field(default_factory=list)
    #: stages to insert after a stage label of the base (written out as ``replace_stages``)
    insert_after: dict = field(default_factory=dict)
    summary: str = ""

    def rule(self, key: str, given: Any, value: Any, rule: str, cite: str) -> Any:
        self.resolved[key] = value
        self.rules.append(Rule(key, given, value, rule, cite))
        return value

    def override(self, stage_label: str, /, **params: Any) -> None:
        self.overrides.setdefault(stage_label, {}).update(params)

    def preset(self, name: str) -> dict:
        out: dict = {
            "extends": self.extends,
            "name": name,
            "description": f"{self.system} from its own config: {self.summary}" if self.summary
            else f"{self.system} from its own config",
            "tags": ["from-config", self.system],
            "assumptions": [r.line() for r in self.rules] + [f"note: {n}" for n in self.notes],
        }
        if self.budget:
            out["budget"] = dict(self.budget)
        if self.arms:
            out["arms"] = [dict(a) for a in self.arms]
        if self.overrides:
            out["overrides"] = {k: dict(v) for k, v in self.overrides.items()}
        if self.after:
            out["after"] = [dict(a) for a in self.after]
        if self.insert_after:
            from retrievers.pipeline import resolve_preset  # lazy: startup
            stages = []
            for s in resolve_preset(self.extends)["stages"]:
                stages.append(s)
                stages += [dict(x) for x in self.insert_after.get(s.get("label") or s["type"], [])]
            out["replace_stages"] = stages
        return out


__all__ = ["MISSING", "DERIVED", "ConfigError", "Resolution", "Rule", "js_number", "js_string", "js_truthy",
           "is_finite_number", "coalesce", "get", "check_keys", "show"]
