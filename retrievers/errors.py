"""Errors shared by the retriever side."""


class ConfigError(ValueError):
    """A preset / stage / arm configuration problem; the message is one line a user can act on."""
