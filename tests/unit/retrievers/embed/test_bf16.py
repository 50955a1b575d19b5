"""The bf16 embedding backend (issue 22): vectors within cosine 0.9999 of the float32 reference, a vector that depends
only on its text (alone, in a batch of mixed lengths, after a cache round trip: bit for bit), the default chosen from
the CPU's flags, and a cache key of its own."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.embed.bf16 import SMALL_BATCH_TOKENS, cpu_has_bf16
from retrievers.embed.model import Embedder, default_backend, load_model, model_path

TEXTS = ["Which VLAN are the IoT devices on?", "  padded with spaces  ",
         "The heat pump defrost cycle runs every forty minutes. " * 60,  # > 256 word pieces: truncated
         "Grandma's lasagne uses ricotta, not béchamel; bake 45 minutes at 180 °C.",
         "Vitamin D deficiency is associated with an increased risk of tuberculosis in HIV-infected adults, a "
         "cohort study of 1,200 patients in Tanzania found; supplementation did not change mortality.",
         "ok"]

ZEN4 = "processor\t: 0\nflags\t\t: fpu vme avx512f avx512_bf16 avx512_vnni\n"
OLDER = "processor\t: 0\nflags\t\t: fpu vme avx2 avx512f avx512_vnni\n"


@pytest.fixture(scope="module")
def bf16_or_skip():
    if not cpu_has_bf16():
        pytest.skip("this CPU has no native bfloat16 (bf16 would be emulated: slow, and not the default here)")


def test_default_backend_follows_the_cpu_flags(monkeypatch):
    monkeypatch.delenv("EVALKIT_EMBED_BACKEND", raising=False)
    assert cpu_has_bf16(ZEN4) and not cpu_has_bf16(OLDER) and not cpu_has_bf16("")
    assert cpu_has_bf16("flags\t: sse2 amx_bf16 amx_tile\n")
    assert not cpu_has_bf16("model name\t: avx512_bf16 in a name, not a flag\nflags\t: sse2\n")
    assert default_backend(ZEN4, openvino=False) == "bf16" and default_backend(OLDER, openvino=False) == "torch"
    monkeypatch.setenv("EVALKIT_EMBED_BACKEND", "torch")  # the fp32 reference on request
    assert default_backend(ZEN4, openvino=True) == "torch"


def test_bf16_and_torch_never_share_a_cache_key(tmp_path):
    bf = Embedder(cache_dir=tmp_path, backend="bf16", progress=False)
    fp = Embedder(cache_dir=tmp_path, backend="torch", progress=False)
    assert bf.model_id == fp.model_id + ":bf16" and bf.describe()["backend"] == "bf16"
    assert bf.key("same text") != fp.key("same text") and bf.cache.path != fp.cache.path


def test_bf16_vectors_match_float32(bf16_or_skip):
    fp = load_model(model_path(), 256, "torch").encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    bf = load_model(model_path(), 256, "bf16").encode(TEXTS)
    cos = np.sum(fp * bf, axis=1)
    assert cos.min() >= 0.9999, cos
    assert bf.dtype == np.float32 and np.allclose(np.linalg.norm(bf, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(fp, bf)  # it really ran in bfloat16


def test_a_bf16_vector_depends_only_on_its_text(tmp_path, bf16_or_skip):
    model = load_model(model_path(), 256, "bf16")
    batch = model.encode(TEXTS, batch_size=4)
    for i, t in enumerate(TEXTS):
        assert np.array_equal(model.encode([t])[0], batch[i]), t  # alone == among mixed lengths
    assert np.array_equal(model.encode(TEXTS[::-1], batch_size=2)[::-1], batch)
    twins = ["alpha beta gamma", "delta epsilon zeta"]  # the same token length: one batch, no padding
    assert len(set(model.token_lengths(twins))) == 1
    assert np.array_equal(model.encode(twins)[1], model.encode(twins[1:])[0])
    full = [f"Report {i} on the defrost cycle of heat pump model {7 * i}. " * 40 for i in range(17)]  # 17 x 256
    assert set(model.token_lengths(full)) == {256} and 17 * 256 >= SMALL_BATCH_TOKENS  # torch's threads, not one
    assert np.array_equal(model.encode(full)[[0, 16]], model.encode([full[0], full[16]]))  # ... == one thread
    emb = Embedder(cache_dir=tmp_path, backend="bf16", progress=False)
    cold = emb.encode(TEXTS[2:] + ["an extra companion text of yet another length"])[:len(TEXTS) - 2]
    assert np.array_equal(cold, batch[2:]) and emb.model_calls == 1
    warm = Embedder(cache_dir=tmp_path, backend="bf16", progress=False)
    assert np.array_equal(warm.encode(TEXTS), batch) and warm.texts_embedded == 2  # only the 2 new ones
    assert np.array_equal(warm.encode(TEXTS), batch) and warm.texts_embedded == 2  # round trip: bit for bit
