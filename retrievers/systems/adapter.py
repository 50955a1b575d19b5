"""The adapter kinds' common face: a live system as evalkit drives it (async, one instance per run).

Each kind (``python``, ``http``, ``mcp``) is a subclass registered with :func:`kind` in a module of its own; a
system file's ``kind`` picks it (:mod:`retrievers.systems.file`, which imports each kind's module once: a new kind is
its module plus that import line — its table's keys, default concurrency and stderr log are declared on the class). Every method but :meth:`Adapter.search` has a default: a system that
cannot ingest says so with ``can_ingest = False`` (evalkit then refuses a dataset it would have to ingest), one
that cannot forget a group with ``can_reset = False``.

Timeouts, retries and fault counting are the driver's (:mod:`evalkit.engine.live.driver`); an adapter turns what its
transport raises into :class:`~retrievers.systems.protocol.SystemFault` / ``SystemDown`` with one-line messages.
"""
from __future__ import annotations

import abc
from typing import Any, Callable

from retrievers.errors import ConfigError
from retrievers.systems.protocol import Answer
from retrievers.types import Document

KINDS: dict[str, type["Adapter"]] = {}


def kind(name: str) -> Callable[[type["Adapter"]], type["Adapter"]]:
    """Register an adapter class under a system file's ``kind``."""
    def deco(cls: type["Adapter"]) -> type["Adapter"]:
        cls.kind = name
        KINDS[name] = cls
        return cls
    return deco


class Adapter(abc.ABC):
    """A live system behind evalkit's async calls. ``label`` names it in every message."""

    kind = "?"
    can_ingest = True
    can_reset = True
    default_concurrency = 4  # requests in flight when the system file's [limits] does not say
    logs_stderr = False  # the adapter runs a server process whose stderr goes to ``stderr_log`` (set by the driver)

    def __init__(self, label: str):
        self.label = label

    # -- the kind's table in a system file --------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def validate(cls, table: dict[str, Any], where: str) -> dict[str, Any]:
        """The kind's table with defaults filled (the canonical form hashed into the system's identity);
        ConfigError (one line, naming ``where``) on a missing or unknown key or a bad value."""

    @classmethod
    def from_table(cls, table: dict[str, Any], label: str, concurrency: int, timeout: float) -> "Adapter":
        """An adapter from the validated table (a kind whose constructor takes these four as they are)."""
        return cls(table, label, concurrency, timeout)

    # -- lifecycle -------------------------------------------------------------------------------------------------
    async def connect(self) -> None:
        """The cheap part of starting: open a client, spawn a stdio server — enough to ask :meth:`version` (once per
        run, first)."""

    async def start(self) -> None:
        """The expensive part (load models, build a store): only when something must be ingested or asked — a
        rerun answered from the response cache never pays it."""

    async def close(self) -> None:
        """Release everything :meth:`start` took (never raises)."""

    async def version(self) -> str | None:
        """What the system reports as its version (part of the response-cache key), None if nothing."""
        return None

    # -- the protocol ----------------------------------------------------------------------------------------------
    @abc.abstractmethod
    async def search(self, query: str, *, k: int, as_of: float | None, group: str | None,
                     context: list[str]) -> Answer:
        """The system's answer to one query (raises SystemFault / SystemDown)."""

    async def ingest(self, documents: list[Document], *, group: str | None) -> dict[str, str]:
        """Send ``documents`` into the memory; the ones the system refused (dataset id → its reason; empty: it kept
        all). A failed request raises SystemFault / SystemDown."""
        raise ConfigError(f"system {self.label}: it cannot ingest documents")

    def code(self) -> str | None:
        """A hash of the code that answers (part of the response-cache key), None when evalkit cannot see it (a
        service, a server: their ``version`` names them)."""
        return None

    stderr_log: str | None = None  # where a server process's stderr goes (set by the driver before connect)

    async def indexed(self, group: str | None) -> list[str] | None:
        """The dataset ids of what the system actually indexed of what it was given (None: it does not say)."""
        return None

    async def reset(self, group: str | None) -> None:
        raise ConfigError(f"system {self.label}: it cannot reset a group")


def check_keys(table: dict, allowed: set[str], required: set[str], where: str) -> None:
    """ConfigError on an unknown or a missing key of a system-file table."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(allowed))})")
    missing = sorted(required - set(table))
    if missing:
        raise ConfigError(f"{where}: missing key(s) {', '.join(missing)}")


__all__ = ["Adapter", "KINDS", "kind", "check_keys"]
