"""Overlap of two ranked lists, for comparing retrievers without relevance labels (query-log replay, `evalkit
replay`): Jaccard of the top k, and extrapolated rank-biased overlap.

Usage::

    jaccard_at_k(["a", "b", "c"], ["b", "a", "d"], 2)   # 1.0: the same two at the top
    rbo_ext(["a", "b", "c"], ["a", "b", "c"])            # 1.0; disjoint lists → 0.0
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from evalkit.data.groups import jaccard  # one definition: near-duplicate queries are clustered by it too

RBO_P = 0.9


def _dedupe(xs: Iterable) -> list:
    seen: set = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def jaccard_at_k(a: Sequence, b: Sequence, k: int) -> float:
    """Jaccard of the top-``k`` items of two ranked lists (NaN when both are empty)."""
    return jaccard(list(a)[:k], list(b)[:k])


def rbo_ext(a: Sequence, b: Sequence, p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat & Zobel 2010, "A similarity measure for indefinite
    rankings", ACM TOIS 28(4), eq. 32 — eq. 30 when the lists have equal length).

    With S the shorter list (length s), L the longer (length l), and X_d = |S_{:d} ∩ L_{:d}| the overlap at depth
    d (for d > s, S_{:d} = S)::

        RBO_ext = (1-p)/p · [ Σ_{d=1..l} X_d/d · p^d  +  Σ_{d=s+1..l} X_s·(d-s)/(s·d) · p^d ]
                  + [ (X_l - X_s)/l + X_s/s ] · p^l

    Identical lists → 1, disjoint lists → 0; p = 0.9 puts ~86 % of the weight on the top 10. Duplicates keep
    their first position. One empty list → 0; both empty → NaN (undefined).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    a, b = _dedupe(a), _dedupe(b)
    if not a and not b:
        return float("nan")
    if not a or not b:
        return 0.0
    S, L = (a, b) if len(a) <= len(b) else (b, a)
    s, l = len(S), len(L)
    pos = {x: j for j, x in enumerate(L, 1)}
    # an item at rank i in S and rank j in L is in the overlap from depth max(i, j) on
    hist = np.zeros(l + 1)
    for i, x in enumerate(S, 1):
        j = pos.get(x)
        if j is not None:
            hist[max(i, j)] += 1
    X = np.cumsum(hist)[1:]  # X[d-1] = X_d, d = 1..l
    d = np.arange(1, l + 1, dtype=np.float64)
    pw = p ** d
    xs, xl = X[s - 1], X[l - 1]
    term = float(np.sum(X / d * pw))
    if l > s:
        dd, pp = d[s:], pw[s:]
        term += float(np.sum(xs * (dd - s) / (s * dd) * pp))
    return (1.0 - p) / p * term + ((xl - xs) / l + xs / s) * p ** l
