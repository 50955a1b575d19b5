"""Load any folder in the BEIR layout (the project's one on-disk dataset format, DESIGN.md §4).

Layout::

    corpus.jsonl        {"_id", "title"?, "text", "metadata"?}        one document per line
    queries.jsonl       {"_id", "text", "metadata"?}                  one query per line
    qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score"     every .tsv in qrels/ is a split

Memory features live in ``metadata`` and are lifted onto the model fields:

* documents: ``timestamp`` (ISO 8601 or epoch seconds → epoch seconds UTC), ``path``, ``importance``
  (number), ``group``, ``created`` (when the document entered the store, a time as above; default: its
  ``timestamp`` — a dated note is in the store from its date on; absent both = undated, always visible),
  ``retired`` (when a later version of the same note replaced it: out of the store from then on; absent = never);
* queries: ``as_of`` (time, as above), ``group``, ``category``.

Every other metadata key is kept verbatim in ``.metadata`` (``start_line``, ``end_line``, ``mtime``, ``source``,
``tier``, ``contains_secret``, ``context``, ``split``, ...).

Rules (also recorded in ``dataset.info["rules"]``):

* Splits: ``splits[s]`` = the queries judged in ``qrels/s.tsv`` plus every query whose ``metadata.split``
  (a string or a list of strings) names ``s`` — a qrels file cannot list a query that has no judgements (e.g. a
  "no-memory" prompt), so ``metadata.split`` is how such a query joins its split; a split named only in
  metadata is created. ``splits["all"]`` = the union of the other splits (every query if the folder has no
  split at all). Queries in no split are kept in ``dataset.queries`` but are in no split: no run scores them,
  so they are counted (``info["queries_in_no_split"]``) and warned about, one line naming the first few ids
  (``info["warnings"]``, ``what = "queries_in_no_split"``). Split lists follow the order of ``queries.jsonl``.
* A qrels row naming an unknown query or document is an error (``qrels_unknown="error"``, the default): a typo
  in a qrels file would otherwise change the score silently (a relevant note that cannot be retrieved, or one
  dropped). The DataError names the file and line of the first few such rows. ``qrels_unknown="drop"``
  (``--qrels-unknown drop``) drops them instead, counts them in ``info["dropped_qrels"]`` (details of the first
  few in ``info["dropped_qrels_examples"]``) and records one warning per file in ``info["warnings"]`` (the command
  prints it as an ``evalkit: warning:`` line and the report and manifest carry it; nothing goes through Python's
  ``warnings``); a qrels file in which *every* row is unknown is an error either way (the files do not belong
  together). A repeated (query, doc) row keeps the last grade. Scores must be integers; the first line is a header
  if its score column is not one. A 4-column TREC qrels line (``qid iter docid score``) is accepted.
* Errors are :class:`DataError` with one line naming the file and line number: malformed JSON, a line that is
  not an object, missing/empty ``_id`` or missing ``text``, duplicate document or query ids, an empty corpus, a
  bad time or importance, a non-integer qrels score, a missing ``corpus.jsonl``/``queries.jsonl``.

As-of visibility (:meth:`retrievers.types.Dataset.as_of_visibility`): a BEIR folder declares ``strict`` — a
query sees only the documents created at or before its ``as_of`` — unless the sidecar's exported ``info`` declares
another protocol (an exported LongMemEval keeps its official one).

Document representation (how a long document becomes vectors, :mod:`retrievers.index.shared`): a plain BEIR folder
declares ``truncate`` — the MTEB/BEIR protocol (title + " " + text, truncated at the model's max word pieces, one
vector per document), so its numbers compare with published BEIR/MTEB ones; MaxP is the explicit
``--representation maxp``. A folder exported by evalkit keeps the representation its original loader declared (in
the sidecar's ``info``; none declared = the index's default, MaxP, as for the project's memory-style datasets).

An optional ``evalkit.json`` sidecar (written by :func:`evalkit.data.export.export_beir`) supplies the dataset
name, ``unit`` ("turn", "session", ...) and the original loader's ``info`` (under ``info["exported_info"]``); its
``clusters`` (dependent queries, for the statistics), ``extra_measures``, ``poison`` (a planting record) and
knowledge-update labels (``labels.superseded``) are lifted onto the loaded dataset's ``info``.

``load_beir(path, split="test")`` returns the view restricted to that split (the corpus is shared).
Unknown keyword options are ignored (the registry passes loader-agnostic options).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from retrievers.errors import json_error
from retrievers.types import (
    DEFAULT_VISIBILITY_WHY,
    VISIBILITY_PROTOCOLS,
    DataError,
    Dataset,
    Document,
    Qrels,
    Query,
    declare_visibility,
    parse_time,
)

DOC_FEATURES = ("timestamp", "path", "importance", "group", "created", "retired")
QUERY_FEATURES = ("as_of", "group", "category")
MAX_DROP_EXAMPLES = 10
MAX_LISTED = 5  # unknown-id qrels rows named in the error line
QRELS_UNKNOWN = ("error", "drop")  # what a qrels row naming an unknown query / document does (``qrels_unknown``)
MTEB_WHY = ("a plain BEIR folder: the MTEB/BEIR protocol (title + text truncated at the model's max word pieces), "
            "comparable with published numbers")
SIDECAR = "evalkit.json"  # optional {"name", "unit", "info"} written by export_beir
# sidecar info keys lifted onto the loaded dataset's info: dependent-query clusters (statistics), the loader's extra
# measures, a planting record (evalkit.data.poison); the harm labels of knowledge updates are lifted below
LIFTED = ("clusters", "extra_measures", "poison")

RULES = [
    "splits = qrels/<split>.tsv query ids + queries whose metadata.split names the split; 'all' = union",
    "qrels rows naming unknown query/doc ids are an error (--qrels-unknown drop: dropped, warned, counted in "
    "dropped_qrels); a qrels file with only unknown ids is an error",
    "repeated (query, doc) qrels rows keep the last grade",
]


SPLIT_SEED = "evalkit-split-1"


def hash_split(ids: list[str], seed: str = SPLIT_SEED) -> tuple[list[str], list[str]]:
    """Deterministic 50/50 partition (``train``, ``heldout``) of ``ids`` by seeded SHA-256 of each id.

    The ids are ranked by ``sha256(f"{seed}:{id}")``; the first half (rounded up) is ``train``. Each half keeps
    the input order. Shared by the LoCoMo and LongMemEval loaders for tuning / held-out reporting.
    """
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    train = set(ranked[: (len(ranked) + 1) // 2])
    return [i for i in ids if i in train], [i for i in ids if i not in train]


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_no, object)`` for each non-blank line; DataError (file:line) on bad JSON / non-objects."""
    try:
        fh = open(path, encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"missing {path.name} in {path.parent}") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        line_no = 0
        while True:
            try:
                line = fh.readline()
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{line_no + 1}: not UTF-8 text ({exc.reason})") from None
            if not line:
                return
            line_no += 1
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{line_no}: malformed JSON ({json_error(exc)})") from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}")
            yield line_no, obj


