"""`evalkit datasets`: the datasets found (with counts) and where they were looked for."""
from __future__ import annotations

from evalkit.commands.options import add_data_args, load_options


def cmd_splits(name: str, rule: str, load_opts: dict | None = None) -> int:
    """The dataset's declared splits under a grouping rule (:mod:`evalkit.data.groups`): per split its queries,
    groups and largest group; groups on two splits and queries whose evidence set equals an earlier split's."""
    from evalkit.data.groups import evidence_sets, query_groups, split_summary, summary_lines  # lazy: startup
    from evalkit.data.registry import load_dataset  # lazy: startup
    from evalkit.tune.protocol import lockbox_of  # lazy: startup
    ds = load_dataset(name, **(load_opts or {}))
    g = query_groups(ds, rule)
    order = [s for s in ("train", "heldout", "test", "lockbox") if s in ds.splits and s != "all"]
    order += [s for s in sorted(ds.splits) if s not in order and s != "all"]
    if "test" in order and any(s in order for s in ("train", "heldout")) and \
            set(ds.splits["test"]) == set(ds.splits.get("all", ())):
        order.remove("test")  # test = all (LoCoMo, LongMemEval): the whole set, not a side
    lock = lockbox_of(ds)
    sides = {(f"{s} (lockbox)" if s == lock else s): list(ds.splits[s]) for s in order}
    print(f"{ds.name}: {len(ds.queries)} queries, {sum(1 for q in ds.queries if q.id in ds.qrels)} judged")
    print("\n".join(summary_lines(split_summary(g, sides, evidence_sets(ds)))))
    return 0


def cmd_datasets(args) -> int:
    from evalkit.data.registry import (  # lazy: startup
        available,
        data_dirs,
        load_dataset,
    )
    if args.splits:
        return cmd_splits(args.splits, args.split_by, load_options(args))
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
    p.add_argument("--splits", default=None, metavar="DATASET",
                   help="instead: the dataset's splits under the grouping rule (queries, groups, the largest group, "
                        "groups on two splits, queries whose evidence set equals an earlier split's)")
    p.add_argument("--split-by", default="auto", metavar="RULE",
                   help="--splits: the grouping rule (auto, group, evidence, query, joined with '+'; default auto)")
    add_data_args(p)  # a qrels error names --qrels-unknown drop: the option must exist wherever a dataset is read
    p.set_defaults(fn=cmd_datasets)
