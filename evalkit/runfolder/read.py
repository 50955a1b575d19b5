"""Reading a run folder (the layout in :mod:`evalkit.runfolder`, written by :mod:`evalkit.runfolder.write`): its
schema version, the file-name rule for datasets and retrievers, and the readers. Imports nothing of evalkit but its
errors, so
the writer and the output-path guard (:mod:`evalkit.runfolder.claim`, which recognises earlier run folders) can
both use it without depending on each other.

Usage: ``run = read_run(Path("reports/runs/scifact/latest"))`` → ``{"manifest", "metrics", "path"}``."""
from __future__ import annotations

import json
from pathlib import Path

from evalkit.errors import RunFolderError  # noqa: F401  (defined with the harness's other errors)

SCHEMA_VERSION = 1
PER_QUERY_DECIMALS = "per_query_decimals"  # manifest key: how per_query.csv stores its values (per_query_decimals())
LEGACY_DECIMALS = 6  # what folders written before that key hold


def per_query_decimals(manifest: dict) -> int | None:
    """How a run folder's ``per_query.csv`` stores its values: None = full precision (each float as the shortest
    text that reads back to the same float, Python's ``repr``), ``k`` = rounded to ``k`` decimals — what a paired
    test must allow for (:func:`evalkit.measures.paired.tie_tolerance`). A folder written before the manifest said
    (no ``per_query_decimals`` key): 6."""
    return manifest[PER_QUERY_DECIMALS] if PER_QUERY_DECIMALS in manifest else LEGACY_DECIMALS


def coarser(a: int | None, b: int | None) -> int | None:
    """The precision of values from two sources together: the fewer decimals (None = full precision)."""
    return b if a is None else a if b is None else min(a, b)


def safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)


def read_run(path: Path) -> dict:
    """Load a run folder written by this version (clear error for other versions or damaged folders)."""
    path = Path(path)
    man = path / "manifest.json"
    met = path / "metrics.json"
    if not path.is_dir():
        raise RunFolderError(f"{path}: not a run folder (no such directory)")
    if not man.exists() or not met.exists():
        raise RunFolderError(f"{path}: not a run folder (manifest.json / metrics.json missing)")
    try:
        manifest = json.loads(man.read_text())
        metrics = json.loads(met.read_text())
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path}: damaged run folder ({exc.msg})") from None
    v = manifest.get("schema_version")
    if v != SCHEMA_VERSION:
        raise RunFolderError(f"{path}: run folder schema version {v!r} is not supported by this evalkit "
                             f"(expects {SCHEMA_VERSION}); re-run it with this version")
    return {"manifest": manifest, "metrics": metrics["rows"], "path": path}


def read_results(path: Path, dataset: str, retriever: str) -> list[dict]:
    f = Path(path) / "results" / safe(dataset) / f"{safe(retriever)}.jsonl"
    if not f.exists():
        raise RunFolderError(f"{path}: no results for {dataset}/{retriever}")
    with open(f, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
