"""The ONNX Runtime embedding backend (issue 22, opt-in): vectors within cosine 0.9999 of sentence-transformers on
torch (short, long = truncated, whitespace-padded texts), a cache key of its own (a torch vector is never served to
the ONNX embedder, nor the other way), and the export's place in the cache keyed by the weights.

The model is a small randomly initialised BERT saved as a sentence-transformers folder (the shipped model's
tokenizer, 2 layers of width 64): the export and the fused graph are the same machinery as for all-MiniLM-L6-v2,
at a fraction of the cost of exporting it on a cold cache (about a minute on 2 cores). ``make perf`` compares the
shipped model itself on the three backends."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.embed.model import Embedder, default_backend, onnx_available, onnx_folder
from tests.helpers import tiny_bert

TEXTS = ["Which VLAN are the IoT devices on?", "  padded with spaces  ",
         "The heat pump defrost cycle runs every forty minutes. " * 60,  # > 256 word pieces: truncated
         "Grandma's lasagne uses ricotta, not béchamel; bake 45 minutes at 180 °C."]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    root = tmp_path_factory.mktemp("tiny")
    base = tiny_bert(root)
    tr = Transformer(str(base), max_seq_length=256)
    st = SentenceTransformer(modules=[tr, Pooling(64, "mean"), Normalize()], device="cpu")
    st.save(str(root / "tiny-bert"))
    return str(root / "tiny-bert")


def test_onnx_vectors_match_torch_and_never_share_its_cache(tmp_path, tiny_model, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path))
    assert onnx_available() and default_backend() != "onnx"  # ONNX is opt-in (no measured speed-up here)
    onnx = Embedder(tiny_model, cache_dir=tmp_path, backend="onnx", progress=False)
    torch_ = Embedder(tiny_model, cache_dir=tmp_path, backend="torch", progress=False)
    assert onnx.backend == "onnx" and onnx.model_id == torch_.model_id + ":onnx-O2"
    a = torch_.encode(TEXTS)
    b = onnx.encode(TEXTS)
    assert onnx.model_calls == 1 and onnx.texts_embedded == len(TEXTS)  # nothing came from torch's rows
    cos = np.sum(a * b, axis=1)
    assert cos.min() >= 0.9999, cos
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5) and b.dtype == np.float32 and b.shape[1] == 64
    again = Embedder(tiny_model, cache_dir=tmp_path, backend="onnx", progress=False)
    assert np.array_equal(again.encode(TEXTS), b) and again.model_calls == 0


def test_onnx_export_is_cached_by_weights_and_sealed(tmp_path, tiny_model, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path))
    folder = onnx_folder(tiny_model)
    assert folder.parent == tmp_path / "onnx"
    assert (folder / "complete").is_file() and (folder / "model_O2.onnx").is_file()
    mtime = (folder / "model_O2.onnx").stat().st_mtime_ns
    assert onnx_folder(tiny_model) == folder  # the same weights: the same sealed export, not a new one
    assert (folder / "model_O2.onnx").stat().st_mtime_ns == mtime