def _id_of(obj: dict, where: str) -> str:
    v = obj.get("_id")
    if v is None or isinstance(v, (dict, list, bool)) or str(v) == "":
        raise DataError(f"{where}: missing '_id'")
    return str(v)


def _text_of(obj: dict, where: str, key: str = "text") -> str:
    v = obj.get(key)
    if v is None:
        raise DataError(f"{where}: missing '{key}'")
    if not isinstance(v, str):
        raise DataError(f"{where}: '{key}' must be a string, got {type(v).__name__}")
    return v


def _metadata_of(obj: dict, where: str) -> dict[str, Any]:
    md = obj.get("metadata")
    if md is None:
        return {}
    if not isinstance(md, dict):
        raise DataError(f"{where}: 'metadata' must be an object, got {type(md).__name__}")
    return dict(md)


def _time(value: Any, key: str, where: str) -> float | None:
    try:
        return parse_time(value)
    except DataError as exc:
        raise DataError(f"{where}: metadata.{key}: {exc}") from None


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _read_corpus(path: Path) -> list[Document]:
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for line_no, obj in iter_jsonl(path):
        where = f"{path}:{line_no}"
        did = _id_of(obj, where)
        if did in seen:
            raise DataError(f"{where}: duplicate document id {did!r} (first on line {seen[did]})")
        seen[did] = line_no
        text = _text_of(obj, where)
        title = obj.get("title") or ""
        if not isinstance(title, str):
            raise DataError(f"{where}: 'title' must be a string, got {type(title).__name__}")
        md = _metadata_of(obj, where)
        ts = _time(md.pop("timestamp", None), "timestamp", where)
        created = _time(md.pop("created", None), "created", where)
        retired = _time(md.pop("retired", None), "retired", where)
        if retired is not None and (created if created is not None else ts) is not None \
                and retired <= (created if created is not None else ts):
            raise DataError(f"{where}: metadata.retired must be after the document was created")
        imp = md.pop("importance", None)
        if imp is not None:
            if isinstance(imp, bool):
                raise DataError(f"{where}: metadata.importance must be a number, got {imp!r}")
            try:
                imp = float(imp)
            except (TypeError, ValueError):
                raise DataError(f"{where}: metadata.importance must be a number, got {imp!r}") from None
        docs.append(Document(id=did, text=text, title=title, path=_opt_str(md.pop("path", None)),
                             timestamp=ts, importance=imp, group=_opt_str(md.pop("group", None)),
                             # a metadata object emptied by the pops above still holds its table (184 bytes):
                             # a fresh empty one is 64 (10^6 notes: 0.1 GB)
                             metadata=md or {}, created=ts if created is None else created, retired=retired))
    if not docs:
        raise DataError(f"{path}: empty corpus (no documents)")
    return docs


