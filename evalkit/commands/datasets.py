"""`evalkit datasets`: the datasets found (with counts) and where they were looked for."""
from __future__ import annotations


def cmd_datasets(args) -> int:
    from evalkit.data.registry import (  # lazy: startup
        available,
        data_dirs,
        load_dataset,
    )
    print("data directories searched: " + ", ".join(str(d) for d in data_dirs()))
    rows = []
    for e, path in available():
        if path is None:
            rows.append((e.name, "missing", "", "", "", e.description))
            continue
        if e.large and not args.count_large:
            rows.append((e.name, "found", "-", "-", "-", e.description + " (counts: --count-large)"))
            continue
        ds = load_dataset(e.name)
        nq = sum(1 for q in ds.queries if q.id in ds.qrels)
        rows.append((e.name, "found", str(len(ds.documents)), str(len(ds.queries)), str(nq), e.description))
    w = [max(len(r[i]) for r in rows + [("dataset", "status", "docs", "queries", "judged", "")]) for i in range(5)]
    print(f"{'dataset':<{w[0]}}  {'status':<{w[1]}}  {'docs':>{w[2]}}  {'queries':>{w[3]}}  {'judged':>{w[4]}}  about")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]:>{w[3]}}  {r[4]:>{w[4]}}  {r[5]}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("datasets", help="list the datasets found (with counts) and where they were looked for")
    p.add_argument("--count-large", action="store_true", help="also load large datasets to count them")
    p.set_defaults(fn=cmd_datasets)
