"""`evalkit report RUN_DIR`: (re)build report.md and report.html of a saved run folder in place."""
from __future__ import annotations

import time


def cmd_report(args) -> int:

    from evalkit.report import rebuild  # lazy: startup
    t0 = time.perf_counter()
    written = rebuild(args.run, baseline=args.baseline)
    secs = time.perf_counter() - t0
    for p in written.values():
        print(f"wrote {p}")
    if args.timing:
        print(f"reports built in {secs:.2f}s")
    return 0


def register(sub) -> None:
    p = sub.add_parser("report", help="(re)build the Markdown and HTML reports of a saved run folder in place")
    p.add_argument("run", metavar="RUN_DIR", help="a run folder written by `evalkit run`")
    p.add_argument("--baseline", default=None,
                   help="retriever to test the others against (default: bm25, else dense, else the best)")
    p.add_argument("--timing", action="store_true", help="print how long building the reports took")
    p.set_defaults(fn=cmd_report)
