"""Declarative requests and answers for the ``http`` and ``mcp`` kinds: templates in, hits out.

**Templates** (a request body, a query string, tool arguments) are JSON-like values whose strings may name fields
in braces: ``"{query}"``, ``"user-{group}"``. A string that is exactly one field (``"{k}"``) becomes that field's
value with its type (an integer, ``null`` for an absent ``as_of``, a list for ``{context}``); a field inside a
longer string is formatted into it (``None`` as the empty string). Only the fields a request offers may be named:
a system file naming another one fails when it is loaded. ``${NAME}`` in a URL or a header reads the environment
variable ``NAME`` when the run starts (a missing one is one line naming it; its value never appears in a message
or in the system's identity).

**Answers** are read with dotted paths (``"results"``, ``"data.0.memories"``, ``"metadata.evk_id"``; ``""`` = the
answer itself): ``results`` → the list of hits; per hit ``id`` / ``text`` / ``score`` / ``injected`` /
``metadata`` paths (each optional but one of id and text); ``block`` → the whole injected block, if the system
returns one. A missing list, a hit that names nothing, a score that is not a number: a ``malformed`` fault whose
message names the keys the answer did have (``the answer has no 'results' (its keys: result)``).

**Ingest answers** (:class:`IngestAnswerMap`): whether the system kept what it was sent. A declared ``success`` path
(a boolean for the whole request, or a list of booleans, one per document of a batch); by default a boolean
``success`` or ``ok`` key of the answer when present, else the HTTP status (2xx kept, 4xx refused). ``reason``: where
the refusal's reason is (default: the first string among ``message``, ``error``, ``detail``, ``reason``).

>>> render({"q": "{query}", "n": "{k}", "ns": "user-{group}"}, {"query": "hi", "k": 5, "group": "g1"})
{'q': 'hi', 'n': 5, 'ns': 'user-g1'}
>>> get_path({"data": [{"m": 1}]}, "data.0.m")
1
"""
from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from typing import Any

from retrievers.errors import ConfigError
from retrievers.systems.protocol import Answer, Hit, SystemFault, as_hit

_FMT = string.Formatter()
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MISSING = object()

#: the fields each request may name
SEARCH_FIELDS = frozenset({"query", "k", "group", "as_of", "as_of_epoch", "context"})
DOC_FIELDS = frozenset({"id", "text", "title", "group", "created", "created_epoch", "timestamp", "path",
                        "metadata"})
RESET_FIELDS = frozenset({"group"})


def fields(template: Any) -> set[str]:
    """Every field name a template uses (``{name}`` in any string, at any depth)."""
    out: set[str] = set()
    if isinstance(template, str):
        for _, name, spec, conv in _FMT.parse(template):
            if name is not None:
                out.add(name)
    elif isinstance(template, dict):
        for k, v in template.items():
            out |= fields(k) | fields(v)
    elif isinstance(template, list):
        for v in template:
            out |= fields(v)
    return out


def check_template(template: Any, allowed: frozenset[str], where: str) -> None:
    """ConfigError when ``template`` names a field outside ``allowed`` or uses a format spec / attribute."""
    try:
        used = fields(template)
    except ValueError as exc:
        raise ConfigError(f"{where}: bad template ({exc})") from None
    bad = sorted(n for n in used if n not in allowed)
    if bad:
        raise ConfigError(f"{where}: unknown field(s) {', '.join('{' + b + '}' for b in bad)} "
                          f"(valid: {', '.join('{' + a + '}' for a in sorted(allowed))})")


def _whole(s: str) -> str | None:
    parts = list(_FMT.parse(s))
    if len(parts) == 1 and parts[0][0] == "" and parts[0][1] and not parts[0][2] and not parts[0][3]:
        return parts[0][1]
    return None


def render(template: Any, values: dict[str, Any]) -> Any:
    """The template with its fields filled (see the module docstring)."""
    if isinstance(template, str):
        name = _whole(template)
        if name is not None:
            return values[name]
        if "{" not in template:
            return template
        return template.format_map({k: ("" if v is None else v) for k, v in values.items()})
    if isinstance(template, dict):
        return {render(k, values): render(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, values) for v in template]
    return template


