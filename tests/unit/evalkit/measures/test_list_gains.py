"""measures.arrays.list_gains (the metrics' one-pass grades, cumulative hits and DCG, numba and plain Python)
against the numpy passes it replaced: the same bits on random compact lists with padding and repeated grades."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.measures.arrays import list_gains
from retrievers.candidates.table import take_rows
from retrievers.kernels.registry import jit_kernel

pytestmark = pytest.mark.kernels


def _numpy(c, gain, disc):
    G = np.where(c >= 0, take_rows(gain, np.where(c >= 0, c, 0)), 0.0)
    return G, np.cumsum(G > 0, axis=1, dtype=np.float64), np.cumsum(G / disc, axis=1), (c >= 0).sum(axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_list_gains_equals_numpy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        Q, C = int(rng.integers(1, 8)), int(rng.integers(1, 30))
        K = int(rng.integers(0, C + 1))
        gain = np.where(rng.random((Q, C)) < 0.3, rng.choice([1.0, 2.0, 3.0], size=(Q, C)), 0.0)
        n = rng.integers(0, K + 1, size=Q)
        c = np.full((Q, K), -1, dtype=np.int64)
        for q in range(Q):
            c[q, :n[q]] = rng.permutation(C)[:n[q]]
        disc = np.log2(np.arange(K) + 2.0)
        want = _numpy(c, gain, disc)
        for fn in (list_gains, jit_kernel(list_gains)):
            got = fn(c, gain, disc)
            for g, w in zip(got, want):
                assert g.dtype.kind == w.dtype.kind and g.shape == w.shape
                assert g.tobytes() == w.tobytes()
