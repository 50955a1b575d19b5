"""ranx-style runs and qrels held in memory — dicts or DataFrames — scored and fused with evalkit's own code.

A *run* is ``{query_id: {doc_id: score}}`` (ranx's ``Run.to_dict()``), ``{query_id: [(doc_id, score), …]}``, or a
DataFrame with columns ``q_id, doc_id, score`` (ranx's ``Run.from_df`` names; BEIR's ``query-id, corpus-id`` are
read too). *Qrels* are ``{query_id: {doc_id: grade}}`` or a DataFrame ``q_id, doc_id, score``. A run's ranking is
its scores descending, ties by document id descending (trec_eval's rule), whatever order the dict or frame holds.

* :func:`evaluate_runs` scores through :func:`evalkit.measures.lists.evaluate` — the same code and conventions as
  every run folder (grades ≥ 1 relevant; queries without a relevant document are not scored; a query missing from
  the run scores 0), parity-tested against ranx (``tests/parity/test_run_dicts_ranx.py``).
* :func:`fuse_runs` turns the runs into a candidate set (:mod:`retrievers.candidates.files`) and applies the
  library's own fusion stage (``fuse.rrf`` / ``fuse.comb``), so a fusion tried here is the one a preset runs.
"""
from __future__ import annotations

from typing import Any, Mapping

from evalkit.measures.lists import evaluate as evaluate_lists
from evalkit.measures.lists import mean
from retrievers.candidates.files import candidates_from_json
from retrievers.errors import ConfigError
from retrievers.pipeline import build_pipeline, ranked

#: DataFrame column names accepted for (query, document, value), in order of preference
COLUMNS = (("q_id", "doc_id", "score"), ("query_id", "doc_id", "score"), ("query-id", "corpus-id", "score"))
#: ranx's normalisation names → evalkit's (``retrievers.stages.helpers.normalize.NORMALISATIONS``)
NORMS = {"min-max": "minmax", "zmuv": "zscore", "max": "max", "sum": "sum", "rank": "rank", None: "none"}
#: ranx's fusion methods served by ``fuse.comb``
COMB = ("sum", "mnz", "max", "min", "med", "anz")


def _frame_to_dict(df, what: str) -> dict[str, dict[str, float]]:
    cols = next((c for c in COLUMNS if set(c) <= set(df.columns)), None)
    if cols is None:
        raise ConfigError(f"{what}: a DataFrame needs the columns q_id, doc_id, score (got {list(df.columns)})")
    out: dict[str, dict[str, float]] = {}
    for q, d, v in zip(df[cols[0]].astype(str), df[cols[1]].astype(str), df[cols[2]]):
        out.setdefault(q, {})[d] = v
    return out


def as_qrels(qrels: Any) -> dict[str, dict[str, int]]:
    """Qrels as ``{query_id: {doc_id: grade}}`` from a dict or a DataFrame; grades must be integers."""
    table = _frame_to_dict(qrels, "qrels") if hasattr(qrels, "columns") else qrels
    if not isinstance(table, Mapping):
        raise ConfigError(f"qrels: expected a dict {{query_id: {{doc_id: grade}}}} or a DataFrame, got "
                          f"{type(qrels).__name__}")
    out = {}
    for q, docs in table.items():
        if not isinstance(docs, Mapping):
            raise ConfigError(f"qrels: query {q!r}: expected {{doc_id: grade}}, got {type(docs).__name__}")
        for d, g in docs.items():
            if float(g) != int(g):
                raise ConfigError(f"qrels: query {q!r}, document {d!r}: grade {g!r} is not an integer")
        out[str(q)] = {str(d): int(g) for d, g in docs.items()}
    return out


