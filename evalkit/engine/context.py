"""The one place the harness builds a stage :class:`~retrievers.stages.base.Context`.

Stages never open files: a stage that learns from a query log names it in a parameter
(``Stage.query_log_param``), and :func:`make_context` loads every log the pipelines name (through the query-log
loader, DESIGN.md §4) into ``options["query_logs"][path]``, once, before anything runs or is timed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from evalkit.data.readers.querylog import load_querylog
from retrievers.pipeline import Pipeline
from retrievers.stages.base import Context
from retrievers.types import DataError


def load_query_logs(pipelines: Iterable[Pipeline]) -> dict[str, list]:
    """``{path: events}`` for every query log a stage of ``pipelines`` learns from; a missing file is a
    :class:`DataError` naming the stage's parameter value."""
    logs: dict[str, list] = {}
    for p in pipelines:
        for path in p.query_logs():
            if path not in logs:
                if not Path(path).is_file():
                    raise DataError(f"preset {p.name!r}: query log {path!r} not found")
                logs[path] = load_querylog(Path(path)).events
    return logs


def make_context(pipelines: Iterable[Pipeline] = (), embedder: Any = None, **options: Any) -> Context:
    """A Context for running ``pipelines``: ``embedder``, ``options`` and the query logs they need."""
    logs = load_query_logs(pipelines)
    if logs:
        options["query_logs"] = logs
    return Context(embedder=embedder, options=options)
