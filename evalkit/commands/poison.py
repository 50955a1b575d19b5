"""`evalkit poison`: plant attacks into a dataset → a new dataset folder (evalkit/workflows/poison.py)."""
from __future__ import annotations

import sys
from pathlib import Path

from evalkit.data.poison.templates import DESIGN_SETS


def cmd_poison(args) -> int:
    from evalkit.workflows.poison import poison_dataset  # lazy: startup
    res = poison_dataset(args.dataset, Path(args.out), args.attacks, args.targets, args.per_target, args.rate,
                         args.seed, args.templates, args.isolate, args.undated, args.max_age_days, args.name)
    for w in res.warnings:
        print(f"evalkit: warning: {w}", file=sys.stderr)
    print(res.to_text())
    return 0


def register(sub) -> None:
    p = sub.add_parser("poison", help="plant attacks (query-echo, instruction, trigger, keyword-stuff, false-fact) "
                                      "into a dataset and write the poisoned copy as a new dataset folder",
                       description="Plant notes aimed at target queries: each dated before its target's as_of, in "
                                   "its target's store, labelled in metadata (poison, poison_target, "
                                   "poison_templates), never in the qrels. `evalkit run` on the folder then reports "
                                   "poison_rate@10, poison_injected_rate per attack, collateral and clean utility. "
                                   "See docs/poisoning.md.")
    p.add_argument("--dataset", required=True, help="dataset name or folder (anything `evalkit run` reads)")
    p.add_argument("--attacks", default=None,
                   help="comma separated: query-echo, instruction, trigger, keyword-stuff, false-fact (every set); "
                        "sourced-fact, chat-echo (design sets only); with --templates FILE, the file's families "
                        "(default: all of them)")
    p.add_argument("--out", required=True, help="the new dataset folder (must not exist or be empty)")
    p.add_argument("--targets", default="all",
                   help="how many target queries (N), 'all' (default: every judged query the rate allows), or "
                        "comma-separated query ids")
    p.add_argument("--rate", type=float, default=None,
                   help="poisoning rate: planted notes / a store's own notes (0 < R < 1). Shared stores: sets how "
                        "many of a store's queries are targets; --isolate: sets the notes per target "
                        "(max(1, round(R x store size)))")
    p.add_argument("--per-target", type=int, default=None,
                   help="planted notes per target (default 1; with --isolate instead of --rate)")
    p.add_argument("--isolate", action="store_true",
                   help="attack each target alone: its notes are visible to it only (metadata visible_to), so every "
                        "target meets exactly its own planted notes at the given rate (PoisonedRAG's per-target "
                        "protocol; the only way to measure a small store on many targets)")
    p.add_argument("--templates", default="evaluation", metavar="SET|FILE",
                   help=f"template set: {' or '.join(DESIGN_SETS)} (what defences are built and tuned on) or "
                        "evaluation (what they are judged on; default); or your own template file (.jsonl or .toml: "
                        "one template per entry with a family name; docs/poisoning.md, docs/examples/attacks.jsonl)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0): same seed, same dataset")
    p.add_argument("--undated", action="store_true",
                   help="plant undated notes (a dataset without query timestamps cannot date them before their "
                        "targets under the strict protocol)")
    p.add_argument("--max-age-days", type=float, default=14.0,
                   help="a note is written at most this long before its target's as_of (default 14)")
    p.add_argument("--name", default=None, help="the dataset's name in reports (default: the --out folder's name)")
    p.set_defaults(fn=cmd_poison)
