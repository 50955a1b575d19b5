"""Intervals that agree with the paired tests of :mod:`evalkit.measures.paired`: each excludes 0 exactly when its
test rejects — at the interval's own level, or at the level Holm decided the comparison at.

* ``signflip_interval`` — the confidence interval of the mean difference obtained by *inverting* the paired
  sign-flip test (the set of shifts the test does not reject; Garthwaite 1996, Ernst 2004): it excludes 0 exactly
  when the test's p is below the interval's alpha. Closed form per sign vector, no search (see its docstring);
* ``holm_adjusted_intervals`` / ``compare_pairs_adjusted`` — each comparison's interval at the level Holm used to
  decide it, ``1 − alpha · p / p_Holm`` (``alpha / (m − j + 1)`` at step ``j`` of the step-down): the interval
  excludes 0 exactly when the comparison is significant after Holm, so a CI printed beside a Holm-adjusted p never
  contradicts its ▲ / ▼ mark.
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from evalkit.measures.paired import (
    ALPHA,
    N_PERMUTATIONS,
    SEED,
    TIE,
    PairedResult,
    cluster_randomization_test,
    cluster_sums,
    compare_pairs,
    randomization_test,
    untie,
)
from evalkit.measures.resampling import random_blocks


def _units(d: np.ndarray, groups) -> tuple[np.ndarray, np.ndarray]:
    """(per-unit summed differences, units' sizes): queries (size 1) or, given cluster labels, clusters — a sum
    within ``TIE`` of 0 is a tie (0), as in :func:`cluster_randomization_test`."""
    if groups is None:
        return d.astype(np.float64), np.ones(len(d))
    sums, sizes = cluster_sums(d, groups)
    return untie(sums[:, 0]), sizes


def signflip_interval(d, level: float = 0.95, groups=None, n_permutations: int = N_PERMUTATIONS,
                      seed: int = SEED, p_value: float | None = None, tie_tol: float = TIE) -> tuple[float, float]:
    """Confidence interval of ``mean(d)`` by inverting the paired sign-flip test of :func:`randomization_test`
    (or :func:`cluster_randomization_test` given ``groups``): the shifts the test does not reject at
    ``1 - level`` (Garthwaite, "Confidence intervals from randomization tests", Biometrics 1996; Ernst,
    "Permutation methods", Statistical Science 2004).

    The test is the one the p-values come from: the units (queries, or clusters with their summed differences
    ``u_i`` and sizes ``w_i``) whose difference is non-zero are flipped — enumerated when ``2^m <= n_permutations``,
    else the same seeded random sign vectors — and tied units (difference 0, both systems agree) stay at 0.
    Under the shift ``δ`` of the differing units the statistic of sign vector ``s`` is ``|a − δc|`` with
    ``a = s·u``, ``c = s·w``, against the observed ``|A − δW|`` (``A = Σu``, ``W = Σw``); ``(a − δc)² >= (A − δW)²``
    factors as ``((a − A) + (W − c)δ)((a + A) − (W + c)δ) >= 0``, which holds on the closed interval between
    ``(A − a)/(W − c)`` and ``(A + a)/(W + c)`` (always, for ``s = ±1``). So ``count(δ)`` is a sum of interval
    indicators, and the set ``{δ: p(δ) >= 1 − level}`` (``p = (1 + count)/(1 + B)``, or ``count / 2^m`` when
    enumerated) is found by one sort of the endpoints. The shift of the differing units maps to the mean over all
    ``n`` queries as ``δ · W / n`` (the tied queries add 0), so the interval is ``[lo · W/n, hi · W/n]`` and holds
    ``mean(d)``. Its edge at 0 follows the test itself: 0 is inside exactly when ``randomization_test`` (the same
    p-value; pass it as ``p_value`` when already computed) is at least ``1 − level``. ``(-inf, inf)`` when even
    the extreme sign vectors cannot reject any shift (too few differing units for this level); ``(0, 0)`` when
    every difference is a tie (within ``tie_tol``: :func:`evalkit.measures.paired.untie`).

    >>> lo, hi = signflip_interval([0.2, 0.1, 0.3, 0.25, 0.15, 0.3, 0.2], level=0.95)
    >>> bool(lo > 0 and hi < 0.31)
    True
    """
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("signflip_interval takes one vector of per-query differences")
    if not np.all(np.isfinite(d)):
        raise ValueError("per-query values must be finite")
    d = untie(d, tie_tol)
    u_all, w_all = _units(d, groups)
    nz = u_all != 0
    if not nz.any():
        return 0.0, 0.0
    if _enumerated(int(nz.sum()), n_permutations):
        a, c = _exact_ac(u_all[nz], w_all[nz])
    else:
        uw = np.column_stack([np.where(nz, u_all, 0.0), np.where(nz, w_all, 0.0)])
        ac = np.concatenate([blk @ uw for blk in random_blocks("signs", len(u_all), n_permutations, seed)])
        a, c = ac[:, 0], ac[:, 1]
    if p_value is None:
        p_value = (cluster_randomization_test(d, groups, n_permutations, seed) if groups is not None
                   else randomization_test(d, n_permutations, seed))
    return _invert(a, c, u_all[nz], w_all[nz], len(d), 1.0 - level, n_permutations, p_value)


def _enumerated(m: int, n_permutations: int) -> bool:
    """Whether :func:`randomization_test` enumerates every sign vector of ``m`` differing units."""
    if 2 ** min(m, 62) > n_permutations:
        return False
    if m > 20:
        raise ValueError(f"exact enumeration over 2^{m} sign vectors refused (at most 2^20)")
    return True


def _exact_ac(u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(s·u, s·w)`` for all ``2^m`` sign vectors ``s`` (the enumeration of
    :func:`evalkit.measures.paired._exact_p`)."""
    m = len(u)
    codes = np.arange(2 ** m, dtype=np.int64)[:, None]
    S = 1.0 - 2.0 * ((codes >> np.arange(m)) & 1)
    return S @ u, S @ w


def _invert(a: np.ndarray, c: np.ndarray, u: np.ndarray, w: np.ndarray, n: int, alpha: float,
            n_permutations: int, p0: float) -> tuple[float, float]:
    """The interval of :func:`signflip_interval` from the per-sign-vector sums ``a = s·u``, ``c = s·w`` over the
    differing units ``u`` (sizes ``w``) of ``n`` queries, at ``alpha``; ``p0``: the test's own p at shift 0."""
    A, W = float(u.sum()), float(w.sum())
    m = len(u)
    exact = len(a) == 2 ** m and _enumerated(m, n_permutations)
    need = alpha * 2 ** m if exact else alpha * (1 + n_permutations) - 1  # count(δ) >= need ⟺ p(δ) >= alpha
    always = (np.abs(W - c) <= 1e-12 * W) | (np.abs(W + c) <= 1e-12 * W)  # s = ±1: counted at every shift
    need -= int(always.sum())
    if need <= 0:
        lo, hi = -math.inf, math.inf
    else:
        a, c = a[~always], c[~always]
        r1, r2 = (A - a) / (W - c), (A + a) / (W + c)
        L, H = np.sort(np.minimum(r1, r2)), np.sort(np.maximum(r1, r2))
        k = int(math.ceil(need - 1e-9))

        def count(x):
            return np.searchsorted(L, x, side="right") - np.searchsorted(H, x, side="left")
        okL, okH = count(L) >= k, count(H) >= k  # the estimate A/W lies in every interval: never both empty
        lo, hi = float(L[okL].min()), float(H[okH].max())
    lo, hi = lo * W / n, hi * W / n
    if (p0 >= alpha) != (lo <= 0.0 <= hi):  # the edge at 0 is the test's own decision (floating-point ties)
        if p0 >= alpha:
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        elif A > 0:
            lo = math.ulp(0.0)
        else:
            hi = -math.ulp(0.0)
    return lo, hi


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (Wilson, JASA 1927): with z the normal quantile of
    ``(1 + level) / 2`` and p = k / n, ``(p + z²/2n ± z·sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n)``. Unlike the Wald
    interval it stays inside [0, 1] and is not empty at k = 0 (0 of 30 → [0, 0.114]). NaNs for n = 0.

    >>> [round(x, 3) for x in wilson_interval(0, 30)]
    [0.0, 0.114]
    """
    if n <= 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf((1 + level) / 2)
    p = k / n
    mid = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    den = 1 + z * z / n
    return max(0.0, (mid - half) / den), min(1.0, (mid + half) / den)


def design_effect(k_by_cluster, n_by_cluster) -> float:
    """Kish's design effect of a proportion whose units come in clusters: the cluster-robust variance of the ratio
    estimator p = Σk_c / Σn_c over the variance it would have with independent units,

        deff = [C/(C − 1) · Σ_c (k_c − p·n_c)² / N²] / [p(1 − p) / N],   N = Σ n_c, C clusters

    (the linearised ratio variance with the usual C/(C − 1) small-sample factor; Kish, *Survey Sampling*, 1965,
    §8.2; Cochran, *Sampling Techniques*, 1977, §6.13), floored at 1 (a cluster never counts for more than its
    units) and capped at :func:`worst_design_effect` (every unit of a cluster alike). NaN when it cannot be
    estimated from the counts: p ∈ {0, 1} (no spread between clusters to see) or
    fewer than two clusters. Singleton clusters give N/(N − 1) → 1, the independent case.

    >>> design_effect([10, 0, 0, 10], [10, 10, 10, 10])  # clusters all in or all out: as many units as clusters
    10.0
    >>> round(design_effect([3, 6, 2, 5], [10, 10, 10, 10]), 2)
    1.39
    >>> design_effect([1, 1], [10, 10])
    1.0
    """
    k = np.asarray(k_by_cluster, dtype=float)
    n = np.asarray(n_by_cluster, dtype=float)
    N, C = n.sum(), int((n > 0).sum())
    if C < 2 or N <= 0:
        return math.nan
    p = k.sum() / N
    if p <= 0 or p >= 1:
        return math.nan
    v_cl = C / (C - 1) * float(np.sum((k - p * n) ** 2)) / (N * N)
    return float(min(worst_design_effect(n), max(1.0, v_cl / (p * (1 - p) / N))))


def worst_design_effect(n_by_cluster) -> float:
    """The largest design effect clusters of these sizes allow (every unit of a cluster alike, ICC = 1):
    ``Σ n_c² / N``, so the effective sample is ``N² / Σ n_c²`` (the number of clusters when they are equal).

    >>> worst_design_effect([10, 10, 10])
    10.0
    """
    n = np.asarray(n_by_cluster, dtype=float)
    N = n.sum()
    return float(np.sum(n * n) / N) if N > 0 else math.nan


def clustered_wilson_interval(k_by_cluster, n_by_cluster, level: float = 0.95,
                              deff: float | None = None) -> tuple[float, float]:
    """The Wilson interval (:func:`wilson_interval`) of p = Σk_c / Σn_c at the *effective* sample size of
    clustered units, ``n_eff = N / deff · (z / t_{C−1})²`` and ``k_eff = p · n_eff`` — the design-effect interval
    with Korn & Graubard's degrees-of-freedom adjustment for C clusters (*Survey Methodology* 1998, 24(2):
    z the normal and t_{C−1} the Student quantile of ``(1 + level) / 2``; few clusters, a wider interval), with
    ``deff`` the counts' own :func:`design_effect`. Where the
    counts cannot show their clustering (p ∈ {0, 1}, or fewer than two clusters) ``deff`` is the one given (a design
    effect borrowed from comparable cells), else the worst the cluster sizes allow (:func:`worst_design_effect`):
    0 events among a few conversations bound the rate only as well as that many conversations do. Every cluster of
    one unit (independent units): exactly :func:`wilson_interval`.

    >>> [round(x, 3) for x in clustered_wilson_interval([0] * 30, [1] * 30)]   # independent: Wilson's 0 of 30
    [0.0, 0.114]
    >>> [round(x, 3) for x in clustered_wilson_interval([0, 0, 0], [10, 10, 10])]  # 0 of 30 in 3 clusters
    [0.0, 0.861]
    """
    k = np.asarray(k_by_cluster, dtype=float)
    n = np.asarray(n_by_cluster, dtype=float)
    N = float(n.sum())
    if N <= 0:
        return math.nan, math.nan
    if np.all(n[n > 0] == 1):
        return wilson_interval(int(k.sum()), int(N), level)
    d = design_effect(k, n)
    if math.isnan(d):
        d = deff if deff is not None and math.isfinite(deff) else worst_design_effect(n)
    from scipy.stats import t as student  # lazy: startup

    C = int((n > 0).sum())
    q = (1 + level) / 2
    df = (NormalDist().inv_cdf(q) / student.ppf(q, C - 1)) ** 2 if C >= 2 else 1.0
    n_eff = float(N / max(1.0, d) * df)
    return wilson_interval(float(k.sum()) / N * n_eff, n_eff, level)


def holm_level(p: float, p_holm: float, alpha: float = ALPHA) -> float:
    """The confidence level of the interval that agrees with a Holm decision: ``1 − alpha · p / p_holm``. At step
    ``j`` of ``m`` (p sorted ascending) ``p_holm = (m − j + 1) p`` unless an earlier step's larger value carries
    over, so the level is Holm's own step level ``1 − alpha/(m − j + 1)`` — narrower never: when a carried-over
    value or the cap at 1 makes the comparison non-significant, the level rises just enough that the test
    inversion (:func:`signflip_interval`) includes 0. NaN when either p is NaN."""
    if not (np.isfinite(p) and np.isfinite(p_holm)) or p_holm <= 0:
        return math.nan
    return 1.0 - alpha * p / p_holm


def holm_adjusted_intervals(pairs: list[tuple], results: list[PairedResult], groups: list | None = None,
                            alpha: float = ALPHA, n_permutations: int = N_PERMUTATIONS,
                            seed: int = SEED, tie_tol: float | list[float] = TIE) -> list[PairedResult]:
    """Fill ``ci_holm_low`` / ``ci_holm_high`` / ``ci_holm_level`` of each result of :func:`compare_pairs` (same
    order as ``pairs`` and ``groups``): the sign-flip test inversion (:func:`signflip_interval`, clustered as the
    p-value was) at :func:`holm_level` — so the interval excludes 0 exactly when ``p_holm < alpha`` (the ▲ / ▼
    mark). ``tie_tol``: the one :func:`compare_pairs` used (a number or one per pair). Returns ``results`` (changed
    in place).

    Usage::

        res = holm_adjusted_intervals(pairs, compare_pairs(pairs, groups=groups), groups=groups)
        print(res[0].ci_holm_low, res[0].ci_holm_high, res[0].ci_holm_level)
    """
    tols = list(tie_tol) if isinstance(tie_tol, (list, tuple, np.ndarray)) else [tie_tol] * len(pairs)
    batch: dict[int, list[tuple[int, np.ndarray]]] = {}  # Monte Carlo pairs of independent queries, by n
    for i, ((a, b), r) in enumerate(zip(pairs, results)):
        g = groups[i] if groups is not None else None
        g = g if (g is not None and r.clusters) else None
        level = holm_level(r.p_randomization, r.p_holm, alpha)
        r.ci_holm_level = level
        if r.n == 0 or not np.isfinite(level):
            continue
        d = untie(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64), tols[i])
        if g is None and not _enumerated(int(np.count_nonzero(d)), n_permutations):
            batch.setdefault(len(d), []).append((i, d))
        else:
            r.ci_holm_low, r.ci_holm_high = signflip_interval(d, level, g, n_permutations, seed, r.p_randomization)
    for n, items in batch.items():  # one product with the shared sign matrix per size (as compare_pairs does)
        D = np.column_stack([d for _, d in items])
        UW = np.concatenate([D, (D != 0).astype(np.float64)], axis=1)
        AC = np.concatenate([blk @ UW for blk in random_blocks("signs", n, n_permutations, seed)])
        k = len(items)
        for j, (i, d) in enumerate(items):
            r, nz = results[i], d != 0
            r.ci_holm_low, r.ci_holm_high = _invert(AC[:, j], AC[:, k + j], d[nz], np.ones(int(nz.sum())), n,
                                                    1.0 - r.ci_holm_level, n_permutations, r.p_randomization)
    return results


def compare_pairs_adjusted(pairs: list[tuple[np.ndarray, np.ndarray]], groups: list | None = None,
                           alpha: float = ALPHA, **kw) -> list[PairedResult]:
    """:func:`compare_pairs` (Holm over the list, clusters where ``groups`` declares them) plus each comparison's
    Holm-adjusted interval (:func:`holm_adjusted_intervals`). What a table that prints a Holm-adjusted p beside an
    interval should call."""
    results = compare_pairs(pairs, groups=groups, **kw)
    return holm_adjusted_intervals(pairs, results, groups, alpha, kw.get("n_permutations", N_PERMUTATIONS),
                                   kw.get("seed", SEED), kw.get("tie_tol", TIE))
