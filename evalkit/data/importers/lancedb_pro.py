"""`evalkit import lancedb-pro`: a memory-lancedb-pro store → a dataset folder.

The table (``memories`` by default) as its ``src/store.ts`` (public repository ``win4r/memory-lancedb-pro``) creates
it — LanceDB infers the schema from a first entry: ``id`` (string, a UUID), ``text`` (string), ``vector``
(fixed-size list of float32), ``category`` (preference / fact / decision / entity / other / reflection), ``scope``
(string), ``importance`` (float64), ``timestamp`` (float64, epoch milliseconds), ``metadata`` (JSON string). Its
migration adds ``scope`` ('global'), ``timestamp`` (0) and ``metadata`` ('{}') to older tables, so those three
may be missing and take those defaults here; the others are required. Read with the real ``lancedb`` package.

What becomes what: one document per row (the ``__schema__`` placeholder row the store deletes after creating the
table is skipped if present): id, text, ``importance``, ``timestamp`` (ms → ISO 8601; 0 = unknown → undated),
metadata ``category``, ``scope``, ``memory_metadata`` (the parsed JSON, or the raw string when it is not JSON).
Queries come from ``--queries`` (JSONL ``{_id?, text, as_of?, category?, relevant?, ...}``; ``relevant`` = memory
ids, a list (grade 1) or an ``{id: grade}`` object → ``qrels/test.tsv``) or ``--log`` (a logged-query file: each
event's query at its ``ts``; the log is copied verbatim as ``querylog.jsonl``); a store holds no queries.

Embeddings: the stored vectors are **not** used — evalkit's index embeds every text with its local model
(``retrievers.embed``, all-MiniLM-L6-v2, 384-d); the import records the stored vectors' dimension and says so.
Using the store's own vectors needs the query vectors of the same embedding model, which a store does not hold.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.data.importers.common import ImportSummary, check_out, read_jsonl_objects, write_dataset
from evalkit.data.querylog import load_querylog
from retrievers.embed import DEFAULT_MODEL
from retrievers.types import DataError, Document, Query, format_time, parse_time

REQUIRED = ("id", "text", "vector", "category", "importance")
DEFAULTS = {"scope": "global", "timestamp": 0.0, "metadata": "{}"}
SCHEMA_ROW = "__schema__"


@contextmanager
def lancedb_api() -> Iterator[Any]:
    """The ``lancedb`` module, usable inside the block even when a folder named ``datasets`` shadows Hugging Face
    ``datasets``. lancedb registers converters for that library whenever a module named ``datasets`` is imported
    (at import and again when it writes), and sentence-transformers' availability check imports any ``datasets``
    it finds on ``sys.path`` — this repository's own ``datasets/`` folder as a namespace package when a command
    runs from the repository root (``python -m …``, pytest). lancedb then fails on ``from datasets import
    Dataset``. A namespace package is not the library: it is hidden from ``sys.modules`` for the block."""
    shadow = sys.modules.get("datasets")
    hide = shadow is not None and getattr(shadow, "__file__", None) is None  # a namespace package has no file
    if hide:
        del sys.modules["datasets"]
    try:
        import lancedb  # lazy: optional-dep
        yield lancedb
    finally:
        if hide:
            sys.modules["datasets"] = shadow


def read_store(db: Path, table: str) -> tuple[list[Document], dict[str, Any]]:
    db = Path(db)
    if not db.is_dir():
        raise DataError(f"memory-lancedb-pro store not found: {db} is not a folder")
    try:
        with lancedb_api() as lancedb:
            conn = lancedb.connect(str(db))
            names = list(conn.list_tables().tables)  # first page (the default page holds more than a store has)
            if table not in names:
                raise DataError(f"{db}: no table {table!r} (tables: {', '.join(names) or 'none'})")
            arrow = conn.open_table(table).to_arrow()
    except DataError:
        raise
    except Exception as exc:  # lancedb/lance raise their own (Rust) error types for damaged files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{db}: cannot read LanceDB table {table!r} ({first})") from None
    fields = set(arrow.schema.names)
    missing = [c for c in REQUIRED if c not in fields]
    if missing:
        raise DataError(f"{db}: table {table!r} is not a memory-lancedb-pro store (no column "
                        f"{', '.join(missing)})")
    rows = arrow.to_pylist()
    docs: list[Document] = []
    dims: set[int] = set()
    for r in rows:
        for k, v in DEFAULTS.items():
            if r.get(k) is None:
                r[k] = v
        if r["id"] == SCHEMA_ROW:
            continue
        if not isinstance(r["id"], str) or not r["id"] or not isinstance(r["text"], str):
            raise DataError(f"{db}: row with an empty id or a non-text 'text' ({r.get('id')!r})")
        dims.add(len(r["vector"] or []))
        try:
            md_obj: Any = json.loads(r["metadata"]) if r["metadata"] else {}
        except ValueError:
            md_obj = r["metadata"]
        ts = float(r["timestamp"] or 0.0)
        docs.append(Document(id=r["id"], text=r["text"], importance=float(r["importance"]),
                             timestamp=ts / 1000.0 if ts > 0 else None,
                             metadata={"category": r["category"], "scope": r["scope"], "memory_metadata": md_obj}))
    if not docs:
        raise DataError(f"{db}: the memory-lancedb-pro table {table!r} is empty (no memories)")
    return docs, {"source": str(db), "table": table, "rows": len(docs), "stored_vector_dims": sorted(dims),
                  "embedding": f"re-embedded with the local model {DEFAULT_MODEL}; stored vectors not used"}


def _relevant(value: Any, where: str) -> dict[str, int]:
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return {x: 1 for x in value}
    if isinstance(value, dict) and all(isinstance(g, int) and not isinstance(g, bool) for g in value.values()):
        return {str(k): int(g) for k, g in value.items()}
    raise DataError(f"{where}: 'relevant' must be a list of memory ids or an {{id: integer grade}} object")


def _queries_file(path: Path) -> tuple[list[Query], dict[str, dict[str, int]]]:
    good, bad = read_jsonl_objects(path)
    if bad:
        no, why = bad[0]
        raise DataError(f"{path}:{no}: {why}")
    out = []
    qrels: dict[str, dict[str, int]] = {}
    for no, obj in good:
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{path}:{no}: 'text' must be a non-empty string")
        md = {k: v for k, v in obj.items() if k not in ("_id", "text", "as_of", "category", "relevant")}
        try:
            as_of = parse_time(obj.get("as_of"))
        except DataError as exc:
            raise DataError(f"{path}:{no}: as_of: {exc}") from None
        out.append(Query(id=str(obj.get("_id") or f"q{no}"), text=text, as_of=as_of,
                         category=obj.get("category"), metadata=md))
        if obj.get("relevant") is not None:
            qrels[out[-1].id] = _relevant(obj["relevant"], f"{path}:{no}")
    return out, qrels


def import_lancedb_pro(args) -> ImportSummary:
    out = check_out(Path(args.out), args.overwrite)
    if bool(args.queries) == bool(args.log):
        raise DataError("give exactly one of --queries (JSONL) or --log (a query log): a store holds no queries")
    docs, info = read_store(Path(args.db), args.table)
    log_text = None
    qrels: dict[str, dict[str, int]] = {}
    if args.queries:
        queries, qrels = _queries_file(Path(args.queries))
    else:
        queries = load_querylog(Path(args.log)).queries()
        log_text = Path(args.log).read_text(encoding="utf-8")
    known = {d.id for d in docs}
    unknown = sum(1 for rel in qrels.values() for d in rel if d not in known)
    if unknown:
        raise DataError(f"{args.queries}: {unknown} 'relevant' id(s) name no memory of the store")
    splits = {"test": list(qrels)} if qrels else {}
    counts = write_dataset(out, out.name, docs, queries, qrels, {"source": "memory-lancedb-pro import", **info},
                           overwrite=args.overwrite, unit="memory", splits=splits,
                           extra_files={"querylog.jsonl": log_text} if log_text is not None else None)
    s = ImportSummary(out, {"documents": counts["documents"], "queries": counts["queries"],
                            "stored_vector_dims": info["stored_vector_dims"]})
    s.notes.append(info["embedding"])
    return s
