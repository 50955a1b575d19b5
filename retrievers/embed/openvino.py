"""A sentence-transformers model's transformer run on OpenVINO: the ``openvino`` embedding backend (the default when
``openvino`` is installed).

* **convert** (nothing downloaded): the model's transformer module (``model[0].auto_model``, ``last_hidden_state``
  out) converted in-process by ``openvino.convert_model`` from the torch module with a probe batch as example input,
  dynamic batch and sequence axes; compiled for the CPU with ``INFERENCE_PRECISION_HINT`` ``bf16`` when the CPU has
  native bfloat16 (:func:`retrievers.embed.bf16.cpu_has_bf16`), else ``f32``, on as many threads as the machine has
  cores (``PERFORMANCE_HINT`` ``LATENCY``: one request at a time, all threads on it).
* **kept** (:func:`compiled_model`): converting and compiling cost 3 s alone and 14-32 s on a loaded machine, in
  every process. The compiled model is exported (``CompiledModel.export_model``) into one verified cache entry
  (:mod:`retrievers.cachefile`: atomic, checksummed; a bad entry is said once and rebuilt) under
  ``$EVALKIT_CACHE/openvino/``, keyed by the sha256 of the model folder's files, the input names, the compile
  configuration (precision, threads), the CPU (model name and flags: a compiled model is for one instruction set)
  and the versions of openvino, torch, transformers and sentence-transformers; the next process imports it
  (``Core.import_model``, ~0.2 s) and gives bit-identical vectors (tested).
* **let go between corpora** (:meth:`OpenVinoSentenceEncoder.release_runtime`): after a corpus the compiled model
  and the kernels the CPU plugin built per input shape are ~570 MB of the process that nothing needs until the next
  corpus; the embedder lets them go after every large embedding and the next batch imports the model again from
  its cache entry (same bits).
* **encode** (:class:`OpenVinoSentenceEncoder`): the same equal-length batching as ``bf16``
  (:class:`retrievers.embed.bf16.EqualLengthEncoder`: no pad position ever reaches the transformer, so a vector
  depends only on its text), the transformer on OpenVINO, then the model's own sentence-transformers modules after
  the transformer (Pooling, Dense, Normalize … as its ``modules.json`` declares them) in torch float32, so a user's
  own model folder works as it would in sentence-transformers. A plain folder (Transformer → mean Pooling →
  Normalize: the shipped model's kind, :func:`retrievers.embed.folder_model.plain_folder`) is read without
  sentence-transformers (:class:`retrievers.embed.folder_model.FolderModel`: its tokenizer and the same pooling,
  the same bits): a process whose compiled model is kept never imports it (~10 s and ~500 MB); converting imports it.
* **int8** (the ``openvino-int8`` backend, opt-in; ``int8=True``): the converted model quantised by NNCF
  post-training quantisation (:func:`quantize`: int8 weights and activations in the transformer's matrix products,
  the rest at the precision above) before it is compiled. Activation ranges are calibrated on
  :func:`calibration_texts` (the shipped memory-workspace notes and questions, in file order: the same model on
  every machine). The quantised compiled model is kept like the float one, its key also covering
  :func:`quantisation_spec` (settings, calibration texts' digest, nncf's version). Less CPU per word piece, further
  from float32 than bf16 (measured: docs/embedding.md), hence not the default.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import threading
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from retrievers import cachefile
from retrievers.embed.bf16 import EqualLengthEncoder, cpu_has_bf16

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: input shapes whose CPU kernels OpenVINO keeps (its default 5,000 held GBs: see OpenVinoSentenceEncoder)
RUNTIME_CACHE = 16


def precision() -> str:
    """``bf16`` when the CPU has native bfloat16 arithmetic, else ``f32`` (OpenVINO's inference precision hint)."""
    return "bf16" if cpu_has_bf16() else "f32"


def convert(st_model, names: list[str]):
    """The OpenVINO model of ``st_model``'s transformer (a SentenceTransformer, or a
    :class:`~retrievers.embed.folder_model.FolderModel`, whose weights are loaded now): inputs ``names`` (int64, any
    batch and length), output its last hidden state."""
    import openvino as ov  # lazy: optional-dep
    import torch  # lazy: optional-dep

    class HiddenStates(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask=None, token_type_ids=None):  # the names of INPUTS
            given = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return self.m(**{n: given[n] for n in names}, return_dict=True).last_hidden_state

    load = getattr(st_model, "load_sentence_transformer", None)  # a FolderModel: its weights, loaded for this only
    st_model = load() if load is not None else st_model
    feats = st_model.preprocess(["an export probe sentence", "a second, longer export probe sentence here"])
    with torch.inference_mode(), warnings.catch_warnings():  # the tracer's notes on constants in the mask
        warnings.simplefilter("ignore")
        return ov.convert_model(HiddenStates(st_model[0].auto_model.eval()),
                                example_input={n: feats[n] for n in names},
                                input=[(n, [-1, -1], ov.Type.i64) for n in names])


LIBRARIES = ("openvino", "torch", "transformers", "sentence-transformers")


def cpu_identity(cpuinfo: str | None = None) -> str:
    """The CPU's model name and instruction-set flags (first processor of ``/proc/cpuinfo``): what a compiled model
    depends on beyond its configuration."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    keep = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "flags") and key.strip() not in keep:
            keep[key.strip()] = " ".join(sorted(value.split()))
    return json.dumps(keep, sort_keys=True)


def cache_key(content_digest: str, names: list[str], config: dict, cpuinfo: str | None = None,
              quant: dict | None = None) -> str:
    """The cache key of a compiled model: sha256 over the model folder's content digest, the input names, the compile
    configuration, :func:`cpu_identity` and the versions of :data:`LIBRARIES` (20 hex digits); for an int8 model
    also ``quant`` (:func:`quantisation_spec`: the settings, the calibration texts' digest, nncf's version)."""
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = version(lib)
        except PackageNotFoundError:
            versions[lib] = None
    spec = {"model": content_digest, "inputs": list(names), "config": {k: str(v) for k, v in config.items()},
            "cpu": cpu_identity(cpuinfo), "versions": versions}
    if quant is not None:  # absent for bf16 / f32: their keys stay what they were
        spec["int8"] = quant
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]


#: the shipped texts int8 calibration runs on (in the repository, so the same on every machine): a workspace's notes
#: and the questions asked of them, long and short — not a dataset whose numbers are references
CALIBRATION = Path(__file__).resolve().parents[2] / "datasets" / "memory-workspace"
CALIBRATION_QUERIES = 100
#: NNCF post-training quantisation settings (:func:`quantize`): the transformer model type (attention's own matrix
#: products and LayerNorm stay in floating point), the mixed preset (asymmetric activations: GELU's outputs are
#: mostly negative or small), SmoothQuant and fast bias correction at NNCF's defaults
QUANT_SETTINGS = {"model_type": "transformer", "preset": "mixed", "subset": "all"}


def calibration_texts(folder: Path = CALIBRATION, n_queries: int = CALIBRATION_QUERIES) -> list[str]:
    """The int8 calibration texts, deterministically: every document of ``folder/corpus.jsonl`` in file order, then
    the first ``n_queries`` of ``folder/queries.jsonl`` (229 + 100 for the shipped memory workspace)."""
    out = []
    for name, limit in (("corpus.jsonl", None), ("queries.jsonl", n_queries)):
        with open(folder / name, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        out.extend(" ".join(x for x in (r.get("title") or "", r.get("text") or "") if x) for r in rows[:limit])
    return out


def quantisation_spec(texts: list[str]) -> dict:
    """What an int8 model depends on beyond the float model (part of its :func:`cache_key`): the settings, the
    calibration texts' sha256 and nncf's version."""
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:20]
    try:
        nncf_version = version("nncf")
    except PackageNotFoundError:
        nncf_version = None
    return dict(QUANT_SETTINGS, calibration=digest, n=len(texts), nncf=nncf_version)


def quantize(model, st_model, names: list[str], texts: list[str]):
    """``model`` (:func:`convert`) with int8 weights and activations in its matrix products: NNCF post-training
    quantisation (:data:`QUANT_SETTINGS`), activation ranges calibrated on ``texts`` one text at a time (each
    unpadded, as :class:`retrievers.embed.bf16.EqualLengthEncoder` runs them)."""
    import nncf  # lazy: optional-dep
    logging.getLogger("nncf").setLevel(logging.ERROR)  # its notes
    feeds = []
    for t in texts:
        f = st_model.preprocess([t])
        feeds.append({n: f[n].numpy().astype(np.int64, copy=False) for n in names})
    with contextlib.redirect_stdout(io.StringIO()):  # its progress bars (rich, on stdout: a run's output stays clean)
        return nncf.quantize(model, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER,
                             preset=nncf.QuantizationPreset.MIXED, subset_size=len(feeds))


def cache_entry(cache: Path | None, digest: str, names: list[str], config: dict, quant: dict | None = None) -> Path | None:
    """The cache file of a compiled model, ``cache/<model>-<key>.ekc`` (:func:`cache_key`); None when nothing is
    kept (no ``cache`` or no ``digest``)."""
    if cache is None or not digest:
        return None
    return Path(cache) / f"{digest[:12]}-{cache_key(digest, names, config, quant=quant)}{cachefile.SUFFIX}"


def compiled_model(st_model, names: list[str], config: dict, cache: Path | None = None, digest: str = "",
                   int8: bool = False, calibration: list[str] | None = None):
    """The OpenVINO CPU model of ``st_model``'s transformer compiled with ``config`` (``int8``: quantised first,
    :func:`quantize` on ``calibration``, default :func:`calibration_texts`): imported from the cache entry
    (:func:`cache_entry`) when there is a good one, else converted, compiled and stored there (``cache`` None or no
    ``digest``: converted and compiled, nothing kept). A corrupt entry is said in one line and rebuilt; an entry
    this openvino cannot import (say, written by another build) likewise."""
    import openvino as ov  # lazy: optional-dep
    core = ov.Core()
    texts = (calibration_texts() if calibration is None else list(calibration)) if int8 else []
    entry = cache_entry(cache, digest, names, config, quantisation_spec(texts) if int8 else None)
    if entry is not None:
        blob = cachefile.read(entry, check=lambda b: None if isinstance(b, bytes) else "not a compiled model")
        if blob is not None:
            try:
                return core.import_model(blob, "CPU", config)
            except Exception as exc:  # noqa: BLE001 - a verified entry openvino refuses: rebuild it
                cachefile.report(entry, f"cannot be imported: {type(exc).__name__}")
    model = convert(st_model, names)
    if int8:
        model = quantize(model, st_model, names, texts)
    compiled = core.compile_model(model, "CPU", config)
    if entry is not None:
        stream = io.BytesIO()
        compiled.export_model(stream)
        cachefile.write(entry, stream.getvalue())
    return compiled


class OpenVinoSentenceEncoder(EqualLengthEncoder):
    """SentenceTransformer-like ``encode`` with the transformer on OpenVINO (see the module docstring). ``cache`` /
    ``digest``: where the compiled model is kept and the model folder's content digest (:func:`compiled_model`);
    ``int8``: the matrix products quantised to int8 (the ``openvino-int8`` backend; the rest runs at ``hint``),
    calibrated on ``calibration`` (default :func:`calibration_texts`).

    Usage (it loads and quantises the model, so not a doctest; tests/unit/retrievers/embed/test_openvino.py runs
    it)::

        enc = OpenVinoSentenceEncoder(load_model(model_path(), 256, "torch"), int8=True)
        enc.precision, enc.encode(["a note"]).shape  # ('int8+bf16', (1, 384)) on a CPU with bfloat16
    """

    def __init__(self, st_model, hint: str | None = None, threads: int | None = None, cache: Path | None = None,
                 digest: str = "", int8: bool = False, calibration: list[str] | None = None):
        self.st = st_model
        probe = st_model.preprocess(["probe"])
        self.input_names = [n for n in INPUTS if n in probe]
        hint = hint or precision()
        self.precision = f"int8+{hint}" if int8 else hint
        self.threads = threads or os.cpu_count() or 1
        # RUNTIME_CACHE: the CPU plugin keeps the kernels it builds for each input shape (default: the last 5,000
        # shapes); equal-length batching meets a new (batch, length) shape at almost every batch, so a bench's RSS
        # grew by GBs with its corpora (96 shapes of up to 64 × 256: +1.62 GiB; 16 kept: +0.72 GiB, the same bits)
        self.config = {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY",
                       "INFERENCE_NUM_THREADS": self.threads, "CPU_RUNTIME_CACHE_CAPACITY": RUNTIME_CACHE}
        self._build = dict(cache=cache, digest=digest, int8=int8, calibration=calibration)
        self.compiled = compiled_model(st_model, self.input_names, self.config, **self._build)
        self._request = self.compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request, used by one thread at a time
        self.releases = 0  # times release_runtime() let the compiled model go (it comes back from the cache)

    def release_runtime(self) -> bool:
        """Let the compiled model, its infer request and the kernels the CPU plugin built for each input shape go,
        when the compiled model can come back from its cache entry (:func:`compiled_model`: an import, ~0.2 s, the
        same vectors bit for bit); the next :meth:`forward` brings it back. True when released (or already out).

        Why: after a corpus those kernels and buffers are the model's largest part and nothing needs them until the
        next corpus (a run's queries are a few small shapes). Measured on 1,500 texts of 3-220 words (float32, the
        2-core AVX2 VM): RSS 1,184 MB after the embedding and a heap trim, 615 MB once released. The embedder calls
        it after every embedding of :data:`retrievers.embed.model.RELEASE_AFTER` texts or more."""
        with self._lock:
            if self._request is None:
                return True
            texts = [] if not self._build["int8"] else (
                calibration_texts() if self._build["calibration"] is None else list(self._build["calibration"]))
            entry = cache_entry(self._build["cache"], self._build["digest"], self.input_names, self.config,
                                quantisation_spec(texts) if self._build["int8"] else None)
            if entry is None or not entry.is_file():
                return False  # nothing to import it from: converting again would cost seconds to minutes
            self._request = self.compiled = None
            self.releases += 1
            return True

    def infer(self, feed: dict) -> np.ndarray:
        """The transformer's last hidden state for one batch ``feed`` (a copy: the request reuses its buffer); the
        compiled model is imported again first if :meth:`release_runtime` let it go."""
        with self._lock:
            if self._request is None:
                self.compiled = compiled_model(self.st, self.input_names, self.config, **self._build)
                self._request = self.compiled.create_infer_request()
            return np.array(self._request.infer(feed)[0], dtype=np.float32)

    def forward(self, batch: dict, n_tokens: int = 0):
        import torch  # lazy: optional-dep
        feed = {n: batch[n].numpy().astype(np.int64, copy=False) for n in self.input_names}
        hidden = self.infer(feed)
        pool = getattr(self.st, "pool", None)  # a FolderModel: its pooling without sentence-transformers
        if pool is not None:
            return pool(torch.from_numpy(hidden), batch["attention_mask"])
        feats = dict(batch, token_embeddings=torch.from_numpy(hidden))
        for module in list(self.st)[1:]:
            feats = module(feats)
        return feats["sentence_embedding"]
