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
  cluster bootstrap); a dataset declares its clusters (``info["clusters"]``).
* ``effect_size`` — Cohen's d for paired samples, ``d_z = mean(d) / sd(d)`` (ddof = 1); NaN when ``sd(d) = 0``.
* ``win_tie_loss`` — counts of queries where B beats A by more than ``tol``, ties within ``tol``, and losses.

**Ties.** A per-query difference with ``|d| <= TIE`` (1e-9) is a tie — no change — everywhere a test counts or signs
differences: it is 0 for the sign-flip tests (exact and Monte Carlo, queries or cluster sums), so it is not one of
the ``m`` differing units and it moves neither the smallest reachable p (:func:`evalkit.measures.power.smallest_p`)
nor the choice of enumeration; it is 0 in the bootstrap, the t-test and d_z, and a tie in W/T/L. ``untie`` applies
the rule; every function here takes its tolerance as ``tie_tol`` (default ``TIE``). 1e-9 is far below any real
change of a ranking measure (one rank of nDCG@10 moves a query by more than 1e-3) and far above the floating-point
noise of the same number computed in another order (~1e-16). A value *stored* rounded (per-query values in a gate
baseline or run folder written before they were kept at full precision: 6 decimals) is only known to within half a
unit of its last place, so two such values are a tie within :func:`tie_tolerance` — ``TIE`` plus ``0.5·10^-k`` for each
side rounded to ``k`` decimals (``TIE + 5e-7`` for one side at 6 decimals, ``TIE + 1e-6`` for both): an unchanged
query can never differ by more, and no real change of a ranking measure is that small.

``compare_pairs`` runs all of them over a list of pairs and applies Holm across the whole list (the family is
every system × metric comparison in one table).

``format_p`` writes a p-value as text, with as many digits as keep it on its side of alpha.

The seeded random draws and their cache are :mod:`evalkit.measures.resampling`; the intervals that agree with these
tests, :mod:`evalkit.measures.intervals`; what a sample can detect at all, :mod:`evalkit.measures.power`; tie groups
of ranked systems, :mod:`evalkit.measures.ranking` (:mod:`evalkit.measures.stats` re-exports them all).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from evalkit.measures.resampling import random_blocks

SEED = 20260227
N_PERMUTATIONS = 10_000
N_BOOTSTRAP = 10_000
ALPHA = 0.05
TIE = 1e-9  # |difference| <= TIE is a tie (no change): the one tie tolerance of every paired test (module docstring)


def tie_tolerance(*decimals: int | None, tie: float = TIE) -> float:
    """The tie tolerance for differences between values stored at ``decimals`` each (None = full precision, a float
    that round-trips): ``tie`` plus half a unit in the last place of every side stored rounded, since a value
    rounded to ``k`` decimals is within ``0.5·10^-k`` of the value it stands for.

    >>> [f"{tie_tolerance(*sides):.4g}" for sides in [(None, None), (6, None), (6, 6)]]
    ['1e-09', '5.01e-07', '1.001e-06']
    """
    return tie + sum(0.5 * 10.0 ** -k for k in decimals if k is not None)


def untie(d, tol=TIE) -> np.ndarray:
    """``d`` (float64, a copy) with every difference ``|d| <= tol`` set to 0: a tie. ``tol`` is a number, or one per
    column of a matrix ``d``.

    >>> untie([0.3, -2e-10, 0.0, -0.1]).tolist()
    [0.3, 0.0, 0.0, -0.1]
    """
    d = np.array(d, dtype=np.float64)
    return np.where(np.abs(d) <= np.asarray(tol, dtype=np.float64), 0.0, d)


