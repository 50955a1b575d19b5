"""The published reference numbers and the layout of the README's reference table (``reference_numbers.toml``
beside this module), read for :mod:`evalkit.workflows.reference`, which renders them without naming a dataset."""
from __future__ import annotations

import tomllib
from pathlib import Path

REFERENCE_NUMBERS = Path(__file__).with_name("reference_numbers.toml")


def load_reference(path: Path = REFERENCE_NUMBERS) -> dict:
    """``{"retrievers": [...], "section": [{dataset, title, layout, metrics, …}, …]}`` in file order."""
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    for s in raw.get("section", []):
        if s.get("layout") not in ("metrics", "categories"):
            raise ValueError(f"{path}: section {s.get('dataset')!r}: unknown layout {s.get('layout')!r}")
    return raw
