"""`evalkit ablate`: turn each stage of a preset off in turn; Δ quality (with significance) and stage latency."""
from __future__ import annotations

from pathlib import Path

from evalkit.data.registry import DEFAULT


def register(sub) -> None:
    from evalkit.commands.options import add_index_args  # lazy: startup
    p = sub.add_parser("ablate", help="stage-by-stage ablation of a preset: Δ nDCG@10 / recall / injected nDCG / "
                                      "skip / budget per stage turned off, paired tests, stage latency")
    p.add_argument("--preset", required=True, help="preset name or .toml path")
    p.add_argument("--dataset", default=DEFAULT, help=f"dataset name or BEIR folder (default {DEFAULT})")
    p.add_argument("--split", default=None, help="query split (default: test when present, else all)")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries of the split (smoke runs)")
    p.add_argument("--latency-queries", type=int, default=30,
                   help="queries for the latency-mode run (one thread; 0 = no latency run)")
    p.add_argument("--repeats", type=int, default=3,
                   help="latency rounds per query (the end-to-end delta uses each query's fastest round)")
    p.add_argument("--out", default=None, help="output folder (default reports/ablation/<dataset>/<preset>)")
    p.add_argument("--cluster", default=None, metavar="SPEC",
                   help="run the variants' quality runs on Dask: local[:N] or tcp://HOST:PORT (the candidate set goes "
                        "once to each worker; the latency run stays on this machine)")
    add_index_args(p)
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.commands.options import index_settings  # lazy: startup
    from evalkit.runfolder.read import safe  # lazy: startup
    from evalkit.errors import CLIError  # lazy: startup
    from evalkit.workflows.ablation import run_ablation  # lazy: startup
    from retrievers.pipeline import load_preset  # lazy: startup

    if args.latency_queries < 0 or args.repeats < 1 or (args.limit is not None and args.limit < 1):
        raise CLIError("--latency-queries must be >= 0, --repeats and --limit >= 1")
    from evalkit.runfolder.claim import claim_folder  # lazy: startup
    from evalkit.workflows.bench import needs_external_model  # lazy: startup
    from evalkit.engine.cluster import open_client, parse_spec  # lazy: startup
    if args.cluster:
        parse_spec(args.cluster)  # a bad spec fails before any work
    p = load_preset(args.preset)  # validate before loading any data
    why = needs_external_model(p)
    if why:
        raise CLIError(f"preset {p.name} cannot run offline: {why}")
    claim = claim_folder(args.out or Path("reports") / "ablation" / safe(Path(args.dataset).name) / safe(p.name),
                         "ablate")  # refuses a user's path before any work
    with open_client(args.cluster) as client:
        res = run_ablation(p, args.dataset, args.split, latency_queries=args.latency_queries, limit=args.limit,
                           settings=index_settings(args), repeats=args.repeats, cluster=client)
    out = res.write(claim)
    print(res.to_text())
    print(f"wrote {out}/ablation.md, ablation.csv, ablation.json")
    return 0
