"""The sweep fast paths against plain reference implementations (random inputs full of ties, NaN, ±inf, −0.0
and empty slots): numba greedy MMR and cosine deferral, State.sort / desc_perm, memoised effective ranks and
the Phase-3 / two-stage orderings."""
from __future__ import annotations

import math

import numpy as np
import pytest

from retrievers.candidates.table import (
    INSERTION_MAX_WIDTH,
    State,
    argsort_desc_perm,
    desc_perm,
    insertion_desc_perm,
)
from retrievers.kernels.registry import jit_kernel
from retrievers.stages.diversity import defer_loop, greedy_select, picks_first

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

NEG = -math.inf


def _f(x: float) -> float:
    return NEG if math.isnan(x) else float(x)


def ref_greedy(valid, rel, raw, sim, lam, raw_tiebreak, first_fixed=False, max_select=None):
    """Greedy MMR written out per query with Python lists and floats."""
    Q, K = valid.shape
    out = []
    for q in range(Q):
        cand = [i for i in range(K) if valid[q, i]]
        steps = K if max_select is None else min(K, max_select)
        picks: list[int] = []
        while len(picks) < min(steps, len(cand)):
            if not picks and first_fixed:
                picks.append(cand[0])
                continue
            best, best_key = None, None
            for i in cand:
                if i in picks:
                    continue
                sims = [0.0 if math.isnan(sim[q, j, i]) else float(sim[q, j, i]) for j in picks]
                pen = max(sims) if sims else 0.0
                pen = 0.0 if pen == NEG else pen
                m = lam * _f(rel[q, i]) - (1.0 - lam) * pen
                m = NEG if math.isnan(m) else m
                key = (m, _f(raw[q, i]) if raw_tiebreak else 0.0)
                if best_key is None or key > best_key:
                    best, best_key = i, key
            picks.append(best)
        rest = [i for i in cand if i not in picks]
        out.append(picks + rest + [i for i in range(K) if not valid[q, i]])
    return np.array(out, dtype=np.int64).reshape(Q, K)


def ref_defer(valid, sim, threshold):
    """lancedb-pro applyMMRDiversity written out per query."""
    Q, K = valid.shape
    out = []
    for q in range(Q):
        sel, deferred = [], []
        for i in range(K):
            if not valid[q, i]:
                continue
            if any(sim[q, i, j] > threshold for j in sel):
                deferred.append(i)
            else:
                sel.append(i)
        out.append(sel + deferred + [i for i in range(K) if not valid[q, i]])
    return np.array(out, dtype=np.int64).reshape(Q, K)


def ref_desc(key, valid):
    """Stable sort by key descending (NaN = −inf), valid rows first, per row with Python's sorted."""
    out = []
    for q in range(key.shape[0]):
        rows = [i for i in range(key.shape[1]) if valid[q, i]]
        rows = sorted(rows, key=lambda i: -_f(key[q, i]))
        out.append(rows + [i for i in range(key.shape[1]) if not valid[q, i]])
    return np.array(out, dtype=np.int64).reshape(key.shape)


def _random_case(rng, Q=40, K=9):
    valid = rng.random((Q, K)) < 0.8
    valid[:3] = True
    valid[3] = False
    grid = np.array([0.0, -0.0, 0.25, 0.5, 0.5, 1.0, np.nan, NEG, math.inf])
    rel = rng.choice(grid, size=(Q, K), p=[.2, .05, .15, .2, .1, .15, .05, .05, .05])
    raw = rng.choice(np.array([0.1, 0.2, 0.2, np.nan, NEG]), size=(Q, K))
    sim = rng.choice(np.array([0.0, 0.25, 0.5, 0.5, 1.0, np.nan]), size=(Q, K, K))
    return valid, rel, raw, sim


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_greedy_select_matches_reference(seed, lam):
    rng = np.random.default_rng(seed)
    valid, rel, raw, sim = _random_case(rng)
    for raw_tiebreak, first_fixed, max_select in ((True, False, None), (False, False, None), (False, True, 3),
                                                  (False, False, 4), (True, True, 1)):
        got = greedy_select(valid, rel, raw, sim, lam, raw_tiebreak=raw_tiebreak, first_fixed=first_fixed,
                            max_select=max_select)
        want = ref_greedy(valid, rel, raw, sim, lam, raw_tiebreak, first_fixed, max_select)
        np.testing.assert_array_equal(got, want)


def test_greedy_kernel_is_compiled_when_numba_is_there():
    pytest.importorskip("numba")
    from retrievers.stages.diversity import greedy_loop
    assert jit_kernel(greedy_loop) is not greedy_loop


@pytest.mark.parametrize("seed", range(6))
def test_cosine_defer_kernel_matches_reference(seed):
    rng = np.random.default_rng(seed)
    valid, _, _, sim = _random_case(rng)
    Q, K = valid.shape
    for thr in (0.0, 0.25, 0.5, 0.9):
        kept = jit_kernel(defer_loop)(valid, np.broadcast_to(np.arange(K), (Q, K)).copy(), sim,
                                    np.arange(Q, dtype=np.int64), thr)
        np.testing.assert_array_equal(picks_first(kept, valid), ref_defer(valid, sim, thr))


