"""Human reports for a run folder: a terminal table, Markdown and a self-contained HTML page."""
from evalkit.report.tables import print_table, write_reports  # noqa: F401
