"""`evalkit runs`: the run folders under reports/runs (date, datasets, retrievers, headline), oldest first."""
from __future__ import annotations

from pathlib import Path


def cmd_runs(args) -> int:
    from evalkit.report.listings import runs_lines  # lazy: startup
    from evalkit.runfolder.history import list_runs  # lazy: startup
    runs = list_runs(Path(args.root))
    if args.dataset:
        runs = [r for r in runs if args.dataset in r.datasets or r.path.parent.name == args.dataset]
    if not runs:
        print(f"no run folders under {args.root}" + (f" for {args.dataset}" if args.dataset else ""))
        return 0
    print("\n".join(runs_lines(runs)))
    return 0


def register(sub) -> None:
    p = sub.add_parser("runs", help="list the run folders under reports/runs: date, datasets, retrievers, headline")
    p.add_argument("--root", default="reports/runs", help="where the run folders are (default reports/runs)")
    p.add_argument("--dataset", default=None, help="only the runs of this dataset")
    p.set_defaults(fn=cmd_runs)
