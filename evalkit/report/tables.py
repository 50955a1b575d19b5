"""Tables as data (header, cells with 'best' / significance marks) rendered to the terminal, Markdown or HTML.

The same Table feeds report.md, report.html and `evalkit compare`, so every output shows the same numbers.
The lowest module of the report package: it imports none of the others.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field


@dataclass
class Cell:
    text: str
    best: bool = False          # best value in its column
    worst: bool = False         # a loss to point at (bold, red background in HTML — never the "best" green)
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
        if (c.best or c.worst) and t not in ("", "–"):
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
            classes = (["num"] if c.num else []) + (["best"] if c.best else []) + (["worst"] if c.worst else [])
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
