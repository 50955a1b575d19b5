"""`evalkit replay`: replay a logged-query file through retrievers and write a run folder (evalkit/workflows/replay.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _positive_float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {s}")
    return v


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {s}")
    return v


def cmd_replay(args) -> int:
    from evalkit.commands.options import (  # lazy: startup
        csv_option,
        embedder_from_args,
        index_settings,
        load_options,
    )
    from evalkit.engine.experiment import finish_out, out_dir, start_manifest  # lazy: startup
    from evalkit.runfolder.write import RunWriter  # lazy: startup
    from evalkit.workflows.replay import log_label, record_replay, run_replay  # lazy: startup

    names = csv_option(args.retrievers, "--retrievers")
    log_path = Path(args.log)
    stem = log_label(Path(args.dataset).name, log_path).replace(":", "-")
    writer = RunWriter(out_dir(args.out, f"replay-{stem}", args), kind="replay")  # refuses a user's path now
    settings = index_settings(args)
    embedder = embedder_from_args(args)
    start_manifest(writer, sys.argv, settings, embedder)
    result = run_replay(log_path, args.dataset, names, settings=settings, embedder=embedder,
                        threshold=args.citation_threshold, k=args.k, load_opts=load_options(args),
                        refresh=args.refresh)
    record_replay(writer, result)
    out = writer.write()
    finish_out(args.out, out)
    print(f"\n{result.to_text()}")
    print(f"wrote {out}")
    return 0


def register(sub) -> None:
    from evalkit.commands.options import add_data_args, add_index_args  # lazy: startup
    p = sub.add_parser("replay", help="replay a logged-query JSONL file through retrievers (skip/injection rates, "
                                      "budget, overlap, agreement with production, citation pseudo-labels)")
    p.add_argument("--log", required=True, help="query log (JSONL, DESIGN.md §4 logged-query contract; .gz ok)")
    p.add_argument("--dataset", required=True, help="the corpus the log's injected ids refer to: dataset name or "
                                                   "BEIR folder path")
    p.add_argument("--retrievers", required=True,
                   help="preset names, live system names (`evalkit systems`) or .toml paths, comma separated; a "
                        "live system is sent each logged query at its own time")
    p.add_argument("--refresh", action="store_true",
                   help="live systems: ask every query again instead of answering from the response cache")
    p.add_argument("--out", default=None, help="output folder (default: a new folder per replay, "
                                              "reports/runs/replay-<dataset>-<log>/<UTC time>-<hash>/, and latest)")
    p.add_argument("--citation-threshold", type=_positive_float, default=0.3,
                   help="share of a note's significant words the response must contain to cite it (default 0.3, "
                        "the citation rule of retrievers.stages.helpers.feedback)")
    p.add_argument("--k", type=_positive_int, default=10, help="cutoff for Jaccard@k and pseudo-nDCG/recall@k")
    add_data_args(p)
    add_index_args(p)
    p.set_defaults(fn=cmd_replay)
