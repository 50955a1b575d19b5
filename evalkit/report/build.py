"""Build report.md and report.html for a run (from a RunWriter during `evalkit run`, or a saved folder)."""
from __future__ import annotations

import os
import tempfile
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def rebuild(path: Path, baseline: str | None = None) -> dict[str, Path]:
    """(Re)write the reports of a saved run folder in place, each file replaced atomically."""
    path = Path(path)
    run = RunData.from_folder(path)
    files = build_reports(run, title=path.resolve().name, baseline=baseline)
    out = {}
    for name, text in files.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=path)
        try:
            os.chmod(tmp, 0o666 & ~_umask())
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        out[name] = path / name
    return out
