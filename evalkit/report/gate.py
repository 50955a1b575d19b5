"""The text, Markdown and JSON forms of a gate run (:mod:`evalkit.workflows.gate`): the state table, each failing
row's worst per-query losses, ``gate.md`` and ``gate.json`` of a failing gate's report folder.

Pure functions over the gate's rows (``GateRow``: dataset, retriever, metric, expected, actual, tolerance, p,
state, note) and its result (``GateResult``: baseline, rows, losses), which renders itself through them
(``result.to_text()`` …); this module never imports the workflow.
"""
from __future__ import annotations

import json

from evalkit.report.format import fmt, fmt_signed

STATES = ("OK", "WARN", "FAIL", "NEW", "MISSING")
WORST = 10  # losses listed per failing row


def render_table(rows: list) -> str:
    """One line per row (state, dataset, retriever, metric, expected, actual, delta, tolerance, p, note), then the
    counts per state (``gate: OK 125, WARN 1``)."""
    w = max([len(r.retriever) for r in rows] + [9])
    dw = max([len(r.dataset) for r in rows] + [7])
    lines = [f"{'state':<7} {'dataset':<{dw}} {'retriever':<{w}} {'metric':<10} {'expected':>9} {'actual':>9} "
             f"{'delta':>8} {'tol':>6} {'p':>7}"]
    for r in rows:
        lines.append(f"{r.state:<7} {r.dataset:<{dw}} {r.retriever:<{w}} {r.metric:<10} "
                     f"{fmt(r.expected, 4, '-'):>9} {fmt(r.actual, 4, '-'):>9} {fmt(r.delta, 4, '-'):>8} "
                     f"{fmt(r.tolerance, 3, '-'):>6} {fmt(r.p_value, 3, '-'):>7}" + (f"  {r.note}" if r.note else ""))
    counts = {s: sum(1 for r in rows if r.state == s) for s in STATES}
    lines.append("gate: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    return "\n".join(lines)


def loss_lines(losses: list, n: int = WORST) -> list[str]:
    """The ``n`` worst losses of a row (``Loss``: query id, expected → now, query text clipped to 100 characters),
    and how many more there are."""
    out = []
    for x in losses[:n]:
        text = " ".join(x.text.split())
        text = text if len(text) <= 100 else text[:99] + "…"
        out.append(f"  {fmt_signed(x.delta)}  {x.query_id} ({fmt(x.expected)} -> {fmt(x.actual)}): {text}")
    if len(losses) > n:
        out.append(f"  … {len(losses) - n} more queries lost")
    return out


def render_text(result) -> str:
    """What `evalkit gate` prints: the table and, for each failing row, its worst per-query losses."""
    out = [render_table(result.rows)]
    for key, losses in result.losses.items():
        out += ["", f"{' · '.join(key)}: worst per-query losses (expected -> now)",
                "\n".join(loss_lines(losses)) or "  (no query lost)"]
    return "\n".join(out)


def render_markdown(result) -> str:
    """gate.md of a failing gate's report folder: the table, the notes, each failing row's worst losses."""
    out = ["# evalkit gate", "", f"Baseline: `{result.baseline}`", "", "```", render_table(result.rows), "```", ""]
    out += [f"- {n}" for n in result.notes] + ([""] if result.notes else [])
    for key, losses in result.losses.items():
        out += [f"## {' · '.join(key)}: worst per-query losses", "", "```", *loss_lines(losses), "```", ""]
    return "\n".join(out)


def render_json(result) -> str:
    """gate.json: the baseline and every row with its delta."""
    return json.dumps({"baseline": result.baseline, "rows": [{**r.__dict__, "delta": r.delta} for r in result.rows]},
                      indent=1, sort_keys=True, default=str) + "\n"
