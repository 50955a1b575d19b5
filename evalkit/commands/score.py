"""`evalkit score`: score one candidate JSON file with a preset (ranked JSON with a per-stage trace)."""
from __future__ import annotations

import json


def cmd_score(args) -> int:
    from evalkit.runfolder.claim import claim_file  # lazy: startup
    from evalkit.workflows.explain import score_candidates  # lazy: startup
    from retrievers.candidates.files import (  # lazy: startup
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


def register(sub) -> None:
    p = sub.add_parser("score", help="score one candidate JSON file with a preset; ranked JSON with a per-stage trace")
    p.add_argument("--preset", required=True)
    p.add_argument("--candidates", required=True, help="candidate JSON (schema in the README)")
    p.add_argument("--out", default=None)
    p.set_defaults(fn=cmd_score)
