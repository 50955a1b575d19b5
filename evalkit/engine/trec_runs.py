"""External TREC run files scored beside presets (``evalkit run --run-file NAME=PATH``), by trec_eval's rules.

A run file is the TREC format every IR tool writes (trec_eval, ranx ``Run.save``, PyTerrier ``pt.io.write_results``):
one line per (query, document), ``qid Q0 docid rank score [tag]``, whitespace separated. It becomes one more
retriever of the run (same measures, per-query rows and significance tests) and is scored exactly as trec_eval
(``trec_eval -c``) scores it — checked against trec_eval's own C code (PyPI ``pytrec-eval-terrier``) to 1e-12 in
``tests/parity/test_trec_runs_pytrec_eval.py``:

* **order** (:func:`trec_order`) — per query, by score descending, the score compared in single precision (trec_eval
  stores it as a C ``float``), equal scores by document id *descending* (byte order; trec_eval's
  ``comp_sim_docno``). The rank column and the tag are ignored, as trec_eval ignores them;
* **a document the corpus lacks keeps its rank as a non-relevant hit** (:func:`place_foreign_ids`): it occupies its
  slot, nothing after it moves up (trec_eval: a document without a judgement is not relevant);
* **a query the file lacks counts 0** on every measure (``trec_eval -c``: the mean is over every judged query, so a
  run file is comparable with presets, which answer every query). ``missing="skip"`` (``--run-file-missing skip``)
  scores only the queries the file answers — the report then says over how many queries, in every table;
* **a (query, document) pair listed twice** is refused, file and both lines named (trec_eval stops with
  "duplicate docs"; ``pytrec_eval.parse_run`` asserts): which line should count is not for evalkit to guess.

Nothing is scored silently: unknown query ids, unknown document ids, queries the file lacks and documents dated after
the query's ``as_of`` (which every preset's search hides under the strict as-of protocol) are each counted in the
run's ``info`` (``runfile_unknown_queries``, ``runfile_unknown_docs``, ``runfile_missing_queries``,
``runfile_future_docs``, also metric rows) and each is one warning (:mod:`evalkit.engine.run_warnings`) naming the
file: printed, in the manifest and beside the run in report.md / report.html.

Injected notes: a run file has no budget, so its whole list is its injected list (the harness convention for a
preset without a budget packer). Malformed lines, a score that is not a number (or NaN), or an empty file are a
one-line DataError naming the file and line.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.engine.run_warnings import warning
from evalkit.engine.runner import QueryResult, RetrieverRun
from retrievers.pipeline import Pipeline
from retrievers.types import DataError, Dataset

COUNTERS = ("runfile_unknown_queries", "runfile_unknown_docs", "runfile_missing_queries", "runfile_future_docs")
MISSING = ("zero", "skip")  # a query the run file lacks: scored 0 (trec_eval -c) or left out


@dataclass
class TrecLine:
    doc: str
    score: float
    line: int  # 1-based line number in the file


def parse_spec(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` → (name, path); the file must exist."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise DataError(f"--run-file {spec!r}: expected NAME=PATH")
    p = Path(path.strip())
    if not p.is_file():
        raise DataError(f"--run-file {name.strip()}: no such file {p}")
    return name.strip(), p


def read_trec(path: Path) -> dict[str, list[TrecLine]]:
    """qid → its lines in file order. DataError (file:line) on a malformed line, a score that is not a number, a
    (query, document) pair listed twice (trec_eval refuses such a file), or an empty file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read run file {path}: {exc}") from None
    out: dict[str, list[TrecLine]] = {}
    seen: dict[tuple[str, str], int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (5, 6):
            raise DataError(f"{path}:{no}: expected 'qid Q0 docid rank score [tag]', got {len(parts)} fields")
        try:
            score = float(parts[4])
        except ValueError:
            raise DataError(f"{path}:{no}: score {parts[4]!r} is not a number") from None
        if math.isnan(score):
            raise DataError(f"{path}:{no}: score is NaN (a ranking needs comparable scores)")
        qid, doc = parts[0], parts[2]
        if (qid, doc) in seen:
            raise DataError(f"{path}:{no}: document {doc!r} listed twice for query {qid!r} (first on line "
                            f"{seen[(qid, doc)]}); trec_eval refuses such a run file — keep one line per pair")
        seen[(qid, doc)] = no
        out.setdefault(qid, []).append(TrecLine(doc, score, no))
    if not out:
        raise DataError(f"{path}: empty run file")
    return out


def trec_order(lines: list[TrecLine]) -> list[TrecLine]:
    """trec_eval's ranking of one query's lines: score descending compared as a C ``float`` (single precision),
    then document id descending (``strcmp`` on the UTF-8 bytes, which is Python's code-point order). Deterministic:
    the order of the lines in the file never matters."""
    by_doc = sorted(lines, key=lambda x: x.doc, reverse=True)
    f32 = np.asarray([x.score for x in by_doc], dtype=np.float64).astype(np.float32)
    order = np.argsort(-f32.astype(np.float64), kind="stable")  # stable: equal floats keep doc id descending
    return [by_doc[i] for i in order]


def place_foreign_ids(ranked: list[tuple[str, float]], known: Container[str]) -> tuple[list[tuple[str, float]], int]:
    """The one rule for a ranked list of ids that come from outside the harness (an external run file, a live
    system's answer): an id the corpus lacks **keeps its rank as a non-relevant hit** — it stays in the list, in its
    slot, so nothing after it moves up, and no qrels row can name it (:mod:`evalkit.data.readers.beir` refuses such rows),
    so every measure counts it as a miss (trec_eval's rule for an unjudged document). Returns (the list, unchanged,
    how many of its ids ``known`` lacks).

    >>> place_foreign_ids([("ghost", 9.0), ("d1", 8.0)], {"d1"})
    ([('ghost', 9.0), ('d1', 8.0)], 1)
    """
    return list(ranked), sum(1 for d, _ in ranked if d not in known)


def _absent(doc, as_of: float) -> bool:
    """Not in the store at ``as_of``: created after it, or a revised note's version retired at or before it."""
    return ((doc.created is not None and doc.created > as_of)
            or (doc.retired is not None and doc.retired <= as_of))


def external_run(name: str, path: Path, ds: Dataset, all_query_ids: set[str], missing: str = "zero",
                 protocol: str = "strict") -> RetrieverRun:
    """The run file as a :class:`RetrieverRun` over ``ds``'s queries (already split), with the counters and the
    warnings in ``info`` (``info["warnings"]``; ``info["answered"]``: the query ids of ``ds`` the file answers).

    ``missing``: ``"zero"`` — a query the file lacks is an empty list (0 on every measure, trec_eval ``-c``);
    ``"skip"`` — it is left out of ``results`` (scored over the answered queries only). ``protocol``: the dataset's
    as-of visibility protocol; under ``strict`` a returned document created after the query's ``as_of`` (or a
    revised note's version retired by then) is warned about (the presets' searches never see it); it is counted
    either way."""
    if missing not in MISSING:
        raise DataError(f"--run-file-missing must be one of {', '.join(MISSING)}, got {missing!r}")
    rows = read_trec(path)
    idx = ds.doc_index
    unknown_docs = future = future_queries = 0
    results: dict[str, QueryResult] = {}
    for q in ds.queries:
        lines = rows.get(q.id)
        if lines is None and missing == "skip":
            continue
        ranked, n_unknown = place_foreign_ids([(x.doc, x.score) for x in trec_order(lines or [])], idx)
        unknown_docs += n_unknown
        if q.as_of is not None:
            late = sum(1 for d, _ in ranked if d in idx and _absent(ds.documents[idx[d]], q.as_of))
            future += late
            future_queries += late > 0
        results[q.id] = QueryResult(ranked=ranked, injected=[d for d, _ in ranked], skipped=False)
    unknown_q = sorted(qid for qid in rows if qid not in all_query_ids)
    missing_q = [q.id for q in ds.queries if q.id not in rows]
    info = {"runfile_unknown_queries": float(len(unknown_q)), "runfile_unknown_docs": float(unknown_docs),
            "runfile_missing_queries": float(len(missing_q)), "runfile_future_docs": float(future),
            "answered": [q.id for q in ds.queries if q.id in rows], "missing_policy": missing}
    who = f"run file {name} ({path})"
    warns = []
    if unknown_q:
        shown = ", ".join(unknown_q[:5]) + (", …" if len(unknown_q) > 5 else "")
        warns.append(warning("runfile_unknown_queries",
                             f"{who}: {len(unknown_q)} query id(s) not in the dataset, ignored ({shown})",
                             name, len(unknown_q)))
    if unknown_docs:
        warns.append(warning("runfile_unknown_docs",
                             f"{who}: {unknown_docs} result line(s) name documents the corpus lacks; each keeps its "
                             f"rank as a non-relevant hit (trec_eval's rule)", name, unknown_docs))
    if missing_q:
        how = ("scored 0 (as trec_eval -c; --run-file-missing skip scores only the answered queries)"
               if missing == "zero" else f"left out: {name} is scored over the {len(ds.queries) - len(missing_q)} "
                                         f"queries it answers (--run-file-missing skip)")
        warns.append(warning("runfile_missing_queries",
                             f"{who}: {len(missing_q)} of the {len(ds.queries)} queries have no line, {how}",
                             name, len(missing_q)))
    if future and protocol == "strict":
        warns.append(warning("runfile_future_docs",
                             f"{who}: {future} returned document(s) on {future_queries} queries were not in the "
                             f"store at the query's as_of (created later, or a version retired by then; the "
                             f"presets' searches hide them under the strict as-of protocol); "
                             f"kept and scored as returned", name, future))
    info["warnings"] = warns
    sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    pipe = Pipeline(name, f"TREC run file {path}", [], [], {},
                    {"run_file": str(path), "run_file_sha256": sha, "run_file_missing": missing})
    return RetrieverRun(name, pipe, results, 0.0, info)
