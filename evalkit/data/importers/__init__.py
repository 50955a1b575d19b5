"""Importers: real memory stores and logs on disk → the project's dataset contract (DESIGN.md §4).

Each importer is declared here once — its ``evalkit import <name>`` sub-command name, help line, arguments and the
``module:function`` that does the work — so the command layer builds its parser from this table without naming
any system (``tests/unit/test_harness_names.py``). Loader modules under ``evalkit/data/`` may name the systems they
read.

An importer function takes the parsed ``argparse`` namespace and returns an :class:`ImportSummary`; every one
writes its output through :func:`evalkit.data.importers.common.write_dataset` (a temporary folder renamed into
place at the end), so a bad input leaves nothing behind.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Arg:
    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImporterSpec:
    name: str
    help: str
    target: str  # "module:function" under evalkit.data.importers
    args: tuple[Arg, ...]

    def function(self) -> Callable:
        mod, fn = self.target.split(":")
        return getattr(importlib.import_module(f"evalkit.data.importers.{mod}"), fn)  # lazy: startup


_OUT = Arg(("--out",), {"required": True, "help": "dataset folder to write (must not exist or be empty)"})
_OVERWRITE = Arg(("--overwrite",), {"action": "store_true", "help": "replace an existing --out folder"})

IMPORTERS: dict[str, ImporterSpec] = {s.name: s for s in (
    ImporterSpec(
        "openclaw", "an OpenClaw 2026.2.26 installation: its memory index (SQLite) or a workspace folder chunked "
                    "the way OpenClaw does, plus its session transcripts → dataset + querylog.jsonl",
        "openclaw:import_openclaw",
        (Arg(("--memory-db",), {"default": None, "help": "OpenClaw's memory index SQLite file "
                                                        "(~/.openclaw/memory/<agent>.sqlite)"}),
         Arg(("--workspace",), {"default": None, "help": "workspace folder to chunk (MEMORY.md, memory/**/*.md) "
                                                        "instead of reading an index"}),
         Arg(("--extra-path",), {"action": "append", "default": [], "help": "extra memory path (file or folder) "
                                                                         "as OpenClaw's memorySearch.extraPaths; "
                                                                         "repeatable"}),
         Arg(("--sessions",), {"default": None, "help": "session transcripts folder (agents/<id>/sessions, or an "
                                                       "OpenClaw state folder holding agents/)"}),
         Arg(("--chunk-tokens",), {"type": int, "default": 400, "help": "chunk size in tokens (default 400)"}),
         Arg(("--chunk-overlap",), {"type": int, "default": 80, "help": "chunk overlap in tokens (default 80)"}),
         _OUT, _OVERWRITE)),
    ImporterSpec(
        "lancedb-pro", "a memory-lancedb-pro store (LanceDB folder, table 'memories') → dataset",
        "lancedb_pro:import_lancedb_pro",
        (Arg(("--db",), {"required": True, "help": "the LanceDB folder (memory-lancedb-pro dbPath)"}),
         Arg(("--table",), {"default": "memories", "help": "table name (default memories)"}),
         Arg(("--queries",), {"default": None, "help": "queries JSONL ({_id?, text, as_of?, vector?, relevant?}) "
                                                      "to evaluate on the store; a 'vector' on every query (the "
                                                      "store's embedding model) makes runs search the stored "
                                                      "vectors, else texts are re-embedded"}),
         Arg(("--log",), {"default": None, "help": "a query log (DESIGN.md §4) whose queries become the "
                                                  "dataset's queries"}),
         _OUT, _OVERWRITE)),
    ImporterSpec(
        "hookclaw-log", "HookClaw journal lines (logInjections, as journalctl prints them) → events + querylog.jsonl",
        "hookclaw_log:import_hookclaw_log",
        (Arg(("file",), {"help": "journalctl output (short, short-iso or short-precise format); .gz ok"}),
         Arg(("--year",), {"type": int, "default": None, "help": "year of journalctl's short format lines "
                                                                "(it prints none)"}),
         Arg(("--dataset",), {"default": None, "help": "dataset the logged results refer to (maps logged "
                                                      "path:start-end results to its document ids)"}),
         Arg(("--out",), {"required": True, "help": "folder to write: events.jsonl, querylog.jsonl, "
                                                   "summary.json"}),
         _OVERWRITE)),
)}
