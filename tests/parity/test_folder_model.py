"""A plain model folder read without sentence-transformers (:mod:`retrievers.embed.folder_model`, what the
``openvino`` backend uses once its compiled model is kept) against sentence-transformers itself: the transformer's
inputs equal on every LoCoMo document and question (and on edge cases: blank, padded, non-ASCII, a URL, past the
window), the MaxP tokenizer's ids equal, and the OpenVINO vectors bit for bit equal — for the shipped folder and for a
user's folder as sentence-transformers 6 writes it (mean pooling, with and without Normalize)."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from evalkit.data.registry import load_dataset
from retrievers.embed.backends import openvino_available
from retrievers.embed.folder_model import FolderModel, plain_folder
from retrievers.embed.loading import cache_root, content_digest, load_model, load_tokenizer, model_path
from tests.helpers import tiny_bert

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not openvino_available(), reason="openvino is not installed")]

EDGE = ["", "   ", " leading space", "trailing  \n", "https://example.com/figure.png", "Ünïcödé — “quotes” 日本語 🙂",
        "tab\tseparated\tvalues", "The heat pump defrost cycle runs every forty minutes. " * 60]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _same_inputs(st, fm, texts: list[str], batch: int = 512) -> None:
    for i in range(0, len(texts), batch):
        a, b = st.preprocess(texts[i:i + batch]), fm.preprocess(texts[i:i + batch])
        for k in INPUTS:
            assert torch.equal(a[k], b[k]), (k, i)


def _same_vectors(st, fm, texts: list[str], cache, digest: str, own_cache=None) -> None:
    """The OpenVINO vectors through sentence-transformers and through the folder model: the latter with the compiled
    model imported from ``cache``, and (``own_cache``) converted by itself into an empty one."""
    from retrievers.embed.openvino import OpenVinoSentenceEncoder
    via_st = OpenVinoSentenceEncoder(st, cache=cache, digest=digest).encode(texts)
    via_fm = OpenVinoSentenceEncoder(fm, cache=cache, digest=digest).encode(texts)
    assert via_fm.shape == via_st.shape and np.array_equal(via_fm, via_st)
    if own_cache is not None:
        converted = OpenVinoSentenceEncoder(fm, cache=own_cache, digest=digest)
        assert list(own_cache.glob("*.ekc")) and np.array_equal(converted.encode(texts), via_st)


def test_the_shipped_folder_gives_sentence_transformers_inputs_and_vectors_bit_for_bit():
    path = model_path()
    st, fm = load_model(path, 256, "torch"), FolderModel(path, 256, load_tokenizer(path))
    ds = load_dataset("locomo")
    texts = list(dict.fromkeys([d.text for d in ds.documents] + [q.text for q in ds.queries])) + EDGE
    _same_inputs(st, fm, texts)
    assert st.tokenizer(texts, add_special_tokens=False)["input_ids"] == \
        fm.tokenizer(texts, add_special_tokens=False)["input_ids"]  # MaxP splitting counts the same pieces
    sample = random.Random(7).sample(texts, 300) + EDGE
    _same_vectors(st, fm, sample, cache_root() / "openvino", content_digest(path))
    assert fm.get_sentence_embedding_dimension() == 384 and fm.normalize


@pytest.mark.parametrize("normalize", [True, False])
def test_a_user_folder_written_by_sentence_transformers_6_gives_its_vectors_bit_for_bit(tmp_path, normalize):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    modules = [Transformer(str(tiny_bert(tmp_path)), max_seq_length=64), Pooling(64, "mean")]
    folder = tmp_path / "my-model"
    SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu").save(str(folder))
    assert plain_folder(str(folder))
    st = SentenceTransformer(str(folder), device="cpu")
    st.max_seq_length = 64
    fm = FolderModel(str(folder), 64, load_tokenizer(str(folder)))
    texts = list(dict.fromkeys(d.text for d in load_dataset("memory-workspace").documents))[:60] + EDGE
    _same_inputs(st, fm, texts)
    _same_vectors(st, fm, texts, tmp_path / "openvino", "t" * 20, own_cache=tmp_path / "own")
    assert fm.get_sentence_embedding_dimension() == 64 and fm.normalize is normalize
