"""The library's errors, in one module: bad data (:class:`DataError`) and bad configuration (:class:`ConfigError`),
each a one-line message a user can act on (``evalkit`` prints it as one ``evalkit: error:`` line, exit 2), and the
helpers that phrase them (did you mean, a JSON error's position)."""


class DataError(ValueError):
    """Bad input data (a dataset, a candidate file, a log): the message is one line a user can act on."""


class ConfigError(ValueError):
    """A preset / stage / arm configuration problem; the message is one line a user can act on."""


def did_you_mean(word: str, choices, n: int = 3) -> str:
    """`` — did you mean 'bm25'?`` for the closest of ``choices`` to a mistyped ``word`` (difflib's ratio ≥ 0.6,
    best first), else ``""``: appended to an "unknown …" message so the fix is on the same line.

    >>> did_you_mean("bm52", ["bm25", "dense"])
    " — did you mean 'bm25'?"
    """
    import difflib  # lazy: startup

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=n, cutoff=0.6)
    if not close:
        return ""
    return " — did you mean " + " or ".join(repr(c) for c in close) + "?"


def json_error(exc) -> str:
    """A :class:`json.JSONDecodeError` as a phrase for one error line: ``"Unterminated string starting at column
    146"`` (the message's own trailing "at" is not repeated).

    >>> import json
    >>> try: json.loads('{"a": "x')
    ... except json.JSONDecodeError as e: print(json_error(e))
    Unterminated string starting at column 7
    """
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
