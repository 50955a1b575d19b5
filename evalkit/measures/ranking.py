"""Tie groups of systems ranked on one measure: each system's rank range from the paired tests of
:mod:`evalkit.measures.paired` over every pair, Holm-adjusted over all of them (``rank_ranges``: "1–3" = not
distinguishable from the best), a range as text (``rank_text``), and ``standing``: the same ranges from the largest
family of tests that can reach alpha at the sample's size (every pair; else each against the best; else none —
ranked by the mean, with the clusters the best wins and a per-question test beside it)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalkit.measures.paired import ALPHA, PairedResult, cluster_sums, compare_pairs
from evalkit.measures.power import can_reach, smallest_p


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


@dataclass
class Standing:
    """Where systems stand on one measure, and how that was decided (:func:`standing`).

    ``ranks``: a rank range per name ("1–3" = not distinguishable from the best; ``(i, i)`` by the mean when no test
    can separate any pair). ``design``: the family Holm ran over — ``"pairs"`` (every pair), ``"best"`` (each
    system against the best by the mean: all pairs could not reach alpha, the k − 1 comparisons with the best can)
    or ``"mean"`` (not even those can: ranked by the mean, no test). ``comparisons``: that family's size (0 for
    ``"mean"``). ``note``: one sentence saying what the design could not do ("" when every pair could be
    separated). ``cluster_wins``: per name, the clusters in which the best scores higher / the same / lower (its
    cluster means, a difference within 1e-9 a tie; empty without clusters). ``per_question``: for ``"mean"``, the
    best against each other system query by query (``delta`` = other − best, W/T/L the other's) — **not clustered**,
    Holm over the k − 1 (what the questions suggest, not a test of the clustered design)."""

    ranks: dict[str, tuple[int, int]]
    design: str = "pairs"
    comparisons: int = 0
    note: str = ""
    units: int = 0            # clusters (or queries) a test resamples
    unit: str = "query"
    cluster_wins: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    per_question: dict[str, PairedResult] = field(default_factory=dict)

    @property
    def best(self) -> str | None:
        return next(iter(self.ranks), None)

    def tied_with_best(self, name: str) -> bool:
        """Whether ``name`` may be shown as tied with the best (bold): its range starts at 1 and, with clusters, the
        best does not score higher in every one of them (a system that loses every conversation is not tied with
        the best, whatever the test can say)."""
        rng = self.ranks.get(name)
        if not rng or rng[0] != 1:
            return False
        won, tied, lost = self.cluster_wins.get(name, (0, 1, 0))
        return name == self.best or not (won > 0 and tied == 0 and lost == 0)

    def wins_text(self, name: str) -> str:
        """"wins 10/10 conversations" (the best against ``name``), "" without clusters or for the best itself."""
        if name == self.best or name not in self.cluster_wins:
            return ""
        won, tied, lost = self.cluster_wins[name]
        return f"{won}/{won + tied + lost}" + (f" ({tied} tied)" if tied else "")


def _units(pairs: dict[tuple[str, str], tuple]) -> tuple[int, bool]:
    """(the most clusters a pair's test resamples — queries when it is not clustered —, whether any is clustered),
    by the rule of :func:`evalkit.measures.paired.compare_pairs` (2 <= clusters < queries)."""
    most, clustered = 0, False
    for v in pairs.values():
        g = v[2] if len(v) > 2 else None
        c = len(set(map(str, g))) if g is not None else 0
        if g is not None and 2 <= c < len(v[0]):
            most, clustered = max(most, c), True
        else:
            most = max(most, len(v[0]))
    return most, clustered


def _with_best(pairs: dict[tuple[str, str], tuple], best: str, other: str) -> tuple | None:
    """The pair (best's values, other's values, clusters) from ``pairs``, whichever order it was stored in."""
    if (best, other) in pairs:
        return pairs[(best, other)]
    v = pairs.get((other, best))
    return None if v is None else (v[1], v[0], *v[2:])


def standing(names: list[str], pairs: dict[tuple[str, str], tuple], alpha: float = ALPHA, unit: str = "cluster",
             what: str = "retrievers") -> Standing:
    """Rank ranges of ``names`` (best mean first) by the largest family of paired tests that can reach ``alpha``.

    A sign-flip test of ``C`` clusters (or queries) cannot give p below ``2 / 2^C``, so after Holm over ``m``
    comparisons no difference, however large, is significant when ``m · 2 / 2^C >= alpha``
    (:func:`evalkit.measures.power.can_reach`): 10 conversations allow 0.002, × 435 pairs of 30 systems = 0.85.
    The family is chosen from ``C`` and the number of systems only, before any p-value is seen:

    1. every pair (``m = k(k − 1)/2``), when it can reach alpha — :func:`rank_ranges` as it is;
    2. else each system against the best by the mean (``m = k − 1``; multiple comparisons with the best, Hsu 1984;
       Gupta's subset selection, 1965): the question the leaderboard asks is "which could be the best"; a system
       significantly worse than the best is ranked "2–k" (not the best, its place among the rest untested);
    3. else none: ranked by the mean, the ``note`` says so once, and what the data do say is kept beside it — how
       many clusters the best wins against each (``cluster_wins``) and the per-question test (``per_question``,
       not clustered, Holm over the k − 1).

    ``pairs``: as :func:`rank_ranges` (every pair, or at least each with ``names[0]``); ``unit``: what a cluster is
    ("conversation"), for the note.

    >>> import numpy as np
    >>> g = [c for c in range(10) for _ in range(3)]                       # 10 conversations of 3 questions
    >>> a, b = np.linspace(0.5, 0.9, 30), np.linspace(0.4, 0.8, 30)         # b lower in every conversation
    >>> vals = {f"s{i}": a - 0.001 * i for i in range(8)} | {"low": b}
    >>> names = list(vals)
    >>> pairs = {(x, y): (vals[x], vals[y], g) for i, x in enumerate(names) for y in names[i + 1:]}
    >>> st = standing(names, pairs, unit="conversation")
    >>> st.design, st.comparisons, st.ranks["low"], st.wins_text("low"), st.tied_with_best("low")
    ('best', 8, (2, 9), '10/10', False)
    """
    k = len(names)
    units, clustered = _units(pairs)
    noun = f"{unit}s" if clustered else "queries"
    floor = smallest_p(units)
    if k < 2 or not units or can_reach(units, alpha, k * (k - 1) // 2):
        return Standing(rank_ranges(names, pairs, alpha), "pairs", k * (k - 1) // 2, units=units, unit=unit)
    best = names[0]
    vs_best = {(best, r): v for r in names[1:] if (v := _with_best(pairs, best, r)) is not None}
    st = Standing({}, units=units, unit=unit)
    if clustered:
        for (_, r), (x, y, g) in ((key, v[:3]) for key, v in vs_best.items()):
            if g is None:
                continue
            sums, sizes = cluster_sums(np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64), g)
            d = sums[:, 0] / sizes
            st.cluster_wins[r] = (int(np.sum(d > 1e-9)), int(np.sum(np.abs(d) <= 1e-9)), int(np.sum(d < -1e-9)))
    m_all = k * (k - 1) // 2
    if can_reach(units, alpha, k - 1):
        st.ranks, st.design, st.comparisons = rank_ranges(names, vs_best, alpha), "best", k - 1
        st.note = (f"{units} {noun}: no pair of {k} {what} could reach p < {alpha:g} after Holm over all {m_all} "
                   f"pairs (smallest p {floor:.2g} × {m_all} = {min(1.0, m_all * floor):.2g}), so each is tested "
                   f"against the best by the mean, {best}, Holm over those {k - 1} comparisons "
                   f"(× {k - 1} = {(k - 1) * floor:.2g})")
        return st
    st.ranks = {r: (i, i) for i, r in enumerate(names, start=1)}
    st.design = "mean"
    st.note = (f"{units} {noun}: no difference between {k} {what} can reach p < {alpha:g} after Holm (the smallest p "
               f"of {units} {noun} is {floor:.2g}; × {k - 1} comparisons with the best = "
               f"{min(1.0, (k - 1) * floor):.2g}): ranked by the mean" +
               (f", with the {unit}s the best wins against each and the per-question test (not clustered)"
                if clustered else ""))
    if not clustered:  # the per-question test is the design's own test: it cannot reach alpha either
        return st
    keys = [r for (_, r) in vs_best if len(vs_best[(best, r)][0]) >= 2]
    res = compare_pairs([(vs_best[(best, r)][0], vs_best[(best, r)][1]) for r in keys]) if keys else []
    st.per_question = dict(zip(keys, res))
    return st
