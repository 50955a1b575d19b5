"""Where a shared index's Chroma collection lives, and how it is opened, checked and built safely.

Measured with chromadb 1.5.9 (the reasons for the design):

* Two processes building the same collection in one ``PersistentClient`` folder at once: in 4 of 4 trials one
  of them died with a traceback (``NotFoundError: Error in compaction`` / ``InternalError: Missing metadata
  segment``): each saw the other's half-built collection, deleted it and rebuilt. Different collections built at
  once in one folder, and a process reading a collection another process finished, were fine.
* Opening a collection writes to its ``chroma.sqlite3`` (an ``acquire_write`` row); the HNSW segment files are
  not touched after the build.
* Damaged files: 16 bytes overwritten in ``header.bin`` or ``link_lists.bin`` crashed the opening process
  (SIGSEGV); ``data_level0.bin`` truncated to half or overwritten in the middle still answered a probe of the
  first 20 records (wrong vectors for the others); a damaged ``chroma.sqlite3`` changed ``count()`` (2,930 of
  4,000 …) or raised. A probe query alone is therefore not enough, and a crash cannot be caught.

So, embedded (``backend="chroma"``): one folder per collection, ``$EVALKIT_CACHE/chroma-collections/<name>/``.
It is built under an exclusive lock (``<name>.lock``; another process wanting the same collection waits, then
opens the finished one) in a temporary folder beside it, closed, given a manifest of the size and sha256 of every
file except ``chroma.sqlite3`` (which Chroma writes on open), fsynced and renamed into place — so the folder
exists only complete. Opening it checks, before Chroma reads a byte: the manifest, every digest, SQLite's
``PRAGMA quick_check`` on ``chroma.sqlite3``; then, through Chroma, the caller's ``verify`` (record count, the
"complete" flag, probe queries that must find their own record). Any failure, including any exception, is one
line on stderr and a rebuild under the lock; the damaged folder is removed.

Server (``backend="chroma-http"``): the collection is built under a temporary name and renamed to its real name
when complete (``modify(name=…)``, which the server refuses when the name exists: the loser of a race drops its
copy and uses the winner's); opening runs the same ``verify``. Every call goes through :meth:`ChromaStore.call`,
which turns a server that stopped answering into one :class:`ChromaUnavailable` line naming its URL.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

from retrievers import cachefile
from retrievers.types import DataError

LOCAL_DIR = "chroma-collections"
MANIFEST = "evalkit-collection.json"
_LOCAL_CLIENTS: dict[str, object] = {}


class ChromaUnavailable(DataError):
    """The Chroma server stopped answering during a run (one line; finished work is cached)."""


class ChromaFailed(DataError):
    """Chroma refused a call in the middle of a run (e.g. a collection another client just dropped)."""


def chroma_settings():
    from chromadb.config import Settings  # lazy: startup
    return Settings(anonymized_telemetry=False, allow_reset=False)


def _connection_lost(exc: BaseException) -> bool:
    try:
        import httpx  # lazy: optional-dep
        if isinstance(exc, httpx.TransportError):
            return True
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        pass
    return isinstance(exc, (ConnectionError, TimeoutError))


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:100]}" if text else type(exc).__name__


class ChromaStore:
    """One collection (``name``) of the embedded store under ``cache_dir`` or of the server at ``url``.

    :meth:`open` returns ``(collection, built)``; ``build(collection, max_batch)`` fills a new collection and
    marks it complete, ``verify(collection)`` returns why an existing one is unusable (``None`` = good)."""

    def __init__(self, name: str, cache_dir: Path, url: str | None = None, configuration: dict | None = None):
        self.name = name
        self.url = url
        self.configuration = configuration or {}
        self.root = Path(cache_dir) / LOCAL_DIR
        self.folder = self.root / name
        self._client = None

    # ---- the one wrapper around every Chroma call --------------------------------------------------------
    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``; a lost server connection becomes one :class:`ChromaUnavailable` line, any
        other error Chroma raises one :class:`ChromaFailed` line (never a traceback)."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if self.url and _connection_lost(exc):
                raise ChromaUnavailable(
                    f"the Chroma server at {self.url} stopped answering ({type(exc).__name__}); finished work is "
                    f"cached: start the server again and rerun the same command") from None
            from chromadb.errors import ChromaError  # lazy: optional-dep
            if isinstance(exc, ChromaError):
                raise ChromaFailed(f"Chroma ({self.url or self.folder}, collection {self.name}) failed: "
                                   f"{_why(exc)}") from None
            raise

    def open(self, build, verify):
        return self._open_server(build, verify) if self.url else self._open_local(build, verify)

    def drop(self) -> None:
        """Delete the persisted collection (tests, ``--rebuild``)."""
        if self.url:
            with contextlib.suppress(Exception):
                self._server_client().delete_collection(self.name)
            return
        _close_local(self.folder)
        with cachefile.locked(self.folder):
            shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        """Release this process's client of the embedded folder (its HNSW index leaves memory)."""
        if not self.url:
            _close_local(self.folder)

    # ---- embedded: one verified folder per collection ---------------------------------------------------
    def _open_local(self, build, verify):
        col, _ = self._try_local(verify)
        if col is not None:
            return col, False
        with cachefile.locked(self.folder):
            col, why = self._try_local(verify)  # another process may have built or repaired it while we waited
            if col is not None:
                return col, False
            if why:
                cachefile.report(self.folder, why, "rebuilding")
            self._build_local(build)
            col, why = self._try_local(verify)
            if col is None:
                raise DataError(f"the Chroma collection just built at {self.folder} fails its check ({why})")
            return col, True

    def _try_local(self, verify):
        """(collection, None) when the folder is complete and sound; (None, why) when it is damaged; (None, None)
        when there is none."""
        if not self.folder.exists():
            return None, None
        why = check_folder(self.folder)
        if why:
            return None, why
        try:
            col = _local_client(self.folder).get_collection(self.name)
        except Exception as exc:  # noqa: BLE001 - anything Chroma raises on a damaged folder means "rebuild"
            col, why = None, _why(exc)
        else:
            why = self._check(verify, col)
        if why:
            _close_local(self.folder)
            return None, why
        return col, None

    def _build_local(self, build) -> None:
        """Build into a temporary folder, seal it with a manifest, rename it into place (the lock is held)."""
        import chromadb  # lazy: startup
        self.root.mkdir(parents=True, exist_ok=True)
        for old in self.root.glob(f".{self.name}.tmp-*"):  # left by a killed build (nobody else holds the lock)
            shutil.rmtree(old, ignore_errors=True)
        _close_local(self.folder)
        if self.folder.exists():  # damaged: out of the way first, so no reader can open it any more
            aside = self.root / f".{self.name}.damaged-{uuid.uuid4().hex[:8]}"
            os.rename(self.folder, aside)
            shutil.rmtree(aside, ignore_errors=True)
        tmp = self.root / f".{self.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            client = chromadb.PersistentClient(path=str(tmp), settings=chroma_settings())
            col = client.create_collection(self.name, configuration=self.configuration, embedding_function=None,
                                           metadata={"complete": 0})
            build(col, client.get_max_batch_size())
            client.close()
            seal_folder(tmp)
            os.rename(tmp, self.folder)
            cachefile.fsync_dir(self.root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    # ---- server ----------------------------------------------------------------------------------------------
    def _server_client(self):
        if self._client is None:
            import chromadb  # lazy: startup
            host, _, port = self.url.split("://")[-1].partition(":")
            try:
                client = chromadb.HttpClient(host=host, port=int(port or 8000), settings=chroma_settings())
                client.heartbeat()
            except Exception as exc:  # noqa: BLE001 - any connection problem is one clear line
                raise DataError(f"cannot reach the Chroma server at {self.url}: {type(exc).__name__}") from None
            self._client = client
        return self._client

    def _open_server(self, build, verify):
        client = self._server_client()
        try:
            col = self.call(client.get_collection, self.name)
        except ChromaUnavailable:
            raise
        except Exception:  # noqa: BLE001 - not there (chroma raises various "not found" types across versions)
            col = None
        if col is not None:
            why = self._check(verify, col)
            if why is None:
                return col, False
            cachefile.report(f"Chroma collection {self.name} at {self.url}", why, "rebuilding")
            self._quietly(client.delete_collection, self.name)
        col = self.call(client.create_collection, f"{self.name}-tmp-{uuid.uuid4().hex[:8]}",
                        configuration=self.configuration, embedding_function=None, metadata={"complete": 0})
        try:
            build(col, self.call(client.get_max_batch_size))
        except BaseException:
            self._quietly(client.delete_collection, col.name)
            raise
        try:
            self.call(col.modify, name=self.name)
            return col, True
        except ChromaUnavailable:
            raise
        except Exception:  # noqa: BLE001 - the name was taken meanwhile: another client finished first
            self._quietly(client.delete_collection, col.name)
        col = self.call(client.get_collection, self.name)
        why = self._check(verify, col)
        if why:
            raise DataError(f"the Chroma collection {self.name} at {self.url} fails its check ({why})")
        return col, False

    def _check(self, verify, col) -> str | None:
        """``verify(col)``, any exception but a lost server being a reason to rebuild."""
        try:
            return verify(col)
        except ChromaUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001
            return _why(exc)

    def _quietly(self, fn, *args) -> None:
        """A clean-up call whose failure does not matter (unless the server is gone)."""
        try:
            self.call(fn, *args)
        except ChromaUnavailable:
            raise
        except Exception:  # noqa: BLE001
            pass


# ---- embedded folders: clients, manifest ----------------------------------------------------------------------

def _local_client(folder: Path):
    key = str(folder)
    client = _LOCAL_CLIENTS.get(key)
    if client is None:
        import chromadb  # lazy: startup
        client = _LOCAL_CLIENTS[key] = chromadb.PersistentClient(path=key, settings=chroma_settings())
    return client


def _close_local(folder: Path) -> None:
    client = _LOCAL_CLIENTS.pop(str(folder), None)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()


def _sealed_files(folder: Path) -> list[Path]:
    """Files the manifest covers: everything Chroma does not rewrite when it opens the folder."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST
                  and not p.name.startswith("chroma.sqlite3"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def seal_folder(folder: Path) -> None:
    """Write the manifest (size + sha256 of every sealed file) and fsync everything in ``folder``."""
    files = {str(p.relative_to(folder)): [p.stat().st_size, _sha256(p)] for p in _sealed_files(folder)}
    if not (folder / "chroma.sqlite3").exists():
        raise DataError(f"Chroma wrote no chroma.sqlite3 in {folder}")
    (folder / MANIFEST).write_text(json.dumps({"files": files}, sort_keys=True))
    for p in folder.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for d in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
        cachefile.fsync_dir(d)


def check_folder(folder: Path) -> str | None:
    """Why ``folder`` is not a sound sealed collection folder (``None`` = sound), without opening Chroma."""
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
    except FileNotFoundError:
        return "no manifest: its build never finished"
    except Exception as exc:  # noqa: BLE001 - a damaged manifest
        return f"unreadable manifest: {type(exc).__name__}"
    present = {str(p.relative_to(folder)) for p in _sealed_files(folder)}
    if present != set(files):
        return f"files differ from its manifest ({len(set(files) - present)} missing, {len(present - set(files))} extra)"
    for rel, (size, digest) in sorted(files.items()):
        p = folder / rel
        if p.stat().st_size != size:
            return f"{rel}: {p.stat().st_size} bytes, expected {size}"
        if _sha256(p) != digest:
            return f"{rel}: checksum mismatch"
    db = folder / "chroma.sqlite3"
    if not db.exists() or db.stat().st_size == 0:
        return "chroma.sqlite3 is missing or empty"
    try:
        con = sqlite3.connect(db, timeout=60)
        try:
            result = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return f"chroma.sqlite3: {exc}"
    if result != "ok":
        return f"chroma.sqlite3: {result.splitlines()[0][:80]}"
    return None
