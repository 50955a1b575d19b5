"""`evalkit compare RUN_A RUN_B [RUN_C …]`: paired significance tests between saved run folders."""
from __future__ import annotations


def cmd_compare(args) -> int:
    from evalkit.commands.options import csv_option  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.runfolder.claim import claim_folder  # lazy: startup
    from evalkit.workflows.compare import CompareError, compare, write_outputs  # lazy: startup

    metrics = csv_option(args.metrics, "--metrics")
    if not 0 < args.alpha < 1:
        raise CLIError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.tie_tolerance is not None and not args.tie_tolerance >= 0:
        raise CLIError(f"--tie-tolerance must be >= 0, got {args.tie_tolerance}")
    ties = {} if args.tie_tolerance is None else {"tie_tol": args.tie_tolerance}  # else the declared TIE
    claim = None
    if args.out:
        formats = csv_option(args.formats, "--formats")
        bad = [f for f in formats if f not in ("md", "html", "csv", "json")]
        if bad:
            raise CLIError(f"--formats: unknown {', '.join(bad)} (choose from md, html, csv, json)")
        claim = claim_folder(args.out, "compare")  # refuses a user's path before reading any run
    try:
        cmp = compare(args.runs, metrics=metrics, baseline=args.baseline, n_examples=args.examples, alpha=args.alpha,
                      **ties)
    except CompareError as exc:
        raise CLIError(str(exc)) from None
    print(cmp.to_text())
    if claim:
        for p in write_outputs(cmp, claim, formats):
            print(f"wrote {p}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare saved run folders query by query (Δ and its interval at the Holm level, "
                        "randomisation and t-test p, Holm, W/T/L, biggest per-query wins and losses)",
        description="Pairs systems by (dataset, retriever) across folders (a name found in several folders is "
                    "labelled folder:retriever). With --baseline FOLDER every other folder is compared with it; "
                    "with --baseline RETRIEVER every system of the same dataset is compared with that one; without "
                    "a baseline, shared retrievers are compared across every pair of folders (or, when the folders "
                    "share none, every pair of systems within a dataset).")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders written by `evalkit run`")
    p.add_argument("--metrics", default=None, help="comma separated (default ndcg@10,recall@10)")
    p.add_argument("--baseline", default=None, help="a run folder (path or name) or a retriever label")
    p.add_argument("--out", default=None, help="also write compare.md/.html/.csv/.json into this folder")
    p.add_argument("--formats", default="md,html,csv,json", help="which files to write with --out")
    p.add_argument("--examples", type=int, default=5, help="biggest wins and losses to show per pair (default 5)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the ▲ / ▼ marks, the Holm-adjusted intervals and the tie groups "
                        "(0 < alpha < 1; default 0.05); every output states it")
    p.add_argument("--tie-tolerance", type=float, default=None,
                   help="per-query differences within this are ties — no change — in the tests, the intervals, "
                        "W/T/L, the examples and the tie groups (default 1e-9; each side read from a run folder "
                        "that keeps 6 decimals adds 5e-7)")
    p.set_defaults(fn=cmd_compare)
