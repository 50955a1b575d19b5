"""Write any :class:`Dataset` in the BEIR layout (DESIGN.md §4), atomically.

Output (readable by :func:`evalkit.data.readers.beir.load_beir` and by any BEIR tool)::

    out_dir/corpus.jsonl         {"_id", "title", "text", "metadata": {timestamp (ISO 8601), path, importance,
                                                                       group, ...document metadata}}
    out_dir/queries.jsonl        {"_id", "text", "metadata": {as_of (ISO 8601), group, category, ...}}
    out_dir/qrels/<split>.tsv    "query-id\\tcorpus-id\\tscore", one file per split (not "all": the loader
                                 derives it), rows for the split's queries that have judgements
    out_dir/evalkit.json         {"name", "unit", "info", "format_version"} (optional sidecar; BEIR tools ignore it)

Rules:

* Memory features that are ``None`` are left out of ``metadata`` (absent = evergreen / unknown on reload);
  ``created`` is written only when it differs from ``timestamp`` (the loader defaults it to the timestamp).
* A split member that has no judgements (e.g. a "no-memory" prompt) gets ``metadata.split`` naming that split
  (merged with any existing value) so that the reload puts it back in the split.
* A dataset with no split besides ``all`` writes its qrels to ``qrels/all.tsv``; judged queries that are in no
  split are written to ``qrels/unsplit.tsv`` (reloaded as a split named ``unsplit``).
* A metadata key that collides with a memory feature name (``timestamp``, ``as_of`` ...) is overwritten by the
  feature; numpy scalars/arrays are converted to JSON numbers/lists; other non-JSON values are an error.
* Atomic: everything is written to a temporary folder next to ``out_dir`` and renamed into place at the end; on
  any error the temporary folder is removed and ``out_dir`` is untouched. An existing non-empty ``out_dir`` is an
  error unless ``overwrite=True`` (then the old folder is swapped out and removed after the new one is in place).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from evalkit.data.readers.beir import SIDECAR
from retrievers.types import DataError, Dataset, format_time

FORMAT_VERSION = 1
T = TypeVar("T")


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):  # numpy scalars and arrays
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _dumps(obj: Any, what: str) -> str:
    try:
        return json.dumps(obj, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise DataError(f"cannot export {what}: {exc}") from None


def _safe_info(info: dict) -> dict:
    out = {}
    for k, v in info.items():
        try:
            json.dumps(v, default=_json_default)
            out[k] = v
        except (TypeError, ValueError):
            out[k] = repr(v)
    return out


def _write(dataset: Dataset, tmp: Path) -> dict[str, int]:
    with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for d in dataset.documents:
            md = dict(d.metadata)
            created = d.created if d.created != d.timestamp else None  # the loader defaults it to timestamp
            for key, val in (("timestamp", format_time(d.timestamp)), ("path", d.path),
                             ("importance", d.importance), ("group", d.group), ("created", format_time(created)),
                             ("retired", format_time(d.retired))):
                md.pop(key, None)
                if val is not None:
                    md[key] = val
            fh.write(_dumps({"_id": d.id, "title": d.title or "", "text": d.text, "metadata": md},
                            f"document {d.id!r}") + "\n")

    qids = [q.id for q in dataset.queries]
    known = set(qids)
    named = {s: ids for s, ids in dataset.splits.items() if s != "all"}
    if not named:
        judged = [q for q in qids if q in dataset.qrels]
        named = {"all": judged} if judged else {}
    in_split = set().union(*map(set, named.values())) if named else set()
    unsplit = [q for q in qids if q in dataset.qrels and q not in in_split]
    if unsplit:
        named = dict(named, unsplit=unsplit)
    extra_split: dict[str, list[str]] = {}
    for s, ids in named.items():
        for qid in ids:
            if qid not in known:
                raise DataError(f"cannot export: split {s!r} names unknown query {qid!r}")
            if not dataset.qrels.get(qid):
                extra_split.setdefault(qid, []).append(s)

    with open(tmp / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in dataset.queries:
            md = dict(q.metadata)
            for key, val in (("as_of", format_time(q.as_of)), ("group", q.group), ("category", q.category)):
                md.pop(key, None)
                if val is not None:
                    md[key] = val
            if q.id in extra_split:
                have = md.get("split")
                have = [have] if isinstance(have, str) else list(have or [])
                add = [s for s in extra_split[q.id] if s not in have]
                if add:
                    merged = have + add
                    md["split"] = merged[0] if len(merged) == 1 else merged
            fh.write(_dumps({"_id": q.id, "text": q.text, "metadata": md}, f"query {q.id!r}") + "\n")

    (tmp / "qrels").mkdir()
    rows = 0
    for s, ids in named.items():
        if "/" in s or s.startswith("."):
            raise DataError(f"cannot export: split name {s!r} is not a file name")
        with open(tmp / "qrels" / f"{s}.tsv", "w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for qid in ids:
                for did, grade in (dataset.qrels.get(qid) or {}).items():
                    for part in (qid, did):
                        if "\t" in part or "\n" in part:
                            raise DataError(f"cannot export: id {part!r} contains a tab or newline")
                    fh.write(f"{qid}\t{did}\t{int(grade)}\n")
                    rows += 1
    info = _safe_info(dataset.info)
    stored = dataset.info.get("stored_vectors")
    if isinstance(stored, dict) and stored.get("path"):
        # the folder's own vectors (retrievers.embed.stored) travel with it: copied beside the sidecar, declared by name
        src = Path(stored["path"])
        fname = str(stored.get("file") or src.name)
        if not src.is_file():
            raise DataError(f"cannot export: the dataset's stored vectors {src} are not a file any more")
        shutil.copyfile(src, tmp / fname)
        info["stored_vectors"] = {k: v for k, v in stored.items() if k != "path"}
    side = {"format_version": FORMAT_VERSION, "exported_by": "evalkit.data.export", "name": dataset.name,
            "unit": dataset.unit, "info": info}
    (tmp / SIDECAR).write_text(json.dumps(side, ensure_ascii=False, indent=1, default=_json_default) + "\n",
                               encoding="utf-8")
    return {"documents": len(dataset.documents), "queries": len(dataset.queries), "qrels_rows": rows,
            "splits": len(named)}


def write_atomically(out_dir: Path, fill: Callable[[Path], T], overwrite: bool = False, what: str = "export to"
                     ) -> T:
    """Create the folder ``out_dir`` all or nothing: ``fill(tmp)`` writes into a temporary folder next to it, which
    is then renamed into place (an existing folder is swapped out and removed after). On any error the temporary
    folder is removed and ``out_dir`` is untouched. An existing non-empty ``out_dir`` is an error unless
    ``overwrite``."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise DataError(f"cannot {what} {out_dir}: it exists and is not a folder")
        if any(out_dir.iterdir()) and not overwrite:
            raise DataError(f"cannot {what} {out_dir}: folder exists and is not empty (use overwrite)")
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
    except OSError as exc:
        raise DataError(f"cannot {what} {out_dir}: {exc.strerror or exc}") from None
    old: Path | None = None
    try:
        result = fill(tmp)
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
            os.rmdir(old)
            os.rename(out_dir, old)
        try:
            os.rename(tmp, out_dir)
        except OSError:
            if old is not None:
                os.rename(old, out_dir)
                old = None
            raise
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DataError(f"cannot {what} {out_dir}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return result


def write_files(tmp: Path, files: dict[str, str | bytes]) -> None:
    """Plain files (name → text, or bytes) into the folder ``tmp``; a name that is not a new plain file name is an
    error."""
    for fname, text in files.items():
        if "/" in fname or fname.startswith(".") or (tmp / fname).exists():
            raise DataError(f"cannot write {fname!r}: not a new plain file name")
        if isinstance(text, bytes):
            (tmp / fname).write_bytes(text)
        else:
            (tmp / fname).write_text(text, encoding="utf-8")


def export_beir(dataset: Dataset, out_dir: Path, overwrite: bool = False,
                extra_files: dict[str, str | bytes] | None = None) -> dict[str, int]:
    """Write ``dataset`` to ``out_dir`` in the BEIR layout (see the module docstring). Returns counts.

    ``extra_files`` (file name → text, e.g. ``querylog.jsonl``) are written into the same temporary folder, so
    they appear together with the dataset or not at all."""

    def fill(tmp: Path) -> dict[str, int]:
        counts = _write(dataset, tmp)
        write_files(tmp, extra_files or {})
        return counts

    return write_atomically(out_dir, fill, overwrite)
