"""The statistics of paired system comparisons, behind one name: a facade that re-exports the public names of the
modules below, so callers write ``from evalkit.measures import stats`` and ``stats.compare_pairs_adjusted(...)``.
It defines nothing; each module holds its code, formulas and citations, and has one job:

* :mod:`evalkit.measures.paired` — the paired tests over per-query values ``d = b - a`` and what they report:
  sign-flip randomisation test (exact or Monte Carlo), paired t-test, Holm, percentile bootstrap, their cluster
  variants, Cohen's d_z, wins / ties / losses, ``PairedResult`` and ``compare_pairs``; the defaults ``SEED``,
  ``N_PERMUTATIONS``, ``N_BOOTSTRAP``, ``ALPHA``; the one tie tolerance ``TIE`` (a difference within 1e-9 is no
  change, in every test) with ``untie``, ``differing`` and ``tie_tolerance`` (values stored rounded); ``format_p``;
* :mod:`evalkit.measures.intervals` — intervals that agree with those tests: the sign-flip test inverted
  (``signflip_interval``) and each comparison's interval at the level Holm decided it at (``holm_level``,
  ``holm_adjusted_intervals``, ``compare_pairs_adjusted``);
* :mod:`evalkit.measures.power` — what a sample can detect at all: ``mde``, ``smallest_p``, ``can_reach``,
  ``units_needed``, ``mde_text``;
* :mod:`evalkit.measures.ranking` — tie groups: ``rank_ranges``, ``rank_text``, ``standing`` (``Standing``);
* :mod:`evalkit.measures.resampling` — the seeded random sign vectors and bootstrap counts, and their cache
  (``cache_clear`` is re-exported; its size limit ``CACHE_MAX_ELEMENTS`` is set on that module, where it is read).

Those modules import each other downwards (resampling ← paired ← intervals, power, ranking) and never import this
one, so the facade closes no cycle.
"""
from __future__ import annotations

from evalkit.measures.intervals import compare_pairs_adjusted, holm_adjusted_intervals, holm_level, signflip_interval
from evalkit.measures.paired import (
    ALPHA,
    N_BOOTSTRAP,
    N_PERMUTATIONS,
    SEED,
    TIE,
    PairedResult,
    bootstrap_ci,
    bootstrap_means,
    cluster_bootstrap_ci,
    cluster_randomization_test,
    cluster_sums,
    compare_pairs,
    differing,
    effect_size,
    format_p,
    holm,
    paired_t_test,
    paired_t_tests,
    randomization_test,
    tie_tolerance,
    untie,
    win_tie_loss,
)
from evalkit.measures.power import can_reach, mde, mde_text, smallest_p, units_needed
from evalkit.measures.ranking import Standing, rank_ranges, rank_text, standing
from evalkit.measures.resampling import cache_clear

__all__ = [
    # paired
    "SEED", "N_PERMUTATIONS", "N_BOOTSTRAP", "ALPHA", "randomization_test", "paired_t_test", "paired_t_tests", "holm",
    "bootstrap_means", "bootstrap_ci", "cluster_sums", "cluster_randomization_test", "cluster_bootstrap_ci",
    "effect_size", "win_tie_loss", "PairedResult", "compare_pairs", "format_p", "TIE", "tie_tolerance", "untie",
    "differing",
    # intervals
    "signflip_interval", "holm_level", "holm_adjusted_intervals", "compare_pairs_adjusted",
    # power
    "mde", "smallest_p", "can_reach", "units_needed", "mde_text",
    # ranking
    "rank_ranges", "rank_text", "Standing", "standing",
    # resampling
    "cache_clear",
]
