"""The answer run's human outputs: the per-question table, the attribution funnel (a PNG per run, one bar per
retriever), accuracy against the injection budget (a PNG: a curve per retriever over its budgets) and ``answers.md`` (header with model ids and prompt hashes, run-level table, per-question table).

Usage: ``png = funnel_png({"bm25": rows})``; ``text = answers_markdown("locomo", {"bm25": rows}, means, record)``.
"""
from __future__ import annotations

import io
import math

from evalkit.engine.answer import budget_of
from evalkit.measures import catalogue
from evalkit.report.format import fmt_value
from evalkit.runfolder.read import safe

FUNNEL = ("correct", "reader miss", "retrieval miss", "judge dispute", "fault")
COLOURS = {"correct": "#2e7d32", "reader miss": "#f9a825", "retrieval miss": "#c62828", "judge dispute": "#6a1b9a",
           "fault": "#616161"}
COLUMNS = ("query_id", "category", "verdict", "attribution", "evidence_in_context", "answer_in_context",
           "answer_exact", "answer_f1", "gold", "answer")


def _figure(size):
    """A figure without pyplot (no global state, no backend switched under a notebook)."""
    from matplotlib.figure import Figure  # lazy: startup
    fig = Figure(figsize=size, dpi=100)
    return fig, fig.add_subplot()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def funnel_counts(rows: list[dict]) -> dict[str, int]:
    return {k: sum((r.get("attribution") or "correct") == k for r in rows) for k in FUNNEL}


def funnel_png(by_retriever: dict[str, list[dict]], title: str = "") -> bytes:
    """One horizontal stacked bar per retriever: correct, then each cause of a wrong answer (counts of questions).
    The PNG carries no date or software stamp, so the same rows give the same bytes."""
    return _png(funnel_figure({n: funnel_counts(rows) for n, rows in by_retriever.items()}, title))


def funnel_figure(counts: dict[str, dict[str, int]], title: str = ""):
    """The funnel figure from counts (retriever → {"correct": n, "reader miss": n, …}): answers-funnel-*.png and
    the run report's Answers section draw this one figure."""
    names = list(counts)
    fig, ax = _figure((7.5, 0.7 + 0.55 * len(names)))
    left = [0] * len(names)
    for k in FUNNEL:
        vals = [int(counts[n].get(k, 0)) for n in names]
        if not any(vals):
            continue
        ax.barh(names, vals, left=left, color=COLOURS[k], label=k)
        for i, v in enumerate(vals):
            if v:
                ax.text(left[i] + v / 2, i, str(v), ha="center", va="center", color="white", fontsize=8)
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_title((title or "answers") + ": questions correct, and why the rest are not", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(names) < 3 else -0.15), ncol=5, fontsize=8,
              frameon=False)
    fig.tight_layout()
    return fig


def answers_line(manifest: dict) -> str | None:
    """The report header's line for an answer run: reader and judge model ids with their prompts' names and hashes
    (one entry per distinct record across the datasets), None for a run without answers."""
    recs = list((manifest.get("answers") or {}).values())
    parts: list[str] = []
    for rec in recs:
        rd = rec["reader"]
        text = (f"reader {rd['model']} ({rd['prompt']} {rd['prompt_hash']}); judges "
                + ", ".join(f"{j['model']} ({j['prompt']} {j['prompt_hash']})" for j in rec["judges"])
                + "; temperature 0, seed 0")
        if text not in parts:
            parts.append(text)
    return " · ".join(f"answers: {p}" for p in parts) or None


def budget_png(curves: dict[str, list[tuple[float, float, str]]], title: str = "") -> bytes:
    """Accuracy against the injection budget: one line per retriever through its points (mean injected tokens,
    answer accuracy), each labelled with its budget (``own``: the retriever's own budget; ``600``: re-packed by
    its own rule at 600 tokens, `evalkit answer --budgets`), in token order. No date or software stamp: the same
    numbers give the same bytes."""
    fig, ax = _figure((6.4, 3.4))
    colours = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#616161")
    for i, (name, pts) in enumerate(sorted(curves.items())):
        pts = sorted(pts)
        c = colours[i % len(colours)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color=c, label=name, markersize=4)
        for x, y, lab in pts:
            ax.annotate(lab, (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7, color=c)
    ax.set_xlabel("injected tokens per question (mean)")
    ax.set_ylabel("answer accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8, frameon=False, loc="best")
    ax.set_title(title or "accuracy against the injection budget", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def budget_points(names, tokens: dict[str, float], accuracy: dict[str, float]) -> dict[str, list]:
    """The curves of :func:`budget_png`: retriever → [(mean injected tokens, accuracy, budget label)], a budget
    variant (``bm25@600``) joining its retriever's curve."""
    out: dict[str, list] = {}
    for n in names:
        base, b = budget_of(n, names)
        out.setdefault(base, []).append((float(tokens.get(n) or 0.0), float(accuracy[n]),
                                         "own" if b is None else str(b)))
    return out


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else fmt_value(v)
    s = str(v).replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= 60 else s[:57] + "..."


def question_table(rows: list[dict], judges: list[str]) -> list[str]:
    cols = list(COLUMNS[:4]) + [f"judge {i + 1}" for i in range(len(judges))] + list(COLUMNS[4:])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [_cell(r.get(c)) for c in COLUMNS[:4]]
        cells += [_cell(r.get("judges", {}).get(j)) for j in judges]
        cells += [_cell(r.get(c)) for c in COLUMNS[4:]]
        out.append("| " + " | ".join(cells) + " |")
    return out


def answers_markdown(dataset: str, by_retriever: dict[str, list[dict]], means: dict[str, dict[str, float]],
                     record: dict) -> str:
    """``answers.md``: models, prompts and their hashes; one row of run-level numbers per retriever; the funnel
    picture; the per-question table of each retriever."""
    rd = record["reader"]
    judges = [j["label"] for j in record["judges"]]
    out = [f"# Answers: {dataset}", "",
           f"reader `{rd['model']}` prompt `{rd['prompt']}` ({rd['prompt_hash']}); "
           + "; ".join(f"judge {i + 1} `{j['model']}` prompt `{j['prompt']}` ({j['prompt_hash']})"
                       for i, j in enumerate(record["judges"]))
           + "; temperature 0, seed 0", ""]
    keys = [k for k in catalogue.names("answer.table") if any(k in m for m in means.values())]
    out += ["| retriever | questions | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for name, m in means.items():
        out.append(f"| {name} | {len(by_retriever[name])} | " + " | ".join(_cell(m.get(k)) for k in keys) + " |")
    out += ["", f"![funnel](answers-funnel-{safe(dataset)}.png)", "",
            f"![accuracy against the injection budget](answers-budget-{safe(dataset)}.png)", ""]
    for name, rows in by_retriever.items():
        c = funnel_counts(rows)
        out += [f"## {name}", "", "funnel: " + ", ".join(f"{k} {v}" for k, v in c.items()), ""]
        out += question_table(rows, judges) + [""]
    return "\n".join(out)
