"""`evalkit poison`: plant attacks into a dataset and write the poisoned copy as a new dataset folder.

The planting itself is :mod:`evalkit.data.poison` (targets, notes per target, dates, places, labels); this workflow
loads the dataset (any name or folder :func:`evalkit.data.registry.load_dataset` reads), parses the options into a
:class:`~evalkit.data.poison.plant.PlantConfig`, and writes through the BEIR exporter
(:func:`evalkit.data.export.export_beir`: a temporary folder renamed into place — on any error nothing is written).

>>> import tempfile
>>> out = Path(tempfile.mkdtemp()) / "ws-poisoned"
>>> summary = poison_dataset("memory-workspace", out, attacks="query-echo,false-fact", rate=0.01, isolate=True,
...                          seed=1)
>>> (out / "corpus.jsonl").exists()
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data.export import export_beir
from evalkit.data.poison import ATTACKS, TEMPLATE_SETS, PlantConfig, plant
from evalkit.data.poison.template_file import read_templates
from evalkit.data.registry import load_dataset
from evalkit.report.attacks import planting_text
from retrievers.errors import ConfigError


@dataclass
class PoisonResult:
    """What ``evalkit poison`` wrote: the folder, the counts, the planting record and the warnings."""

    out: Path
    counts: dict
    record: dict
    warnings: list[str] = field(default_factory=list)

    def to_text(self) -> str:
        return planting_text(self.record, self.out, self.counts)


def parse_targets(text: str) -> int | str | tuple[str, ...]:
    """``--targets``: a number, ``all``, or comma-separated query ids."""
    t = (text or "").strip()
    if t == "all":
        return "all"
    if t.isdigit():
        return int(t)
    ids = tuple(x.strip() for x in t.split(",") if x.strip())
    if not ids:
        raise ConfigError(f"--targets {text!r}: give a number, 'all', or query ids separated by commas")
    return ids


def poison_dataset(dataset: str, out: Path, attacks: str | None, targets: str = "all", per_target: int | None = None,
                   rate: float | None = None, seed: int = 0, templates: str = "evaluation", isolate: bool = False,
                   undated: bool = False, max_age_days: float = 14.0, name: str | None = None) -> PoisonResult:
    """Load ``dataset``, plant, export to ``out`` (a new or empty folder). ``templates``: a template set's name or a
    user's template file (``.jsonl`` / ``.toml``, :mod:`evalkit.data.poison.template_file`; ``attacks`` then names its
    families, all of them when empty). ConfigError / DataError (one line) for bad input, before anything is
    written."""
    custom = None if templates in TEMPLATE_SETS else read_templates(templates)
    names = tuple(a.strip() for a in (attacks or "").split(",") if a.strip())
    if not names and custom is not None:
        names = tuple(custom.families)
    if not names:
        raise ConfigError(f"--attacks: give one or more of {', '.join(ATTACKS)}, comma separated")
    cfg = PlantConfig(names, parse_targets(targets), per_target, rate, seed,
                      templates if custom is None else custom.name, isolate, undated, max_age_days, custom)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder (a poisoned dataset is always new)")
    ds = load_dataset(dataset)
    poisoned, warnings = plant(ds, cfg, name=name or out.name)
    counts = export_beir(poisoned, out)
    return PoisonResult(out, counts, poisoned.info["poison"], warnings)


__all__ = ["PoisonResult", "parse_targets", "poison_dataset"]