def _read_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for line_no, obj in iter_jsonl(path):
        where = f"{path}:{line_no}"
        qid = _id_of(obj, where)
        if qid in seen:
            raise DataError(f"{where}: duplicate query id {qid!r} (first on line {seen[qid]})")
        seen[qid] = line_no
        text = _text_of(obj, where)
        md = _metadata_of(obj, where)
        as_of = _time(md.pop("as_of", None), "as_of", where)
        queries.append(Query(id=qid, text=text, as_of=as_of, group=_opt_str(md.pop("group", None)),
                             category=_opt_str(md.pop("category", None)), metadata=md))
    if not queries:
        raise DataError(f"{path}: no queries")
    return queries


def _read_qrels(path: Path, qids: set[str], dids: set[str], info: dict,
                unknown: str = "error") -> tuple[Qrels, list[str]]:
    """One qrels file → (judgements, query ids in file order). Rows naming an unknown query or document: a
    DataError naming the first few (``unknown="error"``), or dropped, counted in ``info`` and warned there
    (``unknown="drop"``)."""
    qrels: Qrels = {}
    order: list[str] = []
    rows = 0
    bad: list[tuple[int, str]] = []  # (line, reason) of every row naming an unknown id
    first_row = True
    try:
        fh = open(path, encoding="utf-8-sig")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        try:
            lines = fh.read().splitlines()
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        parts = [p.strip() for p in parts]
        if len(parts) == 4:  # TREC qrels: qid iter docid score
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise DataError(f"{path}:{line_no}: expected 3 tab-separated columns "
                            f"(query-id, corpus-id, score), got {len(parts)}")
        qid, did, score = parts
        try:
            grade = int(score)
        except ValueError:
            if first_row:  # header ("query-id corpus-id score" or any other names)
                first_row = False
                continue
            raise DataError(f"{path}:{line_no}: score {score!r} is not an integer") from None
        first_row = False
        rows += 1
        if qid not in qids or did not in dids:
            bad.append((line_no, f"unknown query id {qid!r}" if qid not in qids else f"unknown document id {did!r}"))
            continue
        if qid not in qrels:
            qrels[qid] = {}
            order.append(qid)
        qrels[qid][did] = grade
    if not bad:
        return qrels, order
    listed = "; ".join(f"{path}:{no}: {why}" for no, why in bad[:MAX_LISTED])
    more = f" (+{len(bad) - MAX_LISTED} more)" if len(bad) > MAX_LISTED else ""
    if len(bad) == rows:
        raise DataError(f"{path}: all {rows} qrels rows name unknown query or document ids "
                        f"(first: {listed.split('; ')[0]}); wrong folder?")
    if unknown != "drop":
        raise DataError(f"{len(bad)} qrels row{'s' if len(bad) > 1 else ''} name{'' if len(bad) > 1 else 's'} an id "
                        f"the dataset lacks: {listed}{more} — fix the qrels file, or pass --qrels-unknown drop to "
                        f"score without {'them' if len(bad) > 1 else 'it'}")
    examples = info.setdefault("dropped_qrels_examples", [])
    for no, why in bad[:max(0, MAX_DROP_EXAMPLES - len(examples))]:
        examples.append({"file": path.name, "line": no, "reason": why})
    info["dropped_qrels"] = info.get("dropped_qrels", 0) + len(bad)
    info.setdefault("dropped_qrels_by_file", {})[path.name] = len(bad)
    info.setdefault("warnings", []).append({
        "what": "qrels_unknown", "count": len(bad),
        "text": f"{path}: dropped {len(bad)} of {rows} qrels rows naming ids the dataset lacks (--qrels-unknown "
                f"drop): {listed}{more}"})
    return qrels, order


