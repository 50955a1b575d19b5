"""The embedding vectors' on-disk store: :class:`EmbeddingCache`, an SQLite key → float32 vector table with a
checksum per row, shared by every process and clone using the cache folder (keys: :mod:`retrievers.embed.model`).

Usage::

    cache = EmbeddingCache(cache_root() / "embeddings" / "my-model.sqlite", dim=384)
    cache.put_many([(b"key", vector)])
    cache.get_many([b"key"])          # {b"key": vector}, checked
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import zlib
from pathlib import Path

import numpy as np

from retrievers import cachefile


class EmbeddingCache:
    """SQLite key → float32 vector store, shared by every process and clone using the cache folder.

    * Each row carries ``c = crc32(key + vector bytes)``, checked on every read: a damaged vector (or one that
      moved to another key) is reported in one line and recomputed, never returned. Rows written before the column
      existed (or by an older clone) have ``c`` NULL: they are accepted when they are plausible (whole float32s,
      finite, unit norm) and get their checksum then.
    * A damaged database file (SQLite says "malformed" or "not a database") is moved aside to ``<name>.corrupt``
      (with its ``-wal`` / ``-shm``) under a lock beside it, by the first process that notices, reported in one
      line, and started afresh: its vectors are recomputed as they are needed. Processes that still have the old
      file open notice that it was replaced and reopen.
    * Writes are SQLite transactions (WAL journal): a process killed in the middle of one leaves the database as
      it was before it.
    """

    def __init__(self, path: Path, dim: int | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.dim = dim
        self._local = threading.local()
        with cachefile.locked(self.path):  # creation is one step for other processes: never seen half-made
            if self.path.exists() and self.path.stat().st_size == 0 and not _nonempty(f"{self.path}-wal"):
                cachefile.report(self.path, "an empty file", "recomputing its vectors")
            try:
                self._init_schema()
                return
            except sqlite3.DatabaseError as exc:
                if not _damaged(exc):
                    raise
                why = str(exc)
        self._set_aside(why)

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60)
            self._local.con = con
            self._local.inode = os.stat(self.path).st_ino
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
        return con

    def _close(self) -> None:
        con = getattr(self._local, "con", None)
        self._local.con = None
        if con is not None:
            with contextlib.suppress(sqlite3.Error):
                con.close()

    def _init_schema(self) -> None:
        con = self._con()
        con.execute("CREATE TABLE IF NOT EXISTS emb (k BLOB PRIMARY KEY, v BLOB NOT NULL, c INTEGER)")
        if "c" not in [r[1] for r in con.execute("PRAGMA table_info(emb)")]:
            try:  # a cache from before row checksums
                con.execute("ALTER TABLE emb ADD COLUMN c INTEGER")
            except sqlite3.OperationalError as exc:  # another process added it first
                if "duplicate column" not in str(exc):
                    raise
        con.commit()

    def _guard(self, fn, *args):
        """``fn(*args)``; when SQLite finds the file damaged, replace it (:meth:`_set_aside`) and run it again."""
        try:
            return fn(*args)
        except sqlite3.DatabaseError as exc:
            if not _damaged(exc):
                raise
            self._set_aside(str(exc))
            return fn(*args)

    def _set_aside(self, why: str) -> None:
        inode = getattr(self._local, "inode", None)
        self._close()
        with cachefile.locked(self.path):
            try:
                same = os.stat(self.path).st_ino == inode
            except FileNotFoundError:
                same = False
            if same:  # nobody replaced it yet
                aside = self.path.with_name(self.path.name + ".corrupt")
                for suffix in ("", "-wal", "-shm"):
                    src = Path(f"{self.path}{suffix}")
                    if src.exists():
                        os.replace(src, Path(f"{aside}{suffix}"))
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(f"{aside}{suffix}")
                cachefile.report(self.path, why, f"moved aside to {aside.name}; recomputing its vectors")
            self._init_schema()

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of ``keys`` that pass their checks (a missing or damaged one is left out)."""
        return self._guard(self._get_many, keys)

    def _get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        bad, legacy = 0, []
        con = self._con()
        for i in range(0, len(keys), 900):
            part = keys[i:i + 900]
            q = f"SELECT k, v, c FROM emb WHERE k IN ({','.join('?' * len(part))})"
            for k, v, c in con.execute(q, part):
                k, crc = bytes(k), _row_crc(k, v)
                if c is None:
                    if not self._plausible(v):
                        bad += 1
                        continue
                    legacy.append((crc, k))
                elif c != crc:
                    bad += 1
                    continue
                out[k] = np.frombuffer(v, dtype=np.float32)
        if legacy:
            con.executemany("UPDATE emb SET c = ? WHERE k = ? AND c IS NULL", legacy)
            con.commit()
        if bad:
            cachefile.report(self.path, f"{bad} stored vector(s) fail their checksum", "recomputing them")
        return out

    def _plausible(self, v: bytes) -> bool:
        if len(v) % 4 or not v or (self.dim and len(v) != 4 * self.dim):
            return False
        x = np.frombuffer(v, dtype=np.float32).astype(np.float64)
        return bool(np.isfinite(x).all() and abs(float(np.sqrt(x @ x)) - 1.0) < 1e-3)

    def put_many(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        self._guard(self._put_many, items)

    def _put_many(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        rows = []
        for k, v in items:
            b = np.asarray(v, dtype=np.float32).tobytes()
            rows.append((k, b, _row_crc(k, b)))
        con = self._con()
        con.executemany("INSERT OR REPLACE INTO emb (k, v, c) VALUES (?, ?, ?)", rows)
        self._commit(con)

    def _commit(self, con: sqlite3.Connection) -> None:
        con.commit()

    def __len__(self) -> int:
        return self._guard(lambda: self._con().execute("SELECT COUNT(*) FROM emb").fetchone()[0])


SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """SQLite found the file damaged ("malformed", "not a database"), as opposed to busy, full, read-only …"""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def _nonempty(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def _row_crc(k: bytes, v: bytes) -> int:
    return zlib.crc32(v, zlib.crc32(k))
