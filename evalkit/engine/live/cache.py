"""The response cache of live systems and its keys (see :mod:`evalkit.engine.live`, "Reruns cost nothing").

An answer's key names the system (its file's hash, the version it reported, its code's hash for a ``python`` system),
the group, the query (text, as_of, context), ``k`` and the memory's ingest state: :func:`ingest_states`, a chained
hash of the content of every document ingested so far (:func:`doc_digest`).

>>> ingest_states([])[0] == cache_key("empty")
True
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any

from retrievers.embed.model import cache_root
from retrievers.types import Document

CACHE_FORMAT = 1


class ResponseCache:
    """Answers of live systems, one SQLite file shared by processes (WAL), each row with a crc32 checked on read: a
    damaged row is one ``evalkit: cache:`` line and is asked again; a file SQLite calls damaged is set aside.
    ``stats``: hits, misses, written."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else cache_root() / "live" / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = {"hits": 0, "misses": 0, "written": 0}
        self._con: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._con is None:
            try:
                self._con = self._open()
            except sqlite3.DatabaseError as exc:
                aside = self.path.with_suffix(f".corrupt-{uuid.uuid4().hex[:8]}")
                print(f"evalkit: cache: {self.path} is corrupt ({exc}); moved aside to {aside.name}",
                      file=sys.stderr)
                with contextlib.suppress(OSError):
                    self.path.rename(aside)
                self._con = self._open()
        return self._con

    def _open(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")  # a cache: a power cut may lose the last answers, never corrupt
        con.execute("CREATE TABLE IF NOT EXISTS answers (k TEXT PRIMARY KEY, v BLOB NOT NULL, c INTEGER NOT NULL)")
        con.commit()
        return con

    def get(self, key: str) -> dict | None:
        row = self._db().execute("SELECT v, c FROM answers WHERE k = ?", (key,)).fetchone()
        if row is None:
            self.stats["misses"] += 1
            return None
        v, c = bytes(row[0]), int(row[1])
        try:
            if zlib.crc32(v, zlib.crc32(key.encode())) != c:
                raise ValueError("crc32 mismatch")
            val = json.loads(v)
        except ValueError as exc:
            print(f"evalkit: cache: {self.path} row {key[:12]}… is corrupt ({exc}); asking again", file=sys.stderr)
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return val

    def put(self, key: str, value: dict) -> None:
        v = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        con = self._db()
        con.execute("INSERT OR REPLACE INTO answers (k, v, c) VALUES (?, ?, ?)",
                    (key, v, zlib.crc32(v, zlib.crc32(key.encode()))))
        con.commit()
        self.stats["written"] += 1

    def delete(self, keys: list[str]) -> None:
        """Take answers back (a run that found them untrustworthy after caching them)."""
        if keys:
            con = self._db()
            con.executemany("DELETE FROM answers WHERE k = ?", [(k,) for k in keys])
            con.commit()

    def get_meta(self, key: str) -> dict | None:
        """A bookkeeping row (the version a system last reported), without counting a hit or a miss."""
        before = dict(self.stats)
        try:
            return self.get(key)
        finally:
            self.stats = before

    def put_meta(self, key: str, value: dict) -> None:
        before = dict(self.stats)
        self.put(key, value)
        self.stats = before

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
            self._con = None


def cache_key(*parts: Any) -> str:
    """The sha256 of ``parts`` (JSON, keys sorted) under the cache's format version: every key of the cache."""
    return hashlib.sha256(json.dumps([CACHE_FORMAT, *parts], sort_keys=True, default=str).encode()).hexdigest()


def doc_digest(d: Document) -> str:
    """The content of one document as a system receives it (what makes two corpora the same memory)."""
    return cache_key(d.id, d.title, d.text, d.path, d.created, d.timestamp, d.group, d.metadata)


def ingest_states(docs: list[Document]) -> list[str]:
    """``states[n]`` names the memory after the first ``n`` documents of ``docs`` went in (a chained hash)."""
    out = [cache_key("empty")]
    for d in docs:
        out.append(cache_key(out[-1], doc_digest(d)))
    return out



__all__ = ["ResponseCache", "cache_key", "doc_digest", "ingest_states", "CACHE_FORMAT"]
