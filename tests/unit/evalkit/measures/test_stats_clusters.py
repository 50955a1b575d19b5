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


def _systems(k: int, clusters: int, per: int = 3, seed: int = 2):
    """``k`` systems over ``clusters`` conversations of ``per`` questions, best mean first: each one 0.05 below the
    one before in every conversation (plus noise), and a last one at 0 everywhere (it loses every conversation)."""
    rng = np.random.default_rng(seed)
    g = [f"c{c}" for c in range(clusters) for _ in range(per)]
    base = rng.uniform(0.4, 0.9, clusters * per)
    vals = {f"s{i}": base - 0.05 * i + rng.normal(0, 0.01, len(base)) for i in range(k - 1)}
    vals["zero"] = np.zeros(len(base))
    names = list(vals)
    pairs = {(a, b): (vals[a], vals[b], g) for i, a in enumerate(names) for b in names[i + 1:]}
    return names, pairs, vals


def test_standing_every_pair_when_the_clusters_allow_it():
    names, pairs, _ = _systems(5, 10)      # 10 pairs × 2/2^10 = 0.0195 < 0.05
    st = stats.standing(names, pairs, unit="conversation")
    assert st.design == "pairs" and st.comparisons == 10 and st.note == ""
    assert st.ranks == stats.rank_ranges(names, pairs)
    assert st.ranks["s0"] == (1, 1) and st.ranks["zero"] == (5, 5)   # each wins all 10 conversations: separable


def test_standing_each_against_the_best_when_all_pairs_cannot_reach_alpha():
    names, pairs, _ = _systems(8, 10)      # 28 pairs × 0.00195 = 0.055 ≥ 0.05; 7 with the best: 0.0137
    assert all(r == (1, 8) for r in stats.rank_ranges(names, pairs).values())   # every pair: "1–8" for all
    st = stats.standing(names, pairs, unit="conversation")
    assert st.design == "best" and st.comparisons == 7
    assert st.ranks["s0"] == (1, 1) and all(st.ranks[r] == (2, 8) for r in names[1:])
    assert st.note.startswith("10 conversations: no pair of 8 retrievers could reach p < 0.05 after Holm over all "
                              "28 pairs (smallest p 0.002 × 28 = 0.055), so each is tested against the best by the "
                              "mean, s0, Holm over those 7 comparisons")
    assert st.cluster_wins["zero"] == (10, 0, 0) and st.wins_text("zero") == "10/10"


def test_standing_by_the_mean_when_no_test_can_reach_alpha_and_never_tied_when_losing_everywhere():
    names, pairs, vals = _systems(30, 10)  # 29 comparisons with the best × 0.00195 = 0.057
    st = stats.standing(names, pairs, unit="conversation")
    assert st.design == "mean" and st.comparisons == 0
    assert st.ranks == {r: (i, i) for i, r in enumerate(names, start=1)}
    assert st.note == ("10 conversations: no difference between 30 retrievers can reach p < 0.05 after Holm (the "
                       "smallest p of 10 conversations is 0.002; × 29 comparisons with the best = 0.057): ranked by "
                       "the mean, with the conversations the best wins against each and the per-question test (not "
                       "clustered)")
    assert st.wins_text("zero") == "10/10" and not st.tied_with_best("zero") and st.tied_with_best("s0")
    # the per-question test: not clustered, Holm over the 29 comparisons with the best, Δ = other − best
    res = st.per_question["zero"]
    assert res.clusters == 0 and res.n == 30 and math.isclose(res.delta, -float(vals["s0"].mean()))
    (alone,) = stats.compare_pairs([(vals["s0"], vals["zero"])])
    assert res.p_holm >= alone.p_randomization and res.losses == 30
    # the old rule would have called "zero" tied with the best: every pair, Holm over 435, "1–30"
    assert stats.rank_ranges(names, pairs)["zero"] == (1, 30)


def test_tied_with_best_needs_more_than_a_rank_range_starting_at_one():
    st = stats.Standing({"a": (1, 2), "b": (1, 2)}, cluster_wins={"b": (4, 0, 0)})
    assert st.tied_with_best("a") and not st.tied_with_best("b")   # b loses every cluster to the best
    st = stats.Standing({"a": (1, 2), "b": (1, 2)}, cluster_wins={"b": (3, 1, 0)})
    assert st.tied_with_best("b") and st.wins_text("b") == "3/4 (1 tied)"


def test_standing_without_clusters_ranks_by_the_mean_when_the_queries_are_too_few():
    a, b, c = np.array([0.9, 0.8, 0.7, 0.6, 0.5]), np.array([0.5, 0.4, 0.3, 0.2, 0.1]), np.zeros(5)
    pairs = {("a", "b"): (a, b, None), ("a", "c"): (a, c, None), ("b", "c"): (b, c, None)}
    st = stats.standing(["a", "b", "c"], pairs)   # 5 queries: smallest p 2/32 = 0.0625 even for one comparison
    assert st.design == "mean" and st.ranks == {"a": (1, 1), "b": (2, 2), "c": (3, 3)}
    assert st.note == ("5 queries: no difference between 3 retrievers can reach p < 0.05 after Holm (the smallest p "
                       "of 5 queries is 0.062; × 2 comparisons with the best = 0.12): ranked by the mean")
    assert st.cluster_wins == {} and st.per_question == {}
