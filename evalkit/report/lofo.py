"""`evalkit lofo`'s tables: a defence's leave-one-family-out figures beside the evaluation set's, what each guard
can catch by construction, and each guard alone per family (the result: :class:`evalkit.workflows.lofo.
LofoResult`, read by attribute; this module never imports a workflow).

A rate cell is ``p % (k/n) [lo, hi]``: k of n targets got their planted note into the prompt
(``poison_injected_rate``), with its 95 % interval — Wilson's for independent targets, the design-effect Wilson
interval where targets share a cluster (a LoCoMo conversation: :func:`evalkit.measures.intervals.
clustered_wilson_interval`). A printed figure is *beaten* by a held-out family when the
family's interval lies wholly above the figure's interval.

Example (``res`` a LofoResult; not a doctest)::

    print(to_markdown(res))
"""
from __future__ import annotations

import math

from evalkit.report.format import fmt_pct
from evalkit.report.tables import Cell, Table
from evalkit.report.tables import to_markdown as table_markdown
from evalkit.report.tables import to_text as table_text

NOTE = ("injected = share of a family's targets whose prompt got their planted note (k/n) [95 % interval: Wilson, "
        "at the effective sample size where targets share a cluster]. LOFO: the learned guard fitted and the "
        "guards' thresholds re-tuned without that family (the thresholds it chose beside it); refit only: the "
        "guard refitted, the thresholds as shipped; every family known: fitted on all of them from the "
        "same plantings; as shipped: the preset's own model; evaluation set: the preset as shipped on the blind "
        "evaluation templates (– where the family has no evaluation templates).")


def rate_cell(r) -> Cell:
    """``p % (k/n) [lo, hi]`` of a Rate (– when absent)."""
    if r is None or not r.n:
        return Cell("–")
    lo, hi = r.interval
    return Cell(f"{fmt_pct(r.value, 1)} ({r.k}/{r.n}) [{fmt_pct(lo, 1)}, {fmt_pct(hi, 1)}]")


def _pooled(rates) -> object | None:
    rates = [r for r in rates if r is not None and r.n]
    if not rates:
        return None
    first = rates[0]
    cells: dict = {}  # the families' clusters pooled: one conversation's targets of every family stay one cluster
    for r in rates:
        for c, (k, n) in (getattr(r, "clusters", None) or {}).items():
            x = cells.setdefault(c, [0, 0])
            x[0], x[1] = x[0] + k, x[1] + n
    return type(first)(sum(r.k for r in rates), sum(r.n for r in rates), cells, max(
        (r.borrowed for r in rates if getattr(r, "borrowed", None) is not None), default=None))


def tuned_text(tuned: dict | None) -> str:
    """``classifier margin 1.0, query_echo threshold 1.0`` of a fold's chosen parameters (– when not re-tuned)."""
    if not tuned:
        return "–"
    return ", ".join(f"{stage.removeprefix('guard.')} {p} {v:g}" for stage, ps in tuned.items()
                     for p, v in ps.items())


def fold_rate(row):
    """The fold's headline figure: re-tuned when the folds were, else the guard refit alone, else as shipped."""
    return next((r for r in (row.retuned, row.lofo, row.shipped) if r is not None), None)


def family_table(res) -> Table:
    """Family × (can catch by construction, LOFO re-tuned and what it chose, refit only, every family known, as
    shipped, evaluation set); the re-tuned columns only when the folds were re-tuned."""
    retuned = any(r.retuned is not None for r in res.rows)
    t = Table(["held-out family", "guards that can catch it by construction"]
              + (["LOFO injected (refit + re-tuned)", "fold's thresholds", "refit only"] if retuned
                 else ["LOFO injected"]) + ["every family known", "as shipped", "evaluation set (as shipped)"])
    for row in res.rows:
        catch = ("not declared" if row.catchers is None else ", ".join(row.catchers) or "none")
        lofo = ([rate_cell(row.retuned), Cell(tuned_text(row.tuned), num=False), rate_cell(row.lofo)] if retuned
                else [rate_cell(row.lofo)])
        t.rows.append([Cell(row.family, num=False), Cell(catch, num=False)] + lofo
                      + [rate_cell(row.known), rate_cell(row.shipped), rate_cell(row.evaluation)])
    return t


