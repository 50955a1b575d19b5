"""Latency mode measures a memory store of one user's size (issue 22): with ``IndexSettings.exact_below`` a group
(visible set) of at most that many vector units is searched exactly in numpy and the Chroma collection is never
opened; the hits equal the exact backend's. Under ``--backend hnsw``, 0 keeps HNSW for every group."""
from __future__ import annotations

import numpy as np

from evalkit.data.readers.beir import load_beir
from retrievers.embed.model import Embedder
from retrievers.index.shared import LATENCY_EXACT_BELOW, IndexSettings, SharedIndex
from tests.helpers import write_tiny_beir


def test_groups_below_the_threshold_are_searched_exactly(tmp_path):
    ds = load_beir(write_tiny_beir(tmp_path / "tiny"))
    cache = tmp_path / "cache"
    emb = Embedder(cache_dir=cache, backend="torch", progress=False)
    small = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="hnsw", exact_below=LATENCY_EXACT_BELOW), cache_dir=cache)
    exact = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="exact"), cache_dir=cache)
    hnsw = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="hnsw"), cache_dir=cache)
    q = [x for x in ds.queries]
    qemb = emb.encode([x.text for x in q])
    groups = [x.group for x in q]
    got = small.vector_search(qemb, groups, 5)
    want = exact.vector_search(qemb, groups, 5)
    for (d1, s1), (d2, s2) in zip(got, want):
        assert np.array_equal(d1, d2) and np.allclose(s1, s2)
    assert small._collection is None  # never opened Chroma
    hnsw.vector_search(qemb, groups, 5)
    assert hnsw._collection is not None  # exact_below=0: HNSW as before
    hnsw.close()
