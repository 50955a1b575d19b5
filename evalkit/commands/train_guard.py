"""`evalkit train-guard`: fit the learned payload guard on design plantings (evalkit/workflows/train_guard.py)."""
from __future__ import annotations

from pathlib import Path

from evalkit.commands.options import csv_option


def cmd_train_guard(args) -> int:
    from evalkit.workflows.train_guard import train_guard  # lazy: startup
    datasets = csv_option(args.dataset, "--dataset")
    exclude = tuple(csv_option(args.exclude, "--exclude")) if args.exclude else ()
    print(train_guard(datasets, Path(args.out), args.split, args.C, args.quantile, args.seed,
                      exclude=exclude).to_text())
    return 0


def register(sub) -> None:
    p = sub.add_parser("train-guard", help="fit guard.classifier (a learned payload detector) on plantings of the "
                                           "design attack template sets and write its model file",
                       description="Fit the learned payload guard (stage guard.classifier) on `evalkit poison "
                                   "--templates design` or `design-2` plantings: planted instruction / trigger / "
                                   "keyword-stuff notes of the training split and the defender's own examples "
                                   "against the stores' unplanted notes, sentence by sentence. Use the file with "
                                   "{type = \"guard.classifier\", model = \"<file>\"}. See docs/poisoning.md.")
    p.add_argument("--dataset", required=True,
                   help="comma separated: plantings of design or design-2 (names or folders)")
    p.add_argument("--out", required=True, help="the model file to write (.json)")
    p.add_argument("--split", default="train", help="the split whose targets and stores are learned from "
                                                    "(default train)")
    p.add_argument("--C", type=float, default=0.1, help="inverse L2 strength of the logistic regression (0.1)")
    p.add_argument("--quantile", type=float, default=0.998,
                   help="the threshold: this quantile of the training negatives' scores (default 0.998)")
    p.add_argument("--seed", type=int, default=0, help="seed of the defender's examples' topic words (0)")
    p.add_argument("--exclude", default=None,
                   help="comma separated attack families whose planted notes are left out (a leave-one-family-out "
                        "fold: the guard never sees that family; `evalkit lofo` does this for every family)")
    p.set_defaults(fn=cmd_train_guard)
