"""One tie tolerance in every paired statistic (issue 41): a per-query difference within ``TIE`` (1e-9) — or within
``tie_tolerance`` of values stored rounded — is no change, wherever a test counts or signs differences."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.measures import stats

NDCG_2 = 0.6309297535714575      # nDCG@10 of one relevant note at rank 2 (1/log2(3)); stored at 6 decimals: 0.63093
NDCG_HALF = 0.6131471927654584   # one of two relevant notes found, at rank 1; stored at 6 decimals: 0.613147
ROUNDED = stats.tie_tolerance(6, None)


def test_the_tie_rule_and_the_rounding_band():
    assert stats.TIE == 1e-9
    assert stats.tie_tolerance(None, None) == stats.TIE
    assert stats.tie_tolerance(6, None) == pytest.approx(5e-7 + 1e-9) and stats.tie_tolerance(6, 6) == \
        pytest.approx(1e-6 + 1e-9)
    # an unchanged value against its 6-decimal copy is always within the band (the worst case is half a unit)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(100_000), [NDCG_2, NDCG_HALF, 0.1234565, 0.9999995]])
    assert np.all(np.abs(np.round(x, 6) - x) <= ROUNDED)
    assert stats.differing(np.round(x, 6) - x, ROUNDED) == 0
    # … and two rounded copies of values within floating-point noise of each other are within tie_tolerance(6, 6)
    assert np.all(np.abs(np.round(x, 6) - np.round(x + 1e-15, 6)) <= stats.tie_tolerance(6, 6))
    assert stats.untie([0.3, -1e-9, 2e-9, -0.2]).tolist() == [0.3, 0.0, 2e-9, -0.2]
    assert stats.untie(np.array([[1e-7, 1e-7], [0.5, 0.5]]), [1e-9, 1e-6]).tolist() == [[1e-7, 0.0], [0.5, 0.5]]


def test_sign_flip_test_counts_only_real_changes():
    """Three queries lost 1.0; nine are unchanged but their stored copies are rounded: the old test saw 12 (or 6)
    differences, the smallest p it allowed fell below alpha, and the gate judged by p."""
    real = [-1.0, -1.0, -1.0]
    noise_same_sign = [NDCG_2 - round(NDCG_2, 6)] * 3     # -2.5e-7: "losses" of the same sign
    noise_other_sign = [NDCG_HALF - round(NDCG_HALF, 6)] * 3  # +1.9e-7
    assert stats.randomization_test(real) == 0.25
    # full-precision noise below TIE is a tie everywhere
    assert stats.randomization_test(real + [1e-12, -3e-10, 0.0]) == 0.25
    assert stats.differing(real + [1e-12, -3e-10, 0.0]) == 3
    # rounding noise needs the rounding band: without it the same data give the wrong answers
    assert stats.randomization_test(real + noise_same_sign) == pytest.approx(2 / 2 ** 6)
    assert stats.randomization_test(real + noise_other_sign) == pytest.approx(0.25)
    assert stats.differing(real + noise_same_sign) == 6
    for noise in (noise_same_sign, noise_other_sign):
        assert stats.randomization_test(real + noise, tie_tol=ROUNDED) == 0.25
        assert stats.differing(real + noise, ROUNDED) == 3
    assert stats.smallest_p(stats.differing(real + noise_same_sign, ROUNDED)) == 0.25
    assert not stats.can_reach(stats.differing(real + noise_same_sign, ROUNDED))


def test_monte_carlo_and_cluster_tests_use_the_same_ties():
    rng = np.random.default_rng(3)
    d = np.where(rng.random(40) < 0.5, 0.0, rng.normal(0.05, 0.2, 40))
    noisy = d + np.where(d == 0, rng.uniform(-9e-10, 9e-10, 40), 0.0)  # ties with floating-point noise
    assert stats.differing(noisy) == stats.differing(d) and 2 ** stats.differing(d) > stats.N_PERMUTATIONS
    assert stats.randomization_test(noisy) == stats.randomization_test(d)            # Monte Carlo
    assert stats.randomization_test(noisy, exact=False) == stats.randomization_test(d, exact=False)
    # clusters: a cluster whose changes cancel (0.3 - 0.1 - 0.2 is 5.6e-17 in floating point) is a tie
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["d"] * 3
    x = [0.3, -0.1, -0.2, 0.5, 0.0, 0.0, 0.25, 0.25, 0.0, 0.4, 0.0, 0.0]
    assert sum([0.3, -0.1, -0.2]) != 0  # the floating-point residue the rule is for
    assert stats.cluster_randomization_test(x, groups) == stats.randomization_test([0.5, 0.5, 0.4]) == 0.25
    y = [v + (2.4e-7 if v == 0 else 0.0) for v in x]  # rounding noise on the unchanged queries
    assert stats.cluster_randomization_test(y, groups, tie_tol=ROUNDED) == 0.25


def test_interval_bootstrap_t_test_effect_size_and_wtl_agree_on_ties():
    a = np.array([1.0, 1.0, 1.0, round(NDCG_HALF, 6), round(NDCG_HALF, 6), round(NDCG_HALF, 6)])
    b = np.array([0.0, 0.0, 0.0, NDCG_HALF, NDCG_HALF, NDCG_HALF])
    assert stats.win_tie_loss(a, b) == (3, 0, 3)              # at 1e-9 the rounding is a change …
    assert stats.win_tie_loss(a, b, ROUNDED) == (0, 3, 3)     # … within the band it is a tie
    d = b - a
    assert stats.signflip_interval(d, tie_tol=ROUNDED) == (-np.inf, np.inf)  # 3 units cannot reject at 95 %
    assert stats.signflip_interval([1e-12, -3e-10, 0.0]) == (0.0, 0.0)  # every difference a tie
    res, = stats.compare_pairs_adjusted([(a, b)], tie_tol=[ROUNDED])
    assert (res.wins, res.ties, res.losses) == (0, 3, 3) and res.p_randomization == 0.25
    assert res.delta == -0.5 and res.mean_b == pytest.approx(b.mean(), abs=0)   # means are the values' own
    assert res.ci_holm_low == -np.inf
    assert stats.paired_t_test([0.5] * 4, [0.5 + 3e-10, 0.5, 0.5 - 1e-10, 0.5]) == (0.0, 1.0)
    assert np.isnan(stats.effect_size([0.5] * 4, [0.5 + 3e-10, 0.5, 0.5 - 1e-10, 0.5]))
    lo, hi = stats.bootstrap_ci(stats.untie([3e-10, -5e-10, 0.0, 1e-10]))
    assert (lo, hi) == (0.0, 0.0)


def test_compare_pairs_batches_pairs_with_their_own_tolerance():
    a = np.array([1.0, 1.0, 1.0, 0.63093, 0.63093, 0.63093, 1.0])
    b = np.array([0.0, 0.0, 0.0, NDCG_2, NDCG_2, NDCG_2, 1.0])
    exact, rounded = stats.compare_pairs([(a, b), (a, b)], tie_tol=[stats.TIE, ROUNDED])
    assert (exact.losses, exact.ties) == (6, 1) and exact.p_randomization == pytest.approx(2 / 64)
    assert (rounded.losses, rounded.ties) == (3, 4) and rounded.p_randomization == 0.25
    with pytest.raises(ValueError, match="2 tolerances for 1 pairs"):
        stats.compare_pairs([(a, b)], tie_tol=[stats.TIE, ROUNDED])
