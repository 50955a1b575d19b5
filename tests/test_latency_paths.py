"""Latency-mode fast paths give exactly what the general paths give (issue 8: per-query latency)."""
import numpy as np
import pytest

import retrievers.index as index_mod
from evalkit.data.beir import load_beir
from retrievers.embed import Embedder
from retrievers.index import SharedIndex
from tests.test_index import cache, tiny  # noqa: F401 - fixtures


@pytest.fixture()
def idx(tiny, cache):
    ds = load_beir(tiny)
    return ds, SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)


def _same(a, b):
    assert len(a) == len(b)
    for (d1, s1), (d2, s2) in zip(a, b):
        assert d1.dtype == d2.dtype and list(d1) == list(d2)
        assert np.array_equal(s1, s2)


@pytest.mark.parametrize("depth", [1, 3, 50])
def test_group_filter_by_record_ids_equals_metadata_filter(idx, monkeypatch, depth):
    ds, index = idx
    assert len(index.group_names) > 1
    qemb = index.embed_queries([q.text for q in ds.queries])
    groups = [q.group for q in ds.queries]
    assert "ids" in index._group_filter(groups[0])
    by_ids = index.vector_search(qemb, groups, depth)
    monkeypatch.setattr(index_mod, "ID_FILTER_MAX", 0)  # every group above the limit: metadata filter
    assert "where" in index._group_filter(groups[0])
    by_where = index.vector_search(qemb, groups, depth)
    _same(by_ids, by_where)
    # one query at a time (latency mode) = the batch (quality mode)
    _same([index.vector_search(qemb[i:i + 1], [g], depth)[0] for i, g in enumerate(groups)], by_ids)
