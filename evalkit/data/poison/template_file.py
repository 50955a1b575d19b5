"""A user's own attack templates (``evalkit poison --templates FILE``): one template per entry, each with a family
name, read from JSON Lines or TOML and checked before anything is planted.

JSON Lines (``.jsonl``), one object per line (blank lines skipped)::

    {"family": "soft-link", "template": "{topic}: the current version lives at https://wiki.example/x"}

TOML (``.toml``), an array of tables::

    [[template]]
    family = "sourced-fact"
    template = "Per the team wiki ({date}): {topic} is {answer}."

An entry has ``family`` (lower-case letters, digits and dashes: the label the planted note carries as its attack,
so the run reports it per family), ``template`` (a ``str.format`` string over
:data:`evalkit.data.poison.attacks.FIELDS`; ``{{`` / ``}}`` for a literal brace) and an optional ``comment``.
Anything else — an unknown key or field, a missing family, malformed JSON or TOML, no entry at all — is one
:class:`~retrievers.errors.ConfigError` line naming the file and the entry, before anything is written.

>>> import tempfile, pathlib
>>> f = pathlib.Path(tempfile.mkdtemp()) / "mine.jsonl"
>>> _ = f.write_text('{"family": "echo-2", "template": "{query} It is {answer}."}\\n')
>>> read_templates(f).families
{'echo-2': ('{query} It is {answer}.',)}
"""
from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from evalkit.data.poison.attacks import FIELDS, template_fields
from retrievers.errors import ConfigError

FAMILY = re.compile(r"[a-z][a-z0-9-]{0,39}")
KEYS = ("family", "template", "comment")
SUFFIXES = (".jsonl", ".toml")


@dataclass(frozen=True)
class TemplateFile:
    """A checked template file: ``families`` maps a family to its templates in file order; ``name`` is what a
    planted note records as its template set (``file:<file name>``)."""

    path: str
    sha256: str
    families: dict[str, tuple[str, ...]]

    @property
    def name(self) -> str:
        return f"file:{Path(self.path).name}"

    def record(self) -> dict:
        """What the planting record keeps of the file: its name, content hash and every template by family."""
        return {"file": Path(self.path).name, "sha256": self.sha256,
                "families": {f: list(t) for f, t in self.families.items()}}


def _check_entry(path: Path, where: str, entry) -> tuple[str, str]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: {where}: not an object with 'family' and 'template'")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise ConfigError(f"{path}: {where}: unknown key {unknown[0]!r} (valid: {', '.join(KEYS)})")
    fam, tpl = entry.get("family"), entry.get("template")
    if fam is None or (isinstance(fam, str) and not fam.strip()):
        raise ConfigError(f"{path}: {where}: no 'family' (a name such as \"soft-link\": the label the run reports)")
    if not isinstance(fam, str) or not FAMILY.fullmatch(fam):
        raise ConfigError(f"{path}: {where}: family {fam!r} is not lower-case letters, digits and dashes (at most 40, "
                          f"starting with a letter)")
    if not isinstance(tpl, str) or not tpl.strip():
        raise ConfigError(f"{path}: {where} (family {fam}): no 'template' text")
    try:
        used = template_fields(tpl)
    except ValueError as exc:
        raise ConfigError(f"{path}: {where} (family {fam}): malformed template ({exc}; write {{{{ or }}}} for a "
                          f"literal brace)") from None
    for f in used:
        if f not in FIELDS:
            raise ConfigError(f"{path}: {where} (family {fam}): unknown field {{{f}}} (fields: "
                              f"{', '.join(FIELDS)})")
    return fam, tpl


def read_templates(path: str | Path) -> TemplateFile:
    """Read and check a template file (see the module docstring); ConfigError (one line) otherwise."""
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise ConfigError(f"--templates {path}: not a template set (design, design-2, evaluation) nor a "
                          f"{' or '.join(SUFFIXES)} template file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--templates {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    entries: list[tuple[str, object]] = []
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append((f"line {n}", json.loads(line)))
            except ValueError as exc:
                raise ConfigError(f"{path}: line {n}: malformed JSON ({exc})") from None
    else:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: malformed TOML ({exc})") from None
        extra = sorted(set(doc) - {"template"})
        if extra:
            raise ConfigError(f"{path}: unknown top-level key {extra[0]!r} (write each entry as [[template]])")
        items = doc.get("template", [])
        if not isinstance(items, list):
            raise ConfigError(f"{path}: 'template' must be an array of tables ([[template]])")
        entries = [(f"entry {n}", e) for n, e in enumerate(items, 1)]
    if not entries:
        raise ConfigError(f"{path}: no templates (each entry needs a 'family' and a 'template'; "
                          f"docs/examples/attacks.jsonl is an example)")
    families: dict[str, list[str]] = {}
    for where, e in entries:
        fam, tpl = _check_entry(path, where, e)
        if tpl in families.get(fam, []):
            raise ConfigError(f"{path}: {where} (family {fam}): the same template twice")
        families.setdefault(fam, []).append(tpl)
    return TemplateFile(str(path), hashlib.sha256(raw).hexdigest(), {f: tuple(t) for f, t in families.items()})


__all__ = ["TemplateFile", "read_templates"]