def left_out_warning(path: Path, ids: list[str]) -> dict:
    """The warning record for queries in no split (no qrels row and no ``metadata.split``): no run scores them.

    >>> left_out_warning(Path("d"), ["q1", "q2"])["text"]
    'd: 2 queries are in no split (no qrels row and no metadata.split) and are left out of every run: q1, q2'
    """
    shown = ", ".join(ids[:MAX_DROP_EXAMPLES]) + (f", … (+{len(ids) - MAX_DROP_EXAMPLES} more)"
                                                   if len(ids) > MAX_DROP_EXAMPLES else "")
    n = f"{len(ids)} quer{'ies are' if len(ids) > 1 else 'y is'}"
    return {"what": "queries_in_no_split", "count": len(ids),
            "text": f"{path}: {n} in no split (no qrels row and no metadata.split) and {'are' if len(ids) > 1 else 'is'}"
                    f" left out of every run: {shown}"}


def load_beir(path: Path, name: str | None = None, split: str | None = None, qrels_unknown: str = "error",
              **opts: Any) -> Dataset:
    """Read a BEIR folder (see module docstring). ``split`` restricts the returned view to one split;
    ``qrels_unknown``: ``"error"`` (default) or ``"drop"`` for qrels rows naming an unknown query / document."""
    if qrels_unknown not in QRELS_UNKNOWN:
        raise DataError(f"qrels_unknown must be one of {', '.join(QRELS_UNKNOWN)}, got {qrels_unknown!r}")
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"not a BEIR folder: {path} does not exist or is not a directory")
    for fname in ("corpus.jsonl", "queries.jsonl"):
        if not (path / fname).is_file():
            raise DataError(f"missing {fname} in {path}")
    docs = _read_corpus(path / "corpus.jsonl")
    queries = _read_queries(path / "queries.jsonl")
    qids = {q.id for q in queries}
    dids = {d.id for d in docs}

    info: dict[str, Any] = {"source": str(path), "format": "beir", "dropped_qrels": 0, "rules": list(RULES)}
    qrels: Qrels = {}
    split_members: dict[str, set[str]] = {}
    qdir = path / "qrels"
    tsvs = sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []
    for tsv in tsvs:
        file_qrels, _ = _read_qrels(tsv, qids, dids, info, qrels_unknown)
        split_members.setdefault(tsv.stem, set()).update(file_qrels)
        for qid, rel in file_qrels.items():
            qrels.setdefault(qid, {}).update(rel)
    if not info.get("dropped_qrels_examples"):
        info.pop("dropped_qrels_examples", None)

    for q in queries:
        s = q.metadata.get("split")
        names = [s] if isinstance(s, str) else (s if isinstance(s, list) else [])
        for n in names:
            if isinstance(n, str) and n and n != "all":
                split_members.setdefault(n, set()).add(q.id)

    order = [q.id for q in queries]
    splits = {s: [qid for qid in order if qid in members] for s, members in split_members.items()}
    if splits:
        union = set().union(*split_members.values())
        splits["all"] = [qid for qid in order if qid in union]
    else:
        splits["all"] = list(order)
    info["queries_in_no_split"] = len(order) - len(splits["all"])
    if info["queries_in_no_split"]:
        in_split = set(splits["all"])
        info.setdefault("warnings", []).append(left_out_warning(path, [q for q in order if q not in in_split]))
    info["queries_without_qrels"] = sum(1 for qid in order if qid not in qrels)

    unit = "doc"
    side = path / SIDECAR
    if side.is_file():  # written by evalkit.data.export; optional, other BEIR tools ignore it
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"{side}: unreadable ({exc})") from None
        if isinstance(meta, dict):
            unit = str(meta.get("unit") or unit)
            name = name or meta.get("name")
            if isinstance(meta.get("info"), dict):
                info["exported_info"] = meta["info"]
    exported = info.get("exported_info") or {}
    if exported.get("representation"):
        info["representation"] = exported["representation"]
    elif not side.is_file():
        info["representation"] = "truncate"
        info["representation_why"] = MTEB_WHY
    stored = exported.get("stored_vectors")
    # retrievers.embed.stored: the folder's own vectors
    if isinstance(stored, dict) and isinstance(stored.get("file"), str):
        if "/" in stored["file"] or not (path / stored["file"]).is_file():
            raise DataError(f"{side}: declares stored vectors {stored['file']!r}, which is not a file of {path}")
        info["stored_vectors"] = {**stored, "path": str((path / stored["file"]).resolve())}
    for key in LIFTED:  # what the original loader declared about its queries travels with an exported folder
        if key in exported and key not in info:
            info[key] = exported[key]
    if exported.get("as_of_visibility") in VISIBILITY_PROTOCOLS:
        declare_visibility(info, exported["as_of_visibility"], str(exported.get("as_of_visibility_why") or ""))
    else:
        declare_visibility(info, "strict", DEFAULT_VISIBILITY_WHY)
    # harm labels a BEIR folder carries in document metadata (evalkit.measures.harms): only when present, so a
    # folder without them reports the harms as n/a, never 0
    lab = {}
    if any("contains_secret" in d.metadata for d in docs):
        lab["secret"] = sorted(d.id for d in docs if d.metadata.get("contains_secret"))
    if any("tier" in d.metadata for d in docs):
        lab["junk"] = sorted(d.id for d in docs if d.metadata.get("tier") == "junk")
    sup = (exported.get("labels") or {}).get("superseded")
    if isinstance(sup, dict):  # knowledge-update labels name queries and documents: kept from the sidecar
        lab["superseded"] = sup
    if lab:
        info["labels"] = lab
    ds = Dataset(name=name or path.name, documents=docs, queries=queries, qrels=qrels, splits=splits,
                 info=info, unit=unit)
    if split is not None:
        return ds.split(split)
    return ds
