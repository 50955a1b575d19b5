"""`evalkit tune`: search a preset's stage parameters on a tuning split, report on held-out queries (evalkit/tune/run.py)."""
from __future__ import annotations

import argparse
import json
import os
import sys


def cmd_tune(args) -> int:
    from evalkit.commands.options import index_settings  # lazy: startup
    from evalkit.tune.run import run_tune  # lazy: startup
    from evalkit.tune.space import load_space  # lazy: startup
    from retrievers.embed.model import Embedder  # lazy: startup

    # the space is validated before any index or model work
    from evalkit.engine.cluster import open_client, parse_spec  # lazy: startup
    from retrievers.embed.model import cache_root  # lazy: startup

    from evalkit.tune.protocol import Options  # lazy: startup
    from evalkit.tune.space import parse_folds  # lazy: startup

    space = load_space(args.space, dataset=args.dataset, method=args.sampler or args.method, trials=args.trials)
    opts = Options(split_by=args.split_by, split_date=args.split_date,
                   folds=parse_folds(args.folds, "--folds") if args.folds is not None else None,
                   resplit=args.resplit, final=args.final)
    if args.cluster:
        parse_spec(args.cluster)  # a bad spec fails before any work
    journal = None if args.journal == "off" else (args.journal or cache_root() / "tune-journal")
    if args.bench:

        from evalkit.tune.bench import bench_space  # lazy: startup
        with open_client(args.cluster) as client:
            res = bench_space(space, n=args.bench, workers=args.workers or space.workers or 1,
                              settings=index_settings(args), embedder=Embedder(),
                              log=lambda m: print(m, file=sys.stderr), cluster=client)
        print(json.dumps(res, indent=1, sort_keys=True))
        return 0
    with open_client(args.cluster) as client:
        res = run_tune(space, out=args.out, workers=args.workers, settings=index_settings(args),  # claims --out first
                       log=lambda m: print(m, file=sys.stderr),
                       progress=not args.quiet and os.environ.get("CI", "").lower() not in ("1", "true"),
                       cluster=client, journal=journal, options=opts, lockbox_journal=args.lockbox_journal)
    print(res.text)
    print(f"wrote {res.out}")
    return 0


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {s}")
    return v


def register(sub) -> None:
    from evalkit.commands.options import add_index_args  # lazy: startup
    p = sub.add_parser("tune", help="tune stage parameters of a preset over a search space (grid / random / "
                                    "Bayesian) on a tuning split; leaderboard, held-out significance, best preset TOML")
    p.add_argument("--space", required=True, help="search-space TOML (examples in tune/; format in evalkit/tune/space.py)")
    p.add_argument("--dataset", default=None, help="dataset name or BEIR folder (default: the space's 'dataset')")
    p.add_argument("--out", default=None, help="output folder (default reports/tune/<space name>)")
    p.add_argument("--sampler", choices=["tpe", "gp", "random", "grid"], default=None,
                   help="override the space's method: Optuna TPE / GP / random sampler (seeded), or the full grid")
    p.add_argument("--method", choices=["grid", "tpe", "gp", "random", "bayes"], default=None,
                   help="same as --sampler (bayes = tpe)")
    p.add_argument("--trials", type=_positive_int, default=None, help="tpe / gp / random: configs to evaluate")
    p.add_argument("--cluster", default=None, metavar="SPEC",
                   help="run the sweeps on Dask: local[:N] (N local worker processes) or tcp://HOST:PORT (a running "
                        "scheduler); the candidate set goes once to each worker, configs in contiguous slices")
    p.add_argument("--journal", default=None, metavar="DIR",
                   help="folder of the resumable sweep journal and Optuna study (default $EVALKIT_CACHE/tune-journal; "
                        "'off' = none): a killed tune started again computes only the missing configs")
    p.add_argument("--workers", type=_positive_int, default=None,
                   help="processes for the sweep (default: the space's 'workers', else 1)")
    p.add_argument("--split-by", default=None, metavar="RULE",
                   help="how queries are grouped so that no group is on both sides of a split or fold: auto (the "
                        "dataset's declared rule: its conversations or haystacks when it declares them, else "
                        "identical evidence set), group, evidence, query (near-duplicate query texts, for logged "
                        "traffic), rules joined with '+', or time (tune before a date, hold out after it)")
    p.add_argument("--split-date", default=None, metavar="DATE",
                   help="--split-by time: the first date held out (ISO 8601; default: the median query date)")
    p.add_argument("--folds", default=None, metavar="K",
                   help="cross-validation by group with K folds (2..50) or 'loo' (one fold per group) instead of a "
                        "held-out split (default: the space's; datasets with few groups are cross-validated anyway)")
    p.add_argument("--resplit", action="store_true",
                   help="a declared split that puts a group on both sides is re-split by group (said in every "
                        "output) instead of refused")
    p.add_argument("--final", action="store_true",
                   help="also open the dataset's sealed lockbox split: score the chosen config there once and count "
                        "the opening in the lockbox journal (a second opening is reported as such)")
    p.add_argument("--lockbox-journal", default=None, metavar="FILE",
                   help="the journal of lockbox openings (default: lockbox.jsonl beside the space file)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--bench", type=_positive_int, default=None, metavar="N",
                   help="only measure sweep throughput: the grid (grid spaces) or N random configs; prints JSON")
    add_index_args(p)
    p.set_defaults(fn=cmd_tune)
