"""`evalkit presets`: every retriever preset with its hash and one-line description."""
from __future__ import annotations


def cmd_presets(args) -> int:
    from retrievers.pipeline import load_preset, preset_names  # lazy: startup
    names = preset_names()
    w = max(len(n) for n in names)
    for n in names:
        p = load_preset(n)
        print(f"{n:<{w}}  {p.hash}  {p.description}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("presets", help="list retriever presets with their hash and a one-line description")
    p.set_defaults(fn=cmd_presets)
