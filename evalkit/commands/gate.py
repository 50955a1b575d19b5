"""`evalkit gate`: run the gated retrievers and compare with a baseline file (exit 0 pass, 1 fail, 2 bad input)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from evalkit.data.registry import suite

GATE_DATASETS = suite("gate")
DEFAULT_BASELINE = "reports/gate/expected.json"


def register(sub) -> None:
    from evalkit.commands.options import add_data_args, add_index_args  # lazy: startup
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
                   help="preset names or .toml paths, comma separated (default: the baseline's; for a new baseline "
                        "every runnable preset)")
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
    p.set_defaults(fn=run)


def _datasets(args, expected, base_dir) -> list[tuple[str, str | None]]:
    """(name or path to load, split) per dataset to gate."""
    from evalkit.commands.options import csv_option  # lazy: startup
    from evalkit.data.registry import DATASETS, locate  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.workflows.gate import resolve_source  # lazy: startup
    given = csv_option(args.datasets, "--datasets")
    recorded = (expected or {}).get("datasets") if not given else None
    if recorded:
        wanted = [(resolve_source(x["source"], x["source"] in DATASETS, base_dir), x.get("split")) for x in recorded]
    else:
        wanted = [(n, None) for n in (given or GATE_DATASETS)]
    out = []
    for n, split in wanted:
        if n in DATASETS and locate(n) is None:
            print(f"gate: dataset {n} not in the data directory, skipped", file=sys.stderr)
            continue
        out.append((n, split))
    if not out:
        raise CLIError("gate: no dataset available to gate on")
    return out


def _pipelines(args, expected, base_dir):
    """(pipelines, their sources as given, retriever_set) of the retrievers to gate."""
    from evalkit.commands.options import csv_option  # lazy: startup
    from evalkit.workflows.bench import runnable_presets  # lazy: startup
    from evalkit.workflows.gate import resolve_source  # lazy: startup
    from retrievers.pipeline import load_preset  # lazy: startup
    given = csv_option(args.retrievers, "--retrievers")
    if given:
        return [load_preset(r) for r in given], given, None
    recorded = (expected or {}).get("retrievers")
    every = (expected or {}).get("retriever_set") == "presets"
    if recorded and not (args.update and every):
        srcs = [resolve_source(x["source"], not _is_path(x["source"]), base_dir) for x in recorded]
        return [load_preset(s) for s in srcs], srcs, (expected or {}).get("retriever_set")
    if expected and not args.update:  # a schema-1 baseline: the retrievers of its rows
        wanted = sorted({r["retriever"] for r in expected["rows"]})
        pipes, _ = runnable_presets(wanted, log=lambda *a: None)
        return pipes, [p.name for p in pipes], "presets"
    pipes, _ = runnable_presets(None, log=lambda *a: print(*a, file=sys.stderr))
    return pipes, [p.name for p in pipes], "presets"


def _is_path(src: str) -> bool:
    return src.endswith(".toml") or "/" in src or os.sep in src


def run(args) -> int:
    from evalkit.commands.options import (  # lazy: startup
        csv_option,
        embedder_from_args,
        index_settings,
        load_options,
    )
    from evalkit.data.registry import DATASETS  # lazy: startup
    from evalkit.engine.evaluate import secret_guard  # lazy: startup
    from evalkit.engine.experiment import record, run_dataset, start_manifest  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.report import write_reports  # lazy: startup
    from evalkit.runfolder.history import link_latest, new_run_folder  # lazy: startup
    from evalkit.runfolder.write import RunWriter  # lazy: startup
    from evalkit.workflows.gate import (  # lazy: startup
        GATE_METRICS,
        backend_note,
        changed_sources,
        compare,
        failed,
        gate_backend,
        guard_rows,
        load_expected,
        losses,
        render_markdown,
        source_of,
        table,
        updated,
    )

    for opt, value in (("--datasets", args.datasets), ("--retrievers", args.retrievers), ("--metrics", args.metrics)):
        csv_option(value, opt)  # an empty list is refused before anything else is read
    if args.tolerance is not None and not args.tolerance >= 0:
        raise CLIError(f"--tolerance must be >= 0, got {args.tolerance}")
    if not 0 < args.alpha < 1:
        raise CLIError(f"--alpha must be between 0 and 1, got {args.alpha}")
    path = Path(args.baseline)
    base_dir = path.resolve().parent
    expected = None if (args.update and not path.exists()) else load_expected(path)
    metrics = csv_option(args.metrics, "--metrics") or (expected or {}).get("metrics", GATE_METRICS)
    datasets = _datasets(args, expected, base_dir)
    pipes, sources, retriever_set = _pipelines(args, expected, base_dir)
    settings = index_settings(args)
    args.embed_backend = gate_backend(expected, args.embedder, args.embed_backend, os.environ)
    embedder = embedder_from_args(args)
    note = backend_note(expected, embedder.describe())
    if note:
        print(note, file=sys.stderr)
    current, leaks, clusters, texts, runs, ds_records, ds_hash = {}, {}, {}, {}, [], [], {}
    guards = {p.name: secret_guard(p) for p in pipes}
    for d, split in datasets:
        dr = run_dataset(d, pipes, split, settings, embedder, log=lambda *a: print(*a, file=sys.stderr),
                         load_opts=load_options(args))
        runs.append(dr)
        ds = dr.dataset
        ds_hash[ds.name] = ds.content_hash()
        ds_records.append({"name": ds.name, "source": source_of(d, d in DATASETS, base_dir), "hash": ds_hash[ds.name],
                           "split": ds.info.get("split"), "queries": len(ds.queries)})
        texts.update({q.id: q.text for q in ds.queries})
        cl = ds.info.get("clusters")
        if cl:
            clusters[ds.name] = {q.id: str(getattr(q, cl.get("by", "group")) or q.id) for q in ds.queries}
        for name, ev in dr.evals.items():
            for m in metrics:
                if m not in ev.means:
                    raise CLIError(f"--metrics: {m!r} is not a measure of this run "
                                   f"(e.g. {', '.join(sorted(ev.per_query)[:6])})")
                current[(ds.name, name, m)] = (ev.means[m], ev.per_query.get(m, {}))
            if guards.get(name):
                leaks[(ds.name, name)] = (ev.means.get("secret_leak_rate", float("nan")), guards[name])
    ret_records = [{"name": p.name, "source": src if not _is_path(src) else source_of(src, False, base_dir),
                    "hash": p.hash} for p, src in zip(pipes, sources)]
    if expected is not None:
        for line in changed_sources(expected, ds_hash, {p.name: p.hash for p in pipes}):
            print(line, file=sys.stderr)
        ran = {k[0] for k in current}
        gated = {p.name for p in pipes}
        expected = dict(expected, rows=[r for r in expected["rows"] if r["dataset"] in ran
                                        and (not args.retrievers or r["retriever"] in gated)])
    if args.update:
        new, diff = updated(current, expected, embedder.describe(), args.tolerance, ds_records, ret_records,
                            retriever_set, args.alpha)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        print("\n".join(diff) if diff else "gate baseline unchanged")
        print(f"wrote {path} ({len(new['rows'])} rows)")
        return 0
    rows = compare(expected, current, alpha=args.alpha, tolerance=args.tolerance, clusters=clusters) \
        + guard_rows(leaks)
    print(table(rows))
    if not failed(rows):
        return 0
    loss_lines = {}
    for r in rows:
        if r.state == "FAIL" and r.metric != "secret_leak_rate":
            loss_lines[(r.dataset, r.retriever, r.metric)] = losses(r, expected, current, texts)
            print(f"\n{r.dataset} · {r.retriever} · {r.metric}: worst per-query losses (expected -> now)")
            print("\n".join(loss_lines[(r.dataset, r.retriever, r.metric)]) or "  (no query lost)")
    out = (Path(args.report_dir) if args.report_dir else
           new_run_folder("gate", [f"{k}={v}" for k, v in sorted(vars(args).items()) if k != "fn"],
                          log=lambda *a: None))
    writer = RunWriter(out)
    start_manifest(writer, sys.argv, settings, embedder)
    writer.manifest["gate"] = {"baseline": str(path), "alpha": args.alpha, "tolerance": args.tolerance}
    for dr in runs:
        record(writer, dr)
    writer.extra_files["gate.md"] = render_markdown(rows, loss_lines, str(path), [])
    writer.extra_files["gate.json"] = json.dumps(
        {"baseline": str(path), "rows": [{**r.__dict__, "delta": r.delta} for r in rows]}, indent=1,
        sort_keys=True, default=str) + "\n"
    write_reports(writer)
    written = writer.write()
    if not args.report_dir:
        link_latest(written, log=lambda *a: None)
    print(f"\ngate failed: report folder {written} (gate.md, report.html)")
    return 1
