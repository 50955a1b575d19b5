"""`evalkit` command line. Bad input exits non-zero with one clear line (no traceback)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" /
                                                  "evalkit") / "numba"))

EXIT_BAD_INPUT = 2


from evalkit.errors import CLIError  # noqa: E402  (one class even when this module runs as __main__)


def csv_option(value: str | None, option: str) -> list[str] | None:
    """A comma-separated option's items; None when the option was not given, CLIError when it was given empty
    (``--retrievers ""`` or ``","`` must not quietly run nothing, or everything)."""
    if value is None:
        return None
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items:
        raise CLIError(f"{option} {value!r}: no names given (give one or more, comma separated)")
    return items


def index_settings(args):
    from retrievers.index import HNSWSettings, IndexSettings  # lazy: startup
    backend = args.backend or os.environ.get("EVALKIT_BACKEND") or "chroma"
    if getattr(args, "chroma_url", None) or (os.environ.get("EVALKIT_CHROMA_URL") and not args.backend):
        backend = "chroma-http"
    h = HNSWSettings(ef_search=args.ef_search, ef_construction=args.ef_construction, max_neighbors=args.m)
    return IndexSettings(backend=backend, representation=args.representation, hnsw=h,
                         chroma_url=getattr(args, "chroma_url", None),
                         as_of_visibility=getattr(args, "as_of_visibility", None) or "auto")


def add_index_args(p):
    p.add_argument("--backend", choices=["chroma", "chroma-http", "exact"], default=None,
                   help="vector search backend (default chroma embedded; env EVALKIT_BACKEND)")
    p.add_argument("--chroma-url", default=None, help="Chroma server URL for chroma-http (env EVALKIT_CHROMA_URL)")
    p.add_argument("--representation", choices=["auto", "truncate", "maxp"], default="auto",
                   help="long documents: truncate at 256 tokens or split and score by best piece (MaxP)")
    p.add_argument("--ef-search", type=int, default=200)
    p.add_argument("--ef-construction", type=int, default=200)
    p.add_argument("--m", type=int, default=32, help="HNSW max neighbours")
    p.add_argument("--as-of-visibility", choices=["auto", "strict", "all"], default="auto",
                   help="which documents a query searches: strict = only those created at or before its as_of "
                        "(undated ones always), all = every document of its group; auto (default) = the protocol "
                        "the dataset (or a query-log replay: strict) declares; the run header prints it")


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


def cmd_presets(args) -> int:
    from retrievers.pipeline import load_preset, preset_names  # lazy: startup
    names = preset_names()
    w = max(len(n) for n in names)
    for n in names:
        p = load_preset(n)
        print(f"{n:<{w}}  {p.hash}  {p.description}")
    return 0


def cmd_run(args) -> int:
    from evalkit.engine.experiment import (  # lazy: startup
        load_pipelines,
        out_dir,
        record,
        run_dataset,
        start_manifest,
    )
    from evalkit.engine.output import RunWriter  # lazy: startup
    from evalkit.report import print_table, write_reports  # lazy: startup
    from retrievers.embed import Embedder  # lazy: startup
    if args.limit is not None and args.limit < 1:  # 0 meant "no limit" and -1 "all but the last query"
        raise CLIError(f"--limit must be >= 1, got {args.limit}")
    pipelines = load_pipelines(csv_option(args.retrievers, "--retrievers"))  # validate every preset before any work
    datasets = csv_option(args.dataset, "--dataset")
    writer = RunWriter(out_dir(args.out, "-".join(Path(d).name for d in datasets)))  # refuses a user's path now
    settings = index_settings(args)
    embedder = Embedder()
    start_manifest(writer, sys.argv, settings, embedder)
    results = []
    for d in datasets:
        dr = run_dataset(d, pipelines, args.split, settings, embedder, limit=args.limit)
        record(writer, dr)
        results.append(dr)
    write_reports(writer)
    out = writer.write()
    print_table(writer)
    print(f"wrote {out}")
    return 0


def cmd_score(args) -> int:
    from evalkit.engine.claim import claim_file  # lazy: startup
    from evalkit.workflows.explain import score_candidates  # lazy: startup
    from retrievers.candfile import (  # lazy: startup
        candidates_from_json,
        load_candidate_file,
    )
    from retrievers.pipeline import load_preset  # lazy: startup
    claim = claim_file(args.out, "score") if args.out else None
    p = load_preset(args.preset)
    cs = candidates_from_json(load_candidate_file(args.candidates))
    out = score_candidates(p, cs)
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if claim:
        claim.write_text(text + "\n")
    else:
        print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="evalkit", description="Offline evaluation harness for agent-memory retrieval")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("datasets", help="list the datasets found (with counts) and where they were looked for")
    p.add_argument("--count-large", action="store_true", help="also load large datasets to count them")
    p.set_defaults(fn=cmd_datasets)
    p = sub.add_parser("presets", help="list retriever presets with their hash and a one-line description")
    p.set_defaults(fn=cmd_presets)
    p = sub.add_parser("run", help="run retrievers over datasets and write a run folder")
    p.add_argument("--dataset", required=True, help="dataset name(s) or BEIR folder path(s), comma separated")
    p.add_argument("--retrievers", required=True, help="preset names or .toml paths, comma separated")
    p.add_argument("--split", default=None, help="query split (default: test when present, else all)")
    p.add_argument("--out", default=None, help="output folder (default reports/runs/<dataset>)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries (smoke runs)")
    add_index_args(p)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("score", help="score one candidate JSON file with a preset; ranked JSON with a per-stage trace")
    p.add_argument("--preset", required=True)
    p.add_argument("--candidates", required=True, help="candidate JSON (schema in the README)")
    p.add_argument("--out", default=None)
    p.set_defaults(fn=cmd_score)

    import evalkit.commands as commands  # lazy: startup
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"evalkit.commands.{info.name}").register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    from evalkit.engine.output import RunFolderError  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    from retrievers.types import DataError  # lazy: startup
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (DataError, ConfigError, RunFolderError, CLIError) as exc:
        print(f"evalkit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("evalkit: interrupted (finished work is cached; run again to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
