"""Quality metrics via ranx, plus the memory-benchmark recall variants ranx does not have.

Metric names follow ranx / ir_measures string forms (``ndcg@10``, ``recall@100``, ``mrr@10``, ``map@100``,
``precision@5``) and double as identities in every output file. Extra metrics:

* ``recall_any@k`` — 1 if any relevant document is in the top k (LongMemEval's official session metric);
* ``recall_all@k`` — 1 if all relevant documents are in the top k (LongMemEval);
* ``judged@k`` — share of the top k carrying a judgement (:mod:`evalkit.measures.harms`; empty lists left out);
* LoCoMo "evidence recall" is ``recall@k`` over evidence turns (fraction of a QA item's evidence in the top k).

Conventions: only grades >= 1 are relevant (grade-0 rows are judged non-relevant); queries with no relevant
document are not scored by ranking metrics (they are reported as abstention cases instead); a query whose list is
empty (a gate skipped it) scores 0 on every metric.
"""
from __future__ import annotations

import warnings

import numpy as np

from evalkit.measures import catalogue
from evalkit.measures.harms import judged_at
from retrievers.errors import ConfigError

DEFAULT_METRICS = catalogue.names("default")
HEADLINE = catalogue.names("headline")
_EMPTY = "__evalkit_empty__"


def relevant_qrels(qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out = {}
    for q, docs in qrels.items():
        rel = {d: int(g) for d, g in docs.items() if int(g) >= 1}
        if rel:
            out[q] = rel
    return out


def _ranked_measure(name: str) -> catalogue.Measure:
    m = catalogue.parse(name, engine="lists")
    if m.kind != "ranking" or m.injected:
        raise ConfigError(f"metric {name!r} is not a per-query ranking measure of a list (those: "
                          f"{catalogue.valid_names('lists').split('; ')[0]})")
    return m


def _extra(m: catalogue.Measure, qrels: dict, run: dict[str, list[str]]) -> dict[str, float]:
    """``recall_any@k`` / ``recall_all@k`` (LongMemEval): any / all relevant documents in the first k entries."""
    name, k = m.measure, m.k
    out = {}
    for q, rel in qrels.items():
        top = set(run.get(q, [])[:k])
        hit = [d in top for d in rel]
        out[q] = float(any(hit)) if name == "recall_any" else float(all(hit))
    return out


ID_WIDTH = 32  # document ids go to ranx as fixed-width unicode arrays padded to a multiple of this many characters


def _ranx_table(d: dict[str, dict[str, float]], kind: type):
    """``{query: {doc: value}}`` as ranx's sorted numba dict, built as ``Qrels.from_dict`` / ``Run.from_dict`` build
    it except for the width of the document-id arrays: ranx uses the longest id's length (``<U{n}``), and numba
    compiles its table functions once per width (cold: tens of CPU seconds each; warm: the typed-list set-up
    again per process), so every dataset and every preset whose longest id differs paid another compile. Padding
    to a multiple of :data:`ID_WIDTH` keeps one width for ids up to 32 characters; the ids, their hashes and every
    score are unchanged (numpy strips the padding; tests/test_bench_first_report.py compares with ranx's own)."""
    from ranx.data_structures.common import create_and_sort  # lazy: startup (ranx + numba)
    from numba.typed import List as TypedList  # lazy: startup (numba)

    longest = max((len(doc) for docs in d.values() for doc in docs), default=1)
    dtype = f"<U{-(-max(longest, 1) // ID_WIDTH) * ID_WIDTH}"
    return create_and_sort(TypedList(list(d)), TypedList([np.array(list(v), dtype=dtype) for v in d.values()]),
                           TypedList([np.array(list(v.values()), dtype=kind) for v in d.values()]))


def evaluate(qrels: dict[str, dict[str, int]], ranked: dict[str, list[tuple[str, float]]],
             metrics: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Per-query scores ``{metric: {query_id: value}}`` over queries with at least one relevant document."""
    from ranx import Qrels, Run, evaluate as ranx_evaluate  # lazy: startup (ranx + numba load in ~1 s)

    metrics = metrics or DEFAULT_METRICS
    parsed = {m: _ranked_measure(m) for m in metrics}
    rq = relevant_qrels(qrels)
    if not rq:
        return {m: {} for m in metrics}
    run_dict: dict[str, dict[str, float]] = {}
    ids: dict[str, list[str]] = {}
    for q in rq:
        lst = ranked.get(q) or []
        ids[q] = [d for d, _ in lst]
        if lst:
            # ranx sorts by score; make scores strictly decreasing in list order so ties keep our order
            n = len(lst)
            scores: dict[str, float] = {}
            for i, (d, _) in enumerate(lst):
                scores.setdefault(d, float(n - i))  # a document listed twice counts at its first position
            run_dict[q] = scores
        else:
            run_dict[q] = {_EMPTY: 0.0}
    std = [m for m in metrics if parsed[m].family.ranx]
    out: dict[str, dict[str, float]] = {}
    if std:
        qr = Qrels()
        qr.qrels, qr.sorted = _ranx_table(rq, int), True
        rr = Run()
        rr.run, rr.sorted = _ranx_table(run_dict, float), True
        with warnings.catch_warnings():
            # ranx's nDCG kernel casts uint64 -> int64 when numba first compiles it (harmless for ranks); the
            # warning would otherwise land in every fresh environment's bench output
            warnings.filterwarnings("ignore", message="unsafe cast from uint64 to int64")
            ranx_evaluate(qr, rr, std, return_mean=True, make_comparable=True)
        for m in std:
            out[m] = {q: float(rr.scores[m][q]) for q in rq}
    for m in metrics:
        if m in out:
            continue
        if parsed[m].measure == "judged":  # every judged row counts, grade 0 included
            full = {q: [d for d, _ in ranked.get(q) or []] for q in rq}
            out[m] = judged_at({q: qrels[q] for q in rq}, full, parsed[m].k)
        else:
            out[m] = _extra(parsed[m], rq, ids)
    return out


def mean(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    return {m: (float(np.mean(list(v.values()))) if v else float("nan")) for m, v in per_query.items()}
