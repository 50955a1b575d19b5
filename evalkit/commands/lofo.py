"""`evalkit lofo`: judge a defended pipeline on attack families it never saw (evalkit/workflows/lofo.py)."""
from __future__ import annotations

import json
from pathlib import Path

from evalkit.commands.options import csv_option


def _guard(text: str) -> dict:
    """``--guard '{type = "guard.payload", threshold = 1}'``: a TOML inline table."""
    import tomllib  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    try:
        g = tomllib.loads(f"g = {text}")["g"]
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--guard {text!r}: not a TOML inline table ({exc})") from None
    if not isinstance(g, dict) or "type" not in g:
        raise ConfigError(f"--guard {text!r}: give a TOML inline table with a type, e.g. '{{type = \"guard.payload\"}}'")
    return g


def cmd_lofo(args) -> int:
    from evalkit.workflows.lofo import lofo  # lazy: startup
    res = lofo(args.preset, csv_option(args.dataset, "--dataset"), Path(args.out),
               evaluation=csv_option(args.evaluation, "--evaluation") if args.evaluation else None,
               train_on=csv_option(args.train_on, "--train-on") if args.train_on else None, split=args.split,
               evaluation_split=args.evaluation_split, extra_guards=[_guard(g) for g in args.guard or []],
               retune=not args.no_retune, report_only=args.report_only)
    text = res.to_markdown() if args.markdown else res.to_text()
    (Path(args.out) / "lofo.md").write_text(res.to_markdown() + "\n", encoding="utf-8")
    (Path(args.out) / "lofo.json").write_text(json.dumps(res.to_json(), indent=1) + "\n", encoding="utf-8")
    print(text)
    return 0


def register(sub) -> None:
    p = sub.add_parser("lofo", help="leave one attack family out: judge a defended pipeline on each design family "
                                    "its learned guard never saw, beside the evaluation-set figure",
                       description="For every attack family of the design plantings: fit guard.classifier without "
                                   "that family's notes (train-guard --exclude), run the pipeline with that model, "
                                   "and report its poison_injected_rate on the family's targets (Wilson 95% "
                                   "intervals, clustered where targets share a conversation), with the guards' "
                                   "thresholds re-tuned per fold on the other families; beside it the same with "
                                   "every family known, the preset as shipped, the evaluation planting, each guard "
                                   "alone and which guards can catch the family by construction. See "
                                   "docs/poisoning.md.")
    p.add_argument("--preset", required=True, help="the defended pipeline (a preset name or .toml path)")
    p.add_argument("--dataset", required=True,
                   help="comma separated: plantings of the design template sets (their families are the folds)")
    p.add_argument("--out", required=True, help="a new folder: the fold models, the run folders, lofo.md and lofo.json")
    p.add_argument("--evaluation", default=None,
                   help="comma separated: plantings of the evaluation templates, run with the preset as shipped")
    p.add_argument("--train-on", default=None,
                   help="comma separated: the design plantings the guard is fitted on (default: --dataset)")
    p.add_argument("--split", default="all", help="the split of --dataset measured (default all)")
    p.add_argument("--evaluation-split", default=None,
                   help="the split of --evaluation measured (default: the dataset's own default, test when it has one)")
    p.add_argument("--guard", action="append", default=None,
                   help="a guard stage not in the preset, measured alone in the first guard's place (a TOML inline "
                        "table, e.g. '{type = \"guard.payload\"}'; repeatable)")
    p.add_argument("--no-retune", action="store_true",
                   help="keep the preset's guard thresholds in every fold (refit the learned guard only; faster, "
                        "optimistic for the held-out family)")
    p.add_argument("--report-only", action="store_true",
                   help="fit and run nothing: compute the tables again from the models and run folders a finished "
                        "lofo with the same arguments left in --out")
    p.add_argument("--markdown", action="store_true", help="print Markdown instead of the terminal tables")
    p.set_defaults(fn=cmd_lofo)
