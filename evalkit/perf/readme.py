"""The README's performance table written from the results of an `evalkit perf` run (rendered by
:mod:`evalkit.report.perf`, never typed).

``evalkit perf --json FILE --readme README.md`` writes it after a run; ``evalkit perf --from-json FILE --readme
README.md`` re-renders a saved run.
"""
from __future__ import annotations

from pathlib import Path

from evalkit.report.perf import render
from evalkit.workflows.reference import write_readme

BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"


def write(readme: Path, results: dict, command: str) -> None:
    """Replace the table between ``BEGIN`` and ``END`` of ``readme`` with the one ``results`` render."""
    write_readme(readme, render(results), command, BEGIN, END)
