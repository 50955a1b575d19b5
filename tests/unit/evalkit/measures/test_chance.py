"""Chance levels (a random ranking's expected value) and saturated cut-offs (evalkit.measures.chance)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from evalkit.measures.chance import chance_level, saturated
from evalkit.measures.lists import evaluate


def test_chance_levels_equal_the_mean_over_every_permutation():
    # one query, 5 visible documents, two relevant (grades 2 and 1): enumerate all 120 rankings with ranx
    qrels = {"q": {"a": 2, "b": 1}}
    docs = ["a", "b", "x", "y", "z"]
    metrics = ["recall@2", "ndcg@3", "mrr@3", "precision@2", "hit_rate@2"]
    perms = list(itertools.permutations(docs))
    ids = [f"p{i}" for i in range(len(perms))]  # one query per ranking, scored in one call
    pq = evaluate({q: qrels["q"] for q in ids}, {q: [(d, 0.0) for d in p] for q, p in zip(ids, perms)}, metrics)
    for m in metrics:
        assert math.isclose(chance_level(m, qrels, {"q": 5}), np.mean(list(pq[m].values())), rel_tol=1e-9), m


def test_recall_at_k_beyond_the_pool_is_saturated():
    # LongMemEval-S-like: ~48 sessions per haystack → recall@50 and recall@100 are saturated, recall@10 is not
    assert saturated("recall@100", 48) and saturated("recall@50", 48.0)
    assert not saturated("recall@10", 48) and not saturated("skip_rate", 48) and not saturated("recall@100", None)
    assert chance_level("recall@100", {"q": {"a": 1}}, {"q": 48}) == 1.0
    assert np.isnan(chance_level("skip_rate", {"q": {"a": 1}}, {"q": 48}))
