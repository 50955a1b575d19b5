"""`evalkit perf` (what `make perf` runs): print measured speed numbers, section by section."""
from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    from evalkit.perf import SECTIONS
    p = sub.add_parser("perf", help="performance report: sweep throughput, latency, embedding, index, HNSW "
                                    "exactness, scale (printed tables with the machine line)")
    p.add_argument("--quick", action="store_true", help="small sizes and few queries (about 2 minutes)")
    p.add_argument("--sections", default=None,
                   help="comma-separated section numbers (" + ", ".join(f"{k} {v}" for k, v in SECTIONS.items())
                        + "); default all")
    p.add_argument("--sweep-dataset", default=None,
                   help="dataset of the sweep section (default longmemeval-s when its vectors are cached, else "
                        "locomo)")
    p.add_argument("--configs", type=int, default=None, help="configurations per preset family in the sweep (evenly spaced over its grid; default: the whole grid, >= 1,000; --quick 200)")
    p.add_argument("--latency-queries", type=int, default=None, help="queries per dataset in the latency section")
    p.add_argument("--scale-sizes", default=None, help="comma-separated corpus sizes of the scale section")
    p.add_argument("--json", default=None, help="also write every table as JSON to this file")
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.cli import _csv_list
    from evalkit.errors import CLIError
    from evalkit.perf import SECTIONS, PerfOptions, run_perf
    sections = sorted(SECTIONS)
    if args.sections:
        try:
            sections = sorted({int(x) for x in _csv_list(args.sections)})
        except ValueError:
            raise CLIError(f"--sections takes section numbers, got {args.sections!r}") from None
        bad = [s for s in sections if s not in SECTIONS]
        if bad:
            raise CLIError(f"unknown section(s) {bad} (valid: {', '.join(map(str, SECTIONS))})")
    sizes = None
    if args.scale_sizes:
        try:
            sizes = [int(x) for x in _csv_list(args.scale_sizes)]
        except ValueError:
            raise CLIError(f"--scale-sizes takes integers, got {args.scale_sizes!r}") from None
        if any(s < 10 for s in sizes):
            raise CLIError("--scale-sizes: every size must be >= 10")
    if args.configs is not None and args.configs < 1:
        raise CLIError("--configs must be >= 1")
    if args.latency_queries is not None and args.latency_queries < 1:
        raise CLIError("--latency-queries must be >= 1")
    if args.sweep_dataset:
        from evalkit.data.registry import DATASETS
        if args.sweep_dataset not in DATASETS:
            raise CLIError(f"unknown dataset {args.sweep_dataset!r} (valid: {', '.join(DATASETS)})")
    run_perf(PerfOptions(quick=args.quick, sections=sections, sweep_dataset=args.sweep_dataset, configs=args.configs,
                         latency_queries=args.latency_queries, scale_sizes=sizes,
                         json_out=Path(args.json) if args.json else None))
    return 0
