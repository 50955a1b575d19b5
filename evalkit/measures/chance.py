"""Chance levels and saturation: what a random ranking scores, and when a cut-off is too large to mean anything.

A query can only retrieve the ``N_q`` documents visible to it (its group — one LoCoMo conversation, one
LongMemEval haystack — under the as-of protocol). A random ranking of them (every permutation equally likely)
has, with ``R_q`` relevant documents of grades ``g`` (linear gain, as :mod:`evalkit.measures.lists`):

* ``recall@k`` = ``min(k, N) / N``; ``precision@k`` = ``R · min(k, N) / (N · k)``; ``hit_rate@k`` =
  ``1 − C(N − R, m) / C(N, m)`` with ``m = min(k, N)``;
* ``ndcg@k`` = ``(Σg / N) · Σ_{i<m} 1/log2(i + 2)`` divided by the ideal DCG@k (each position holds a uniformly
  random document, so its expected gain is the mean grade);
* ``mrr@k`` = ``Σ_{i=1..m} P(first relevant at rank i) / i``, ``P = (Π_{j<i-1} (N − R − j)/(N − j)) · R/(N − i + 1)``.

Averaged over the answerable queries. A measure at cut-off ``k`` is **saturated** when ``k`` is at least the
median ``N_q``: every system that returns its whole candidate pool scores the maximum, so it cannot rank systems
(recall@100 on haystacks of ~50 sessions).
"""
from __future__ import annotations

import math

import numpy as np

from evalkit.measures import catalogue
from evalkit.measures.lists import relevant_qrels

CHANCE_FAMILIES = tuple(f.name for f in catalogue.SETS["chance"])


def _one(family: str, k: int, n: int, grades: list[int]) -> float:
    r = len(grades)
    if n <= 0 or r == 0:
        return float("nan")
    r = min(r, n)
    m = min(k, n)
    if family == "recall":
        return m / n
    if family == "precision":
        return r * m / (n * k)
    if family == "hit_rate":
        return 1.0 - (math.comb(n - r, m) / math.comb(n, m) if n - r >= m else 0.0)
    if family == "ndcg":
        disc = 1.0 / np.log2(np.arange(m) + 2.0)
        ideal = sorted(grades, reverse=True)[:k]
        idcg = float(np.sum(np.asarray(ideal, dtype=np.float64) / np.log2(np.arange(len(ideal)) + 2.0)))
        return float(sum(grades) / n * disc.sum()) / idcg if idcg > 0 else float("nan")
    if family == "mrr":
        none_before, out = 1.0, 0.0
        for i in range(1, m + 1):
            out += none_before * r / (n - i + 1) / i
            none_before *= (n - r - (i - 1)) / (n - i + 1) if n - i + 1 > 0 else 0.0
        return out
    raise ValueError(f"no chance level for {family!r}")


def chance_level(metric: str, qrels: dict[str, dict[str, int]], visible: dict[str, int]) -> float:
    """Expected ``metric`` of a random ranking over the answerable queries (NaN when it has no closed form here
    or no query has a count in ``visible``)."""
    try:
        m = catalogue.parse(metric)
    except ValueError:
        return float("nan")
    if m.family.name not in CHANCE_FAMILIES or m.k is None or m.injected:
        return float("nan")
    vals = [_one(m.family.name, m.k, visible[q], list(rel.values()))
            for q, rel in relevant_qrels(qrels).items() if q in visible]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else float("nan")


def saturated(metric: str, median_visible: float | None) -> bool:
    """Is ``metric``'s cut-off at or above the median number of documents a query can retrieve?"""
    try:
        m = catalogue.parse(metric)
    except ValueError:
        return False
    return bool(median_visible) and m.k is not None and m.kind == "ranking" and m.k >= median_visible


__all__ = ["chance_level", "saturated", "CHANCE_FAMILIES"]
