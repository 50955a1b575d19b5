"""A sweep's results journal: one JSON line per evaluated config, appended as slices finish, so a sweep that
is killed midway and started again computes only the configs that are missing.

The journal is keyed by the sweep: the caller passes a dict (preset hash, search space, dataset content hash,
split, seed, metrics …) and the file lives at ``<folder>/<sha256 of that dict>.jsonl``; its first line repeats
the key, and a file whose key differs is refused. Each further line is ``{"c": config key, "m": {metric: mean},
"q": {metric: [per-query values]}}``. Floats are written with ``repr`` (JSON's own float form), which reads back
to the same bits, so a resumed sweep's leaderboard is byte-identical to an uninterrupted one. A line cut short by
a kill (the last one) is ignored and overwritten.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from retrievers.errors import ConfigError


def key_id(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


class SweepJournal:
    """Results of finished configs of one sweep, read at open and appended to as results arrive."""

    def __init__(self, folder: str | Path, key: dict, flush_every: int = 64):
        self.key = json.loads(json.dumps(key, sort_keys=True, default=str))
        self.id = key_id(self.key)
        self.path = Path(folder) / f"{self.id}.jsonl"
        self.flush_every = flush_every
        self.done: dict[str, tuple[dict, dict]] = {}
        self._buf: list[str] = []
        self._good = 0  # bytes of complete lines
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        pos = 0
        first = True
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break  # a line cut short by a kill
            line = data[pos:nl]
            try:
                rec = json.loads(line)
            except ValueError:
                break
            if first:
                if rec.get("journal") != self.id or rec.get("key") != self.key:
                    raise ConfigError(f"{self.path}: journal of another sweep (key mismatch)")
                first = False
            else:
                self.done[rec["c"]] = ({m: np.asarray(v, dtype=np.float64) for m, v in rec["q"].items()}, rec["m"])
            pos = nl + 1
        self._good = pos if not first else 0

    def get(self, config_key: str) -> tuple[dict, dict] | None:
        return self.done.get(config_key)

    def __len__(self) -> int:
        return len(self.done)

    def add(self, config_key: str, per: dict, means: dict) -> None:
        if config_key in self.done:
            return
        self.done[config_key] = (per, means)
        rec = {"c": config_key, "m": {m: float(v) for m, v in means.items()},
               "q": {m: np.asarray(v, dtype=np.float64).tolist() for m, v in per.items()}}
        self._buf.append(json.dumps(rec, sort_keys=True))
        if len(self._buf) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        head = not self._good
        with open(self.path, "r+b" if self.path.exists() else "wb") as fh:
            fh.truncate(self._good)  # drop a torn last line
            fh.seek(self._good)
            if head:
                fh.write((json.dumps({"journal": self.id, "key": self.key}, sort_keys=True) + "\n").encode())
            fh.write(("\n".join(self._buf) + "\n").encode())
            fh.flush()
            os.fsync(fh.fileno())
            self._good = fh.tell()
        self._buf = []


__all__ = ["SweepJournal", "key_id"]
