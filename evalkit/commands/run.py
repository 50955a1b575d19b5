"""`evalkit run`: run retrievers over datasets and write a run folder (metrics, per-query rows, reports). The
workflow is :mod:`evalkit.workflows.run`; this module parses the arguments."""
from __future__ import annotations

from pathlib import Path

from evalkit.commands.options import (
    add_answer_args,
    add_data_args,
    answer_spec,
    add_index_args,
    csv_option,
    embedder_from_args,
    index_settings,
    load_options,
)
from evalkit.errors import CLIError


def cmd_run(args) -> int:
    from evalkit.engine.experiment import load_retrievers, out_dir  # lazy: startup
    from evalkit.engine.options import RunOptions  # lazy: startup
    from evalkit.engine.trec_runs import parse_spec  # lazy: startup
    from evalkit.report import print_table  # lazy: startup
    from evalkit.workflows.run import run  # lazy: startup
    if args.limit is not None and args.limit < 1:  # 0 meant "no limit" and -1 "all but the last query"
        raise CLIError(f"--limit must be >= 1, got {args.limit}")
    # validate every preset and system file before any work
    pipelines, systems = load_retrievers(csv_option(args.retrievers, "--retrievers"))
    run_files = dict(parse_spec(s) for s in args.run_file or [])
    clash = set(run_files) & ({p.name for p in pipelines} | {s.name for s in systems})
    if clash or len(run_files) != len(args.run_file or []):
        raise CLIError(f"--run-file names must be unique and differ from the presets: {', '.join(sorted(clash))}")
    answer = None
    if getattr(args, "answer", False):
        answer = answer_spec(args)
    elif getattr(args, "reader", None):
        raise CLIError("--reader is for answer runs: add --answer (or use `evalkit answer`)")
    if getattr(args, "cluster", None):
        from evalkit.engine.cluster import parse_spec as cluster_spec  # lazy: startup
        cluster_spec(args.cluster)  # a bad spec is one error line before any work
    datasets = csv_option(args.dataset, "--dataset")
    out = out_dir(args.out, "-".join(Path(d).name for d in datasets), args)
    options = RunOptions(settings=index_settings(args), split=args.split, limit=args.limit,
                         load_opts=load_options(args), run_files=run_files, run_file_missing=args.run_file_missing,
                         systems=systems, refresh=args.refresh, answer=answer,
                         cluster=args.cluster)
    writer, written = run(datasets, pipelines, out, options, make_embedder=lambda: embedder_from_args(args),
                          default_out=not args.out)
    print_table(writer)
    print(f"wrote {written}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("run", help="run retrievers over datasets and write a run folder")
    add_run_args(p)
    p.add_argument("--answer", action="store_true",
                   help="also answer every question with a reader model over each retriever's injected block and "
                        "judge it (the options of `evalkit answer`; docs/answers.md)")
    add_answer_args(p, required=False)
    p.set_defaults(fn=cmd_run)


def add_run_args(p, required: bool = True) -> None:
    """The arguments of a run (shared by `evalkit run` and `evalkit answer`; ``required=False``: `evalkit answer
    RUN_FOLDER` reads them from the folder)."""
    p.add_argument("--dataset", required=required, help="dataset name(s) or BEIR folder path(s), comma separated")
    p.add_argument("--retrievers", required=required,
                   help="preset names, live system names (`evalkit systems`) or .toml paths (presets or system "
                        "files), comma separated")
    p.add_argument("--split", default=None, help="query split (default: test when present, else all)")
    p.add_argument("--out", default=None, help="output folder (default: a new folder per run, "
                                              "reports/runs/<dataset>/<UTC time>-<hash>/, with reports/runs/<dataset>/"
                                              "latest linking the newest; `evalkit runs` lists them)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries (smoke runs)")
    p.add_argument("--run-file", action="append", default=None, metavar="NAME=PATH",
                   help="score a TREC run file (qid Q0 docid rank score tag) as retriever NAME beside the presets, by "
                        "trec_eval's rules (order by score, ties by doc id descending; a doc id the corpus lacks keeps "
                        "its rank as a miss); repeatable; unknown ids, missing queries and documents dated after a "
                        "query's as_of are each one warning line and a note in the report")
    p.add_argument("--run-file-missing", choices=["zero", "skip"], default="zero",
                   help="a query a run file has no line for: zero (default; scored 0 on every measure, as "
                        "trec_eval -c, so the file is comparable with the presets) or skip (score the file over the "
                        "queries it answers; every table says so)")
    add_data_args(p)
    p.add_argument("--cluster", default=None, metavar="SPEC",
                   help="run the corpus embedding and the pipelines' query blocks on a Dask cluster: local[:N] (N worker "
                        "processes here) or tcp://HOST:PORT (a running scheduler); "
                        "metrics are byte-identical to one process (docs/performance.md)")
    p.add_argument("--refresh", action="store_true",
                   help="live systems: ask every query again instead of answering from the response cache")
    add_index_args(p)
