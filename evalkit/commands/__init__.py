"""Sub-command plug-ins: every module here defines ``register(subparsers)`` adding its commands.

Keeps `evalkit/cli.py` small and lets each feature (compare, replay, gate, tune, bench, perf) own its command.
Handlers raise DataError / ConfigError / RunFolderError / CLIError for bad input; cli.main prints one line.
"""
