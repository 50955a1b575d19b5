"""Headline tables (terminal / Markdown) built from a RunWriter's metric rows."""
from __future__ import annotations

import math

from evalkit.metrics import HEADLINE

COLUMNS = HEADLINE + ["skip_rate", "budget_compliance"]


def headline_rows(metric_rows: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    by: dict[str, dict[str, dict]] = {}
    for r in metric_rows:
        by.setdefault(r["dataset"], {}).setdefault(r["retriever"], {})[r["metric"]] = r["value"]
    out = {}
    for ds, rets in by.items():
        out[ds] = sorted(rets.items(), key=lambda kv: -_num(kv[1].get("ndcg@10")))
    return out


def _num(v) -> float:
    return -1.0 if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _cell(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def markdown_table(ds: str, rows: list[tuple[str, dict]], columns=COLUMNS) -> str:
    best = {c: max((_num(m.get(c)) for _, m in rows), default=-1) for c in columns}
    lines = [f"| retriever | {' | '.join(columns)} |", "|---|" + "---:|" * len(columns)]
    for name, m in rows:
        cells = []
        for c in columns:
            v = m.get(c)
            s = _cell(v)
            if c not in ("skip_rate",) and v is not None and _num(v) == best[c] and best[c] >= 0 and len(rows) > 1:
                s = f"**{s}**"
            cells.append(s)
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def print_table(writer) -> None:
    for ds, rows in headline_rows(writer.metrics).items():
        print(f"\n{ds}")
        w = max([len(n) for n, _ in rows] + [9])
        print(f"{'retriever':<{w}}  " + "  ".join(f"{c:>17}" for c in COLUMNS))
        for name, m in rows:
            print(f"{name:<{w}}  " + "  ".join(f"{_cell(m.get(c)):>17}" for c in COLUMNS))


def write_reports(writer) -> None:
    parts = ["# evalkit run", ""]
    for ds, rows in headline_rows(writer.metrics).items():
        parts += [f"## {ds}", "", markdown_table(ds, rows), ""]
    writer.extra_files["report.md"] = "\n".join(parts) + "\n"
