"""Build report.md and report.html for a run (from a RunWriter during `evalkit run`, or a saved folder)."""
from __future__ import annotations

import sys
from pathlib import Path

from evalkit.report import html as html_report
from evalkit.report import markdown as md_report
from evalkit.report.analysis import summarize
from evalkit.report.console import headline_rows, plain_markdown
from evalkit.runfolder.claim import RUN_FOLDER_KINDS, claim_in_place
from evalkit.runfolder.history import resolve_run_folder
from evalkit.runfolder.view import RunData

REPORT_FILES = ("report.md", "report.html")


def build_reports(run: RunData, title: str, baseline: str | None = None) -> dict[str, str]:
    """``{"report.md": text, "report.html": text}``."""
    summaries = summarize(run, baseline=baseline)
    return {"report.md": md_report.render(run, summaries, title),
            "report.html": html_report.render(run, summaries, title)}


def rebuild(path: Path, baseline: str | None = None) -> dict[str, Path]:
    """(Re)write the reports of a saved run folder in place, each file replaced atomically — only report files
    evalkit wrote (or missing ones): a report.md the user edited is refused, other files are left alone."""
    path = resolve_run_folder(Path(path))  # reports/runs/<dataset>: its latest run
    run = RunData.from_folder(path)
    claim = claim_in_place(path, RUN_FOLDER_KINDS, REPORT_FILES)
    return claim.write(build_reports(run, title=path.resolve().name, baseline=baseline))


def write_reports(writer) -> None:
    """report.md + report.html into ``writer.extra_files`` (called by `evalkit run` before ``writer.write()``).

    A failure here must not cost the run: it is reported on stderr, report.md falls back to the plain
    leaderboards, and `evalkit report RUN_DIR` can rebuild the reports from the saved folder later.
    """
    try:
        writer.extra_files.update(build_reports(RunData.from_writer(writer), title=writer.out.name))
    except Exception as exc:  # noqa: BLE001 - keep the run's data whatever goes wrong in a report
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"evalkit: warning: building the reports failed ({msg}); the run folder is written without "
              f"report.html — rebuild with `evalkit report {writer.out}`", file=sys.stderr)
        parts = ["# evalkit run", "", f"(the full report failed to build: {msg})", ""]
        for ds, rows in headline_rows(writer.metrics).items():
            parts += [f"## {ds}", "", plain_markdown(rows), ""]
        writer.extra_files["report.md"] = "\n".join(parts) + "\n"
