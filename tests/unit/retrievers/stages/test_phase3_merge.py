"""fuse.phase3's one-loop pass merge (``merge_passes``, numba and plain Python) against the pass-by-pass numpy
merge it replaced (``merge_passes_numpy``), and its row order (``order_rows``) against ``order_rows_numpy``: the
same bits on random inputs full of ties, −0.0, few files, every early-stop rule and τ, and the not-finite route
handed back to numpy."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.kernels.registry import jit_kernel
from retrievers.stages.fuse.phase3 import merge_passes, merge_passes_numpy

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

RULES = {"off": 0, "converge": 1, "evidence": 2, "converge_or_evidence": 3}


def _inputs(seed: int, Q: int = 40, C: int = 11, P: int = 5):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, P + 1)
    pres = rng.random((n, Q, C)) < rng.uniform(0.1, 0.8)
    # coarse values: many exact ties between components, passes and columns; −0.0 beside 0.0
    nv = rng.choice([0.0, -0.0, 0.25, 0.5, 0.55, 0.75, 1.0], size=(n, Q, C))
    nf = rng.choice([0.0, 0.2, 0.5, 0.6, 0.75], size=(n, Q, C))
    boost = rng.choice([0.0, 0.05, 0.10, -0.10, -0.05], size=(Q, C))
    perm = np.argsort(rng.random((Q, C)), axis=1)
    rank = np.empty_like(perm)
    np.put_along_axis(rank, perm, np.broadcast_to(np.arange(C), perm.shape), axis=1)
    files = rng.integers(0, rng.integers(1, 5), size=(Q, C)).astype(np.int64)
    return pres, nv, nf, boost, (perm, rank), files


def _same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype.kind == b.dtype.kind and a.shape == b.shape
    assert a.tobytes() == b.tobytes()  # bit for bit: −0.0 and every max kept as numpy keeps it


@pytest.mark.parametrize("seed", range(12))
def test_merge_passes_equals_numpy_merge(seed):
    P, NV, NF, boost, tie, files = _inputs(seed)
    stops = 0
    for rule, code in RULES.items():
        for tau in (0.4, 0.5, 0.55, float("nan")):
            want = merge_passes_numpy(P, NV, NF, boost, tie, files, tau, rule)
            stops += int(want[4].sum())
            for fn in (merge_passes, jit_kernel(merge_passes)):
                *got, ok = fn(P, NV, NF, boost, tie[1], files, tau, code)
                assert ok
                for g, w in zip(got, want):
                    _same(g, w)
    assert stops > 0  # the early stop fired somewhere: the per-query pass cut-off is exercised


def test_not_finite_score_hands_back_to_numpy():
    P, NV, NF, boost, tie, files = _inputs(3)
    boost = boost.copy()
    boost[:, 0] = np.inf
    P = P.copy()
    P[0, :, 0] = True
    for fn in (merge_passes, jit_kernel(merge_passes)):
        assert not fn(P, NV, NF, boost, tie[1], files, 0.5, RULES["converge_or_evidence"])[-1]
        # the rule off reads no score: nothing to hand back
        assert fn(P, NV, NF, boost, tie[1], files, 0.5, RULES["off"])[-1]
    present, *_ = merge_passes_numpy(P, NV, NF, boost, tie, files, 0.5, "converge_or_evidence")
    assert present[:, 0].all()


@pytest.mark.parametrize("seed", range(12))
def test_order_rows_equals_numpy_order(seed):
    from retrievers.stages.fuse.phase3 import order_rows, order_rows_numpy
    P, NV, NF, boost, tie, files = _inputs(seed)
    present, nv, nf, base, *_ = merge_passes_numpy(P, NV, NF, boost, tie, files, 0.5, "converge_or_evidence")
    want = order_rows_numpy(present, nv, nf, base, boost, tie)
    assert (want[0] >= 0).sum() == present.sum() and want[0].shape[1] == present.sum(axis=1).max()
    got = order_rows(present, nv, nf, base, boost, tie[1])
    assert got is not None
    for g, w in zip(got, want):
        _same(g, w)
    bad = boost.copy()
    bad[present] = np.inf
    assert order_rows(present, nv, nf, base, bad, tie[1]) is None
    # no row at all: width 0
    got = order_rows(np.zeros_like(present), nv, nf, base, boost, tie[1])
    assert got is not None and got[0].shape == (present.shape[0], 0)


@pytest.mark.parametrize("seed", range(12))
def test_order_present_plain_equals_compiled(seed):
    """The shared insertion kernel as plain Python (no numba) and compiled: the same columns, ``keep`` cuts."""
    from retrievers.stages.helpers.signals import order_present
    P, NV, NF, boost, tie, files = _inputs(seed)
    present, nv, nf, base, *_ = merge_passes_numpy(P, NV, NF, boost, tie, files, 0.5, "converge_or_evidence")
    score = base + boost
    for keep in (present.shape[1], 3, 0):
        want, ok = order_present(present, score, base, tie[1], keep)
        got, ok2 = jit_kernel(order_present)(present, score, base, tie[1], keep)
        assert ok and ok2
        _same(got, want)
        assert got.shape[1] == min(keep, present.sum(axis=1).max())
