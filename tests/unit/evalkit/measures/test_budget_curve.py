"""Quality at a token budget (evalkit.measures.budget_curve) against a hand computation."""
from __future__ import annotations

import math

from evalkit.measures.budget_curve import budget_curve, pack
from retrievers.tokens import count_tokens

TEXTS = {"a": "alpha " * 50, "b": "beta " * 100, "x": "noise " * 30}


def test_pack_stops_at_the_first_chunk_that_does_not_fit():
    tok = {"a": 60, "b": 120, "x": 10}
    assert pack(["a", "b", "x"], tok, 100) == ["a"]       # b does not fit: stop (x is not tried)
    assert pack(["a", "b", "x"], tok, 200) == ["a", "b", "x"]


def test_budget_curve_by_hand():
    ta, tb, tx = (count_tokens(TEXTS[d]) for d in "abx")
    qrels = {"q": {"a": 1, "b": 1}}
    ranked = {"q": ["x", "a", "b"], "n": ["x"]}
    b1 = tx + ta            # x and a fit, b does not
    (row,) = budget_curve(qrels, ranked, TEXTS, budgets=(b1,))
    assert math.isclose(row["recall"], 1 / 2)
    assert math.isclose(row["relevant_token_share"], ta / (tx + ta + tx))   # query n packs x too
    assert math.isclose(row["mean_tokens"], (tx + ta + tx) / 2)
    # nDCG@10 of [x, a] with a and b relevant (grade 1): (1/log2 3) / (1 + 1/log2 3)
    assert math.isclose(row["ndcg@10"], (1 / math.log2(3)) / (1 + 1 / math.log2(3)), rel_tol=1e-6)
