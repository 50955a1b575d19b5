"""A sentence-transformers model's transformer run on OpenVINO: the ``openvino`` embedding backend (the default when
``openvino`` is installed).

* **convert** (once per process, ~3 s, nothing downloaded): the model's transformer module (``model[0].auto_model``,
  ``last_hidden_state`` out) converted in-process by ``openvino.convert_model`` from the torch module with a probe
  batch as example input, dynamic batch and sequence axes; compiled for the CPU with ``INFERENCE_PRECISION_HINT``
  ``bf16`` when the CPU has native bfloat16 (:func:`retrievers.embed.bf16.cpu_has_bf16`), else ``f32``, on as many
  threads as the machine has cores (``PERFORMANCE_HINT`` ``LATENCY``: one request at a time, all threads on it).
  Converting per process costs less than caching the IR would save: the torch model must be loaded anyway
  (tokeniser and the modules after the transformer).
* **encode** (:class:`OpenVinoSentenceEncoder`): the same equal-length batching as ``bf16``
  (:class:`retrievers.embed.bf16.EqualLengthEncoder`: no pad position ever reaches the transformer, so a vector
  depends only on its text), the transformer on OpenVINO, then the model's own sentence-transformers modules after
  the transformer (Pooling, Dense, Normalize … as its ``modules.json`` declares them) in torch float32, so a user's
  own model folder works as it would in sentence-transformers.
"""
from __future__ import annotations

import os
import threading
import warnings

import numpy as np

from retrievers.embed.bf16 import EqualLengthEncoder, cpu_has_bf16

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def precision() -> str:
    """``bf16`` when the CPU has native bfloat16 arithmetic, else ``f32`` (OpenVINO's inference precision hint)."""
    return "bf16" if cpu_has_bf16() else "f32"


def convert(st_model, names: list[str]):
    """The OpenVINO model of ``st_model``'s transformer: inputs ``names`` (int64, any batch and length), output its
    last hidden state."""
    import openvino as ov  # lazy: optional-dep
    import torch  # lazy: optional-dep

    class HiddenStates(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask=None, token_type_ids=None):  # the names of INPUTS
            given = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return self.m(**{n: given[n] for n in names}, return_dict=True).last_hidden_state

    feats = st_model.preprocess(["an export probe sentence", "a second, longer export probe sentence here"])
    with torch.inference_mode(), warnings.catch_warnings():  # the tracer's notes on constants in the mask
        warnings.simplefilter("ignore")
        return ov.convert_model(HiddenStates(st_model[0].auto_model.eval()),
                                example_input={n: feats[n] for n in names},
                                input=[(n, [-1, -1], ov.Type.i64) for n in names])


class OpenVinoSentenceEncoder(EqualLengthEncoder):
    """SentenceTransformer-like ``encode`` with the transformer on OpenVINO (see the module docstring)."""

    def __init__(self, st_model, hint: str | None = None, threads: int | None = None):
        import openvino as ov  # lazy: optional-dep
        self.st = st_model
        probe = st_model.preprocess(["probe"])
        self.input_names = [n for n in INPUTS if n in probe]
        self.precision = hint or precision()
        self.threads = threads or os.cpu_count() or 1
        self.compiled = ov.Core().compile_model(convert(st_model, self.input_names), "CPU", {
            "INFERENCE_PRECISION_HINT": self.precision, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": self.threads})
        self._request = self.compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request, used by one thread at a time

    def forward(self, batch: dict, n_tokens: int = 0):
        import torch  # lazy: optional-dep
        feed = {n: batch[n].numpy().astype(np.int64, copy=False) for n in self.input_names}
        with self._lock:
            hidden = np.array(self._request.infer(feed)[0], dtype=np.float32)  # a copy: the request reuses its buffer
        feats = dict(batch, token_embeddings=torch.from_numpy(hidden))
        for module in list(self.st)[1:]:
            feats = module(feats)
        return feats["sentence_embedding"]
