"""`evalkit gate`: run the gated retrievers and compare with the committed expected-metrics file."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from evalkit.data.registry import suite

GATE_DATASETS = suite("gate")


def register(sub) -> None:
    from evalkit.commands.options import add_index_args  # lazy: startup
    p = sub.add_parser("gate", help="CI regression gate: exit 0 when no nDCG regression, non-zero otherwise")
    p.add_argument("--baseline", default="reports/gate/expected.json")
    p.add_argument("--datasets", default=None, help=f"comma separated (default: {','.join(GATE_DATASETS)} when "
                                                      "available; a dataset missing from the data dir is skipped)")
    p.add_argument("--retrievers", default=None, help="presets or .toml paths (default: the baseline's retrievers)")
    p.add_argument("--metrics", default=None, help="default: the baseline's metrics (ndcg@10, recall@10)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level for FAIL")
    p.add_argument("--update", action="store_true", help="rewrite the baseline from this run and show the diff")
    add_index_args(p)
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.commands.options import csv_option, embedder_from_args, index_settings  # lazy: startup
    from evalkit.data.registry import DATASETS, locate  # lazy: startup
    from evalkit.engine.evaluate import secret_guard  # lazy: startup
    from evalkit.engine.experiment import run_dataset  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.workflows.bench import runnable_presets  # lazy: startup
    from evalkit.workflows.gate import (  # lazy: startup
        GATE_METRICS,
        backend_note,
        gate_backend,
        compare,
        failed,
        guard_rows,
        load_expected,
        table,
        updated,
    )
    from retrievers.pipeline import load_preset  # lazy: startup

    metrics, names, retrievers = (csv_option(args.metrics, "--metrics"), csv_option(args.datasets, "--datasets"),
                                  csv_option(args.retrievers, "--retrievers"))
    path = Path(args.baseline)
    expected = None if (args.update and not path.exists()) else load_expected(path)
    metrics = metrics or (expected or {}).get("metrics", GATE_METRICS)
    names = names or GATE_DATASETS
    datasets = []
    for n in names:
        if n in DATASETS and locate(n) is None:
            print(f"gate: dataset {n} not in the data directory, skipped", file=sys.stderr)
            continue
        datasets.append(n)
    if not datasets:
        raise CLIError("gate: no dataset available to gate on")
    if retrievers:
        pipes = [load_preset(r) for r in retrievers]
    elif expected and not args.update:
        wanted = sorted({r["retriever"] for r in expected["rows"]})
        pipes, _ = runnable_presets(wanted, log=lambda *a: None)
    else:
        pipes, _ = runnable_presets(None, log=lambda *a: print(*a, file=sys.stderr))
    settings = index_settings(args)
    args.embed_backend = gate_backend(expected, args.embedder, args.embed_backend, os.environ)
    embedder = embedder_from_args(args)
    note = backend_note(expected, embedder.describe())
    if note:
        print(note, file=sys.stderr)
    current, leaks = {}, {}
    guards = {p.name: secret_guard(p) for p in pipes}
    for d in datasets:
        dr = run_dataset(d, pipes, None, settings, embedder, log=lambda *a: print(*a, file=sys.stderr))
        for name, ev in dr.evals.items():
            for m in metrics:
                current[(dr.dataset.name, name, m)] = (ev.means[m], ev.per_query.get(m, {}))
            if guards.get(name):
                leaks[(dr.dataset.name, name)] = (ev.means.get("secret_leak_rate", float("nan")), guards[name])
    if expected is not None:
        ran = {k[0] for k in current}
        expected = dict(expected, rows=[r for r in expected["rows"] if r["dataset"] in ran
                                        and (not retrievers or r["retriever"] in {p.name for p in pipes})])
    if args.update:
        new, diff = updated(current, expected, embedder.describe())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        print("\n".join(diff) if diff else "gate baseline unchanged")
        print(f"wrote {path} ({len(new['rows'])} rows)")
        return 0
    rows = compare(expected, current, alpha=args.alpha) + guard_rows(leaks)
    print(table(rows))
    return 1 if failed(rows) else 0
