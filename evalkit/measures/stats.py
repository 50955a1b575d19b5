"""Paired significance tests, confidence intervals and effect sizes over per-query metric values.

Every function takes *paired* per-query values: ``a[i]`` and ``b[i]`` are two systems' scores on the same
query ``i``; the per-query difference is ``d = b - a`` (positive = B better). Everything is deterministic: random
draws come from ``numpy.random.default_rng(seed)`` with a fixed default seed, so the same inputs always give the
same p-values and intervals.

Methods (one function each):

* ``randomization_test`` — paired randomisation (sign-flip permutation) test of H0 "A and B are exchangeable per
  query". Statistic ``T = |mean(d)|``; under H0 every ``d_i`` is equally likely to have either sign, so
  ``p = P(|mean(s * d)| >= |mean(d)|)`` over random sign vectors ``s`` in {-1, +1}^n. When the number of non-zero
  differences ``m`` is small (``2^m <= n_permutations``) all ``2^m`` sign vectors are enumerated and ``p`` is exact;
  otherwise ``n_permutations`` random sign vectors are drawn and ``p = (1 + #{|T*| >= |T|}) / (1 + P)``
  (Phipson & Smyth 2010, never 0). Zero differences do not change the statistic under any flip, so dropping them
  gives the same p. Fisher (1935); Smucker, Allan & Carterette, "A comparison of statistical significance tests
  for information retrieval evaluation", CIKM 2007.
* ``paired_t_test`` — Student's paired t-test: ``t = mean(d) / (sd(d) / sqrt(n))`` with ``n - 1`` degrees of
  freedom, two-sided, p from scipy's Student t CDF (equal to scipy.stats.ttest_rel). All-zero differences → 1.
* ``holm`` — Holm (1979) step-down family-wise correction: sort the ``m`` p-values ascending,
  ``p'_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))``. NaN p-values are left out of ``m`` and stay NaN.
* ``bootstrap_ci`` — percentile bootstrap (Efron & Tibshirani 1993) of the mean: resample the ``n`` queries with
  replacement ``n_resamples`` times (multinomial counts, vectorised as one matrix product) and take the 2.5 / 97.5
  percentiles of the resampled means.
* ``cluster_randomization_test`` / ``cluster_bootstrap_ci`` — the same over clusters of dependent queries (one
  LoCoMo conversation, one haystack): whole clusters flip sign / are resampled together (Field & Welsh 2007,
  cluster bootstrap); a dataset declares its clusters (``info["clusters"]``);
* ``mde`` — minimum detectable effect of a paired comparison at alpha 0.05 and power 0.8 (normal approximation);
* ``effect_size`` — Cohen's d for paired samples, ``d_z = mean(d) / sd(d)`` (ddof = 1); NaN when ``sd(d) = 0``.
* ``win_tie_loss`` — counts of queries where B beats A by more than ``tol``, ties within ``tol``, and losses.

``compare_pairs`` runs all of them over a list of pairs and applies Holm across the whole list (the family is
every system × metric comparison in one table).

Intervals that agree with the tests, and what a sample can show at all:

* ``signflip_interval`` — the confidence interval of the mean difference obtained by *inverting* the paired
  sign-flip test (the set of shifts the test does not reject; Garthwaite 1996, Ernst 2004): it excludes 0 exactly
  when the test's p is below the interval's alpha. Closed form per sign vector, no search (see its docstring);
* ``holm_adjusted_intervals`` / ``compare_pairs_adjusted`` — each comparison's interval at the level Holm used to
  decide it, ``1 − alpha · p / p_Holm`` (``alpha / (m − j + 1)`` at step ``j`` of the step-down): the interval
  excludes 0 exactly when the comparison is significant after Holm, so a CI printed beside a Holm-adjusted p never
  contradicts its ▲ / ▼ mark;
* ``smallest_p`` / ``can_reach`` / ``units_needed`` — the smallest p-value a paired sign-flip test of ``n``
  differing queries (or clusters) can give, ``2 / 2^n`` (both all-same-sign vectors are as extreme as the data),
  and whether it can fall below alpha at all (with Holm over ``m`` comparisons the smallest adjusted p is
  ``m · 2 / 2^n``): below that size no difference, however large, can be significant;
* ``mde_text`` — the minimum detectable effect as text, or "too few queries to detect any difference at α" when the
  test cannot reach alpha.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

SEED = 20260227
N_PERMUTATIONS = 10_000
N_BOOTSTRAP = 10_000
ALPHA = 0.05
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


def _random_blocks(kind: str, n: int, count: int, seed: int):
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


def _as_diffs(d) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    if d.ndim != 2:
        raise ValueError("differences must be a vector (n,) or a matrix (n, columns)")
    if not np.all(np.isfinite(d)):
        raise ValueError("per-query values must be finite")
    return d


def _eps(d: np.ndarray) -> np.ndarray:
    # floating-point slack for "as extreme as observed": the same numbers summed in another order
    return 1e-9 * np.maximum(1.0, np.abs(d).sum(axis=0))


def _exact_p(d: np.ndarray) -> float:
    """Exact two-sided sign-flip p over all 2^m sign vectors of the non-zero differences ``d`` (1-D)."""
    m = len(d)
    if m == 0:
        return 1.0
    codes = np.arange(2 ** m, dtype=np.int64)[:, None]
    signs = 1.0 - 2.0 * ((codes >> np.arange(m)) & 1)
    sums = signs @ d
    obs = abs(d.sum())
    return float(np.mean(np.abs(sums) >= obs - _eps(d[:, None])[0]))


def randomization_test(d, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
                       exact: bool | None = None) -> np.ndarray | float:
    """Two-sided paired sign-flip randomisation p-value(s) for per-query differences ``d``.

    ``d`` is ``(n,)`` (returns a float) or ``(n, c)`` (returns ``(c,)``: one test per column, every column using
    the same random sign vectors, so a batch costs one matrix product). ``exact=None`` enumerates all sign
    vectors when ``2^m <= n_permutations`` (``m`` = non-zero differences in that column), ``True`` forces
    enumeration (refused above 2^20), ``False`` forces Monte Carlo.
    """
    one = np.ndim(d) == 1
    D = _as_diffs(d)
    n, c = D.shape
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    p = np.full(c, np.nan)
    mc_cols = []
    for j in range(c):
        nz = D[:, j][D[:, j] != 0]
        m = len(nz)
        use_exact = exact if exact is not None else (2 ** min(m, 62) <= n_permutations)
        if use_exact:
            if m > 20:
                raise ValueError(f"exact enumeration over 2^{m} sign vectors refused (at most 2^20)")
            p[j] = _exact_p(nz)
        else:
            mc_cols.append(j)
    if mc_cols:
        sub = D[:, mc_cols]
        obs = np.abs(sub.sum(axis=0)) - _eps(sub)
        hits = np.zeros(len(mc_cols), dtype=np.int64)
        for signs in _random_blocks("signs", n, n_permutations, seed):
            hits += (np.abs(signs @ sub) >= obs).sum(axis=0)
        p[mc_cols] = (1.0 + hits) / (1.0 + n_permutations)
    return float(p[0]) if one else p


def paired_t_test(a, b) -> tuple[float, float]:
    """(t, two-sided p) of Student's paired t-test on ``d = b - a``.

    ``t = mean(d) / (sd(d) / sqrt(n))`` (ddof 1), ``p = 2 * T_{n-1}(-|t|)`` with the Student t CDF from
    ``scipy.special.stdtr`` (the same numbers as ``scipy.stats.ttest_rel``, without importing scipy.stats).
    All differences zero → (0, 1). Constant non-zero differences (sd = 0, up to rounding) → (±inf, 0).
    """
    t, p = paired_t_tests(np.asarray(a, dtype=np.float64)[:, None], np.asarray(b, dtype=np.float64)[:, None])
    return float(t[0]), float(p[0])


def paired_t_tests(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Column-wise ``paired_t_test`` for ``(n, c)`` matrices: arrays ``t`` and ``p`` of length ``c``."""
    from scipy.special import stdtr  # lazy: startup

    D = np.asarray(B, dtype=np.float64) - np.asarray(A, dtype=np.float64)
    n, c = D.shape
    t = np.full(c, np.nan)
    p = np.full(c, np.nan)
    if n < 2:
        return t, p
    mean = D.mean(axis=0)
    sd = D.std(axis=0, ddof=1)
    scale = np.maximum(1.0, np.abs(D).max(axis=0))
    const = np.ptp(D, axis=0) <= 1e-12 * scale
    zero = const & np.all(np.abs(D) <= 1e-12, axis=0)
    ok = ~const
    t[ok] = mean[ok] / (sd[ok] / np.sqrt(n))
    p[ok] = np.minimum(1.0, 2.0 * stdtr(n - 1, -np.abs(t[ok])))
    t[const] = np.copysign(np.inf, mean[const])
    p[const] = 0.0
    t[zero] = 0.0
    p[zero] = 1.0
    return t, p


