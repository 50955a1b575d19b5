"""`evalkit pool` and `evalkit qrels`: logged queries → a blind grading sheet → qrels (evalkit/workflows/pool.py)."""
from __future__ import annotations

from pathlib import Path

from evalkit.commands.options import add_index_args, csv_option, index_settings


def cmd_pool(args) -> int:
    from evalkit.workflows.pool import pool  # lazy: startup
    counts = pool(args.dataset, Path(args.log), csv_option(args.retrievers, "--retrievers"), args.depth,
                  Path(args.out), settings=index_settings(args))
    print(f"pooled {counts['rows']} (query, document) rows from {counts['events']} events and "
          f"{counts['retrievers']} retrievers (depth {args.depth}); grade the 'grade' column 0/1/2")
    print(f"wrote {args.out}")
    return 0


def cmd_qrels(args) -> int:
    from evalkit.workflows.pool import qrels_from_labels  # lazy: startup
    counts = qrels_from_labels(Path(args.labels), Path(args.out), Path(args.dataset) if args.dataset else None)
    print(f"{counts['rows']} judgements ({counts['relevant']} relevant) for {counts['queries']} queries"
          + (f"; {counts['queries_added']} queries added to the dataset" if counts["queries_added"] else ""))
    print(f"wrote {args.out}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("pool", help="pool retrievers' top results for logged queries into a blind grading CSV")
    p.add_argument("--dataset", required=True, help="dataset name or BEIR folder the log searched")
    p.add_argument("--log", required=True, help="query log (JSONL, DESIGN.md §4)")
    p.add_argument("--retrievers", required=True, help="preset names or .toml paths, comma separated")
    p.add_argument("--depth", type=int, default=10, help="top results per retriever pooled (default 10)")
    p.add_argument("--out", required=True, help="CSV to write (query_id, as_of, query, doc_id, path, text, grade)")
    add_index_args(p)
    p.set_defaults(fn=cmd_pool)
    q = sub.add_parser("qrels", help="graded pool CSV → qrels TSV (refuses inconsistent grades, one line each)")
    q.add_argument("labels", help="the graded CSV written by `evalkit pool`")
    q.add_argument("--out", required=True, help="qrels file to write, e.g. DATASET/qrels/test.tsv")
    q.add_argument("--dataset", default=None, help="the BEIR folder (default: the folder holding --out's qrels/)")
    q.set_defaults(fn=cmd_qrels)
