"""External TREC run files scored beside presets (``evalkit run --run-file NAME=PATH``).

A run file is the TREC format every IR tool writes (trec_eval, ranx ``Run.save``, PyTerrier ``pt.io.write_results``):
one line per (query, document), ``qid Q0 docid rank score [tag]``, whitespace separated. Per query the documents
are ordered by score descending (trec_eval's rule; equal scores by the rank column, then doc id).

It becomes one more retriever of the run (same measures, same per-query rows, same significance tests in the
report). Nothing is scored silently:

* ``runfile_unknown_queries`` — query ids of the file that are not in the dataset (ignored);
* ``runfile_unknown_docs`` — result lines whose doc id is not in the corpus (dropped from the list, so they
  neither count as misses nor push known documents down);
* ``runfile_missing_queries`` — scored queries the file has no line for (an empty list: the system returned
  nothing, scored as such).

Injected notes: a run file has no budget, so its whole list is its injected list (the harness convention for a
preset without a budget packer). Malformed lines, a score that is not a number, or an empty file are a
one-line DataError naming the file and line.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from evalkit.engine.runner import QueryResult, RetrieverRun
from retrievers.pipeline import Pipeline
from retrievers.types import DataError, Dataset

COUNTERS = ("runfile_unknown_queries", "runfile_unknown_docs", "runfile_missing_queries")


def parse_spec(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` → (name, path); the file must exist."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise DataError(f"--run-file {spec!r}: expected NAME=PATH")
    p = Path(path.strip())
    if not p.is_file():
        raise DataError(f"--run-file {name.strip()}: no such file {p}")
    return name.strip(), p


def read_trec(path: Path) -> dict[str, list[tuple[str, float, int]]]:
    """qid → [(doc id, score, rank)] in file order."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read run file {path}: {exc}") from None
    out: dict[str, list[tuple[str, float, int]]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (5, 6):
            raise DataError(f"{path}:{no}: expected 'qid Q0 docid rank score [tag]', got {len(parts)} fields")
        try:
            score, rank = float(parts[4]), int(parts[3])
        except ValueError:
            raise DataError(f"{path}:{no}: rank {parts[3]!r} / score {parts[4]!r} is not a number") from None
        out.setdefault(parts[0], []).append((parts[2], score, rank))
    if not out:
        raise DataError(f"{path}: empty run file")
    return out


def external_run(name: str, path: Path, ds: Dataset, all_query_ids: set[str]) -> RetrieverRun:
    """The run file as a :class:`RetrieverRun` over ``ds``'s queries, with the counters in ``info``."""
    rows = read_trec(path)
    docs = set(ds.doc_index)
    unknown_docs = 0
    results: dict[str, QueryResult] = {}
    for q in ds.queries:
        lines = rows.get(q.id, [])
        best: dict[str, tuple[float, int]] = {}
        for did, score, rank in lines:
            if did not in docs:
                unknown_docs += 1
            elif did not in best or score > best[did][0]:
                best[did] = (score, rank)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))
        results[q.id] = QueryResult(ranked=[(d, s) for d, (s, _) in ranked], injected=[d for d, _ in ranked],
                                    skipped=False)
    info = {"runfile_unknown_queries": float(sum(1 for qid in rows if qid not in all_query_ids)),
            "runfile_unknown_docs": float(unknown_docs),
            "runfile_missing_queries": float(sum(1 for q in ds.queries if q.id not in rows))}
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    pipe = Pipeline(name, f"TREC run file {path}", [], [], {}, {"run_file": str(path), "run_file_sha256": sha})
    return RetrieverRun(name, pipe, results, 0.0, info)