@pytest.mark.parametrize("K", [11, INSERTION_MAX_WIDTH, INSERTION_MAX_WIDTH + 1])
@pytest.mark.parametrize("seed", range(8))
def test_desc_perm_and_state_sort_match_reference(seed, K):
    rng = np.random.default_rng(seed)
    Q = 50
    key = rng.choice(np.array([0.0, -0.0, 0.3, 0.3, 1.0, np.nan, NEG, math.inf, -2.5]), size=(Q, K))
    valid = rng.random((Q, K)) < 0.75
    if seed % 2:  # no valid row at −inf / NaN: the single float argsort path
        key = np.where(np.isnan(key) | (key == NEG), 0.5, key)
    want = ref_desc(key, valid)
    np.testing.assert_array_equal(desc_perm(key, valid), want)
    # both ways of sorting, at any width: the insertion kernel (narrow rows) and the stable argsort (wide ones)
    np.testing.assert_array_equal(jit_kernel(insertion_desc_perm)(key, valid), want)
    np.testing.assert_array_equal(argsort_desc_perm(key, valid), want)
    col = np.where(valid, np.arange(K)[None, :] + 100, -1)
    st = State(col, key.copy(), np.zeros(Q, dtype=bool), {"x": np.arange(Q * K, dtype=float).reshape(Q, K)})
    out = st.sort()
    np.testing.assert_array_equal(out.col, np.take_along_axis(col, want, axis=1))
    np.testing.assert_array_equal(out.extra["x"], np.take_along_axis(st.extra["x"], want, axis=1))


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (3, 1)])
def test_desc_perm_degenerate_shapes(shape):
    key = np.full(shape, 0.5)
    valid = np.ones(shape, dtype=bool)
    got = desc_perm(key, valid)
    assert got.shape == shape and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(shape[1]), shape))


def test_desc_perm_nearly_sorted_wide_rows_match_reference():
    """Rows already close to their order (the fused rows of a sweep) and long runs of equal keys."""
    rng = np.random.default_rng(7)
    Q, K = 30, INSERTION_MAX_WIDTH
    key = -np.sort(-rng.random((Q, K)), axis=1) + 0.05 * rng.standard_normal((Q, K))
    key[:, 10:30] = 0.4
    valid = rng.random((Q, K)) < 0.9
    np.testing.assert_array_equal(desc_perm(key, valid), ref_desc(key, valid))


def ref_multi_desc(keys, present, tie_keys):
    """Present columns by keys descending, then tie keys ascending, then column — Python's sorted per row."""
    out = []
    Q, C = present.shape
    for q in range(Q):
        rows = [c for c in range(C) if present[q, c]]
        rows.sort(key=lambda c: tuple(-k[q, c] for k in keys) + tuple(t[q, c] for t in tie_keys) + (c,))
        out.append(rows)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_sort_desc_by_and_phase3_order_match_reference(seed):
    from retrievers.stages.fuse.phase3 import Phase3Fusion, early_stop_rows
    from retrievers.stages.helpers.signals import sort_desc_by
    rng = np.random.default_rng(seed)
    Q, C = 30, 13
    present = rng.random((Q, C)) < 0.7
    base = rng.choice(np.array([0.0, -0.0, 0.2, 0.5, 0.5, 0.9]), size=(Q, C))
    boost = rng.choice(np.array([0.0, 0.05, 0.1, -0.1]), size=(Q, C))
    score = base + boost
    files = rng.integers(0, 4, (Q, C))
    prank, start = rng.integers(0, 4, (Q, C)), rng.integers(-1, 3, (Q, C))
    idr = rng.integers(0, 5, (Q, C))  # duplicates: the column decides
    perm = np.lexsort((idr, start, prank), axis=1)
    rank = np.empty_like(perm)
    np.put_along_axis(rank, perm, np.broadcast_to(np.arange(C), perm.shape), axis=1)
    want = ref_multi_desc([score, base], present, [prank, start, idr])
    full = sort_desc_by([score, base], present, perm)
    s_top, f_top, ok = jit_kernel(early_stop_rows)(present, base, boost, rank, files, 3)
    assert ok
    for q in range(Q):
        n = len(want[q])
        assert full[q, :n].tolist() == want[q]
        # early-stop rows: the top 3 in order, then the other present rows (as a set), then padding
        assert s_top[q, :min(n, 3)].tolist() == [score[q, c] for c in want[q][:3]]
        assert f_top[q, :min(n, 3)].tolist() == [files[q, c] for c in want[q][:3]]
        assert sorted(zip(s_top[q, 3:n], f_top[q, 3:n])) == sorted((score[q, c], files[q, c]) for c in want[q][3:])
        assert np.isnan(s_top[q, n:]).all() and (f_top[q, n:] == -1).all()
    assert not jit_kernel(early_stop_rows)(present | True, base, np.full((Q, C), np.nan), rank, files, 3)[2]
    assert sort_desc_by([np.where(present, np.nan, score)], present | True, perm) is None
    # non-finite scores take the general lexsort path and still order like the reference (NaN last)
    bad = np.where(rng.random((Q, C)) < 0.1, np.nan, score)
    got = Phase3Fusion._order(present, bad, base, (perm, rank))
    ref = ref_multi_desc([np.where(np.isnan(bad), -np.inf, bad), base], present, [prank, start, idr])
    for q in range(Q):
        assert got[q, :len(ref[q])].tolist() == ref[q]


