"""measures.arrays.has_copies (the metrics' cheap "does any list hold a copy" check, numba and plain Python)
against a set per row, on random short lists with padding."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.measures.arrays import has_copies
from retrievers.kernels.registry import jit_kernel

pytestmark = pytest.mark.kernels


@pytest.mark.parametrize("seed", range(6))
def test_has_copies_matches_a_set_per_row(seed):
    rng = np.random.default_rng(seed)
    seen = set()
    for _ in range(200):
        Q, K = int(rng.integers(1, 6)), int(rng.integers(0, 12))
        col = rng.integers(-1, int(rng.integers(2, 40)), size=(Q, K)).astype(np.int64)
        want = any(len([x for x in row if x >= 0]) != len({x for x in row if x >= 0}) for row in col.tolist())
        seen.add(want)
        for fn in (has_copies, jit_kernel(has_copies)):
            assert fn(col) is want or bool(fn(col)) == want
    assert seen == {True, False}
    # padding repeated is no copy
    assert not jit_kernel(has_copies)(np.array([[4, -1, -1, -1]], dtype=np.int64))
