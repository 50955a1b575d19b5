"""What every importer shares: the summary it returns, JSONL reading that counts bad lines, and the atomic writers
(a dataset folder through :func:`evalkit.data.export.export_beir`, any other folder through
:func:`write_folder`): everything goes to a temporary folder next to ``out`` that is renamed into place at the end,
so a failed import writes nothing."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from evalkit.data.export import export_beir, write_atomically, write_files
from retrievers.types import DataError, Dataset, Document, Qrels, Query, declare_visibility


@dataclass
class ImportSummary:
    out: Path
    counts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in self.counts.items()]
        return out + [f"note: {n}" for n in self.notes]


def jsonl_line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n"


def check_out(out: Path, overwrite: bool) -> Path:
    """Refuse an output that exists as a file, or a non-empty folder without ``overwrite`` — before any work."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not overwrite)):
        raise DataError(f"cannot write {out}: it exists and is not an empty folder (use --overwrite)")
    return out


def write_dataset(out: Path, name: str, documents: list[Document], queries: list[Query], qrels: Qrels,
                  info: dict, events: Iterable[dict] | None = None, overwrite: bool = False,
                  unit: str = "chunk", splits: dict[str, list[str]] | None = None,
                  extra_files: dict[str, str | bytes] | None = None) -> dict[str, int]:
    """The BEIR folder (+ ``querylog.jsonl`` when ``events`` is given), all or nothing."""
    if not documents:
        raise DataError(f"nothing to import: the store has no documents ({info.get('source', '?')})")
    if not queries:
        raise DataError("nothing to evaluate: no queries (give queries or session transcripts / a log)")
    declare_visibility(info, "strict", "an imported store: a query sees the notes created by its as_of "
                                       "(undated notes always)")
    ds = Dataset(name=name, documents=documents, queries=queries, qrels=qrels, splits=dict(splits or {}),
                 info=info, unit=unit)
    extra = dict(extra_files or {})
    if events is not None:
        extra["querylog.jsonl"] = "".join(jsonl_line(e) for e in events)
    return export_beir(ds, out, overwrite=overwrite, extra_files=extra)


def write_folder(out: Path, files: dict[str, str], overwrite: bool = False) -> None:
    """Write ``files`` (name → text) as the folder ``out``, all or nothing."""
    write_atomically(out, lambda tmp: write_files(tmp, files), overwrite, what="write")


def read_jsonl_objects(path: Path) -> tuple[list[tuple[int, dict]], list[tuple[int, str]]]:
    """(line number, object) of every JSON-object line, and (line number, reason) of every malformed one; blank
    lines ignored. A file that cannot be read is a DataError."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    good: list[tuple[int, dict]] = []
    bad: list[tuple[int, str]] = []
    for no, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            bad.append((no, "not UTF-8"))
            continue
        except json.JSONDecodeError as exc:
            bad.append((no, f"not JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            bad.append((no, "not a JSON object"))
            continue
        good.append((no, obj))
    return good, bad
