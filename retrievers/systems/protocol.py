"""The protocol a live memory system speaks to evalkit, and the faults it can raise.

A memory system evalkit does not re-implement (mem0, OpenClaw, a team's own service) is driven through a small
protocol. In Python (``kind = "python"`` system files, or an object handed to the Python API) it is any object
with::

    search(query, *, k, as_of, group, context) -> hits      # required
    ingest(documents, *, group) -> None | ids               # optional: put documents into the memory; it may
                                                            #   return the ids it refused (or {id: reason})
    reset(group) -> None                                    # optional: forget one group (namespace)
    injected(query, hits, *, k, as_of, group, context) -> str | None   # optional: the block it would inject
    version() -> str | None                                 # optional: what the system reports as its version
    start() -> None                                         # optional: the expensive set-up (models, stores),
                                                            #   called only when something must be ingested/asked
    indexed(group) -> list[str] | None                      # optional: the ids it actually indexed of what it got
    close() -> None                                         # optional: release servers, temp folders

* ``query``: the text; ``k``: how many hits to return; ``as_of``: the query's "now" (epoch seconds UTC, or None);
  ``group``: the namespace of the memory store the query belongs to (a LoCoMo conversation, a LongMemEval haystack:
  evalkit renders it from the system file's ``namespace`` template); ``context``: recent messages, oldest first.
* ``hits``: a list of :class:`Hit` (or dicts with the same keys, or plain strings = texts), best first, or an
  :class:`Answer` (hits + the whole injected block + the system's own time). A hit names the memory it found by
  ``id`` (the dataset id, when the system echoes the metadata it was given) or by ``text``; evalkit maps it back
  to a dataset document (:mod:`evalkit.engine.live`).
* ``documents``: :class:`retrievers.types.Document` objects (``id``, ``text``, ``created``, ``path``,
  ``metadata`` …) in the order they entered the memory (creation order under the strict as-of protocol).
* Any method may be ``async def``; evalkit awaits it.

Faults: an adapter raises :class:`SystemFault` for a failure of one request (a timeout, a 5xx, an answer that is
not the format) — evalkit retries the retryable ones with back-off, counts the rest per query and stops the run
above a threshold — and :class:`SystemDown` when the system itself is gone (its process exited, its port refuses
connections): the run stops at once with one line. Anything else a Python system raises is a fault of that query.

Example (a system in a dozen lines)::

    class Keyword:
        def __init__(self):
            self.docs = {}
        def ingest(self, documents, *, group):
            self.docs.setdefault(group, []).extend(documents)
        def search(self, query, *, k, as_of, group, context):
            words = set(query.lower().split())
            scored = [(len(words & set(d.text.lower().split())), d.id) for d in self.docs.get(group, [])]
            return [Hit(id=i, score=float(s)) for s, i in sorted(scored, key=lambda x: (-x[0], x[1]))[:k] if s]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from retrievers.types import Document

FAULT_KINDS = ("timeout", "server_error", "malformed", "refused", "error")


class SystemFault(Exception):
    """One request to a live system failed. ``kind``: timeout | server_error (HTTP 5xx / 429) | malformed (an answer
    that is not the format) | refused (the request was rejected: HTTP 4xx, a tool error) | error (anything a Python
    system raised). ``retryable``: a later attempt may succeed (timeouts, 5xx, 429). The message is one line."""

    def __init__(self, kind: str, message: str, retryable: bool | None = None):
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}")
        super().__init__(" ".join(str(message).split()))
        self.kind = kind
        self.retryable = kind in ("timeout", "server_error") if retryable is None else retryable


class SystemDown(SystemFault):
    """The system is gone (its process exited, its port refuses connections, its session closed): nothing more
    can be asked, the run stops with this one line."""

    def __init__(self, message: str):
        super().__init__("refused", message, retryable=False)


@dataclass
class Hit:
    """One memory a system returned: ``id`` (the dataset id when the system echoes it) and/or ``text``; ``score``
    (None when the system gives none); ``injected``: the text the system puts into the prompt for this memory (a
    snippet with a citation; None = not reported); ``metadata``: whatever else it returned (kept, JSON-able)."""

    id: str | None = None
    text: str | None = None
    score: float | None = None
    injected: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        d: dict[str, Any] = {}
        for k in ("id", "text", "score", "injected"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.metadata:
            d["metadata"] = self.metadata
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Hit":
        return cls(d.get("id"), d.get("text"), d.get("score"), d.get("injected"), dict(d.get("metadata") or {}))


@dataclass
class Answer:
    """A system's whole answer to one query: its hits (best first), the block it would inject (None = not
    reported) and its own time in milliseconds when it measures one."""

    hits: list[Hit]
    injected: str | None = None
    system_ms: float | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"hits": [h.to_json() for h in self.hits]}
        if self.injected is not None:
            d["injected"] = self.injected
        if self.system_ms is not None:
            d["system_ms"] = self.system_ms
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Answer":
        return cls([Hit.from_json(h) for h in d.get("hits", [])], d.get("injected"), d.get("system_ms"))


@runtime_checkable
class MemorySystem(Protocol):
    """The one required method (see the module docstring for the optional ones)."""

    def search(self, query: str, *, k: int, as_of: float | None, group: str | None,
               context: list[str]) -> Any: ...


def as_hit(x: Any, where: str) -> Hit:
    """A hit from what a system returned: a :class:`Hit`, a dict (keys id / text / score / injected / metadata) or a
    string (a text). :class:`SystemFault` (malformed) otherwise, or when it names no memory (no id, no text), or
    when its score is not a finite number."""
    if isinstance(x, Hit):
        h = x
    elif isinstance(x, str):
        h = Hit(text=x)
    elif isinstance(x, dict):
        unknown = set(x) - {"id", "text", "score", "injected", "metadata"}
        if unknown:
            raise SystemFault("malformed", f"{where}: hit has unknown key(s) {', '.join(sorted(unknown))}")
        h = Hit.from_json(x)
    else:
        raise SystemFault("malformed", f"{where}: a hit must be a Hit, a dict or a string, got {type(x).__name__}")
    if h.id is not None and not isinstance(h.id, str):
        h.id = str(h.id)
    if h.id is None and not (isinstance(h.text, str) and h.text):
        raise SystemFault("malformed", f"{where}: a hit has neither an id nor a text")
    if h.text is not None and not isinstance(h.text, str):
        raise SystemFault("malformed", f"{where}: a hit's text is {type(h.text).__name__}, not a string")
    if h.injected is not None and not isinstance(h.injected, str):
        raise SystemFault("malformed", f"{where}: a hit's injected text is not a string")
    if h.score is not None:
        try:
            h.score = float(h.score)
        except (TypeError, ValueError):
            raise SystemFault("malformed", f"{where}: score {h.score!r} is not a number") from None
        if not math.isfinite(h.score):
            raise SystemFault("malformed", f"{where}: score {h.score} is not finite")
    if not isinstance(h.metadata, dict):
        raise SystemFault("malformed", f"{where}: a hit's metadata is not an object")
    return h


def as_answer(x: Any, where: str) -> Answer:
    """An :class:`Answer` from what ``search`` returned (an Answer, or a list of hits)."""
    if isinstance(x, Answer):
        hits, inj, ms = x.hits, x.injected, x.system_ms
    elif isinstance(x, (list, tuple)):
        hits, inj, ms = list(x), None, None
    else:
        raise SystemFault("malformed", f"{where}: search returned {type(x).__name__}, expected a list of hits")
    if inj is not None and not isinstance(inj, str):
        raise SystemFault("malformed", f"{where}: the injected block is not a string")
    return Answer([as_hit(h, where) for h in hits], inj, ms)


__all__ = ["Hit", "Answer", "MemorySystem", "SystemFault", "SystemDown", "FAULT_KINDS", "as_hit", "as_answer",
           "Document"]
