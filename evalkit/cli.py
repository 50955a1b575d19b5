"""`evalkit` command line: environment defaults, the parser (every command is a plug-in in ``evalkit/commands/``)
and ``main``. Bad input exits non-zero with one clear line (no traceback)."""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" /
                                                  "evalkit") / "numba"))

EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141


from evalkit import __version__, commands  # noqa: E402  (after the environment defaults above)
from evalkit.errors import CLIError  # noqa: E402  (one class even when this module runs as __main__)


class Parser(argparse.ArgumentParser):
    """argparse with evalkit's contract for bad input: one ``evalkit: error: …`` line (a mistyped command or choice
    gets the closest name, ``— did you mean 'run'?``), exit 2; never the whole usage block."""

    def error(self, message: str):  # argparse's hook: every parse error comes here
        from retrievers.errors import did_you_mean  # lazy: startup

        m = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if m:
            what, word, choices = m.groups()
            names = re.findall(r"'([^']*)'", choices)
            head = f"unknown command {word!r}" if what == "cmd" else f"argument {what}: invalid choice: {word!r}"
            message = head + (did_you_mean(word, names) or f" (one of: {', '.join(names)})")
        hint = f" (`{self.prog} --help` lists them)" if "unknown command" in message else ""
        self.exit(EXIT_BAD_INPUT, f"evalkit: error: {message}{hint}\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="evalkit", description="Offline evaluation harness for agent-memory retrieval")
    ap.add_argument("--version", action="version", version=f"evalkit {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in commands.command_modules():
        importlib.import_module(f"evalkit.commands.{name}").register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    from evalkit.runfolder.read import RunFolderError  # lazy: startup
    from retrievers.errors import ConfigError  # lazy: startup
    from retrievers.types import DataError  # lazy: startup
    from evalkit.engine.run_warnings import route_python_warnings  # lazy: startup
    route_python_warnings()  # a library's warnings.warn: one `evalkit: warning:` line, never a source excerpt
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (DataError, ConfigError, RunFolderError, CLIError) as exc:
        print(f"evalkit: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("evalkit: interrupted (finished work is cached; run again to resume)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`evalkit presets | head`): stop quietly, as `ls | head` does. Point stdout at
        # /dev/null so the interpreter's final flush does not raise a second time; 141 = 128 + SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
