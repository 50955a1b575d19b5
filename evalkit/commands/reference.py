"""`evalkit reference`: the measured reference table (docs/reference.md) from run folders."""
from __future__ import annotations

from pathlib import Path

from evalkit.data.reference_numbers import load_reference
from evalkit.data.registry import label


def register(sub) -> None:
    shown = ", ".join(label(s["dataset"]) for s in load_reference()["section"])
    p = sub.add_parser("reference", help=f"render the measured reference table ({shown}) from run folders; "
                                         "--write docs/reference.md updates that page's section")
    p.add_argument("runs", nargs="+", help="run folders (e.g. reports/bench/latest)")
    p.add_argument("--write", default=None, help="the Markdown file to update between the reference markers (docs/reference.md)")
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.workflows.reference import render, write_readme  # lazy: startup
    text = render([Path(r) for r in args.runs])
    if args.write:
        write_readme(Path(args.write), text, "evalkit reference " + " ".join(args.runs) + f" --write {args.write}")
        print(f"updated {args.write}")
    else:
        print(text)
    return 0
