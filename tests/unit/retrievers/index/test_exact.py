"""Exact vector search (retrievers/index/exact.py): equal to a float64 brute force, the same bits whatever the batch."""
import numpy as np
import pytest

from retrievers.index import exact


def _unit(rng, n, d=384):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(q, vectors, unit_doc, cols, depth):
    """Independent reference: float64 scores of every visible unit, best unit per document, sort by (-score, doc)."""
    cols = np.arange(len(vectors)) if cols is None else np.asarray(cols)
    s = vectors[cols].astype(np.float64) @ q.astype(np.float64)
    best: dict[int, float] = {}
    for d, v in zip(unit_doc[cols].tolist(), s.tolist()):
        best[d] = max(best.get(d, -np.inf), v)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
    return [d for d, _ in ranked], np.array([v for _, v in ranked])


@pytest.mark.parametrize("per_doc", [1, 3])
def test_exact_equals_float64_brute_force_with_visibility_and_maxp(per_doc):
    rng = np.random.default_rng(7)
    n_docs = 400
    unit_doc = np.repeat(np.arange(n_docs), per_doc)
    vectors = _unit(rng, len(unit_doc))
    q = _unit(rng, 20)
    cols = [None if i % 3 == 0 else np.flatnonzero(rng.random(len(unit_doc)) < 0.4) for i in range(len(q))]
    depths = [1, 10, 50, 1000] * 5
    got = exact.search(q, vectors, unit_doc, cols, depths)
    for i, (docs, scores) in enumerate(got):
        want_docs, want_scores = _brute(q[i], vectors, unit_doc, cols[i], depths[i])
        assert docs.tolist() == want_docs
        np.testing.assert_allclose(scores, want_scores, rtol=0, atol=1e-12)


def test_same_bits_whatever_the_batch_and_ties_by_document():
    rng = np.random.default_rng(3)
    vectors = _unit(rng, 3000)
    vectors[10] = vectors[20] = vectors[5]  # three documents tied exactly
    q = _unit(rng, 70)
    q[0] = vectors[5]
    unit_doc = np.arange(len(vectors))
    all_at_once = exact.search(q, vectors, unit_doc, [None] * len(q), [25] * len(q))
    one_by_one = [exact.search(q[i:i + 1], vectors, unit_doc, [None], [25])[0] for i in range(len(q))]
    for (d1, s1), (d2, s2) in zip(all_at_once, one_by_one):
        assert d1.tolist() == d2.tolist() and s1.tobytes() == s2.tobytes()
    assert all_at_once[0][0][:3].tolist() == [5, 10, 20]


def test_block_rows_bounds_memory_and_depends_on_group_size_only():
    assert exact.block_rows(1000) == exact.MAX_BLOCK
    assert exact.block_rows(1_000_000) * 1_000_000 <= exact.BLOCK_CELLS
    assert exact.block_rows(10 ** 9) == 1


def test_empty_visible_set_and_zero_depth():
    rng = np.random.default_rng(1)
    vectors = _unit(rng, 10)
    got = exact.search(_unit(rng, 2), vectors, np.arange(10), [np.zeros(0, np.int64), None], [5, 0])
    assert [len(d) for d, _ in got] == [0, 0]


@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 4096, 100_003])
def test_kth_largest_equals_a_full_partition(n):
    rng = np.random.default_rng(n)
    s = rng.standard_normal(n).astype(np.float32)
    s[rng.integers(0, n, n // 3)] = s[0]  # ties
    for k in sorted({1, 2, 10, 100, n // 2 or 1, n}):
        if k <= n:
            assert exact.kth_largest(s, k) == np.partition(s, n - k)[n - k]


@pytest.mark.parametrize("cells", [exact.BLOCK_CELLS, 24 * 300, 24 * 37])  # one tile; ~12; ~100 (CHUNK-wide)
@pytest.mark.parametrize("per_doc", [1, 3])
def test_prefix_search_equals_gathered_search_and_brute_force_bit_for_bit(per_doc, cells, monkeypatch):
    """The visibility-order prefix path gives the documents and the bits of the gathered path (and of float64 brute
    force) over the same visible units, whatever the rows' order and prefixes, and however many tiles the units
    are cut into."""
    monkeypatch.setattr(exact, "BLOCK_CELLS", cells)
    rng = np.random.default_rng(11)
    n_docs = 1200
    unit_doc = np.repeat(rng.permutation(n_docs), per_doc)  # a visibility order: documents in any order
    vectors = _unit(rng, len(unit_doc))
    vectors[7 * per_doc:8 * per_doc] = vectors[:per_doc]  # two documents tied exactly
    q = _unit(rng, 24)
    q[0] = vectors[0]
    ends = np.arange(1, n_docs + 1) * per_doc
    prefixes = rng.integers(0, n_docs + 1, len(q))
    prefixes[:3] = [n_docs, 8, 0]
    limits = [int(ends[p - 1]) if p else 0 for p in prefixes]
    depths = [10, 1, 5] + [int(d) for d in rng.choice([1, 10, 100, 5000], len(q) - 3)]
    starts = None if per_doc == 1 else ends - per_doc
    got = exact.search_prefix(q, vectors, unit_doc, limits, depths, starts)
    # unit_doc must be non-decreasing for the gathered path: relabel documents by first appearance
    relabel = np.empty(n_docs, dtype=np.int64)
    relabel[unit_doc[::per_doc]] = np.arange(n_docs)
    back = unit_doc[::per_doc]
    gathered = exact.search(q, vectors, relabel[unit_doc], [np.arange(lim) for lim in limits], depths)
    one_by_one = [exact.search_prefix(q[i:i + 1], vectors, unit_doc, limits[i:i + 1], depths[i:i + 1], starts)[0]
                  for i in range(len(q))]
    for i, ((d1, s1), (d2, s2), (d3, s3)) in enumerate(zip(got, gathered, one_by_one)):
        assert sorted(d1.tolist()) == sorted(back[d2].tolist()) and d1.tolist() == d3.tolist()
        assert s1.tobytes() == s3.tobytes() and sorted(s1.tolist()) == sorted(s2.tolist())
        want_docs, want_scores = _brute(q[i], vectors, unit_doc, np.arange(limits[i]), depths[i])
        assert d1.tolist() == want_docs
        np.testing.assert_allclose(s1, want_scores, rtol=0, atol=1e-12)
    assert got[0][0][:2].tolist() == sorted([unit_doc[0], unit_doc[7 * per_doc]])  # exact tie: by document
    assert got[2][0].size == 0
