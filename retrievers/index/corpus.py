"""Columnar document features (numpy), built once per dataset and shared by every stage.

Stages never touch ``Document`` objects on the hot path: they gather from these arrays with the
candidate table's document indices.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np

from retrievers.text import utf16_len
from retrievers.types import Dataset
from retrievers.index.visibility import audience

DATED_MEMORY_PATH = re.compile(r"(?:^|/)memory/([0-9]{4})-([0-9]{2})-([0-9]{2})\.md\Z")


class Corpus:
    """Document features of one dataset as arrays indexed by document position."""

    def __init__(self, dataset: Dataset):
        docs = dataset.documents
        self.dataset_name = dataset.name
        self.n = len(docs)
        self.ids: list[str] = [d.id for d in docs]
        self.index = dataset.doc_index
        self.texts: list[str] = [d.full_text for d in docs]
        self.raw_texts: list[str] = [d.text for d in docs]
        self.paths: list[str] = [(d.path or "") for d in docs]
        self.groups: list[str] = [(d.group or "") for d in docs]
        nan = float("nan")
        self.timestamp = np.array([d.timestamp if d.timestamp is not None else nan for d in docs], dtype=np.float64)
        # when each document entered the store (NaN = undated: visible at any as_of)
        self.created = np.array([d.created if d.created is not None else nan for d in docs], dtype=np.float64)
        # when a later version replaced it (NaN = current: a revised note's older versions only)
        self.retired = np.array([d.retired if d.retired is not None else nan for d in docs], dtype=np.float64)
        self.mtime = np.array([_num(d.metadata.get("mtime")) for d in docs], dtype=np.float64)
        self.importance = np.array([d.importance if d.importance is not None else nan for d in docs], dtype=np.float64)
        self.length = np.array([utf16_len(t) for t in self.raw_texts], dtype=np.float64)
        self.source: list[str] = [str(d.metadata.get("source", "memory")) for d in docs]
        self.start_line = np.array([_int(d.metadata.get("start_line")) for d in docs], dtype=np.int64)
        self.end_line = np.array([_int(d.metadata.get("end_line")) for d in docs], dtype=np.int64)
        self.secret = np.array([bool(d.metadata.get("contains_secret", False)) for d in docs], dtype=bool)
        self.category: list[str] = [str(d.metadata.get("category") or "") for d in docs]  # lancedb-pro entries
        # scoped notes (retrievers.index.visibility): corpus index -> the query ids that may see it; ordinary notes absent
        self.visible_to: dict[int, frozenset[str]] = {i: a for i, d in enumerate(docs) if (a := audience(d))}
        self._embeddings: np.ndarray | None = None  # (n, dim) float32, unit norm; set by the shared index
        self.embeddings_loader = None  # the shared index's function embedding the corpus on first use
        # vectors exactly as a candidate file gives them (float64, any sizes; None = no vector); None on the index side
        self.raw_vectors: list | None = None
        self._cache: dict = {}

    @property
    def embeddings(self) -> np.ndarray | None:
        """(n, dim) float32 unit-norm document vectors; the shared index embeds the corpus when a stage first reads
        them (``embeddings_loader``), so a run whose stages never read them embeds nothing."""
        if self._embeddings is None and self.embeddings_loader is not None:
            loader, self.embeddings_loader = self.embeddings_loader, None
            loader()  # sets self.embeddings
        return self._embeddings

    @embeddings.setter
    def embeddings(self, value: np.ndarray | None) -> None:
        self._embeddings = value

    def __getstate__(self) -> dict:
        """Pickled (a Dask worker) with its vectors resolved, never with the index's loader (which holds the
        model): a worker's stages see what they would in this process."""
        _ = self.embeddings
        return {**self.__dict__, "embeddings_loader": None}

    def cached(self, key, fn):
        """Per-corpus memo for derived features (token sets, path dates, …)."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def id_of(self, idx: int) -> str:
        return self.ids[idx]


def _num(v) -> float:
    try:
        return float(v) if v is not None else float("nan")
    except (TypeError, ValueError):
        return float("nan")


def _int(v) -> int:
    try:
        return int(v) if v is not None else -1
    except (TypeError, ValueError):
        return -1


def dated_path_ts(path: str) -> float | None:
    """OpenClaw's dated-file rule: ``memory/YYYY-MM-DD.md`` with a real calendar date → 00:00 UTC.

    Years 0000–0099 never count (JS Date maps them to 1900–1999, so the round-trip check fails).
    """
    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    m = DATED_MEMORY_PATH.search(p)
    if not m:
        return None
    y, mo, d = (int(x) for x in m.groups())
    if y < 100:
        return None
    try:
        return datetime(y, mo, d, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
