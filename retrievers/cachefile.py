"""Verified, atomic cache files: what every pickle cache under ``$EVALKIT_CACHE`` is written and read with.

The caches are shared by clones and by processes running at the same time (``make bench`` beside a notebook),
and they live on disks where processes get killed and files get truncated. Three rules make that safe:

* **Atomic.** An entry is written to a unique temporary name beside it (``.<name>.<random>.tmp``), flushed and
  fsynced, then renamed over the final name (``os.replace``); the folder is fsynced too. A reader sees the old
  entry, the new one, or none — never a half-written one — and two writers of the same entry never share a
  temporary file. A temporary file left by a killed writer is removed by a later write of that entry once it is
  an hour old (a live writer of the same entry may still be using a younger one).
* **Verified.** The file is ``MAGIC + sha256(payload) + len(payload) + payload``: a reader checks all of it
  before unpickling, so a truncated file or bytes overwritten in the middle are caught as such, not by whatever
  the unpickler happens to do with them.
* **Said once, then recomputed.** A bad entry is reported in one line on stderr
  (``evalkit: cache: <path> is corrupt (<why>); recomputing``) and the caller recomputes and rewrites it.

:func:`locked` is an exclusive ``fcntl.flock`` on a lock file beside an entry, for backends that cannot be
written atomically by a rename (the embedding SQLite file when it has to be replaced, a Chroma folder while it
is built). A lock held by a process that dies is released by the kernel.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pickle
import struct
import sys
import time
import uuid
from pathlib import Path

MAGIC = b"evalkit-cache/1\n"
# Entries are named ``*.ekc``, not ``*.pkl``: a clone on older code sharing the cache looks for its plain pickles
# under the old names and never meets this format.
SUFFIX = ".ekc"
_HEAD = len(MAGIC) + 32 + 8
STALE_TEMP_SECONDS = 3600
_reported: set[tuple[str, str]] = set()


class CorruptCache(Exception):
    """A cache entry failed its checks; the message says why in a few words."""


def report(what, why: str, action: str = "recomputing", state: str = "is corrupt") -> None:
    """The one stderr line for a bad cache entry (once per entry and reason per process)."""
    key = (str(what), why)
    if key in _reported:
        return
    _reported.add(key)
    print(f"evalkit: cache: {what} {state} ({why}); {action}", file=sys.stderr, flush=True)


def wrap(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload


def unwrap(raw: bytes) -> bytes:
    """The payload of a :func:`wrap` ped file, or :class:`CorruptCache` saying what is wrong with it."""
    return bytes(_checked(raw))


def _checked(raw: bytes) -> memoryview:
    """:func:`unwrap` as a view of ``raw`` (no copy of the payload: a 10^6-note BM25 index is ~0.5 GB)."""
    head = raw[:len(MAGIC)]
    if head != MAGIC[:len(head)]:
        raise CorruptCache("bad header")
    if len(raw) < _HEAD:
        raise CorruptCache(f"truncated to {len(raw)} bytes")
    digest = raw[len(MAGIC):len(MAGIC) + 32]
    (n,) = struct.unpack("<Q", raw[len(MAGIC) + 32:_HEAD])
    payload = memoryview(raw)[_HEAD:]
    if len(payload) != n:
        raise CorruptCache(f"truncated: {len(payload)} of {n} payload bytes")
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptCache("checksum mismatch")
    return payload


def write_payload(fh, data: bytes, path: Path) -> None:
    """Write the bytes of entry ``path`` to its temporary file ``fh`` (one call, so a fault test can stop a
    process half-way through it)."""
    fh.write(data)


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically and durably (unique temp name, fsync, rename, fsync the folder).
    ``durable=False`` skips both fsyncs: still atomic for every reader, but a power cut may lose the entry (or leave
    a torn one, which :func:`read` rejects) — for entries that are cheap to ask again and written many times a
    second (the answer cache: an fsync costs milliseconds to tens of milliseconds on a busy disk)."""
    _atomic_write(path, lambda fh: write_payload(fh, data, Path(path)), durable)


def _atomic_write(path: Path, fill, durable: bool) -> None:
    """:func:`atomic_write_bytes` with the temporary file written by ``fill(fh)``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
    try:
        with open(tmp, "xb") as fh:  # a name no other writer uses; permissions from the umask, as any file
            fill(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


class _Sink:
    """The file object a pickle is streamed into: every piece goes to the file (through :func:`write_payload`) and
    into the running sha256 and length of the payload, so the pickle is never held in memory whole."""

    def __init__(self, fh, path: Path):
        self.fh, self.path, self.sha, self.n = fh, path, hashlib.sha256(), 0

    def write(self, data) -> int:
        # bytes, or a PickleBuffer (a numpy array's memory, protocol 5): its bytes, not a copy
        view = data.raw() if isinstance(data, pickle.PickleBuffer) else memoryview(data).cast("B")
        self.sha.update(view)
        self.n += len(view)
        write_payload(self.fh, view, self.path)
        return len(view)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temps(path: Path) -> None:
    cutoff = time.time() - STALE_TEMP_SECONDS
    for p in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if p.stat().st_mtime < cutoff:
                p.unlink()


def write(path: Path, obj, durable: bool = True) -> None:
    """Pickle ``obj`` into a verified cache file at ``path`` (atomic; ``durable``: see :func:`atomic_write_bytes`).
    The pickle is streamed to the file behind a placeholder header, then the header (as :func:`wrap` writes it) is
    written in its place: no copy of the payload in memory (a 10^6-note BM25 index is ~0.4 GB)."""

    def fill(fh) -> None:
        fh.write(bytes(_HEAD))
        sink = _Sink(fh, Path(path))
        pickle.dump(obj, sink, protocol=pickle.HIGHEST_PROTOCOL)
        fh.seek(0)
        fh.write(MAGIC + sink.sha.digest() + struct.pack("<Q", sink.n))
        fh.seek(0, os.SEEK_END)

    _atomic_write(path, fill, durable)


def read(path: Path, check=None):
    """The object cached at ``path``; ``None`` when there is none or it is bad (then one line on stderr, and the
    caller recomputes it). ``check(obj)`` may return a reason to reject a well-formed entry (wrong shape)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        report(path, f"unreadable: {exc.strerror or type(exc).__name__}")
        return None
    try:
        obj = pickle.loads(_checked(raw))
    except CorruptCache as exc:
        report(path, str(exc))
        return None
    except Exception as exc:  # noqa: BLE001 - a verified payload this code cannot load (e.g. from another version)
        report(path, f"cannot be loaded: {type(exc).__name__}")
        return None
    why = check(obj) if check else None
    if why:
        report(path, why)
        return None
    return obj


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created beside ``path``) for the ``with`` body."""
    lock = Path(f"{path}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
