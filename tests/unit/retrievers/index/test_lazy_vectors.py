"""A lexical-only run loads no embedding model and embeds nothing: the shared index builds its vector side (MaxP
units, document vectors, query vectors) when a vector arm or a stage reading vectors first needs it — with the same
candidates and rankings as an index that built it up front."""
from __future__ import annotations

import numpy as np

from evalkit.data.readers.beir import load_beir
from evalkit.engine.runner import arm_map, shared_candidates
from retrievers.candidates.table import view
from retrievers.embed.model import Embedder, loaded_models
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import load_preset


def _run(idx, ds, preset):
    p = load_preset(preset)
    cs = shared_candidates(idx, ds.queries, [p])
    v = view(cs, arm_map(p))
    return v, p.run(v)


def test_bm25_only_embeds_nothing_and_loads_no_model(tiny, cache):
    ds = load_beir(tiny)
    emb = Embedder(cache_dir=cache)
    models_before = set(loaded_models())
    idx = SharedIndex(ds, embedder=emb, cache_dir=cache)
    cs, st = _run(idx, ds, "bm25")
    assert st.col.shape[0] == len(ds.queries) and (st.col >= 0).any()
    assert emb.texts_embedded == 0 and not emb.model_loaded and not idx.vectors_built
    assert set(loaded_models()) == models_before  # no model (not even its tokenizer) was loaded
    assert idx.stats["embedded_texts"] == 0 and idx.manifest()["units"] is None
    # a stage that reads vectors (or a vector arm) builds them on first use, once
    assert cs.qemb.shape == (len(ds.queries), emb.dim) and emb.texts_embedded == len(ds.queries)
    assert idx.corpus.embeddings.shape == (len(ds.documents), emb.dim) and idx.vectors_built
    assert emb.texts_embedded == len(ds.queries) + len(ds.documents)


def test_lazy_and_eager_indexes_rank_identically(tiny, cache):
    ds = load_beir(tiny)
    emb = Embedder(cache_dir=cache)
    eager = SharedIndex(ds, embedder=emb, cache_dir=cache)
    eager.ensure_vectors()
    lazy = SharedIndex(ds, embedder=emb, cache_dir=cache / "own")  # its own candidate cache: it searches itself
    for preset in ("bm25", "dense", "hybrid-rrf", "openclaw_core_2026_2_26_decay_mmr"):
        (ca, sa), (cb, sb) = _run(eager, ds, preset), _run(lazy, ds, preset)
        assert np.array_equal(ca.doc, cb.doc), preset
        assert np.array_equal(sa.col, sb.col) and np.array_equal(sa.score, sb.score, equal_nan=True), preset
    assert lazy.vectors_built and np.array_equal(lazy.unit_emb, eager.unit_emb)
    # and an index whose candidates all come from the cache and whose stages read no vectors never builds them
    cached = SharedIndex(ds, embedder=emb, cache_dir=cache)
    _run(cached, ds, "hybrid-rrf")
    assert not cached.vectors_built
