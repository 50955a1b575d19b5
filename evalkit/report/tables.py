"""Tables as data (header, cells with 'best' / significance marks) rendered to the terminal, Markdown or HTML.

The same Table feeds report.md, report.html and `evalkit compare`, so every output shows the same numbers.
``print_table(writer)`` / ``write_reports(writer)`` are the entry points `evalkit run` calls.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

from evalkit.measures.lists import HEADLINE
from retrievers.visibility import describe

COLUMNS = HEADLINE + ["skip_rate", "budget_compliance"]


@dataclass
class Cell:
    text: str
    best: bool = False          # best value in its column
    mark: str = ""              # '▲' / '▼' significance mark
    num: bool = True            # right-aligned number
    title: str | None = None    # hover text (HTML)


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    caption: str = ""
    header_help: list[str | None] | None = None   # hover text per column (HTML)
    highlight_rows: set[int] = field(default_factory=set)  # e.g. the reference retriever

    def add(self, *cells) -> None:
        self.rows.append([c if isinstance(c, Cell) else Cell(str(c), num=False) for c in cells])


def _cell_text(c: Cell, md: bool) -> str:
    t = c.text + (f" {c.mark}" if c.mark else "")
    if md:
        t = t.replace("|", "\\|")
        if c.best and t not in ("", "–"):
            t = f"**{t}**"
    return t


def to_markdown(t: Table) -> str:
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in t.header) + " |"]
    first = t.rows[0] if t.rows else [Cell("", num=False)] * len(t.header)
    lines.append("|" + "|".join("---:" if c.num else "---" for c in first) + "|")
    for row in t.rows:
        lines.append("| " + " | ".join(_cell_text(c, True) for c in row) + " |")
    return "\n".join(lines)


def to_html(t: Table, cls: str = "") -> str:
    out = [f'<table class="{cls}">' if cls else "<table>"]
    if t.caption:
        out.append(f"<caption>{t.caption}</caption>")
    out.append("<thead><tr>")
    first = t.rows[0] if t.rows else []
    for i, h in enumerate(t.header):
        tip = (t.header_help or [None] * len(t.header))[i] if t.header_help else None
        num = i < len(first) and first[i].num
        attrs = (' class="num"' if num else "") + (f' title="{html.escape(tip)}"' if tip else "")
        out.append(f"<th{attrs}>{html.escape(h)}</th>")
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(t.rows):
        out.append('<tr class="ref">' if i in t.highlight_rows else "<tr>")
        for c in row:
            classes = (["num"] if c.num else []) + (["best"] if c.best else [])
            attrs = (f' class="{" ".join(classes)}"' if classes else "") + \
                (f' title="{html.escape(c.title)}"' if c.title else "")
            mark = ""
            if c.mark:
                mark = f' <span class="{"up" if c.mark == "▲" else "down"}">{c.mark}</span>'
            out.append(f"<td{attrs}>{html.escape(c.text)}{mark}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def to_text(t: Table) -> str:
    cells = [[_cell_text(c, False) + ("*" if c.best and c.text not in ("", "–") else "") for c in row]
             for row in t.rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(t.header)]
    nums = [t.rows[0][i].num if t.rows else False for i in range(len(t.header))]
    lines = ["  ".join(h.rjust(w) if n else h.ljust(w) for h, w, n in zip(t.header, widths, nums))]
    for r in cells:
        lines.append("  ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(r, widths, nums)))
    return "\n".join(line.rstrip() for line in lines)


# --- the quick table `evalkit run` prints (from a RunWriter's metric rows) -----------------------------------

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


def print_table(writer) -> None:
    datasets = writer.manifest.get("datasets") or {}
    for ds, rows in headline_rows(writer.metrics).items():
        print(f"\n{ds}")
        seen = (datasets.get(ds) or {}).get("as_of_visibility")
        if seen:
            print(describe(seen))
        w = max([len(n) for n, _ in rows] + [9])
        print(f"{'retriever':<{w}}  " + "  ".join(f"{c:>17}" for c in COLUMNS))
        for name, m in rows:
            print(f"{name:<{w}}  " + "  ".join(f"{_cell(m.get(c)):>17}" for c in COLUMNS))


def write_reports(writer) -> None:
    """report.md + report.html into ``writer.extra_files`` (called by `evalkit run` before ``writer.write()``).

    A failure here must not cost the run: it is reported on stderr, report.md falls back to the plain
    leaderboards, and `evalkit report RUN_DIR` can rebuild the reports from the saved folder later.
    """
    import sys

    from evalkit.report.build import build_reports
    from evalkit.report.rundata import RunData

    try:
        writer.extra_files.update(build_reports(RunData.from_writer(writer), title=writer.out.name))
    except Exception as exc:  # noqa: BLE001 - keep the run's data whatever goes wrong in a report
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"evalkit: warning: building the reports failed ({msg}); the run folder is written without "
              f"report.html — rebuild with `evalkit report {writer.out}`", file=sys.stderr)
        parts = ["# evalkit run", "", f"(the full report failed to build: {msg})", ""]
        for ds, rows in headline_rows(writer.metrics).items():
            parts += [f"## {ds}", "", _plain_markdown(rows), ""]
        writer.extra_files["report.md"] = "\n".join(parts) + "\n"


def _plain_markdown(rows: list[tuple[str, dict]]) -> str:
    lines = [f"| retriever | {' | '.join(COLUMNS)} |", "|---|" + "---:|" * len(COLUMNS)]
    for name, m in rows:
        lines.append(f"| {name} | {' | '.join(_cell(m.get(c)) for c in COLUMNS)} |")
    return "\n".join(lines)
