"""The seeded random draws the paired tests resample with (:mod:`evalkit.measures.paired`,
:mod:`evalkit.measures.intervals`): random sign vectors in {-1, +1}^n (the randomisation test: ``1 - 2 * B`` with ``B``
uniform bits) and multinomial bootstrap counts (``n`` queries resampled with replacement, probability ``1/n`` each),
both from ``numpy.random.default_rng(seed)``, drawn in row blocks of at most ``_MAX_BLOCK_ELEMENTS`` entries — and the
cache that keeps a matrix of up to ``CACHE_MAX_ELEMENTS`` entries for the next call with the same ``n`` (reports test
many pairs per ``n``). Cached or not, the numbers are the same: a matrix is always drawn in the same blocks."""
from __future__ import annotations

import numpy as np

_MAX_BLOCK_ELEMENTS = 2_000_000  # sign / count matrices are drawn in row blocks of at most this many entries
CACHE_MAX_ELEMENTS = 8_000_000  # matrices up to this size (64 MB) are kept for the next call with the same n
_CACHE: dict[tuple, np.ndarray] = {}


def cache_clear() -> None:
    """Forget the cached sign-flip / resampling matrices (they are redrawn, identically, on the next call)."""
    _CACHE.clear()


def _sign_blocks(n: int, count: int, seed: int):
    rng = np.random.default_rng(seed)
    block = max(1, min(count, _MAX_BLOCK_ELEMENTS // max(1, n)))
    done = 0
    while done < count:
        k = min(block, count - done)
        yield 1.0 - 2.0 * rng.integers(0, 2, size=(k, n), dtype=np.int8)
        done += k


def _count_blocks(n: int, count: int, seed: int):
    rng = np.random.default_rng(seed)
    block = max(1, min(count, _MAX_BLOCK_ELEMENTS // max(1, n)))
    probs = np.full(n, 1.0 / n)
    done = 0
    while done < count:
        k = min(block, count - done)
        yield rng.multinomial(n, probs, size=k).astype(np.float64)
        done += k


def random_blocks(kind: str, n: int, count: int, seed: int):
    """Row blocks of random sign vectors or bootstrap counts; the same numbers whether cached or not (a
    matrix is always drawn in the same blocks), kept for reuse when small (reports test many pairs per n)."""
    gen = _sign_blocks if kind == "signs" else _count_blocks
    key = (kind, n, count, seed)
    if key in _CACHE:
        yield _CACHE[key]
        return
    if n * count > CACHE_MAX_ELEMENTS:
        yield from gen(n, count, seed)
        return
    mat = np.concatenate(list(gen(n, count, seed)))
    for old in [k for k in _CACHE if k[0] == kind][1:]:  # keep at most two matrices per kind
        del _CACHE[old]
    _CACHE[key] = mat
    yield mat