def differing(d, tol=TIE) -> int:
    """How many differences are not ties (``|d| > tol``): the ``n`` of :func:`evalkit.measures.power.smallest_p`."""
    return int(np.count_nonzero(untie(d, tol)))


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
                       exact: bool | None = None, tie_tol=TIE) -> np.ndarray | float:
    """Two-sided paired sign-flip randomisation p-value(s) for per-query differences ``d``.

    ``d`` is ``(n,)`` (returns a float) or ``(n, c)`` (returns ``(c,)``: one test per column, every column using
    the same random sign vectors, so a batch costs one matrix product). Differences within ``tie_tol`` (a number or
    one per column) are ties (:func:`untie`). ``exact=None`` enumerates all sign vectors when ``2^m <=
    n_permutations`` (``m`` = differences in that column that are not ties), ``True`` forces enumeration (refused
    above 2^20), ``False`` forces Monte Carlo.

    >>> randomization_test([0.5, 0.5, 0.5, 3e-10, -2e-10])   # three differ, two tie: 2 / 2^3
    0.25
    """
    one = np.ndim(d) == 1
    D = untie(_as_diffs(d), tie_tol)
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
        for signs in random_blocks("signs", n, n_permutations, seed):
            hits += (np.abs(signs @ sub) >= obs).sum(axis=0)
        p[mc_cols] = (1.0 + hits) / (1.0 + n_permutations)
    return float(p[0]) if one else p


def paired_t_test(a, b, tie_tol=TIE) -> tuple[float, float]:
    """(t, two-sided p) of Student's paired t-test on ``d = b - a`` (differences within ``tie_tol`` are 0).

    ``t = mean(d) / (sd(d) / sqrt(n))`` (ddof 1), ``p = 2 * T_{n-1}(-|t|)`` with the Student t CDF from
    ``scipy.special.stdtr`` (the same numbers as ``scipy.stats.ttest_rel``, without importing scipy.stats).
    All differences ties → (0, 1). Constant non-zero differences (no two further apart than ``TIE``, relative to
    their size) → (±inf, 0).
    """
    t, p = paired_t_tests(np.asarray(a, dtype=np.float64)[:, None], np.asarray(b, dtype=np.float64)[:, None],
                          tie_tol)
    return float(t[0]), float(p[0])


def _constant(D: np.ndarray) -> np.ndarray:
    """Per column: no two differences further apart than ``TIE`` (relative to their size): sd 0, up to rounding."""
    return np.ptp(D, axis=0) <= TIE * np.maximum(1.0, np.abs(D).max(axis=0))


def paired_t_tests(A, B, tie_tol=TIE) -> tuple[np.ndarray, np.ndarray]:
    """Column-wise ``paired_t_test`` for ``(n, c)`` matrices: arrays ``t`` and ``p`` of length ``c`` (``tie_tol``: a
    number or one per column)."""
    from scipy.special import stdtr  # lazy: startup

    D = untie(np.asarray(B, dtype=np.float64) - np.asarray(A, dtype=np.float64), tie_tol)
    n, c = D.shape
    t = np.full(c, np.nan)
    p = np.full(c, np.nan)
    if n < 2:
        return t, p
    mean = D.mean(axis=0)
    sd = D.std(axis=0, ddof=1)
    const = _constant(D)
    zero = ~np.any(D, axis=0)
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
    for counts in random_blocks("counts", n, n_resamples, seed):
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


def cluster_randomization_test(d, groups, n_permutations: int = N_PERMUTATIONS, seed: int = SEED, tie_tol=TIE):
    """Paired randomisation test that flips the sign of whole clusters (queries of one conversation / haystack
    together): under H0 every cluster's summed difference is equally likely to have either sign, and
    ``|mean(d)| = |Σ_c S_c| / n``, so this is :func:`randomization_test` on the cluster sums ``S_c`` (exact when
    ``2^C <= n_permutations``). Per-query differences within ``tie_tol`` are 0 before they are summed, and a cluster
    whose sum is within ``TIE`` of 0 (its changes cancel) is a tie: it is not one of the ``C`` differing clusters."""
    sums, _ = cluster_sums(untie(_as_diffs(d), tie_tol), groups)
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
        for counts in random_blocks("counts", C, n_resamples, seed):
            means[done:done + len(counts)] = (counts @ sums) / (counts @ sizes)[:, None]
            done += len(counts)
        tail = (1.0 - level) / 2.0 * 100.0
        lohi = np.percentile(means, [tail, 100.0 - tail], axis=0)
    return (float(lohi[0, 0]), float(lohi[1, 0])) if one else lohi


def effect_size(a, b, tie_tol: float = TIE) -> float:
    """Cohen's d_z for paired samples: mean(b - a) / sd(b - a) (ddof 1; differences within ``tie_tol`` are 0).
    NaN if sd is 0 (the differences are constant up to ``TIE``) or n < 2."""
    d = untie(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64), tie_tol)
    if len(d) < 2 or _constant(d[:, None])[0]:
        return float("nan")
    return float(d.mean() / d.std(ddof=1))


