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

Embeddings. A store holds no query vectors, so the stored vectors are used only when every query of
``--queries`` carries a ``vector`` (from the embedding model the store was written with): the import then writes
``stored_vectors.npz`` (document ids and vectors, query texts and vectors) and declares it in ``evalkit.json``, and
a run searches those vectors by exact cosine (:mod:`retrievers.embed.stored`; memory-lancedb-pro's ``vectorSearch`` is
LanceDB's cosine distance over the table). A query vector whose length is not the store's dimension is refused as
the original refuses it ("Vector dimension mismatch"), as is a vector on some queries only. Without query vectors
(or with ``--log``) every text is re-embedded with evalkit's local model (``retrievers.embed.model``); the import says
which of the two it did.
"""
from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.data.importers.common import ImportSummary, check_out, read_jsonl_objects, write_dataset
from evalkit.data.readers.querylog import load_querylog
from retrievers.embed.model import DEFAULT_MODEL
from retrievers.types import DataError, Document, Query, format_time, parse_time

REQUIRED = ("id", "text", "vector", "category", "importance")
DEFAULTS = {"scope": "global", "timestamp": 0.0, "metadata": "{}"}
SCHEMA_ROW = "__schema__"
STORED_VECTORS = "stored_vectors.npz"


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


def read_store(db: Path, table: str) -> tuple[list[Document], dict[str, Any], dict[str, list[float]]]:
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
    vectors: dict[str, list[float]] = {}
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
        vectors[r["id"]] = list(r["vector"] or [])
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
                  "embedding": f"re-embedded with the local model {DEFAULT_MODEL}; stored vectors not used "
                               "(no query vectors given)"}, vectors


def _relevant(value: Any, where: str) -> dict[str, int]:
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return {x: 1 for x in value}
    if isinstance(value, dict) and all(isinstance(g, int) and not isinstance(g, bool) for g in value.values()):
        return {str(k): int(g) for k, g in value.items()}
    raise DataError(f"{where}: 'relevant' must be a list of memory ids or an {{id: integer grade}} object")


def _query_vector(value: Any, where: str) -> list[float]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value)):
        raise DataError(f"{where}: 'vector' must be a non-empty list of finite numbers")
    if not any(value):
        raise DataError(f"{where}: 'vector' is all zeros (cosine undefined)")
    return [float(x) for x in value]


def _queries_file(path: Path) -> tuple[list[Query], dict[str, dict[str, int]], dict[str, list[float]]]:
    good, bad = read_jsonl_objects(path)
    if bad:
        no, why = bad[0]
        raise DataError(f"{path}:{no}: {why}")
    out = []
    qrels: dict[str, dict[str, int]] = {}
    vectors: dict[str, list[float]] = {}  # query text -> vector
    with_vec = [no for no, obj in good if obj.get("vector") is not None]
    if with_vec and len(with_vec) != len(good):
        no = next(no for no, obj in good if obj.get("vector") is None)
        raise DataError(f"{path}:{no}: no 'vector', but {len(with_vec)} other queries have one: give a query "
                        "vector on every query (the stored vectors are used) or on none (texts are re-embedded)")
    for no, obj in good:
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{path}:{no}: 'text' must be a non-empty string")
        md = {k: v for k, v in obj.items() if k not in ("_id", "text", "as_of", "category", "relevant", "vector")}
        if with_vec:
            vec = _query_vector(obj["vector"], f"{path}:{no}")
            if vectors.get(text, vec) != vec:
                raise DataError(f"{path}:{no}: the same query text has two different vectors")
            vectors[text] = vec
        try:
            as_of = parse_time(obj.get("as_of"))
        except DataError as exc:
            raise DataError(f"{path}:{no}: as_of: {exc}") from None
        out.append(Query(id=str(obj.get("_id") or f"q{no}"), text=text, as_of=as_of,
                         category=obj.get("category"), metadata=md))
        if obj.get("relevant") is not None:
            qrels[out[-1].id] = _relevant(obj["relevant"], f"{path}:{no}")
    return out, qrels, vectors


def _stored_vectors(doc_vectors: dict[str, list[float]], dims: list[int], query_vectors: dict[str, list[float]],
                    where: str) -> bytes:
    """``stored_vectors.npz`` (retrievers.embed.stored) for the store's vectors and the queries' ones, after the check
    memory-lancedb-pro makes on a search vector: its length must be the table's dimension."""
    if len(dims) != 1 or dims[0] == 0:
        raise DataError(f"{where}: the store's vectors have no single dimension ({dims}); cannot search them")
    dim = dims[0]
    for text, vec in query_vectors.items():
        if len(vec) != dim:
            raise DataError(f"{where}: Vector dimension mismatch: expected {dim} (the store's), got {len(vec)} "
                            f"(query {text[:60]!r})")
    for doc_id, vec in doc_vectors.items():
        if not any(vec):
            raise DataError(f"{where}: memory {doc_id} has an all-zero vector (cosine undefined)")
    buf = io.BytesIO()
    np.savez(buf, doc_ids=np.array(list(doc_vectors), dtype=str),
             doc_vectors=np.array(list(doc_vectors.values()), dtype=np.float32),
             query_texts=np.array(list(query_vectors), dtype=str),
             query_vectors=np.array(list(query_vectors.values()), dtype=np.float32))
    return buf.getvalue()


def import_lancedb_pro(args) -> ImportSummary:
    out = check_out(Path(args.out), args.overwrite)
    if bool(args.queries) == bool(args.log):
        raise DataError("give exactly one of --queries (JSONL) or --log (a query log): a store holds no queries")
    docs, info, doc_vectors = read_store(Path(args.db), args.table)
    log_text = None
    qrels: dict[str, dict[str, int]] = {}
    query_vectors: dict[str, list[float]] = {}
    if args.queries:
        queries, qrels, query_vectors = _queries_file(Path(args.queries))
    else:
        queries = load_querylog(Path(args.log)).queries()
        log_text = Path(args.log).read_text(encoding="utf-8")
    known = {d.id for d in docs}
    unknown = sum(1 for rel in qrels.values() for d in rel if d not in known)
    if unknown:
        raise DataError(f"{args.queries}: {unknown} 'relevant' id(s) name no memory of the store")
    splits = {"test": list(qrels)} if qrels else {}
    extra: dict[str, str | bytes] = {"querylog.jsonl": log_text} if log_text is not None else {}
    if query_vectors:
        extra[STORED_VECTORS] = _stored_vectors(doc_vectors, info["stored_vector_dims"], query_vectors,
                                                str(args.queries))
        dim = info["stored_vector_dims"][0]
        info["stored_vectors"] = {"file": STORED_VECTORS, "label": "lancedb-pro", "dim": dim}
        info["embedding"] = (f"stored vectors used (lancedb-pro, dim {dim}): the store's vectors and the queries' "
                             "vectors, searched by exact cosine; nothing re-embedded")
    counts = write_dataset(out, out.name, docs, queries, qrels, {"source": "memory-lancedb-pro import", **info},
                           overwrite=args.overwrite, unit="memory", splits=splits, extra_files=extra or None)
    s = ImportSummary(out, {"documents": counts["documents"], "queries": counts["queries"],
                            "stored_vector_dims": info["stored_vector_dims"]})
    s.notes.append(info["embedding"])
    return s
