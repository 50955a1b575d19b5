"""What a paired comparison of a sample of queries (or clusters) can detect at all: the minimum detectable effect,
and the smallest p-value the sign-flip test of :mod:`evalkit.measures.paired` can give at the sample's size.

* ``mde`` — minimum detectable effect of a paired comparison at alpha 0.05 and power 0.8 (normal approximation);
* ``smallest_p`` / ``can_reach`` / ``units_needed`` — the smallest p-value a paired sign-flip test of ``n``
  differing queries (or clusters) can give, ``2 / 2^n`` (both all-same-sign vectors are as extreme as the data),
  and whether it can fall below alpha at all (with Holm over ``m`` comparisons the smallest adjusted p is
  ``m · 2 / 2^n``): below that size no difference, however large, can be significant. ``n`` counts differences
  that are not ties (``|d| > TIE``, :func:`evalkit.measures.paired.differing`): a query that did not change — or
  only by its stored rounding — adds nothing to what the test can reach;
* ``mde_text`` — the minimum detectable effect as text, or "too few queries to detect any difference at α" when the
  test cannot reach alpha.
"""
from __future__ import annotations

import math

import numpy as np

from evalkit.measures.paired import ALPHA, N_PERMUTATIONS


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = 0.8) -> float:
    """Minimum detectable effect of a paired comparison of ``n`` queries (normal approximation, two-sided):
    ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``, ``sd`` = standard deviation of the per-query differences."""
    from scipy.special import ndtri  # lazy: startup
    if n < 2 or not np.isfinite(sd):
        return float("nan")
    return float((ndtri(1 - alpha / 2) + ndtri(power)) * sd / math.sqrt(n))


def smallest_p(n: int, n_permutations: int = N_PERMUTATIONS) -> float:
    """The smallest two-sided p :func:`randomization_test` can return for ``n`` differences that are not ties
    (queries, or clusters; :func:`evalkit.measures.paired.differing`): ``2 / 2^n`` when it enumerates (``2^n <=
    n_permutations``; the observed signs and their negation are both as extreme as the data), else ``1 / (1 +
    n_permutations)``. 1 for n = 0.

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
