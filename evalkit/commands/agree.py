"""`evalkit agree SYSTEM --dataset D`: a live system against the preset that re-implements it (evalkit/workflows/agree.py)."""
from __future__ import annotations


def cmd_agree(args) -> int:
    from evalkit.runfolder.claim import claim_folder  # lazy: startup
    from evalkit.workflows.agree import agree, write_outputs  # lazy: startup
    claim = claim_folder(args.out, "agree") if args.out else None  # refuses a user's path before any work
    ag = agree(args.system, args.dataset, preset=args.preset, split=args.split, visibility=args.as_of_visibility,
               embed_backend=args.embed_backend, refresh=args.refresh)
    print(ag.to_text())
    if claim:
        for p in write_outputs(ag, claim):
            print(f"wrote {p}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("agree", help="a live system vs the preset that re-implements it: per-query top-k agreement, "
                                     "metric difference, every disagreement classified by the setting that explains it")
    p.add_argument("system", help="system name or system file (its [compare] table names the preset and the "
                                  "matching settings)")
    p.add_argument("--dataset", required=True, help="dataset name or BEIR folder path")
    p.add_argument("--preset", default=None, help="the preset to compare with (default: the system file's)")
    p.add_argument("--split", default=None, help="query split (default: test when present, else all)")
    p.add_argument("--as-of-visibility", choices=["auto", "strict", "all"], default="all",
                   help="default all: a system that indexes a whole folder sees every document")
    p.add_argument("--embed-backend", choices=["openvino", "openvino-f32", "openvino-int8", "bf16", "onnx", "torch"], default=None,
                   help="the preset's prescribed embedding runtime (default: evalkit's default)")
    p.add_argument("--refresh", action="store_true", help="ask the live system again instead of the response cache")
    p.add_argument("--out", default=None, help="also write agree.md and agree.json into this folder")
    p.set_defaults(fn=cmd_agree)
