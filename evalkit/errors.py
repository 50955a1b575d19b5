"""The harness's errors, in one module: bad command-line or output-path input (:class:`CLIError`,
:class:`OutputPathError`), run folders that cannot be read (:class:`RunFolderError`) and comparisons that cannot be
made (:class:`CompareError`), live runs that had to stop (:class:`LiveError`); ``evalkit.cli.main`` prints each as one
``evalkit: error:`` line, exit 2. Bad data and bad configuration are the library's (:mod:`retrievers.errors`:
``DataError``, ``ConfigError``)."""
from retrievers.errors import DataError


class CLIError(Exception):
    """Bad command-line input; printed as one line by ``evalkit.cli.main``."""


class OutputPathError(CLIError):
    """An output path evalkit refuses to write (evalkit/runfolder/claim.py): it holds something evalkit did not
    write."""


class RunFolderError(ValueError):
    """A run folder evalkit cannot read: written by another version, damaged, or not a run folder."""


class CompareError(ValueError):
    """A comparison that cannot be made (unknown baseline or metric, runs that share nothing)."""



class LiveError(DataError):
    """A live run had to stop (system gone, too many faults, a failed ingest: :mod:`evalkit.engine.live`): one line,
    exit 2."""