def win_tie_loss(a, b, tol: float = TIE) -> tuple[int, int, int]:
    """Queries where B beats A by more than ``tol`` (wins), within ``tol`` (ties), and where A beats B (losses)."""
    d = untie(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64), tol)
    wins = int(np.sum(d > 0))
    losses = int(np.sum(d < 0))
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
                  n_resamples: int = N_BOOTSTRAP, seed: int = SEED, tie_tol: float | list[float] = TIE,
                  level: float = 0.95, groups: list | None = None) -> list[PairedResult]:
    """All statistics for each ``(a, b)`` pair; Holm is applied over the whole list (randomisation p-values).

    ``tie_tol``: the tie tolerance (:data:`TIE`), or one per pair (:func:`tie_tolerance` of where each side's values
    were stored): a difference within it is 0 in every statistic — the tests, the bootstrap, the t-test, d_z, W/T/L
    and ``delta`` (the mean difference, ties at 0); ``mean_a`` / ``mean_b`` are the values' own means.
    Pairs with the same number of queries are batched (one sign matrix, one bootstrap matrix per size).
    ``groups``: per pair, the cluster label of each query (or None): such a pair is tested and bootstrapped by
    clusters (:func:`cluster_randomization_test`, :func:`cluster_bootstrap_ci`) when it has at least 2 clusters
    and fewer clusters than queries.

    >>> r, = compare_pairs([([0.5, 0.613147, 1.0], [0.5, 0.6131471927654584, 0.0])], tie_tol=tie_tolerance(6, None))
    >>> (r.wins, r.ties, r.losses), r.delta
    ((0, 2, 1), -0.3333333333333333)
    """
    tols = list(tie_tol) if isinstance(tie_tol, (list, tuple, np.ndarray)) else [tie_tol] * len(pairs)
    if len(tols) != len(pairs):
        raise ValueError(f"tie_tol: {len(tols)} tolerances for {len(pairs)} pairs")
    out: list[PairedResult | None] = [None] * len(pairs)
    by_n: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        if len(a) != len(b):
            raise ValueError(f"pair {i}: {len(a)} vs {len(b)} values (paired tests need the same queries)")
        g = groups[i] if groups is not None else None
        C = len(set(map(str, g))) if g is not None else 0
        if g is not None and 2 <= C < len(a):
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            d = untie(b - a, tols[i])
            lo, hi = cluster_bootstrap_ci(d, g, level, n_resamples, seed)
            w, t, l = win_tie_loss(a, b, tols[i])
            out[i] = PairedResult(len(a), float(a.mean()), float(b.mean()), float(d.mean()), lo, hi,
                                  float(cluster_randomization_test(d, g, n_permutations, seed)),
                                  paired_t_test(a, b, tols[i])[1], math.nan, effect_size(a, b, tols[i]), w, t, l, C)
            continue
        by_n.setdefault(len(a), []).append(i)
    for n, idx in by_n.items():
        if n == 0:
            for i in idx:
                out[i] = PairedResult(0, *([math.nan] * 5), math.nan, math.nan, math.nan, math.nan, 0, 0, 0)
            continue
        A = np.column_stack([np.asarray(pairs[i][0], dtype=np.float64) for i in idx])
        B = np.column_stack([np.asarray(pairs[i][1], dtype=np.float64) for i in idx])
        col_tol = np.array([tols[i] for i in idx], dtype=np.float64)
        D = untie(B - A, col_tol)
        p_rand = randomization_test(D, n_permutations, seed)
        ci = bootstrap_ci(D, level, n_resamples, seed)
        _, p_ts = paired_t_tests(A, B, col_tol)
        for j, i in enumerate(idx):
            a, b = A[:, j], B[:, j]
            p_t = float(p_ts[j])
            w, t, l = win_tie_loss(a, b, tols[i])
            out[i] = PairedResult(n, float(a.mean()), float(b.mean()), float(D[:, j].mean()), float(ci[0, j]),
                                  float(ci[1, j]), float(p_rand[j]), p_t, math.nan, effect_size(a, b, tols[i]), w, t,
                                  l)
    adj = holm([r.p_randomization for r in out])
    for r, p in zip(out, adj):
        r.p_holm = float(p)
    return out  # type: ignore[return-value]


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
