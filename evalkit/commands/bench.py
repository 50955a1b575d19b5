"""`evalkit bench` (what `make bench` runs)."""
from __future__ import annotations

from pathlib import Path

from evalkit.data.registry import label, suite


def register(sub) -> None:
    from evalkit.commands.options import add_index_args  # lazy: startup
    p = sub.add_parser("bench", help="every runnable preset × every available dataset → reports/bench/latest")
    p.add_argument("--full", action="store_true", help=f"also {', '.join(map(label, suite('bench.full')))} "
                                                           "(hours of embedding)")
    p.add_argument("--datasets", default=None, help="comma-separated subset of datasets")
    p.add_argument("--retrievers", default=None, help="comma-separated subset of presets, and live system names or "
                                                         "system files (asked live; answers cached)")
    p.add_argument("--out", default="reports/bench")
    p.add_argument("--no-latency", action="store_true", help="skip the latency pass")
    p.add_argument("--latency-queries", type=int, default=50)
    p.add_argument("--diagnostics", action="store_true",
                   help="also record recall funnels, threshold sweeps and the budget curve for the report (as "
                        "`evalkit run` does; about +40%% CPU time on the default dataset, so off by default)")
    add_index_args(p)
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.commands.options import csv_option, embedder_from_args, index_settings  # lazy: startup
    from evalkit.workflows.bench import run_bench  # lazy: startup
    run_bench(Path(args.out), full=args.full, datasets=csv_option(args.datasets, "--datasets"),
              presets=csv_option(args.retrievers, "--retrievers"), latency=not args.no_latency,
              latency_queries=args.latency_queries, settings=index_settings(args),
              embedder=embedder_from_args(args), diagnose=args.diagnostics)
    return 0
