"""Errors of the evalkit command line."""


class CLIError(Exception):
    """Bad command-line input; printed as one line by ``evalkit.cli.main``."""
