"""`evalkit perf` (what `make perf` runs): print measured speed numbers, section by section."""
from __future__ import annotations

import json
from pathlib import Path

from evalkit.data.registry import suite


def register(sub) -> None:
    from evalkit.perf import SECTIONS  # lazy: startup
    p = sub.add_parser("perf", help="performance report: sweep throughput, latency, embedding, index, HNSW "
                                    "exactness, scale (printed tables with the machine line)")
    p.add_argument("--quick", action="store_true", help="small sizes and few queries (about 2 minutes)")
    p.add_argument("--sections", default=None,
                   help="comma-separated section numbers or names (" + ", ".join(f"{k} {v}" for k, v in
                                                                                SECTIONS.items())
                        + "; a name is the title in lower case, e.g. scale); default all but 9")
    p.add_argument("--sweep-dataset", default=None,
                   help="dataset of the sweep section (default "
                        + " when its vectors are cached, else ".join(suite("perf.sweep")) + ")")
    p.add_argument("--configs", type=int, default=None, help="configurations per preset family in the sweep (evenly spaced over its grid; default: the whole grid, >= 1,000; --quick 200)")
    p.add_argument("--latency-queries", type=int, default=None, help="queries per dataset in the latency section")
    p.add_argument("--scale-sizes", default=None, help="comma-separated store sizes of the scale section "
                                                       "(default 10000,100000,1000000; --quick 1000,2000)")
    p.add_argument("--scale-seed", type=int, default=None, help="seed of the scale section's synthetic store")
    p.add_argument("--scale-queries", type=int, default=None, help="queries per size in the scale section "
                                                                   "(default 200; --quick 5)")
    p.add_argument("--json", default=None, help="also write every table as JSON to this file")
    p.add_argument("--readme", default=None,
                   help="write the summary table between <!-- perf:begin/end --> markers of this file (docs/performance.md)")
    p.add_argument("--from-json", default=None,
                   help="no run: render --readme from a file written by an earlier `evalkit perf --json`")
    p.set_defaults(fn=run)


def _readme(args, results: dict, source: str) -> None:
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.perf import readme  # lazy: startup
    path = Path(args.readme)
    if not path.is_file():
        raise CLIError(f"--readme: {path} is not a file")
    readme.write(path, results, source)
    print(f"updated {path}")


def run(args) -> int:
    from evalkit.commands.options import csv_option  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.perf import DEFAULT_SECTIONS, SECTIONS, PerfOptions, run_perf  # lazy: startup
    if args.from_json:
        if not args.readme:
            raise CLIError("--from-json renders a table: give --readme FILE too")
        try:
            results = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CLIError(f"--from-json: cannot read {args.from_json}: {exc}") from None
        if not isinstance(results, dict) or "sections" not in results:
            raise CLIError(f"--from-json: {args.from_json} is not an `evalkit perf --json` file (no 'sections')")
        _readme(args, results, f"evalkit perf --json {Path(args.from_json).name} --readme {args.readme}")
        return 0
    sections = list(DEFAULT_SECTIONS)
    if args.sections is not None:
        try:
            names = {v.lower(): k for k, v in SECTIONS.items()}
            sections = sorted({names[x.lower()] if x.lower() in names else int(x)
                               for x in csv_option(args.sections, "--sections")})
        except ValueError:
            raise CLIError(f"--sections takes section numbers or names ({', '.join(names)}), "
                           f"got {args.sections!r}") from None
        bad = [s for s in sections if s not in SECTIONS]
        if bad:
            raise CLIError(f"unknown section(s) {bad} (valid: {', '.join(map(str, SECTIONS))})")
    sizes = None
    if args.scale_sizes is not None:
        try:
            sizes = [int(x) for x in csv_option(args.scale_sizes, "--scale-sizes")]
        except ValueError:
            raise CLIError(f"--scale-sizes takes integers, got {args.scale_sizes!r}") from None
        if any(s < 10 for s in sizes):
            raise CLIError("--scale-sizes: every size must be >= 10")
    if args.scale_queries is not None and args.scale_queries < 1:
        raise CLIError("--scale-queries must be >= 1")
    if args.configs is not None and args.configs < 1:
        raise CLIError("--configs must be >= 1")
    if args.latency_queries is not None and args.latency_queries < 1:
        raise CLIError("--latency-queries must be >= 1")
    if args.sweep_dataset:
        from evalkit.data.registry import DATASETS  # lazy: startup
        if args.sweep_dataset not in DATASETS:
            raise CLIError(f"unknown dataset {args.sweep_dataset!r} (valid: {', '.join(DATASETS)})")
    if args.readme and not Path(args.readme).is_file():
        raise CLIError(f"--readme: {args.readme} is not a file")
    results = run_perf(PerfOptions(quick=args.quick, sections=sections, sweep_dataset=args.sweep_dataset,
                                   configs=args.configs, latency_queries=args.latency_queries, scale_sizes=sizes,
                                   scale_seed=args.scale_seed, scale_queries=args.scale_queries,
                                   json_out=Path(args.json) if args.json else None))
    if args.readme:
        _readme(args, json.loads(json.dumps(results, default=str)), "evalkit perf --readme " + args.readme)
    return 0
