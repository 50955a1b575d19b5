"""`evalkit import <source> ...`: real memory stores and logs → datasets (evalkit/workflows/imports.py).

The sources and their arguments are declared in ``evalkit/data/importers/__init__.py``; this module only builds
the parser from that table."""
from __future__ import annotations


def cmd_import(args) -> int:
    from evalkit.workflows.imports import run_import  # lazy: startup
    run_import(args.source, args)
    return 0


def register(sub) -> None:
    from evalkit.data.importers import IMPORTERS  # lazy: startup
    p = sub.add_parser("import", help="import a real memory store, transcripts or a log as a dataset folder "
                                      "(BEIR layout + querylog.jsonl)")
    srcs = p.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for spec in IMPORTERS.values():
        sp = srcs.add_parser(spec.name, help=spec.help, description=spec.help)
        for a in spec.args:
            sp.add_argument(*a.flags, **a.options)
        sp.set_defaults(fn=cmd_import)
