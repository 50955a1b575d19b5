"""The scale section's synthetic store: the same store for the same seed, whatever the chunking (the pinned
fingerprints are those of the generator before it was made compact), and its stand-in embedder hands the index the
generated matrix itself."""
from __future__ import annotations

import hashlib

import numpy as np

import evalkit.perf.scale_store as scale_store
from evalkit.perf.scale_store import GeneratedEmbedder, generate

# generate(1000, 20, seed=7): Dataset.content_hash(), sha256 of the note vectors and of the query vectors (16 hex),
# as the generator wrote them before it shared floats / paths / metadata and normalised chunk by chunk
PINNED = ("8f3e887492cdc034", "5fa2a0925fc32d4a", "00d97052e8485cf3")


def _fingerprint(ds, emb, qemb):
    return (ds.content_hash(), hashlib.sha256(emb.tobytes()).hexdigest()[:16],
            hashlib.sha256(qemb.tobytes()).hexdigest()[:16])


def test_the_store_of_a_seed_is_pinned_and_does_not_depend_on_the_chunk_size(monkeypatch):
    ds, emb, qemb = generate(1000, 20, seed=7)
    assert _fingerprint(ds, emb, qemb) == PINNED
    assert emb.dtype == np.float32 and emb.flags.c_contiguous and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-6)
    monkeypatch.setattr(scale_store, "CHUNK", 128)  # 8 chunks, the last one short
    assert _fingerprint(*generate(1000, 20, seed=7)) == PINNED
    assert _fingerprint(*generate(1000, 20, seed=8)) != PINNED


def test_the_stand_in_embedder_returns_the_matrix_for_the_corpus_and_looks_up_anything_else():
    ds, emb, qemb = generate(300, 5, seed=3)
    fake = GeneratedEmbedder(ds, emb, qemb, "t")
    corpus = [d.full_text for d in ds.documents]
    assert fake.encode(corpus) is emb  # the corpus in order: no copy of the vectors
    assert fake._rows is None  # and no text -> row table built for it
    mixed = [ds.queries[2].text, corpus[17], corpus[0]]
    assert np.array_equal(fake.encode(mixed), np.stack([qemb[2], emb[17], emb[0]]))
    shuffled = corpus[::-1]
    assert np.array_equal(fake.encode(shuffled), emb[::-1])
