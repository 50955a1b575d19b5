"""Reading a run folder (the layout in :mod:`evalkit.runfolder`, written by :mod:`evalkit.runfolder.write`): its
schema version, the file-name rule for datasets and retrievers, and the readers. Imports nothing of evalkit but its
errors, so
the writer and the output-path guard (:mod:`evalkit.runfolder.claim`, which recognises earlier run folders) can
both use it without depending on each other.

Usage: ``run = read_run(Path("reports/runs/scifact/latest"))`` → ``{"manifest", "metrics", "path"}``."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Iterator

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
    f = results_file(path, dataset, retriever)
    if not f.exists():
        raise RunFolderError(f"{path}: no results for {dataset}/{retriever}")
    with open(f, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


PER_QUERY_HEADER = ["dataset", "retriever", "query_id", "category", "metric", "value"]
_BUDGET_PREFIX = re.compile(r'^\{"budget": (\{[^{}]*\})')


def per_query_rows(path: Path) -> Iterator[list[str]]:
    """The rows of a run folder's ``per_query.csv`` as the file holds them (six texts each: dataset, retriever,
    query id, category, metric, value), streamed (a bench's file holds over a million rows); RunFolderError on a
    missing file, another header or a short row."""
    path = Path(path)
    f = path / "per_query.csv"
    if not f.exists():
        raise RunFolderError(f"{path}: damaged run folder (per_query.csv missing)")
    with open(f, newline="", encoding="utf-8") as fh:
        rd = csv.reader(fh)
        head = next(rd, None)
        if head != PER_QUERY_HEADER:
            raise RunFolderError(f"{path}: damaged run folder (per_query.csv header is {head!r})")
        for row in rd:
            if len(row) != 6:
                raise RunFolderError(f"{path}: damaged run folder (per_query.csv line {rd.line_num})")
            yield row


def results_file(path: Path, dataset: str, retriever: str) -> Path:
    """Where a run folder keeps one retriever's results on one dataset (``results/<dataset>/<retriever>.jsonl``)."""
    return Path(path) / "results" / safe(dataset) / f"{safe(retriever)}.jsonl"


def read_budgets(path: Path, dataset: str, retriever: str) -> list[dict]:
    """The ``budget`` record of every result line of one retriever on one dataset, without parsing the rest of the
    line (its ranked list and injected block) when the line starts with it, as the writer's sorted keys put it;
    [] when the folder has no such results."""
    f = results_file(path, dataset, retriever)
    if not f.exists():
        return []
    out = []
    with open(f, encoding="utf-8") as fh:
        for line in fh:
            m = _BUDGET_PREFIX.match(line)
            if m:
                out.append(json.loads(m.group(1)))
            elif line.strip():
                try:
                    out.append(json.loads(line).get("budget") or {})
                except json.JSONDecodeError:
                    raise RunFolderError(f"{path}: damaged results for {dataset}/{retriever}") from None
    return out
