"""The ONNX Runtime embedding backend (issue 22): vectors within cosine 0.9999 of sentence-transformers on torch
(short, long = truncated at 256 pieces, whitespace-padded texts), a cache key of its own (a torch vector is never
served to the ONNX embedder, nor the other way), and the export's place in the cache keyed by the weights."""
from __future__ import annotations

import numpy as np

from retrievers.embed import Embedder, default_backend, model_path, onnx_available, onnx_folder

TEXTS = ["Which VLAN are the IoT devices on?", "  padded with spaces  ",
         "The heat pump defrost cycle runs every forty minutes. " * 60,  # > 256 word pieces: truncated
         "Grandma's lasagne uses ricotta, not béchamel; bake 45 minutes at 180 °C."]


def test_onnx_vectors_match_torch_and_never_share_its_cache(tmp_path):
    assert onnx_available() and default_backend() != "onnx"  # ONNX is opt-in (no measured speed-up here)
    onnx = Embedder(cache_dir=tmp_path, backend="onnx", progress=False)
    torch_ = Embedder(cache_dir=tmp_path, backend="torch", progress=False)
    assert onnx.backend == "onnx" and onnx.model_id == torch_.model_id + ":onnx-O2"
    a = torch_.encode(TEXTS)
    b = onnx.encode(TEXTS)
    assert onnx.model_calls == 1 and onnx.texts_embedded == len(TEXTS)  # nothing came from torch's rows
    cos = np.sum(a * b, axis=1)
    assert cos.min() >= 0.9999, cos
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5) and b.dtype == np.float32
    again = Embedder(cache_dir=tmp_path, backend="onnx", progress=False)
    assert np.array_equal(again.encode(TEXTS), b) and again.model_calls == 0


def test_onnx_export_is_cached_by_weights_and_sealed():
    folder = onnx_folder(model_path())
    assert (folder / "complete").is_file() and (folder / "model_O2.onnx").is_file()
    assert onnx_folder(model_path()) == folder  # the same weights: the same sealed export, not a new one