@pytest.mark.parametrize("seed", range(5))
def test_effective_rank_with_cached_order_and_take_rows(seed):
    from retrievers.candidates.table import take_rows
    from retrievers.stages.helpers.signals import effective_rank, rank_order
    rng = np.random.default_rng(seed)
    Q, C = 20, 15
    rank = np.where(rng.random((Q, C)) < 0.7, rng.integers(1, 6, (Q, C)), 0).astype(np.int32)  # equal ranks too
    keep = rng.random((Q, C)) < 0.6
    got = effective_rank(rank, keep, rank_order(rank))
    for q in range(Q):
        rows = sorted((c for c in range(C) if rank[q, c] > 0 and keep[q, c]), key=lambda c: (rank[q, c], c))
        want = np.zeros(C, dtype=np.int32)
        for i, c in enumerate(rows):
            want[c] = i + 1
        np.testing.assert_array_equal(got[q], want)
    np.testing.assert_array_equal(got, effective_rank(rank, keep))
    idx = rng.integers(0, C, (Q, 7))
    np.testing.assert_array_equal(take_rows(rank, idx), np.take_along_axis(rank, idx, axis=1))


def ref_early_stop_rows(present, base, boost, rank, files, k):
    """The early-stop rows written out with Python lists: the ``k`` best present rows by (score desc, base desc,
    rank asc), then the other present rows in column order, then (NaN, -1)."""
    Q, C = present.shape
    s_out, f_out = np.full((Q, C), np.nan), np.full((Q, C), -1, dtype=np.int64)
    for q in range(Q):
        rows = [c for c in range(C) if present[q, c]]
        best = sorted(rows, key=lambda c: (-(base[q, c] + boost[q, c]), -base[q, c], rank[q, c]))[:k]
        seq = best + [c for c in rows if c not in best]
        for i, c in enumerate(seq):
            s_out[q, i], f_out[q, i] = base[q, c] + boost[q, c], files[q, c]
    return s_out, f_out


def _early_stop_inputs(seed: int, Q: int = 12, C: int = 9):
    """Rows of every fill level (0 … C present), distinct scores, and a full row right before a sparse one, so an
    index past the ``k`` valid entries of the top buffer meets a stale entry naming a present column."""
    rng = np.random.default_rng(seed)
    present = np.zeros((Q, C), dtype=bool)
    for q in range(Q):
        n = C if q % 2 == 0 else int(rng.integers(0, C + 1))
        present[q, rng.permutation(C)[:n]] = True
    base = rng.permutation(Q * C).reshape(Q, C) / (Q * C)
    boost = rng.choice(np.array([0.0, 0.05, 0.1, -0.1]), size=(Q, C))
    rank = np.argsort(rng.permutation(Q * C).reshape(Q, C), axis=1).astype(np.int64)
    files = rng.integers(0, 4, (Q, C)).astype(np.int64)
    return present, base, boost, rank, files


@pytest.mark.parametrize("seed", range(6))
def test_early_stop_rows_stay_inside_the_top_buffer(seed):
    """Regression (issue 15): the membership check of the second loop ran over ``range(n)`` while ``n`` grew, so it
    read the ``k``-entry top buffer past its end; the compiled kernel then dropped a present row or returned a
    padding row among the present ones depending on leftover memory. The plain-Python form of the kernel (what
    runs without numba) raises IndexError on such a read whatever the memory holds, so this test fails on the old
    kernel without NUMBA_BOUNDSCHECK too; both forms must equal the list-based reference."""
    from retrievers.stages.fuse.phase3 import early_stop_rows
    args = _early_stop_inputs(seed)
    want_s, want_f = ref_early_stop_rows(*args, 3)
    for fn in (early_stop_rows, jit_kernel(early_stop_rows)):
        s_out, f_out, ok = fn(*args, 3)
        assert ok
        np.testing.assert_array_equal(s_out, want_s)
        np.testing.assert_array_equal(f_out, want_f)


def test_every_kernel_gives_the_same_result_compiled_and_in_python():
    """Every registered kernel (``kernel_example``) on its example input: compiled == plain Python, which indexes
    with numpy's bounds checks."""
    import retrievers.stages  # noqa: F401  (registers every kernel)
    from retrievers.kernels.registry import registered_kernels
    kernels = registered_kernels()
    assert len(kernels) >= 3
    for fn, example in kernels:
        py, jit = fn(*example()), jit_kernel(fn)(*example())
        for a, b in zip(py if isinstance(py, tuple) else (py,), jit if isinstance(jit, tuple) else (jit,)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=fn.__name__)