def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values (same order as the input; NaN stays NaN and does not count in m)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    m = len(q)
    if m == 0:
        return out
    order = np.argsort(q, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


def bootstrap_means(x, n_resamples: int = N_BOOTSTRAP, seed: int = SEED) -> np.ndarray:
    """``(n_resamples, c)`` bootstrap means of the columns of ``x`` ``(n, c)`` (queries resampled jointly)."""
    X = _as_diffs(x)
    n, c = X.shape
    out = np.empty((n_resamples, c))
    done = 0
    for counts in _random_blocks("counts", n, n_resamples, seed):
        out[done:done + len(counts)] = counts @ X / n
        done += len(counts)
    return out


def bootstrap_ci(x, level: float = 0.95, n_resamples: int = N_BOOTSTRAP, seed: int = SEED):
    """Percentile bootstrap interval of the mean: ``(low, high)`` for a vector, ``(2, c)`` array for a matrix."""
    one = np.ndim(x) == 1
    X = _as_diffs(x)
    if X.shape[0] == 0:
        lohi = np.full((2, X.shape[1]), np.nan)
    else:
        means = bootstrap_means(X, n_resamples, seed)
        tail = (1.0 - level) / 2.0 * 100.0
        lohi = np.percentile(means, [tail, 100.0 - tail], axis=0)
    return (float(lohi[0, 0]), float(lohi[1, 0])) if one else lohi


def cluster_sums(x, groups) -> tuple[np.ndarray, np.ndarray]:
    """(per-cluster sums of ``x`` (C,) or (C, c), queries per cluster (C,)) for cluster labels ``groups`` (n,),
    clusters in order of first appearance."""
    X = _as_diffs(x)
    _, first, inv = np.unique(np.asarray(groups, dtype=object).astype(str), return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")          # relabel clusters by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    lab = rank[inv]
    sums = np.zeros((len(order), X.shape[1]))
    np.add.at(sums, lab, X)
    return sums, np.bincount(lab, minlength=len(order)).astype(np.float64)


def cluster_randomization_test(d, groups, n_permutations: int = N_PERMUTATIONS, seed: int = SEED):
    """Paired randomisation test that flips the sign of whole clusters (queries of one conversation / haystack
    together): under H0 every cluster's summed difference is equally likely to have either sign, and
    ``|mean(d)| = |Σ_c S_c| / n``, so this is :func:`randomization_test` on the cluster sums ``S_c`` (exact when
    ``2^C <= n_permutations``)."""
    sums, _ = cluster_sums(d, groups)
    return randomization_test(sums if np.ndim(d) > 1 else sums[:, 0], n_permutations, seed)


def cluster_bootstrap_ci(x, groups, level: float = 0.95, n_resamples: int = N_BOOTSTRAP, seed: int = SEED):
    """Percentile cluster bootstrap of the mean: resample whole clusters with replacement; a resample's mean is
    ``Σ counts_c S_c / Σ counts_c n_c`` (the queries it holds). Same shapes as :func:`bootstrap_ci`."""
    one = np.ndim(x) == 1
    sums, sizes = cluster_sums(x, groups)
    C = len(sizes)
    if C == 0:
        lohi = np.full((2, sums.shape[1]), np.nan)
    else:
        means = np.empty((n_resamples, sums.shape[1]))
        done = 0
        for counts in _random_blocks("counts", C, n_resamples, seed):
            means[done:done + len(counts)] = (counts @ sums) / (counts @ sizes)[:, None]
            done += len(counts)
        tail = (1.0 - level) / 2.0 * 100.0
        lohi = np.percentile(means, [tail, 100.0 - tail], axis=0)
    return (float(lohi[0, 0]), float(lohi[1, 0])) if one else lohi


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """Minimum detectable effect of a paired comparison of ``n`` queries (normal approximation, two-sided):
    ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``, ``sd`` = standard deviation of the per-query differences."""
    from scipy.special import ndtri  # lazy: startup
    if n < 2 or not np.isfinite(sd):
        return float("nan")
    return float((ndtri(1 - alpha / 2) + ndtri(power)) * sd / math.sqrt(n))


def effect_size(a, b) -> float:
    """Cohen's d_z for paired samples: mean(b - a) / sd(b - a) (ddof 1). NaN if sd is 0 or n < 2."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) < 2:
        return float("nan")
    sd = d.std(ddof=1)
    return float(d.mean() / sd) if sd > 0 else float("nan")


def win_tie_loss(a, b, tol: float = 1e-9) -> tuple[int, int, int]:
    """Queries where B beats A by more than ``tol`` (wins), within ``tol`` (ties), and where A beats B (losses)."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    wins = int(np.sum(d > tol))
    losses = int(np.sum(d < -tol))
    return wins, len(d) - wins - losses, losses


@dataclass
class PairedResult:
    """One system-vs-system comparison on one metric (B vs A: positive delta = B better)."""

    n: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_randomization: float
    p_ttest: float
    p_holm: float
    effect_size: float
    wins: int
    ties: int
    losses: int
    clusters: int = 0   # > 0: the p-value and CI resampled this many clusters (0 = queries, independent)
    # the interval at the level Holm decided this comparison at (holm_adjusted_intervals); NaN until computed
    ci_holm_low: float = math.nan
    ci_holm_high: float = math.nan
    ci_holm_level: float = math.nan

    def significant(self, alpha: float = ALPHA) -> bool:
        return not math.isnan(self.p_holm) and self.p_holm < alpha

    def mark(self, alpha: float = ALPHA) -> str:
        """'▲' B significantly better, '▼' significantly worse (Holm-adjusted randomisation p < alpha), else ''."""
        if not self.significant(alpha):
            return ""
        return "▲" if self.delta > 0 else ("▼" if self.delta < 0 else "")

    def to_dict(self) -> dict:
        return asdict(self)


def compare_pairs(pairs: list[tuple[np.ndarray, np.ndarray]], n_permutations: int = N_PERMUTATIONS,
                  n_resamples: int = N_BOOTSTRAP, seed: int = SEED, tie_tol: float = 1e-9,
                  level: float = 0.95, groups: list | None = None) -> list[PairedResult]:
    """All statistics for each ``(a, b)`` pair; Holm is applied over the whole list (randomisation p-values).

    Pairs with the same number of queries are batched (one sign matrix, one bootstrap matrix per size).
    ``groups``: per pair, the cluster label of each query (or None): such a pair is tested and bootstrapped by
    clusters (:func:`cluster_randomization_test`, :func:`cluster_bootstrap_ci`) when it has at least 2 clusters
    and fewer clusters than queries.
    """
    out: list[PairedResult | None] = [None] * len(pairs)
    by_n: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        if len(a) != len(b):
            raise ValueError(f"pair {i}: {len(a)} vs {len(b)} values (paired tests need the same queries)")
        g = groups[i] if groups is not None else None
        C = len(set(map(str, g))) if g is not None else 0
        if g is not None and 2 <= C < len(a):
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            d = b - a
            lo, hi = cluster_bootstrap_ci(d, g, level, n_resamples, seed)
            w, t, l = win_tie_loss(a, b, tie_tol)
            out[i] = PairedResult(len(a), float(a.mean()), float(b.mean()), float(d.mean()), lo, hi,
                                  float(cluster_randomization_test(d, g, n_permutations, seed)),
                                  paired_t_test(a, b)[1], math.nan, effect_size(a, b), w, t, l, C)
            continue
        by_n.setdefault(len(a), []).append(i)
    for n, idx in by_n.items():
        if n == 0:
            for i in idx:
                out[i] = PairedResult(0, *([math.nan] * 5), math.nan, math.nan, math.nan, math.nan, 0, 0, 0)
            continue
        A = np.column_stack([np.asarray(pairs[i][0], dtype=np.float64) for i in idx])
        B = np.column_stack([np.asarray(pairs[i][1], dtype=np.float64) for i in idx])
        D = B - A
        p_rand = randomization_test(D, n_permutations, seed)
        ci = bootstrap_ci(D, level, n_resamples, seed)
        _, p_ts = paired_t_tests(A, B)
        for j, i in enumerate(idx):
            a, b = A[:, j], B[:, j]
            p_t = float(p_ts[j])
            w, t, l = win_tie_loss(a, b, tie_tol)
            out[i] = PairedResult(n, float(a.mean()), float(b.mean()), float(D[:, j].mean()), float(ci[0, j]),
                                  float(ci[1, j]), float(p_rand[j]), p_t, math.nan, effect_size(a, b), w, t, l)
    adj = holm([r.p_randomization for r in out])
    for r, p in zip(out, adj):
        r.p_holm = float(p)
    return out  # type: ignore[return-value]


def smallest_p(n: int, n_permutations: int = N_PERMUTATIONS) -> float:
    """The smallest two-sided p :func:`randomization_test` can return for ``n`` non-zero differences (queries, or
    clusters): ``2 / 2^n`` when it enumerates (``2^n <= n_permutations``; the observed signs and their negation
    are both as extreme as the data), else ``1 / (1 + n_permutations)``. 1 for n = 0.

    >>> smallest_p(5), smallest_p(6)
    (0.0625, 0.03125)
    """
    if n <= 0:
        return 1.0
    if 2 ** min(n, 62) <= n_permutations:
        return 2.0 / 2 ** n
    return 1.0 / (1.0 + n_permutations)


def can_reach(n: int, alpha: float = ALPHA, comparisons: int = 1, n_permutations: int = N_PERMUTATIONS) -> bool:
    """Whether a paired sign-flip test of ``n`` differing queries (clusters) can give p < ``alpha`` at all — after
    Holm over ``comparisons`` tests, whose smallest adjusted p is ``comparisons × smallest_p(n)``. False = no
    difference, however large, can be significant at this size ("underpowered")."""
    return comparisons * smallest_p(n, n_permutations) < alpha


def units_needed(alpha: float = ALPHA, comparisons: int = 1) -> int:
    """The smallest number of differing queries (clusters) for which :func:`can_reach` holds (6 at alpha 0.05,
    one comparison: 2/2^6 = 0.031)."""
    n = 1
    while not can_reach(n, alpha, comparisons):
        n += 1
    return n


def mde_text(value: float, n: int, alpha: float = ALPHA, unit: str = "queries", digits: int = 3) -> str:
    """The minimum detectable effect as a number, or, when even ``n`` all-agreeing differences could not reach
    ``alpha`` (:func:`can_reach`), "too few queries to detect any difference at α 0.05 (needs ≥ 6)": a number would
    claim a precision the sample does not have."""
    if not can_reach(n, alpha):
        return f"too few {unit} to detect any difference at α {alpha:g} (n = {n}; needs ≥ {units_needed(alpha)})"
    return "–" if not np.isfinite(value) else f"{value:.{digits}f}"


def _units(d: np.ndarray, groups) -> tuple[np.ndarray, np.ndarray]:
    """(per-unit summed differences, units' sizes): queries (size 1) or, given cluster labels, clusters."""
    if groups is None:
        return d.astype(np.float64), np.ones(len(d))
    sums, sizes = cluster_sums(d, groups)
    return sums[:, 0], sizes


def signflip_interval(d, level: float = 0.95, groups=None, n_permutations: int = N_PERMUTATIONS,
                      seed: int = SEED, p_value: float | None = None) -> tuple[float, float]:
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
    every difference is 0.

    >>> lo, hi = signflip_interval([0.2, 0.1, 0.3, 0.25, 0.15, 0.3, 0.2], level=0.95)
    >>> bool(lo > 0 and hi < 0.31)
    True
    """
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError("signflip_interval takes one vector of per-query differences")
    if not np.all(np.isfinite(d)):
        raise ValueError("per-query values must be finite")
    u_all, w_all = _units(d, groups)
    nz = u_all != 0
    if not nz.any():
        return 0.0, 0.0
    if _enumerated(int(nz.sum()), n_permutations):
        a, c = _exact_ac(u_all[nz], w_all[nz])
    else:
        uw = np.column_stack([np.where(nz, u_all, 0.0), np.where(nz, w_all, 0.0)])
        ac = np.concatenate([blk @ uw for blk in _random_blocks("signs", len(u_all), n_permutations, seed)])
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
    """``(s·u, s·w)`` for all ``2^m`` sign vectors ``s`` (the enumeration of :func:`_exact_p`)."""
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
                            seed: int = SEED) -> list[PairedResult]:
    """Fill ``ci_holm_low`` / ``ci_holm_high`` / ``ci_holm_level`` of each result of :func:`compare_pairs` (same
    order as ``pairs`` and ``groups``): the sign-flip test inversion (:func:`signflip_interval`, clustered as the
    p-value was) at :func:`holm_level` — so the interval excludes 0 exactly when ``p_holm < alpha`` (the ▲ / ▼
    mark). Returns ``results`` (changed in place).

    Usage::

        res = holm_adjusted_intervals(pairs, compare_pairs(pairs, groups=groups), groups=groups)
        print(res[0].ci_holm_low, res[0].ci_holm_high, res[0].ci_holm_level)
    """
    batch: dict[int, list[tuple[int, np.ndarray]]] = {}  # Monte Carlo pairs of independent queries, by n
    for i, ((a, b), r) in enumerate(zip(pairs, results)):
        g = groups[i] if groups is not None else None
        g = g if (g is not None and r.clusters) else None
        level = holm_level(r.p_randomization, r.p_holm, alpha)
        r.ci_holm_level = level
        if r.n == 0 or not np.isfinite(level):
            continue
        d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
        if g is None and not _enumerated(int(np.count_nonzero(d)), n_permutations):
            batch.setdefault(len(d), []).append((i, d))
        else:
            r.ci_holm_low, r.ci_holm_high = signflip_interval(d, level, g, n_permutations, seed, r.p_randomization)
    for n, items in batch.items():  # one product with the shared sign matrix per size (as compare_pairs does)
        D = np.column_stack([d for _, d in items])
        UW = np.concatenate([D, (D != 0).astype(np.float64)], axis=1)
        AC = np.concatenate([blk @ UW for blk in _random_blocks("signs", n, n_permutations, seed)])
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
                                   kw.get("seed", SEED))


def format_p(p: float, alpha: float = ALPHA) -> str:
    """Human p-value text: 'p<0.001', 'p=0.012', 'p=0.40', '–' for NaN — with as many digits as it takes to stay
    on p's side of ``alpha`` (0.0498 is 'p=0.0498', never 'p=0.05' beside a significance mark)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    if p < 0.001:
        return "p<0.001"
    digits = 3 if p < 0.01 else 2
    while digits < 8 and (float(f"{p:.{digits}f}") < alpha) != (p < alpha):
        digits += 1
    return f"p={p:.{digits}f}"


def rank_ranges(names: list[str], pairs: dict[tuple[str, str], tuple],
                alpha: float = ALPHA) -> dict[str, tuple[int, int]]:
    """Tie groups: a rank range per name from paired tests of every pair (Holm over all of them).

    ``pairs``: ``{(a, b): (values of a, values of b, cluster label per query or None)}`` over the queries both were
    scored on; a pair missing from it (or with fewer than 2 queries) counts as not distinguishable. A name's best
    rank is 1 + the number significantly better than it, its worst the number not significantly worse than it
    (itself included): "1–3" = not distinguishable from the best. Significant = Holm-adjusted p < ``alpha``."""
    keys = [k for k, v in pairs.items() if len(v[0]) >= 2]
    groups = [pairs[k][2] if len(pairs[k]) > 2 else None for k in keys]
    results = compare_pairs([(pairs[k][0], pairs[k][1]) for k in keys],
                            groups=groups if any(g is not None for g in groups) else None)
    better = {r: 0 for r in names}   # names significantly better than r
    worse = {r: 0 for r in names}    # names significantly worse than r
    for (a, b), res in zip(keys, results):
        if res.significant(alpha):
            hi, lo = (b, a) if res.delta > 0 else (a, b)
            better[lo] += 1
            worse[hi] += 1
    return {r: (1 + better[r], len(names) - worse[r]) for r in names}


def rank_text(rng: tuple[int, int] | None) -> str:
    """'1', '2–4', '–' (no range)."""
    if not rng:
        return "–"
    return str(rng[0]) if rng[0] == rng[1] else f"{rng[0]}–{rng[1]}"
