"""`evalkit presets`: every retriever preset with its hash and one-line description.

`evalkit preset from-config --system SYSTEM CONFIG.json [--name NAME] [--out FILE.toml]` (``preset`` is an alias
of ``presets``): a seed system's own configuration file → a preset that extends the as-shipped one with the
values the original would run with (``retrievers/presets/config/``). The resolved configuration, each value with
its rule and citation, goes to stderr; the preset TOML to ``--out`` (written whole or not at all) or stdout.
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

def cmd_presets(args) -> int:
    from retrievers.pipeline import load_preset, preset_names  # lazy: startup
    names = preset_names()
    w = max(len(n) for n in names)
    for n in names:
        p = load_preset(n)
        print(f"{n:<{w}}  {p.hash}  {p.description}")
    return 0


def _default_name(system: str, config: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", config.stem).strip("_") or "config"
    return f"{system.replace('-', '_').replace('.', '_')}_{stem}"


def cmd_from_config(args) -> int:
    from evalkit.runfolder.claim import claim_file  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    from retrievers.pipeline import load_preset  # lazy: startup
    from retrievers.presets.config import from_config, preset_toml, read_config, resolution_text  # lazy: startup

    from retrievers.presets.config import FRONT_ENDS  # lazy: startup
    if args.system not in FRONT_ENDS:
        raise ConfigError(f"unknown system {args.system!r} (valid: {', '.join(FRONT_ENDS)})")
    config = Path(args.config)
    name = args.name or _default_name(args.system, config)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ConfigError(f"--name {name!r}: use letters, digits, '_', '-' or '.'")
    out = Path(args.out) if args.out else None
    if out is not None and out.suffix != ".toml":
        raise ConfigError(f"--out {out}: a preset file must end in .toml")
    if out is not None and not out.parent.is_dir():
        raise ConfigError(f"--out {out}: folder {out.parent} does not exist")
    claim = claim_file(out, "preset") if out is not None else None  # never replaces a file evalkit did not write
    limit = None
    if args.limit is not None:
        try:
            limit = float(args.limit)
        except ValueError:
            raise ConfigError(f"--limit {args.limit!r} is not a number") from None
        limit = int(limit) if limit.is_integer() else limit
    call = {"agent": args.agent, "provider": args.provider, "limit": limit, "category": args.category}
    res = from_config(args.system, read_config(config), **call)
    text = preset_toml(res, name)
    with tempfile.TemporaryDirectory(prefix="evalkit-preset-") as tmpdir:
        tmp = Path(tmpdir) / f"{name}.toml"
        tmp.write_text(text, encoding="utf-8")
        pipe = load_preset(str(tmp))  # the preset must build before it is written anywhere
    print(resolution_text(res), file=sys.stderr)
    print(f"  preset {name} (hash {pipe.hash})", file=sys.stderr)
    if claim is not None:
        claim.write_text(text)  # temp sibling + rename
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(sub) -> None:
    p = sub.add_parser("presets", aliases=["preset"],
                       help="list retriever presets with their hash and a one-line description; "
                            "`preset from-config` turns a system's own config file into a preset")
    p.set_defaults(fn=cmd_presets)
    acts = p.add_subparsers(dest="action", metavar="{from-config}")
    fc = acts.add_parser("from-config", help="a seed system's own config file → a preset extending the "
                                             "as-shipped one, resolved as the original resolves it")
    fc.add_argument("config", help="the config file (JSON): the host application's whole config or just the system's block")
    fc.add_argument("--system", required=True,
                    help="whose config this is: a front end of retrievers/presets/config (an unknown name lists them)")
    fc.add_argument("--name", help="preset name (default: <system>_<config file stem>)")
    fc.add_argument("--out", help="write the preset here (.toml; default: stdout)")
    fc.add_argument("--agent", help="merge this agent's own block over the defaults (configs with per-agent "
                                    "blocks)")
    fc.add_argument("--provider", choices=("auto", "none"),
                    help="'none' = no embedding provider is available at run time (keyword-only mode)")
    fc.add_argument("--limit", help="evaluate the recall tool's call with this limit instead of the automatic "
                                    "recall (systems with both)")
    fc.add_argument("--category", help="the retrieve call's category filter (systems whose memories have one)")
    fc.set_defaults(fn=cmd_from_config)
