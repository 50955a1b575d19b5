"""Human reports for a run folder: a terminal table, Markdown (report.md) and a self-contained HTML page
(report.html). ``write_reports(writer)`` runs inside `evalkit run`; ``rebuild(path)`` serves `evalkit report`."""
from evalkit.report.build import build_reports, rebuild, write_reports  # noqa: F401
from evalkit.report.console import print_table  # noqa: F401
