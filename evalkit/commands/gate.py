"""`evalkit gate`: run the gated retrievers and compare with a baseline file (exit 0 pass, 1 fail, 2 bad input).
The workflow is :mod:`evalkit.workflows.gate`; this module parses the arguments."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from evalkit.data.registry import suite

GATE_DATASETS = suite("gate")
DEFAULT_BASELINE = "reports/gate/expected.json"


def register(sub) -> None:
    from evalkit.commands.options import add_answer_args, add_data_args, add_index_args  # lazy: startup
    p = sub.add_parser("gate", help="CI regression gate: exit 0 when no regression, 1 when a row FAILs "
                                    "(re-runs what the baseline file records)")
    p.add_argument("--baseline", default=DEFAULT_BASELINE,
                   help="the baseline file to compare with (written by --update; default "
                        f"{DEFAULT_BASELINE}). It records its datasets, retrievers, metrics, tolerances and "
                        "embedder, so `evalkit gate --baseline FILE` alone re-runs exactly that")
    p.add_argument("--datasets", default=None,
                   help="dataset names or BEIR folder paths, comma separated (default: the baseline's; for a new "
                        f"baseline {','.join(GATE_DATASETS)} when available — a registered dataset missing from the "
                        "data directory is skipped with a note)")
    p.add_argument("--retrievers", default=None,
                   help="preset names, live system names or .toml paths (presets or system files), comma separated "
                        "(default: the baseline's; for a new baseline every runnable preset)")
    p.add_argument("--metrics", default=None, help="comma separated (default: the baseline's; for a new one "
                                                   "ndcg@10,recall@10)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="largest drop that is not a regression, for every row (default: each row's own, "
                        "recorded in the baseline; 0.005 for a new row); with --update it is recorded")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level: a drop beyond the tolerance FAILs when the paired randomisation "
                        "test gives p < alpha, or when too few queries differ for p to ever get below alpha")
    p.add_argument("--update", action="store_true",
                   help="rewrite the baseline from this run (datasets, retrievers, values) and print the diff")
    p.add_argument("--report-dir", default=None,
                   help="where a failing gate writes its report folder (the run, report.html, gate.md; default "
                        "a new folder under reports/runs/gate/)")
    add_data_args(p)
    add_index_args(p)
    add_answer_args(p, required=False)
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.commands.options import (  # lazy: startup
        answer_spec,
        csv_option,
        fault_line,
        embedder_from_args,
        index_settings,
        load_options,
    )
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.runfolder.history import link_latest, new_run_folder  # lazy: startup
    from evalkit.workflows.gate import (  # lazy: startup
        ANSWER_METRICS,
        GATE_METRICS,
        gate_answers,
        gate_backend,
        measure,
        run_gate,
        update_baseline,
        write_gate_report,
    )
    from evalkit.workflows.gate_baseline import load_expected  # lazy: startup

    for opt, value in (("--datasets", args.datasets), ("--retrievers", args.retrievers), ("--metrics", args.metrics)):
        csv_option(value, opt)  # an empty list is refused before anything else is read
    if args.tolerance is not None and not args.tolerance >= 0:
        raise CLIError(f"--tolerance must be >= 0, got {args.tolerance}")
    if not 0 < args.alpha < 1:
        raise CLIError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.budgets:
        raise CLIError("--budgets is for answer runs (evalkit answer), not the gate")
    path = Path(args.baseline)
    expected = None if (args.update and not path.exists()) else load_expected(path)
    answer = gate_answers(expected, answer_spec(args) if args.reader else None, log=_err,
                          timeout=args.timeout, retries=args.retries, on_fault=fault_line)
    metrics = csv_option(args.metrics, "--metrics") or (expected or {}).get("metrics") or (
        [*GATE_METRICS, "answer_correct", "answer_f1"] if answer is not None else GATE_METRICS)
    if answer is not None and not any(m in ANSWER_METRICS for m in metrics):
        answer = None  # nothing to gate on the answers: do not ask the model
    if answer is not None:
        answer.concurrency = args.concurrency

    def embedder_for(baseline: dict | None):
        args.embed_backend = gate_backend(baseline, args.embedder, args.embed_backend, os.environ)
        return embedder_from_args(args)

    log = _err
    settings = index_settings(args)
    measured = measure(path, expected, csv_option(args.datasets, "--datasets"),
                       csv_option(args.retrievers, "--retrievers"), metrics, args.update, settings, embedder_for,
                       load_options(args), log=log, answer=answer)
    if args.update:
        new, diff = update_baseline(path, expected, measured, args.tolerance, args.alpha, bool(args.retrievers))
        print("\n".join(diff) if diff else "gate baseline unchanged")
        print(f"wrote {path} ({len(new['rows'])} rows)")
        return 0
    result = run_gate(path, expected, measured, alpha=args.alpha, tolerance=args.tolerance,
                      retrievers_given=bool(args.retrievers))
    print(result.to_text())
    if not result.failed:
        return 0
    out = (Path(args.report_dir) if args.report_dir else
           new_run_folder("gate", [f"{k}={v}" for k, v in sorted(vars(args).items()) if k != "fn"],
                          log=lambda *a: None))
    written = write_gate_report(result, out, settings, measured.embedder, str(path), args.alpha, args.tolerance,
                                sys.argv, answer=measured.answer)
    if not args.report_dir:
        link_latest(written, log=lambda *a: None)
    print(f"\ngate failed: report folder {written} (gate.md, report.html)")
    return 1


def _err(*a) -> None:
    print(*a, file=sys.stderr)