def env_expand(s: str, where: str) -> str:
    """``${NAME}`` → the environment variable's value; ConfigError naming the variable when it is not set."""
    def sub(m: re.Match) -> str:
        v = os.environ.get(m.group(1))
        if v is None:
            raise ConfigError(f"{where}: environment variable {m.group(1)} is not set")
        return v
    return _ENV.sub(sub, s)


def get_path(obj: Any, path: str) -> Any:
    """The value at a dotted path (list items by index), MISSING when any step is absent."""
    if path in ("", "."):
        return obj
    cur = obj
    for step in path.split("."):
        if isinstance(cur, dict):
            if step not in cur:
                return MISSING
            cur = cur[step]
        elif isinstance(cur, list):
            try:
                cur = cur[int(step)]
            except (ValueError, IndexError):
                return MISSING
        else:
            return MISSING
    return cur


def found(obj: Any, path: str) -> str:
    """What an answer holds where ``path`` failed: the keys of the deepest object the path reached (for a
    ``malformed`` message: ``its keys: result`` / ``at 'data': a list of 3``)."""
    cur, where = obj, ""
    for step in ([] if path in ("", ".") else path.split(".")):
        nxt = get_path(cur, step)
        if nxt is MISSING:
            break
        cur, where = nxt, f"{where}.{step}" if where else step
    at = f"at {where!r}: " if where else ""
    if isinstance(cur, dict):
        keys = sorted(map(str, cur))
        return f"{at}its keys: {', '.join(keys[:12]) + (' …' if len(keys) > 12 else '') if keys else 'none'}"
    if isinstance(cur, list):
        return f"{at}a list of {len(cur)}"
    return f"{at}{type(cur).__name__ if cur is not None else 'null'}"


ANSWER_KEYS = {"results", "id", "text", "score", "injected", "metadata", "block", "system_ms"}


@dataclass(frozen=True)
class AnswerMap:
    """Where the hits are in an answer (see the module docstring)."""

    results: str = "results"
    id: str | None = None
    text: str | None = None
    score: str | None = None
    injected: str | None = None
    metadata: str | None = None
    block: str | None = None
    system_ms: str | None = None

    @classmethod
    def from_table(cls, t: dict, where: str) -> "AnswerMap":
        m = cls(**{k: t[k] for k in ANSWER_KEYS if k in t})
        for k in ANSWER_KEYS:
            v = getattr(m, k)
            if v is not None and not isinstance(v, str):
                raise ConfigError(f"{where}: {k} must be a dotted path (a string)")
        if m.id is None and m.text is None:
            raise ConfigError(f"{where}: say where a hit's id or its text is (id = \"...\" or text = \"...\")")
        return m

    def record(self) -> dict:
        return {k: getattr(self, k) for k in sorted(ANSWER_KEYS) if getattr(self, k) is not None}

    def read(self, body: Any, where: str) -> Answer:
        """The answer's hits; SystemFault (malformed) when it is not the declared shape."""
        items = get_path(body, self.results)
        if items is MISSING:
            raise SystemFault("malformed", f"{where}: the answer has no {self.results or 'list'!r} "
                                           f"({found(body, self.results)})")
        if not isinstance(items, list):
            raise SystemFault("malformed", f"{where}: {self.results or 'the answer'!r} is "
                                           f"{type(items).__name__}, not a list")
        hits = []
        for i, it in enumerate(items):
            vals = {}
            for k in ("id", "text", "score", "injected", "metadata"):
                p = getattr(self, k)
                if p is not None:
                    v = get_path(it, p)
                    if v is not MISSING and v is not None:
                        vals[k] = v
            if "metadata" not in vals and isinstance(it, dict) and self.metadata is None:
                vals["metadata"] = {}
            if "id" not in vals and "text" not in vals:
                raise SystemFault("malformed", f"{where}: hit {i + 1} has neither "
                                               f"{' nor '.join(repr(p) for p in (self.id, self.text) if p)} "
                                               f"({found(it, '')})")
            if "id" in vals and not isinstance(vals["id"], (str, int)):
                raise SystemFault("malformed", f"{where}: hit {i + 1}'s id is {type(vals['id']).__name__}")
            hits.append(as_hit(Hit(**vals), f"{where}: hit {i + 1}"))
        block = get_path(body, self.block) if self.block is not None else None
        if block is MISSING:
            block = None
        if block is not None and not isinstance(block, str):
            raise SystemFault("malformed", f"{where}: {self.block!r} is not a string")
        ms = get_path(body, self.system_ms) if self.system_ms is not None else None
        ms = float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None
        return Answer(hits, block, ms)


