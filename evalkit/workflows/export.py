"""`evalkit export`: write any dataset `evalkit run` reads (a registered name or a folder) as a BEIR folder that
`evalkit run` reads back identically — the same documents, queries, qrels, splits, groups, as-of protocol, document
representation, dependent-query clusters and planting record (:mod:`evalkit.data.export`'s sidecar), so a run on
the folder gives the same metrics as a run on the name.

>>> import tempfile
>>> out = Path(tempfile.mkdtemp()) / "ws"
>>> print(export_dataset("memory-workspace", out).to_text().splitlines()[0])   # doctest: +ELLIPSIS
exported memory-workspace to ...
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit.data.export import export_beir
from evalkit.data.registry import load_dataset


@dataclass
class ExportResult:
    """What ``evalkit export`` wrote."""

    name: str
    out: Path
    counts: dict
    info: dict

    def to_text(self) -> str:
        c, i = self.counts, self.info
        rec = i.get("poison")
        lines = [f"exported {self.name} to {self.out}: {c['documents']} documents, {c['queries']} queries, "
                 f"{c['qrels_rows']} qrels rows in {c['splits']} split file(s)",
                 f"kept: unit {i.get('unit')}, representation {i.get('representation') or 'maxp (the index default)'}"
                 f", as-of visibility {i.get('as_of_visibility') or 'strict'}"
                 + (f", clusters by {i['clusters'].get('by')}" if isinstance(i.get("clusters"), dict) else "")
                 + (f", planting record ({rec.get('planted')} planted notes, {rec.get('templates')} templates)"
                    if isinstance(rec, dict) else ""),
                 f"read it back with: evalkit run --dataset {self.out} ..."]
        return "\n".join(lines)


def export_dataset(dataset: str, out: Path, overwrite: bool = False) -> ExportResult:
    """Load ``dataset`` and write it to ``out`` (new or empty unless ``overwrite``; atomic: a temporary folder
    renamed into place). DataError / ConfigError (one line) for bad input, nothing written then."""
    ds = load_dataset(dataset)
    counts = export_beir(ds, Path(out), overwrite=overwrite)
    info = {k: ds.info.get(k) for k in ("representation", "as_of_visibility", "clusters", "poison")}
    info["unit"] = ds.unit
    return ExportResult(ds.name, Path(out), counts, info)


__all__ = ["ExportResult", "export_dataset"]