def guard_table(res) -> Table:
    """Family × each guard alone (every other guard of the pipeline removed), no guard, and the whole pipeline."""
    cols = list(res.rows[0].alone) if res.rows else []
    t = Table(["family"] + [c if c == "no guard" else f"only {c}" for c in cols] + ["whole pipeline"])
    for row in res.rows:
        t.rows.append([Cell(row.family, num=False)] + [rate_cell(row.alone[c]) for c in cols]
                      + [rate_cell(row.shipped)])
    return t


def headline(res) -> list[str]:
    """The headline: the worst held-out family under LOFO beside the evaluation set's pooled figure, and every
    family whose interval lies wholly above that figure's."""
    folds = [(fold_rate(r), r.family) for r in res.rows]
    folds = [(r, f) for r, f in folds if r is not None and r.n]
    lines = []
    if folds:
        worst, fam = max(folds, key=lambda x: (x[0].value, x[1]))
        lo, hi = worst.interval
        lines.append(f"headline (leave one family out, worst held-out family): {fam} {fmt_pct(worst.value, 1)} "
                     f"({worst.k}/{worst.n}) [{fmt_pct(lo, 1)}, {fmt_pct(hi, 1)}]")
        caught = [(fold_rate(r), r.family) for r in res.rows if r.catchers]
        caught = [(r, f) for r, f in caught if r is not None and r.n]
        if caught and len(caught) < len(folds):
            w2, f2 = max(caught, key=lambda x: (x[0].value, x[1]))
            lo2, hi2 = w2.interval
            lines.append(f"worst held-out family a guard of the pipeline can catch by construction: {f2} "
                         f"{fmt_pct(w2.value, 1)} ({w2.k}/{w2.n}) [{fmt_pct(lo2, 1)}, {fmt_pct(hi2, 1)}]; no guard "
                         f"reads " + ", ".join(r.family for r in res.rows if r.catchers == []))
    ev = _pooled([r.evaluation for r in res.rows])
    if ev is not None:
        elo, ehi = ev.interval
        lines.append(f"evaluation set, families pooled (as shipped): {fmt_pct(ev.value, 1)} ({ev.k}/{ev.n}) "
                     f"[{fmt_pct(elo, 1)}, {fmt_pct(ehi, 1)}]")
        beaten = [f"{f} ({fmt_pct(r.value, 1)}, lower bound {fmt_pct(r.interval[0], 1)})" for r, f in folds
                  if not math.isnan(r.interval[0]) and r.interval[0] > ehi]
        lines.append("held-out families that beat it beyond its interval: " + (", ".join(beaten) or "none"))
    return lines


def _head(res) -> list[str]:
    return [f"{res.preset}: leave-one-family-out over {', '.join(res.design)} (split {res.split})"
            + (f"; evaluation set {', '.join(res.evaluation)}" if res.evaluation else "")]


def to_text(res) -> str:
    parts = _head(res) + headline(res) + ["", table_text(family_table(res)), "", "each guard alone (design "
                                                                                "plantings, the shipped model):",
                                          table_text(guard_table(res)), "", NOTE]
    parts += [f"limit: {x}" for x in res.limits]
    return "\n".join(parts)


def to_markdown(res) -> str:
    parts = ["\n".join(f"{x}  " for x in _head(res) + headline(res)), "", table_markdown(family_table(res)), "",
             "Each guard alone (design plantings, the shipped model):", "", table_markdown(guard_table(res)), "",
             NOTE, ""] + [f"- limit: {x}" for x in res.limits]
    return "\n".join(parts)


__all__ = ["family_table", "fold_rate", "tuned_text", "guard_table", "headline", "rate_cell", "to_markdown", "to_text"]
