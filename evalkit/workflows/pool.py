"""Pool → grade → qrels: turn logged traffic into a labelled set.

``pool`` runs retrievers over a query log's events (each at its own ``ts``, as replay does:
:func:`evalkit.workflows.replay.build_replay_set`) and writes, per event, the union of their top-``depth`` results
as a CSV a person grades — **system-blind**: no retriever names, no ranks, no scores, rows shuffled within each
query by a seeded hash of (seed, query id, doc id), so the order reveals nothing and the same inputs give the same
file. Columns: ``query_id, as_of, query, doc_id, path, text, grade`` (``grade`` empty: fill 0 = not relevant,
1 = relevant, 2 = highly relevant). The query id is the event's ``query_id`` key when it names a dataset query
(an imported session log), else ``log-<sha1(ts, query)[:12]>``.

``qrels`` reads the graded CSV and writes ``query-id corpus-id score`` rows (zeros kept: they are judgements, and
``judged@10`` counts them). It refuses the file — one stderr line per problem, nothing written — when a grade is
empty or not 0/1/2, when one (query, doc) pair has two different grades, when a doc id is not in the dataset, or
a required column is missing. Queries of the labels the dataset does not have are appended to its
``queries.jsonl`` (text and ``as_of`` from the labels, ``metadata.split`` = the qrels split). Every file is written
to a temporary name and renamed.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

from evalkit.data.readers.beir import iter_jsonl
from evalkit.data.readers.querylog import load_querylog
from evalkit.data.registry import load_dataset
from evalkit.engine.context import make_context
from evalkit.engine.experiment import load_pipelines
from evalkit.engine.runner import run_quality
from evalkit.workflows.replay import build_replay_set
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex
from retrievers.types import DataError, format_time

COLUMNS = ("query_id", "as_of", "query", "doc_id", "path", "text", "grade")
GRADES = {"0": 0, "1": 1, "2": 2}
POOL_SEED = "evalkit-pool-1"


def write_text_atomically(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _blind_key(seed: str, qid: str, did: str) -> str:
    return hashlib.sha256(f"{seed}\0{qid}\0{did}".encode()).hexdigest()


def pool(dataset: str, log_path: Path, retrievers: list[str], depth: int, out: Path, settings=None,
         embedder=None, seed: str = POOL_SEED) -> dict[str, int]:
    if depth < 1:
        raise DataError(f"--depth must be >= 1, got {depth}")
    pipelines = load_pipelines(retrievers)
    qlog = load_querylog(Path(log_path))
    base = load_dataset(dataset)
    rs = build_replay_set(base, qlog)
    embedder = embedder or Embedder()
    index = SharedIndex(base, embedder=embedder, settings=settings)
    vis = index.visibility(rs.dataset)
    runs = run_quality(rs.dataset, pipelines, index, make_context(pipelines, embedder), visibility=vis.protocol)
    docs = {d.id: d for d in base.documents}
    known_q = {q.id for q in base.queries}
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    rows = 0
    for ev, q in zip(qlog.events, rs.dataset.queries):
        qid = ev.extra.get("query_id")
        if not (isinstance(qid, str) and qid in known_q):
            qid = "log-" + hashlib.sha1(f"{ev.raw_ts}\0{ev.query}".encode()).hexdigest()[:12]
        union: set[str] = set()
        for run in runs.values():
            union.update(d for d, _ in run.results[q.id].ranked[:depth])
        for did in sorted(union, key=lambda d: _blind_key(seed, qid, d)):
            d = docs[did]
            w.writerow([qid, format_time(q.as_of) or "", q.text, did, d.path or "", d.text, ""])
            rows += 1
    write_text_atomically(Path(out), buf.getvalue())
    return {"events": len(qlog.events), "rows": rows, "retrievers": len(pipelines)}


def read_labels(path: Path, doc_ids: set[str] | None) -> tuple[dict[str, dict[str, int]], dict[str, tuple[str, str]],
                                                               list[str]]:
    """(qrels, query id → (text, as_of), problems) of a graded CSV."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read labels {path}: {exc}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("query_id", "doc_id", "grade") if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(COLUMNS)})")
    qrels: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    queries: dict[str, tuple[str, str]] = {}
    problems: list[str] = []
    for row in reader:
        line = reader.line_num
        qid, did, raw = (row.get("query_id") or "").strip(), (row.get("doc_id") or "").strip(), \
            (row.get("grade") or "").strip()
        if not qid or not did:
            problems.append(f"{path}:{line}: empty query_id or doc_id")
            continue
        if raw not in GRADES:
            problems.append(f"{path}:{line}: grade {raw!r} for ({qid}, {did}) is not 0, 1 or 2"
                            if raw else f"{path}:{line}: ({qid}, {did}) is not graded")
            continue
        if doc_ids is not None and did not in doc_ids:
            problems.append(f"{path}:{line}: doc_id {did!r} is not in the dataset")
            continue
        g = GRADES[raw]
        prev = qrels.setdefault(qid, {}).get(did)
        if prev is not None and prev != g:
            problems.append(f"{path}:{line}: ({qid}, {did}) graded {g} here but {prev} on line {first[(qid, did)]}")
            continue
        first.setdefault((qid, did), line)
        qrels[qid][did] = g
        queries.setdefault(qid, ((row.get("query") or "").strip(), (row.get("as_of") or "").strip()))
    if not qrels and not problems:
        problems.append(f"{path}: no graded rows")
    return qrels, queries, problems


def qrels_from_labels(labels: Path, out: Path, dataset: Path | None) -> dict[str, int]:
    """Write ``out`` (qrels TSV) from the graded ``labels``; see the module docstring. Raises DataError whose
    message holds one line per problem."""
    out = Path(out)
    folder = Path(dataset) if dataset else (out.parent.parent if out.parent.name == "qrels" else None)
    ds_queries: dict[str, int] = {}
    doc_ids: set[str] | None = None
    if folder is not None and (folder / "corpus.jsonl").is_file() and (folder / "queries.jsonl").is_file():
        doc_ids = {str(obj.get("_id")) for _, obj in iter_jsonl(folder / "corpus.jsonl")}
        ds_queries = {str(obj.get("_id")): n for n, obj in iter_jsonl(folder / "queries.jsonl")}
    elif dataset:
        raise DataError(f"--dataset {dataset}: not a BEIR folder (corpus.jsonl, queries.jsonl)")
    qrels, queries, problems = read_labels(labels, doc_ids)
    if problems:
        raise DataError(f"{len(problems)} problem(s) in {labels}; nothing written:\n" + "\n".join(problems))
    new = [q for q in qrels if doc_ids is not None and q not in ds_queries]
    for q in new:
        if not queries[q][0]:
            raise DataError(f"{labels}: query {q!r} is not in {folder} and its row has no query text")
    body = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, rel in qrels.items()
                                                   for d, g in rel.items())
    if new:
        qpath = folder / "queries.jsonl"
        split = out.stem
        extra = "".join(json.dumps({"_id": q, "text": queries[q][0],
                                    "metadata": {**({"as_of": queries[q][1]} if queries[q][1] else {}),
                                                 "split": split}}, ensure_ascii=False) + "\n" for q in new)
        old = qpath.read_text(encoding="utf-8")
        write_text_atomically(qpath, old + ("" if old.endswith("\n") or not old else "\n") + extra)
    write_text_atomically(out, body)
    return {"queries": len(qrels), "rows": sum(len(r) for r in qrels.values()), "queries_added": len(new),
            "relevant": sum(1 for r in qrels.values() for g in r.values() if g > 0)}
