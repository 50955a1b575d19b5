"""`evalkit systems`: the shipped live memory systems (``systems/*.toml``) and the commands around them.

* ``evalkit systems`` — every system file with its kind, hash and description (also those of ``$EVALKIT_SYSTEMS``);
* ``evalkit systems show NAME`` — the validated system file: canonical form and hash;
* ``evalkit systems install NAME`` — what a system needs installed once (its Python object's ``install(log)``,
  e.g. a Node runtime and an npm package, content-keyed under ``$EVALKIT_CACHE``); one with nothing to install says so;
* ``evalkit serve-embeddings`` — an OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 over evalkit's
  embedder (what a live system that embeds through such an endpoint is pointed at).
"""
from __future__ import annotations

import json
import sys


def cmd_list(args) -> int:
    from evalkit.engine.live.retriever import system_folders  # lazy: startup
    from evalkit.report.listings import systems_lines  # lazy: startup
    from retrievers.systems.file import load_system, system_names  # lazy: startup
    rows = []
    for folder in system_folders():
        for n in system_names(folder):
            s = load_system(str(folder / f"{n}.toml"))
            rows.append((s.name, s.kind, s.hash, s.description))
    if not rows:
        print("no system files found")
        return 0
    print("\n".join(systems_lines(rows)))
    return 0


def _spec(name: str):
    from evalkit.engine.live.retriever import find, system_folders  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    from retrievers.systems.file import system_names  # lazy: startup
    spec = find(name)
    if spec is None:
        known = [n for f in system_folders() for n in system_names(f)]
        raise ConfigError(f"unknown system {name!r} (systems: {', '.join(known) or 'none'})")
    return spec


def cmd_show(args) -> int:
    spec = _spec(args.name)
    print(json.dumps({"name": spec.name, "file": spec.path, "hash": spec.hash, "description": spec.description,
                      "system": spec.system, **spec.canonical(), "compare": spec.compare}, indent=1))
    return 0


def cmd_install(args) -> int:
    from retrievers.systems.python import import_object  # lazy: startup
    spec = _spec(args.name)
    target = import_object(spec.table["object"], f"system {spec.name}") if spec.kind == "python" else None
    fn = getattr(target, "install", None)
    if fn is None:
        print(f"system {spec.name}: nothing to install ({spec.kind} system)")
        return 0
    path = fn(log=lambda m: print(m, file=sys.stderr))
    print(f"system {spec.name}: installed at {path}")
    return 0


def cmd_serve(args) -> int:
    from evalkit.commands.options import embedder_from_args  # lazy: startup
    from retrievers.embed.server import EmbeddingServer  # lazy: startup
    srv = EmbeddingServer(embedder_from_args(args), host=args.host, port=args.port, name=args.name)
    print(f"serving {srv.name} ({srv.embedder.describe()['id']}) at http://{args.host}:{args.port}/v1/embeddings "
          f"(Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def register(sub) -> None:
    from evalkit.commands.options import add_embed_args  # lazy: startup
    p = sub.add_parser("systems", help="live memory systems: list the shipped system files, show one, install what "
                                       "one needs (see docs/systems.md)")
    p.set_defaults(fn=cmd_list)
    ss = p.add_subparsers(dest="systems_cmd")
    ss.add_parser("list", help="every system file (name, kind, hash, description)").set_defaults(fn=cmd_list)
    s = ss.add_parser("show", help="a system file's canonical form and hash")
    s.add_argument("name", help="system name or system file path")
    s.set_defaults(fn=cmd_show)
    s = ss.add_parser("install", help="install what a system needs, once (its object's install(): e.g. a Node "
                                      "runtime and an npm package into $EVALKIT_CACHE/systems)")
    s.add_argument("name", help="system name or system file path")
    s.set_defaults(fn=cmd_install)
    e = sub.add_parser("serve-embeddings", help="an OpenAI-compatible /v1/embeddings server on 127.0.0.1 over "
                                                "evalkit's embedder (for live systems that embed over HTTP)")
    e.add_argument("--host", default="127.0.0.1")
    e.add_argument("--port", type=int, default=18080)
    e.add_argument("--name", default=None, help="the model name the server reports (default all-MiniLM-L6-v2)")
    add_embed_args(e)
    e.set_defaults(fn=cmd_serve)
