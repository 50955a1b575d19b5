"""`evalkit import <source>`: run one importer of :mod:`evalkit.data.importers` and print what it wrote.

The importers themselves (formats, rules, what becomes what) are documented in their modules; this workflow only
dispatches by the registered name and prints the summary (counts, then notes such as the first malformed lines)."""
from __future__ import annotations

import sys

from evalkit.data.importers import IMPORTERS
from evalkit.data.importers.common import ImportSummary


def run_import(name: str, args, out=None) -> ImportSummary:
    out = out or sys.stdout
    summary: ImportSummary = IMPORTERS[name].function()(args)
    for line in summary.lines():
        print(f"  {line}", file=out)
    print(f"wrote {summary.out}", file=out)
    return summary
