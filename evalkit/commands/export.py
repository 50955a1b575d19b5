"""`evalkit export`: write any dataset as a BEIR folder `evalkit run` reads back identically
(evalkit/workflows/export.py)."""
from __future__ import annotations

from pathlib import Path


def cmd_export(args) -> int:
    from evalkit.workflows.export import export_dataset  # lazy: startup
    print(export_dataset(args.dataset, Path(args.out), args.overwrite).to_text())
    return 0


def register(sub) -> None:
    p = sub.add_parser("export", help="write a dataset (a registered name or a folder) as a BEIR "
                                      "folder that `evalkit run` reads back identically",
                       description="Write DATASET in the BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) "
                                   "with the evalkit.json sidecar: its unit, document representation, as-of "
                                   "protocol, query clusters and, for a poisoned dataset, its planting record. "
                                   "`evalkit run --dataset DIR` then gives the same metrics as on the name; the "
                                   "folder is also where your own edits or plantings start. See docs/datasets.md.")
    p.add_argument("dataset", help="dataset name or folder (anything `evalkit run` reads)")
    p.add_argument("--out", required=True, help="the folder to write (must not exist or be empty)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out folder (atomically)")
    p.set_defaults(fn=cmd_export)
