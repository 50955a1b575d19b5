"""Warnings that belong to a run: printed once as ``evalkit: warning: …`` lines, kept in the manifest and shown in
the report beside the dataset or retriever they concern — never a Python ``warnings.warn`` (which prints a source
line and a file path the user cannot act on, and reaches neither the manifest nor the report).

A warning is a plain dict (it goes to JSON as is)::

    {"what": "runfile_unknown_docs",   # a stable key: what happened
     "text": "one line a user can act on",
     "retriever": "mine",              # optional: the retriever it concerns (None = the dataset / the run)
     "count": 3}                       # optional: how many rows / queries / documents

Loaders (below this layer) append such dicts to ``Dataset.info["warnings"]``; the engine adds its own (external run
files, :mod:`evalkit.engine.trec_runs`; degenerate stages, :mod:`evalkit.engine.degenerate`) and
:func:`evalkit.engine.experiment.run_dataset` prints each one and records them (``manifest.json`` →
``datasets.<name>.warnings``).
"""
from __future__ import annotations

import sys

PREFIX = "evalkit: warning: "


def warning(what: str, text: str, retriever: str | None = None, count: int | float | None = None) -> dict:
    """One warning record (see the module docstring)."""
    w: dict = {"what": what, "text": " ".join(str(text).split())}
    if retriever is not None:
        w["retriever"] = retriever
    if count is not None:
        w["count"] = count
    return w


def line(w: dict) -> str:
    """The terminal line of warning ``w``: ``evalkit: warning: <text>``."""
    return PREFIX + w["text"]


def emit(warnings: list[dict], stream=None) -> None:
    """Print each warning as one ``evalkit: warning:`` line on ``stream`` (default stderr)."""
    out = stream or sys.stderr
    for w in warnings:
        print(line(w), file=out)


def route_python_warnings(stream=None) -> None:
    """Send anything a library raises through Python's ``warnings`` to one ``evalkit: warning:`` line (category,
    message, where) instead of the default two-line form with a source excerpt; deprecation notes (meant for a
    library's developers) are not shown. Installed by ``evalkit.cli.main``."""
    import warnings  # lazy: startup

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - warnings' signature
        text = " ".join(str(message).split())
        print(f"{PREFIX}{category.__name__}: {text} ({filename.rsplit('/', 1)[-1]}:{lineno})",
              file=file or stream or sys.stderr)

    warnings.showwarning = show
    # a library's deprecation notes are for its developers, not for someone reading a run's output
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", PendingDeprecationWarning)
