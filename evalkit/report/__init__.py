"""Human reports for a run folder: a terminal table, Markdown (report.md) and a self-contained HTML page
(report.html). ``write_reports(writer)`` runs inside `evalkit run`; ``rebuild(path)`` serves `evalkit report`."""
from evalkit.report.build import build_reports, rebuild  # noqa: F401
from evalkit.report.tables import print_table, write_reports  # noqa: F401
