"""Tie groups of systems ranked on one measure: each system's rank range from the paired tests of
:mod:`evalkit.measures.paired` over every pair, Holm-adjusted over all of them (``rank_ranges``: "1–3" = not
distinguishable from the best), and a range as text (``rank_text``)."""
from __future__ import annotations

from evalkit.measures.paired import ALPHA, compare_pairs


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
