"""Intervals that agree with their tests (evalkit.measures.stats: signflip_interval, holm_adjusted_intervals) and the
smallest p a sample allows (smallest_p, can_reach, units_needed, mde_text)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.measures import stats


def _p_shifted(d: np.ndarray, delta: float, groups=None) -> float:
    """The sign-flip test of H0 "the differing units are symmetric about δ", straight from randomization_test:
    shift every non-zero difference (or cluster, spread over its queries) by δ, keep ties at 0."""
    if groups is None:
        return stats.randomization_test(np.where(d != 0, d - delta, 0.0))
    sums, sizes = stats.cluster_sums(d, groups)
    nz = sums[:, 0] != 0
    return stats.randomization_test(np.where(nz, sums[:, 0] - delta * sizes, 0.0))


@pytest.mark.parametrize("seed", range(8))
def test_interval_is_the_set_of_shifts_the_test_does_not_reject(seed):
    """The closed-form inversion against the test evaluated on a fine grid of shifts: same set (up to the grid)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 40))
    d = np.round(rng.normal(0.05, 0.2, n), 2) * (rng.random(n) < 0.7)
    if not d.any():
        d[0] = 0.1
    level = float(rng.choice([0.9, 0.95, 0.99]))
    lo, hi = stats.signflip_interval(d, level)
    m = int(np.count_nonzero(d))
    grid = np.linspace(-1.5, 1.5, 1201)
    ok = [x for x in grid if _p_shifted(d, x) >= 1 - level]
    step = (grid[1] - grid[0]) * m / n
    if math.isinf(lo):
        assert stats.smallest_p(m) >= 1 - level  # unbounded only when the extreme sign vectors cannot reject
        return
    assert min(ok) * m / n - step <= lo <= min(ok) * m / n + 1e-9
    assert max(ok) * m / n - 1e-9 <= hi <= max(ok) * m / n + step
    assert lo <= d.mean() <= hi


def test_clustered_interval_inverts_the_cluster_test():
    rng = np.random.default_rng(3)
    groups = list(np.repeat([f"c{i}" for i in range(9)], 7))
    d = rng.normal(0.04, 0.15, len(groups))
    lo, hi = stats.signflip_interval(d, 0.95, groups)
    W, n = len(d), len(d)  # every cluster differs
    grid = np.linspace(-0.5, 0.5, 2001)
    ok = [x for x in grid if _p_shifted(d, x, groups) >= 0.05]
    assert min(ok) * W / n - 5e-4 <= lo <= min(ok) * W / n + 1e-9 and max(ok) * W / n - 1e-9 <= hi
    assert hi <= max(ok) * W / n + 5e-4
    # resampling 9 clusters is far less precise than 63 independent queries
    lo_i, hi_i = stats.signflip_interval(d, 0.95)
    assert hi - lo > hi_i - lo_i


def test_holm_adjusted_interval_excludes_zero_exactly_when_the_mark_says_significant():
    """Over families with every kind of pair (clear, borderline, null, few differing queries, clustered), the
    interval beside a Holm-adjusted p never contradicts its ▲ / ▼ mark — the issue's phase3_policy row had a 95 %
    CI excluding 0 beside p(Holm) 0.10."""
    rng = np.random.default_rng(11)
    seen = {True: 0, False: 0}
    for fam in range(12):
        pairs, groups = [], []
        for _ in range(int(rng.integers(3, 9))):
            n = int(rng.choice([8, 12, 40, 210]))
            a = rng.random(n)
            b = np.clip(a + rng.normal(rng.choice([0.0, 0.03, 0.08, -0.05]), 0.12, n), 0, 1)
            tie = rng.random(n) < 0.3
            b[tie] = a[tie]  # queries on which both systems agree
            pairs.append((a, b))
            groups.append(list(np.arange(n) // 5) if rng.random() < 0.3 else None)
        res = stats.compare_pairs_adjusted(pairs, groups=groups)
        for r in res:
            excl = not (r.ci_holm_low <= 0 <= r.ci_holm_high)
            assert excl == r.significant(), (fam, r)
            assert r.ci_holm_level == pytest.approx(1 - stats.ALPHA * r.p_randomization / r.p_holm)
            assert r.ci_holm_level >= 1 - stats.ALPHA - 1e-12  # never narrower than the unadjusted interval
            seen[excl] += 1
    assert seen[True] > 3 and seen[False] > 3  # both cases really occurred


def test_holm_step_level_and_batch_equals_single():
    rng = np.random.default_rng(5)
    pairs = [(rng.random(300), rng.random(300) + s) for s in (0.0, 0.02, 0.05, 0.1)]
    res = stats.compare_pairs_adjusted(pairs)
    order = np.argsort([r.p_randomization for r in res])
    m = len(res)
    first = res[order[0]]
    assert first.ci_holm_level == pytest.approx(1 - stats.ALPHA / m)  # step 1 of Holm: alpha / m
    for (a, b), r in zip(pairs, res):  # the batched product gives the single-pair interval
        assert (r.ci_holm_low, r.ci_holm_high) == stats.signflip_interval(b - a, r.ci_holm_level)
        lo95, hi95 = stats.signflip_interval(b - a, 0.95)
        assert r.ci_holm_low <= lo95 + 1e-12 and hi95 <= r.ci_holm_high + 1e-12  # adjusted = wider


def test_degenerate_inputs():
    assert stats.signflip_interval(np.zeros(7), 0.95) == (0.0, 0.0)
    lo, hi = stats.signflip_interval(np.array([0.3, 0.2, 0.0, 0.1]), 0.95)  # 3 differing: 2/8 > 0.05
    assert (lo, hi) == (-math.inf, math.inf)
    with pytest.raises(ValueError):
        stats.signflip_interval(np.array([np.nan, 1.0]), 0.95)


def test_smallest_p_and_how_many_queries_a_test_needs():
    assert stats.smallest_p(5) == 2 / 32 and stats.smallest_p(6) == 2 / 64 and stats.smallest_p(0) == 1.0
    assert stats.smallest_p(40) == 1 / (1 + stats.N_PERMUTATIONS)  # Monte Carlo floor
    assert not stats.can_reach(5) and stats.can_reach(6)
    assert stats.units_needed() == 6
    assert stats.units_needed(comparisons=10) == 9  # Holm over 10: 10 · 2/2^9 = 0.039
    assert not stats.can_reach(8, comparisons=10)
    # the exact test really cannot go below its floor: 5 queries all in one direction
    assert stats.randomization_test(np.array([0.5, 0.4, 0.3, 0.2, 0.1])) == stats.smallest_p(5)


def test_mde_text_refuses_a_number_below_the_reachable_size():
    assert stats.mde_text(0.0, 5).startswith("too few queries to detect any difference at α 0.05 (n = 5; needs ≥ 6)")
    assert stats.mde_text(0.1234, 50) == "0.123"
    assert stats.mde_text(float("nan"), 50) == "–"
    assert "clusters" in stats.mde_text(0.2, 4, unit="clusters")
