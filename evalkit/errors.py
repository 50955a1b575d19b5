"""Errors of the evalkit command line."""


class CLIError(Exception):
    """Bad command-line input; printed as one line by ``evalkit.cli.main``."""


class OutputPathError(CLIError):
    """An output path evalkit refuses to write (evalkit/runfolder/claim.py): it holds something evalkit did not
    write."""
