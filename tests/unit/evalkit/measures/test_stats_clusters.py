"""Cluster-aware statistics, tie groups and the minimum detectable effect (evalkit.measures.stats)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from evalkit.measures import stats


def test_cluster_randomization_is_the_exact_sign_flip_over_cluster_sums():
    d = np.array([0.5, 0.1, -0.2, 0.3, 0.4, -0.1])
    g = ["a", "a", "b", "b", "c", "c"]
    sums = [0.6, 0.1, 0.3]
    # by hand: all 2^3 sign vectors over the cluster sums, |Σ s_c S_c| >= |Σ S_c| = 1.0
    hits = sum(abs(sum(s * x for s, x in zip(signs, sums))) >= 1.0 - 1e-12
               for signs in itertools.product((1, -1), repeat=3))
    assert math.isclose(stats.cluster_randomization_test(d, g), hits / 8)


def test_cluster_bootstrap_is_wider_when_clusters_share_an_effect():
    rng = np.random.default_rng(1)
    g = np.repeat(np.arange(8), 40)
    d = rng.normal(0, 0.3, 8)[g] + rng.normal(0, 0.1, len(g))
    lo, hi = stats.bootstrap_ci(d)
    clo, chi = stats.cluster_bootstrap_ci(d, g)
    assert (chi - clo) > 2 * (hi - lo)
    # one query per cluster: the cluster bootstrap is the ordinary one
    single = np.arange(len(d))
    assert np.allclose(stats.cluster_bootstrap_ci(d, single), stats.bootstrap_ci(d))


def test_compare_pairs_reports_clusters_used():
    a = np.zeros(6)
    b = np.array([0.5, 0.1, -0.2, 0.3, 0.4, -0.1])
    (res,) = stats.compare_pairs([(a, b)], groups=[["a", "a", "b", "b", "c", "c"]])
    assert res.clusters == 3 and math.isclose(res.p_randomization, stats.cluster_randomization_test(b, list("aabbcc")))
    (plain,) = stats.compare_pairs([(a, b)])
    assert plain.clusters == 0


def test_mde_normal_approximation():
    # (1.95996 + 0.84162) * 0.3 / sqrt(100)
    assert math.isclose(stats.mde(0.3, 100), (1.959964 + 0.841621) * 0.03, rel_tol=1e-5)
    assert math.isnan(stats.mde(0.3, 1))
