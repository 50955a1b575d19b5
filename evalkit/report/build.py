"""Build report.md and report.html for a run (from a RunWriter during `evalkit run`, or a saved folder)."""
from __future__ import annotations

from pathlib import Path

from evalkit.report import html as html_report
from evalkit.report import markdown as md_report
from evalkit.report.analysis import summarize
from evalkit.report.rundata import RunData

REPORT_FILES = ("report.md", "report.html")


def build_reports(run: RunData, title: str, baseline: str | None = None) -> dict[str, str]:
    """``{"report.md": text, "report.html": text}``."""
    summaries = summarize(run, baseline=baseline)
    return {"report.md": md_report.render(run, summaries, title),
            "report.html": html_report.render(run, summaries, title)}


def rebuild(path: Path, baseline: str | None = None) -> dict[str, Path]:
    """(Re)write the reports of a saved run folder in place, each file replaced atomically — only report files
    evalkit wrote (or missing ones): a report.md the user edited is refused, other files are left alone."""
    from evalkit.engine.claim import RUN_FOLDER_KINDS, claim_in_place
    path = Path(path)
    run = RunData.from_folder(path)
    claim = claim_in_place(path, RUN_FOLDER_KINDS, REPORT_FILES)
    return claim.write(build_reports(run, title=path.resolve().name, baseline=baseline))
