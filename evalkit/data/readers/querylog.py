"""Read a logged-query JSONL file (DESIGN.md §4, "Contract — logged queries") for replay.

One query event per line::

    {"ts": "2026-02-27T10:00:00Z", "query": "...", "session": "...", "context": [...], "injected": ["doc-id"],
     "response": "...", "latency_ms": 41.5, "anything_else": ...}

* Required: ``ts`` (ISO 8601; epoch seconds are accepted too) and ``query`` (a non-empty string).
* Optional: ``session`` (string), ``context`` (recent messages, oldest first: strings or ``{role, content}``
  objects; a single string becomes a one-item list), ``injected`` (doc ids production injected; a single id
  becomes a one-item list), ``response`` (the agent's reply), ``latency_ms`` (number).
* Unknown keys are kept (in ``LogEvent.extra`` and in the replay query's ``metadata``), never rejected.

Lenient by design — a production log should not be thrown away for one bad line:

* A line that is not JSON, not an object, not UTF-8, has no/empty ``query`` or no/invalid ``ts`` is skipped and
  recorded in ``QueryLog.skipped`` as ``(line_no, reason)``; blank lines are ignored.
* An optional field of the wrong type (e.g. ``latency_ms: "fast"``) is dropped from the event and recorded in
  ``QueryLog.notes`` as ``(line_no, note)``; the event itself is kept.
* A file that cannot be read, or that has zero valid events, is a :class:`DataError` (one line).

``QueryLog.queries()`` converts events to :class:`Query` objects for replay: id ``"log:{line_no}"``, text = the
query, ``as_of`` = ``ts``, metadata = ``session``, ``context``, ``injected``, ``response``, ``latency_ms``, ``ts``
(the original string) and the unknown keys. ``.gz`` files are read transparently.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrievers.types import DataError, Query, parse_time
from retrievers.errors import json_error

KNOWN = ("ts", "query", "session", "context", "injected", "response", "latency_ms")


@dataclass
class LogEvent:
    line_no: int
    ts: float
    query: str
    raw_ts: str
    session: str | None = None
    context: list[Any] = field(default_factory=list)
    injected: list[str] | None = None  # None = not logged; [] = production injected nothing
    response: str | None = None
    latency_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_query(self) -> Query:
        md: dict[str, Any] = dict(self.extra)
        md.update({"ts": self.raw_ts, "line": self.line_no, "context": list(self.context)})
        if self.session is not None:
            md["session"] = self.session
        if self.injected is not None:
            md["injected"] = list(self.injected)
        if self.response is not None:
            md["response"] = self.response
        if self.latency_ms is not None:
            md["latency_ms"] = self.latency_ms
        return Query(id=f"log:{self.line_no}", text=self.query, as_of=self.ts, metadata=md)


@dataclass
class QueryLog:
    path: Path
    events: list[LogEvent]
    skipped: list[tuple[int, str]] = field(default_factory=list)
    notes: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.events)

    def queries(self) -> list[Query]:
        return [e.to_query() for e in self.events]

    def summary(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for _, r in self.skipped:
            key = r.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
        return {"path": str(self.path), "events": len(self.events), "skipped": len(self.skipped),
                "skipped_by_reason": reasons, "notes": len(self.notes),
                "sessions": len({e.session for e in self.events if e.session is not None})}


def _parse_event(line_no: int, obj: Any, notes: list[tuple[int, str]]) -> LogEvent | str:
    """An event, or the reason the line is skipped."""
    if not isinstance(obj, dict):
        return f"not a JSON object ({type(obj).__name__})"
    q = obj.get("query")
    if q is None:
        return "no 'query'"
    if not isinstance(q, str) or not q.strip():
        return "'query' is not a non-empty string"
    if "ts" not in obj or obj["ts"] in (None, ""):
        return "no 'ts'"
    raw_ts = obj["ts"]
    if isinstance(raw_ts, bool):
        return f"invalid 'ts': {raw_ts!r}"
    try:
        ts = parse_time(raw_ts)
    except DataError:
        return f"invalid 'ts': {raw_ts!r}"
    ev = LogEvent(line_no=line_no, ts=ts, query=q, raw_ts=str(raw_ts),
                  extra={k: v for k, v in obj.items() if k not in KNOWN})

    def note(msg: str) -> None:
        notes.append((line_no, msg))

    s = obj.get("session")
    if s is not None:
        if isinstance(s, (str, int)) and not isinstance(s, bool):
            ev.session = str(s)
        else:
            note(f"'session' ignored (not a string: {type(s).__name__})")
    c = obj.get("context")
    if c is not None:
        if isinstance(c, str):
            ev.context = [c]
        elif isinstance(c, list) and all(isinstance(m, (str, dict)) for m in c):
            ev.context = list(c)
        else:
            note("'context' ignored (not a list of messages)")
    inj = obj.get("injected")
    if inj is not None:
        if isinstance(inj, (str, int)) and not isinstance(inj, bool):
            ev.injected = [str(inj)]
        elif isinstance(inj, list) and all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in inj):
            ev.injected = [str(i) for i in inj]
        else:
            note("'injected' ignored (not a list of doc ids)")
    r = obj.get("response")
    if r is not None:
        if isinstance(r, str):
            ev.response = r
        else:
            note(f"'response' ignored (not a string: {type(r).__name__})")
    lat = obj.get("latency_ms")
    if lat is not None:
        if isinstance(lat, (int, float)) and not isinstance(lat, bool):
            ev.latency_ms = float(lat)
        else:
            note(f"'latency_ms' ignored (not a number: {lat!r})")
    return ev


def load_querylog(path: Path) -> QueryLog:
    """Read a logged-query JSONL file (see the module docstring)."""
    path = Path(path)
    try:
        fh = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"query log not found: {path}") from None
    except IsADirectoryError:
        raise DataError(f"query log is a folder, expected a JSONL file: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read query log {path}: {exc.strerror or exc}") from None
    events: list[LogEvent] = []
    skipped: list[tuple[int, str]] = []
    notes: list[tuple[int, str]] = []
    try:
        with fh:
            for line_no, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
                except UnicodeDecodeError:
                    skipped.append((line_no, "not UTF-8"))
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    skipped.append((line_no, f"not JSON: {json_error(exc)}"))
                    continue
                res = _parse_event(line_no, obj, notes)
                if isinstance(res, str):
                    skipped.append((line_no, res))
                else:
                    events.append(res)
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read query log {path}: {exc}") from None
    if not events:
        first = f" (first: line {skipped[0][0]}: {skipped[0][1]})" if skipped else ""
        raise DataError(f"query log {path} has no valid events: {len(skipped)} line(s) skipped{first}")
    return QueryLog(path=path, events=events, skipped=skipped, notes=notes)