REASON_KEYS = ("message", "error", "detail", "reason")


@dataclass(frozen=True)
class IngestAnswerMap:
    """Where an ingest answer says whether the system kept each document (see the module docstring)::

        [http.ingest.answer]        # or [mcp.store.answer]
        success = "stored"          # a boolean, or a list of booleans (one per document of a batch)
        reason = "message"
    """

    success: str | None = None
    reason: str | None = None

    @classmethod
    def from_table(cls, t: dict, where: str) -> "IngestAnswerMap":
        if not isinstance(t, dict):
            raise ConfigError(f"{where}: expected a table")
        unknown = sorted(set(t) - {"success", "reason"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: reason, success)")
        for k, v in t.items():
            if not isinstance(v, str):
                raise ConfigError(f"{where}: {k} must be a dotted path (a string)")
        return cls(t.get("success"), t.get("reason"))

    def record(self) -> dict:
        return {k: v for k, v in (("success", self.success), ("reason", self.reason)) if v is not None}

    def refused(self, body: Any, ids: list[str], where: str) -> dict[str, str]:
        """The documents of one request (``ids``) that the answer ``body`` (of a 2xx request) says the system
        refused, each with its reason; SystemFault (malformed, naming the keys found) when a declared ``success``
        path is absent or not a boolean / a list of one boolean per document."""
        if self.success is not None:
            ok = get_path(body, self.success)
            if ok is MISSING:
                raise SystemFault("malformed", f"{where}: the ingest answer has no {self.success!r} "
                                               f"({found(body, self.success)})")
        elif isinstance(body, dict):
            ok = next((body[k] for k in ("success", "ok") if isinstance(body.get(k), bool)), True)
        else:
            ok = True  # no success key: the HTTP status (a 2xx) said it
        if isinstance(ok, bool):
            flags = [ok] * len(ids)
        elif isinstance(ok, list) and len(ok) == len(ids) and all(isinstance(x, bool) for x in ok):
            flags = ok
        else:
            raise SystemFault("malformed", f"{where}: {self.success!r} is neither a boolean nor a list of "
                                           f"{len(ids)} booleans (one per document sent)")
        if all(flags):
            return {}
        why = get_path(body, self.reason) if self.reason else next(
            (body[k] for k in REASON_KEYS if isinstance(body, dict) and isinstance(body.get(k), str)), None)
        why = " ".join(str(why).split())[:160] if why not in (None, MISSING) else "refused"
        return {i: why for i, f in zip(ids, flags) if not f}


__all__ = ["render", "fields", "check_template", "env_expand", "get_path", "found", "AnswerMap", "IngestAnswerMap",
           "SEARCH_FIELDS", "DOC_FIELDS", "RESET_FIELDS", "MISSING"]


def search_values(query: str, k: int, as_of: float | None, group: str | None, context: list[str]) -> dict:
    """The fields a search template may name."""
    from retrievers.types import format_time  # lazy: startup
    return {"query": query, "k": k, "group": group, "as_of": format_time(as_of), "as_of_epoch": as_of,
            "context": list(context)}


def doc_values(d, group: str | None) -> dict:
    """The fields an ingest template may name, for one :class:`retrievers.types.Document`."""
    from retrievers.types import format_time  # lazy: startup
    return {"id": d.id, "text": d.text, "title": d.title, "group": group, "created": format_time(d.created),
            "created_epoch": d.created, "timestamp": format_time(d.timestamp), "path": d.path,
            "metadata": dict(d.metadata)}