def as_ranked(run: Any, what: str = "run") -> dict[str, list[tuple[str, float]]]:
    """A run as ``{query_id: [(doc_id, score), …]}`` in ranking order: score descending, ties by document id
    descending (trec_eval's rule)."""
    table = _frame_to_dict(run, what) if hasattr(run, "columns") else run
    if not isinstance(table, Mapping):
        raise ConfigError(f"{what}: expected a dict {{query_id: {{doc_id: score}}}} or a DataFrame, got "
                          f"{type(run).__name__}")
    out = {}
    for q, docs in table.items():
        pairs = list(docs.items()) if isinstance(docs, Mapping) else list(docs)
        try:
            pairs = [(str(d), float(s)) for d, s in pairs]
        except (TypeError, ValueError):
            raise ConfigError(f"{what}: query {q!r}: expected doc_id → score pairs") from None
        pairs.sort(key=lambda p: p[0], reverse=True)
        pairs.sort(key=lambda p: -p[1])  # stable: equal scores keep document id descending
        out[str(q)] = pairs
    return out


def evaluate_runs(qrels: Any, run: Any, metrics: list[str]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``(means, per_query)`` of ``metrics`` for one in-memory run: means over the queries with a relevant
    document, ``per_query`` as ``{metric: {query_id: value}}``."""
    per_query = evaluate_lists(as_qrels(qrels), as_ranked(run), metrics)
    return mean(per_query), per_query


def fusion_stage(names: list[str], method: str, norm: str | None, weights: list[float] | None,
                 params: Mapping | None) -> dict:
    """The ``fuse.*`` stage config that computes ranx's ``fuse(runs, norm, method, params)``."""
    params = dict(params or {})
    if weights is not None and len(weights) != len(names):
        raise ConfigError(f"fuse: {len(names)} runs but {len(weights)} weights")
    if norm not in NORMS:
        raise ConfigError(f"fuse: unknown norm {norm!r} (valid: {', '.join(str(n) for n in NORMS)})")
    if method == "rrf":
        stage = {"type": "fuse.rrf", "arms": names, "k": float(params.pop("k", 60))}
        if weights is not None:
            stage["weights"] = [float(w) for w in weights]
    elif method == "wsum" or method in COMB:
        w = weights if weights is not None else params.pop("weights", None)
        stage = {"type": "fuse.comb", "arms": names, "method": "sum" if method == "wsum" else method,
                 "norm": NORMS[norm]}
        if w is not None:
            stage["weights"] = [float(x) for x in w]
    else:
        raise ConfigError(f"fuse: unknown method {method!r} (valid: rrf, wsum, {', '.join(COMB)})")
    if params:
        raise ConfigError(f"fuse: unknown parameter(s) {', '.join(sorted(params))} for method {method!r}")
    return stage


def fuse_runs(runs: list[Any] | Mapping[str, Any], method: str = "rrf", norm: str | None = "min-max",
              weights: list[float] | None = None, params: Mapping | None = None) -> dict[str, dict[str, float]]:
    """Fuse in-memory runs with the library's fusion stage; returns ``{query_id: {doc_id: score}}`` in ranking
    order (a query absent from a run contributes nothing from it)."""
    named = dict(runs) if isinstance(runs, Mapping) else {f"run{i}": r for i, r in enumerate(runs)}
    if len(named) < 1:
        raise ConfigError("fuse: no run given")
    lists = {n: as_ranked(r, f"run {n!r}") for n, r in named.items()}
    stage = fusion_stage(list(named), method, norm, weights, params)
    qids = sorted({q for ranked_ in lists.values() for q in ranked_})
    docs = sorted({d for ranked_ in lists.values() for pairs in ranked_.values() for d, _ in pairs})
    obj = {"documents": [{"id": d, "text": ""} for d in docs],
           "queries": [{"id": q, "query": q, "arms": {n: [{"id": d, "score": s} for d, s in lists[n].get(q, [])]
                                                       for n in named}} for q in qids]}
    cs = candidates_from_json(obj)
    st = build_pipeline({"name": "fuse", "stages": [stage]}).run(cs)
    return {q: dict(ranked(st, cs, i)) for i, q in enumerate(qids)}
