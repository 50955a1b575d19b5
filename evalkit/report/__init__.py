"""Human reports for a run folder: a terminal table, Markdown (report.md) and a self-contained HTML page
(report.html). ``write_reports(writer)`` runs inside `evalkit run`; ``rebuild(path)`` serves `evalkit report`.

The package itself imports nothing: its four entry points are looked up on first use (PEP 562), so a command that
only needs a light renderer (`evalkit runs`: :mod:`evalkit.report.listings`) does not load the report's renderers.
"""
from importlib import import_module

_LAZY = {"build_reports": "evalkit.report.build", "rebuild": "evalkit.report.build",
         "write_reports": "evalkit.report.build", "print_table": "evalkit.report.console"}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
