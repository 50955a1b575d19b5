"""The lockbox journal: how many times a dataset's sealed split has been opened for a search space.

A lockbox figure is a test figure only the first time it is looked at: every later opening for the same space
(after changing the space, the stages or the data) makes it one more validation look. ``evalkit tune --final``
appends one line per opening to a JSON-lines journal and writes the count into the tuned file's header and the
report ("lockbox opened 2 times"). The key is the space (its path, name and the sha256 of its parsed table) and the
dataset (name, content hash, lockbox split): editing the space or the data starts a new count — the journal keeps
the old one, and :func:`openings_of_space` counts every opening of the same space file whatever its contents.

Default journal: ``lockbox.jsonl`` beside the space file (``tune/lockbox.jsonl`` for the project's own spaces,
committed with the tuned files). A line: ``{"key", "space", "space_sha256", "dataset", "dataset_hash", "lockbox",
"queries", "config", "objective", "value", "opening", "opened_at"}``. Appends hold an exclusive ``flock`` so
concurrent runs count correctly.

Example::

    j = LockboxJournal(Path("tune/lockbox.jsonl"))
    n = j.record(key, {...})   # 1 the first time, 2 the next ...
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from retrievers.errors import ConfigError

JOURNAL_NAME = "lockbox.jsonl"


def space_sha(raw: dict) -> str:
    """sha256 (16 hex) of a space's parsed table (the same digest the tuned file's provenance line prints)."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]


def lockbox_key(space_path: str, space_raw: dict, dataset: str, dataset_hash: str, split: str) -> str:
    """The journal key of (space, dataset, lockbox split)."""
    return hashlib.sha256(json.dumps([Path(space_path).as_posix(), space_sha(space_raw), dataset, dataset_hash,
                                      split]).encode()).hexdigest()[:16]


class LockboxJournal:
    """Append-only JSON-lines journal of lockbox openings (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _lines(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for no, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(f"{self.path}:{no}: not a lockbox journal line (malformed JSON)") from None
            if not isinstance(rec, dict) or "key" not in rec:
                raise ConfigError(f"{self.path}:{no}: not a lockbox journal line (no 'key')")
            out.append(rec)
        return out

    def openings(self, key: str) -> int:
        """How many times the lockbox of ``key`` has been opened."""
        return sum(1 for r in self._lines() if r["key"] == key)

    def openings_of_space(self, space_path: str) -> int:
        """Openings recorded for the space file at ``space_path`` under any of its versions."""
        p = Path(space_path).as_posix()
        return sum(1 for r in self._lines() if r.get("space") == p)

    def record(self, key: str, entry: dict) -> int:
        """Append one opening of ``key`` (with ``entry``'s fields) and return its number (1 = the first)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.seek(0)
                n = sum(1 for line in fh if line.strip() and json.loads(line).get("key") == key) + 1
                rec = {"key": key, **entry, "opening": n,
                       "opened_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
                fh.seek(0, os.SEEK_END)
                fh.write(json.dumps(rec, sort_keys=True, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return n
