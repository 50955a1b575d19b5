"""`evalkit presets`: every retriever preset with a description clipped to 100 columns, and what a preset that
cannot run as shipped needs (``--long``: hashes and whole descriptions).

`evalkit preset from-config --system SYSTEM CONFIG.json [--name NAME] [--out FILE.toml]` (``preset`` is an alias
of ``presets``): a seed system's own configuration file → a preset that extends the as-shipped one with the
values the original would run with (``retrievers/presets/config/``). The resolved configuration, each value with
its rule and citation, goes to stderr; the preset TOML to ``--out`` (written whole or not at all) or stdout.
"""
from __future__ import annotations

import re
import sys
import tempfile
import textwrap
from pathlib import Path

WIDTH = 100  # the listing fits a 100-column terminal; --long has the hashes and whole descriptions


def _clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:max(0, width - 1)].rstrip() + "…"


def cmd_presets(args) -> int:
    from evalkit.workflows.bench import how_to_run, needs_external_model  # lazy: startup
    from retrievers.pipeline import load_preset, preset_names  # lazy: startup
    names = preset_names()
    pipes = [load_preset(n) for n in names]
    w = max(len(n) for n in names)
    needs = {p.name: (needs_external_model(p), how_to_run(p)) for p in pipes if needs_external_model(p)}
    if args.long:
        for p in pipes:
            print(f"{p.name}  {p.hash}\n  {p.description}")
            if p.name in needs:
                why, how = needs[p.name]
                print(f"  needs to run: {why}\n  how: {how}")
            print()
        return 0
    for p in pipes:
        text = f"needs a reranker: set {next(iter(_needs_stage(p)))}.provider (see below)" if p.name in needs \
            else p.description
        print(f"{p.name:<{w}}  {_clip(text, WIDTH - w - 2)}")
    if needs:
        print()
        for n, (why, how) in needs.items():
            for line in textwrap.wrap(f"{n}: {why}; to run it: {how}", WIDTH, subsequent_indent="    "):
                print(line)
    print(f"\n{len(names)} presets; `evalkit presets --long` for hashes and full descriptions")
    return 0


def _needs_stage(p) -> list[str]:
    return [f"{s.display}" for s in p.stages if s.params().get("provider") in ("injected", "local")]


def default_name(system: str, config: Path, agent: str | None = None) -> str:
    """The preset's name from the config file: its stem, prefixed by the system only when the stem does not already
    name it (``openclaw.json`` → ``openclaw``, ``work-agent.json`` → ``openclaw_work_agent``, never
    ``openclaw_openclaw``), the ``--agent`` appended; ``_config`` is appended to a name a shipped preset has."""
    from retrievers.pipeline import preset_names  # lazy: startup

    def slug(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")

    stem, sys_slug = slug(config.stem) or "config", slug(system)
    name = stem if stem.lower().startswith(sys_slug.lower()) else f"{sys_slug}_{stem}"
    if agent:
        name += f"_{slug(agent)}"
    return name + "_config" if name in preset_names() else name


def cmd_from_config(args) -> int:
    from evalkit.runfolder.claim import claim_file  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    from retrievers.pipeline import load_preset  # lazy: startup
    from retrievers.presets.config import from_config, preset_toml, read_config, resolution_text  # lazy: startup

    from retrievers.presets.config import FRONT_ENDS  # lazy: startup
    if args.system not in FRONT_ENDS:
        raise ConfigError(f"unknown system {args.system!r} (valid: {', '.join(FRONT_ENDS)})")
    config = Path(args.config)
    name = args.name or default_name(args.system, config, args.agent)
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
    p.add_argument("--long", action="store_true", help="each preset's hash, whole description and what it needs")
    p.set_defaults(fn=cmd_presets)
    acts = p.add_subparsers(dest="action", metavar="{from-config}")
    fc = acts.add_parser("from-config", help="a seed system's own config file → a preset extending the "
                                             "as-shipped one, resolved as the original resolves it")
    fc.add_argument("config", help="the config file (JSON): the host application's whole config or just the system's block")
    fc.add_argument("--system", required=True,
                    help="whose config this is: a front end of retrievers/presets/config (an unknown name lists them)")
    fc.add_argument("--name", help="preset name (default: the config file's stem, prefixed by the system when it does not name it, plus the --agent)")
    fc.add_argument("--out", help="write the preset here (.toml; default: stdout)")
    fc.add_argument("--agent", help="merge this agent's own block over the defaults (configs with per-agent "
                                    "blocks)")
    fc.add_argument("--provider", choices=("auto", "none"),
                    help="'none' = no embedding provider is available at run time (keyword-only mode)")
    fc.add_argument("--limit", help="evaluate the recall tool's call with this limit instead of the automatic "
                                    "recall (systems with both)")
    fc.add_argument("--category", help="the retrieve call's category filter (systems whose memories have one)")
    fc.set_defaults(fn=cmd_from_config)
