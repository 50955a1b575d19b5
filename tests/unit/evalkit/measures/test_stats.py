"""evalkit.measures.stats: parity with independent computations, closed-form examples and invariants."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from evalkit.measures import resampling, stats


def _enumerate_p(d):
    """Independent exact sign-flip p-value: loop over every sign vector with itertools."""
    d = list(d)
    obs = abs(sum(d))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        if abs(sum(s * x for s, x in zip(signs, d))) >= obs - 1e-12:
            hits += 1
    return hits / total


# --- randomisation test ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [
    [0.3, 0.1, -0.05, 0.2, 0.4, 0.0, 0.15, -0.1],
    [1.0, 1.0, 1.0, 1.0, 1.0],
    [0.5, -0.5, 0.25, -0.25],
    [0.0, 0.0, 0.2],
])
def test_randomization_exact_matches_enumeration(d):
    assert stats.randomization_test(d) == pytest.approx(_enumerate_p(d), abs=1e-15)


def test_randomization_exact_closed_form():
    # five equal positive differences: only all-plus and all-minus are as extreme → 2 / 32
    assert stats.randomization_test([0.2] * 5) == pytest.approx(2 / 32)


def test_randomization_monte_carlo_close_to_exact():
    rng = np.random.default_rng(7)
    d = rng.normal(0.08, 0.3, size=14)
    exact = _enumerate_p(d)
    mc = stats.randomization_test(d, n_permutations=20_000, exact=False)
    assert mc == pytest.approx(exact, abs=0.01)


def test_randomization_batch_equals_single_columns():
    rng = np.random.default_rng(3)
    D = rng.normal(0.02, 0.2, size=(60, 4))
    batch = stats.randomization_test(D)
    for j in range(4):
        assert batch[j] == stats.randomization_test(D[:, j])


def test_randomization_deterministic_and_bounded():
    rng = np.random.default_rng(11)
    d = rng.normal(0.5, 0.1, size=200)
    p1 = stats.randomization_test(d)
    p2 = stats.randomization_test(d)
    assert p1 == p2
    assert p1 == pytest.approx(1 / (stats.N_PERMUTATIONS + 1))  # never 0
    assert stats.randomization_test(np.zeros(50)) == 1.0


def test_random_draws_same_with_and_without_cache(monkeypatch):
    rng = np.random.default_rng(12)
    D = rng.normal(0.05, 0.2, size=(300, 3))
    stats.cache_clear()
    p1, ci1 = stats.randomization_test(D), stats.bootstrap_ci(D)
    p1b, ci1b = stats.randomization_test(D), stats.bootstrap_ci(D)  # served from the cache
    monkeypatch.setattr(resampling, "CACHE_MAX_ELEMENTS", 0)
    stats.cache_clear()
    p2, ci2 = stats.randomization_test(D), stats.bootstrap_ci(D)  # drawn block by block
    assert np.array_equal(p1, p2) and np.array_equal(p1, p1b)
    assert np.array_equal(ci1, ci2) and np.array_equal(ci1, ci1b)


def test_randomization_uses_at_least_10000_permutations():
    assert stats.N_PERMUTATIONS >= 10_000


# --- paired t-test --------------------------------------------------------------------------------------------

def test_t_test_matches_hand_formula():
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 1, 40)
    b = np.clip(a + rng.normal(0.05, 0.2, 40), 0, 1)
    d = b - a
    n = len(d)
    t_hand = d.mean() / (d.std(ddof=1) / math.sqrt(n))
    p_hand = 2 * sps.t.sf(abs(t_hand), df=n - 1)
    t, p = stats.paired_t_test(a, b)
    assert t == pytest.approx(t_hand, rel=1e-12)
    assert p == pytest.approx(p_hand, rel=1e-10)
    ref = sps.ttest_rel(b, a)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert t == pytest.approx(ref.statistic, rel=1e-12)


def test_t_tests_batch_equals_scipy_per_column():
    rng = np.random.default_rng(8)
    A = rng.uniform(0, 1, (30, 5))
    B = np.clip(A + rng.normal(0.03, 0.2, (30, 5)), 0, 1)
    t, p = stats.paired_t_tests(A, B)
    for j in range(5):
        ref = sps.ttest_rel(B[:, j], A[:, j])
        assert t[j] == pytest.approx(ref.statistic, rel=1e-12)
        assert p[j] == pytest.approx(ref.pvalue, rel=1e-9)


def test_t_test_degenerate_cases():
    assert stats.paired_t_test([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]) == (0.0, 1.0)
    t, p = stats.paired_t_test([0.1, 0.2, 0.3], [0.2, 0.3, 0.4])
    assert t == math.inf and p == 0.0


# --- Holm -----------------------------------------------------------------------------------------------------

def test_holm_closed_form():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → monotone max 0.06
    adj = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert adj.tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan():
    adj = stats.holm([0.5, np.nan, 0.4])
    assert adj[0] == pytest.approx(0.8)
    assert math.isnan(adj[1])
    assert adj[2] == pytest.approx(0.8)
    assert stats.holm([0.6, 0.7]).tolist() == [1.0, 1.0]


def test_holm_never_below_raw_and_order_free():
    rng = np.random.default_rng(2)
    p = rng.uniform(0, 0.2, 12)
    adj = stats.holm(p)
    assert np.all(adj >= p)
    perm = rng.permutation(12)
    assert np.allclose(stats.holm(p[perm]), adj[perm])


# --- bootstrap, effect size, W/T/L ----------------------------------------------------------------------------

def test_bootstrap_ci_contains_mean_and_is_deterministic():
    rng = np.random.default_rng(9)
    d = rng.normal(0.1, 0.3, 100)
    lo, hi = stats.bootstrap_ci(d)
    assert lo < d.mean() < hi
    assert (lo, hi) == stats.bootstrap_ci(d)
    # close to the normal-theory interval for a mean of 100 draws
    se = d.std(ddof=1) / 10
    assert lo == pytest.approx(d.mean() - 1.96 * se, abs=0.02)
    assert hi == pytest.approx(d.mean() + 1.96 * se, abs=0.02)


def test_bootstrap_constant_is_degenerate():
    assert stats.bootstrap_ci([0.25] * 30) == pytest.approx((0.25, 0.25))


def test_effect_size_and_win_tie_loss():
    a = [0.0, 0.5, 1.0, 0.2]
    b = [0.5, 0.5, 0.75, 0.2 + 1e-12]
    d = np.subtract(b, a)
    assert stats.effect_size(a, b) == pytest.approx(d.mean() / d.std(ddof=1))
    assert stats.win_tie_loss(a, b) == (1, 2, 1)
    assert stats.win_tie_loss(a, b, tol=0.3) == (1, 3, 0)
    assert stats.win_tie_loss(a, b, tol=0.6) == (0, 4, 0)


# --- end to end -----------------------------------------------------------------------------------------------

def test_runs_identical_but_one_query_are_not_significant():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 200)
    pairs = []
    for metric_shift in (1.0, 0.5, 0.3):
        b = a.copy()
        b[17] = min(1.0, b[17] + metric_shift)
        pairs.append((a, b))
    res = stats.compare_pairs(pairs)
    for r in res:
        assert r.p_randomization == 1.0  # a single non-zero difference: exact, both signs equally extreme
        assert r.p_holm >= 0.05
        assert not r.significant()
        assert r.mark() == ""
        assert (r.wins, r.ties, r.losses) == (1, 199, 0)


def test_compare_pairs_clear_difference_and_holm_family():
    rng = np.random.default_rng(4)
    a = rng.uniform(0, 0.6, 150)
    b = np.clip(a + 0.2 + rng.normal(0, 0.05, 150), 0, 1)
    noise = np.clip(a + rng.normal(0, 0.05, 150), 0, 1)
    res = stats.compare_pairs([(a, b), (a, noise), (b, a)])
    assert res[0].significant() and res[0].mark() == "▲"
    assert res[2].significant() and res[2].mark() == "▼"
    assert res[0].ci_low > 0 and res[2].ci_high < 0
    raw = [r.p_randomization for r in res]
    assert [r.p_holm for r in res] == pytest.approx(stats.holm(raw).tolist())
    assert res[0].n == 150 and res[0].mean_b == pytest.approx(b.mean())


def test_format_p():
    assert stats.format_p(0.0001) == "p<0.001"
    assert stats.format_p(0.0042) == "p=0.004"
    assert stats.format_p(0.4) == "p=0.40"
    assert stats.format_p(float("nan")) == "–"
    # never rounded across alpha: a significant p is not printed as 0.05 (compare showed ▼ beside "p Holm 0.05")
    assert stats.format_p(0.0498) == "p=0.0498" and stats.format_p(0.0501) == "p=0.05"
    assert stats.format_p(0.05) == "p=0.05" and stats.format_p(0.04999996) == "p=0.04999996"
