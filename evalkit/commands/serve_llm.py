"""`evalkit serve-llm`: the local chat model (SmolLM2-135M-Instruct, offline) as an OpenAI-compatible endpoint on
127.0.0.1 for answer runs (:mod:`evalkit.engine.llm_server`). A plumbing model: it shows the answer workflow end to
end and keeps the tests real; it is not a judge of quality."""
from __future__ import annotations

from evalkit.errors import CLIError


def cmd_serve_llm(args) -> int:
    from evalkit.engine.llm_server import serve  # lazy: startup
    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be in 0..65535, got {args.port}")
    if args.threads is not None and args.threads < 1:
        raise CLIError(f"--threads must be >= 1, got {args.threads}")
    try:
        serve(args.port, args.threads)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc})") from None
    return 0


def register(sub) -> None:
    p = sub.add_parser("serve-llm", help="serve the local chat model (SmolLM2-135M-Instruct, offline) as an "
                                         "OpenAI-compatible /v1/chat/completions on 127.0.0.1 (a plumbing model for "
                                         "answer runs, not a judge of quality)")
    p.add_argument("--port", type=int, default=8011, help="port on 127.0.0.1 (default 8011; 0 = any free port)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    p.set_defaults(fn=cmd_serve_llm)
