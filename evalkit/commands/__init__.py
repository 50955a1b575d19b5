"""Sub-command plug-ins: every module here defines ``register(subparsers)`` adding its commands.

`evalkit/cli.py` only builds the parser from them; each command imports its workflow when it runs (start-up stays
fast), and shared arguments live in ``options.py``. Handlers raise DataError / ConfigError / RunFolderError /
CLIError for bad input; cli.main prints one line.
"""
import pkgutil

#: listed first in `evalkit --help` (the everyday commands), the rest alphabetically
FIRST = ("datasets", "presets", "run", "score")


def command_modules() -> list[str]:
    """The plug-in modules, in `--help` order."""
    names = [m.name for m in pkgutil.iter_modules(__path__) if m.name != "options"]
    return sorted(names, key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST), n))
