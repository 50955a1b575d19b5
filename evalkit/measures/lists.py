"""Quality metrics with ranx's definitions and arithmetic, plus the memory-benchmark recall variants ranx does not have.

ranx's measures are computed in numpy (:func:`_standard`) exactly as ranx's numba kernels compute them, so no run
pays numba's compile of ranx (~80 CPU s on a fresh cache); ranx stays the reference (``evaluate(..., engine="ranx")``,
compared to the bit in tests/parity/test_lists_ranx.py) and still scores ``bpref``.

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

import math
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


def _recall_any_all(m: catalogue.Measure, qrels: dict, run: dict[str, list[str]]) -> dict[str, float]:
    """``recall_any@k`` / ``recall_all@k`` (LongMemEval): any / all relevant documents in the first k entries."""
    name, k = m.measure, m.k
    out = {}
    for q, rel in qrels.items():
        top = set(run.get(q, [])[:k])
        hit = [d in top for d in rel]
        out[q] = float(any(hit)) if name == "recall_any" else float(all(hit))
    return out


# the ranking families ranx does not have: family -> kernel(measure, judged qrels (every grade, of the queries
# with a relevant document), relevant qrels, doc ids per query in list order) giving {query: value}
_OWN = {
    "recall_any": lambda m, qrels, rq, ids: _recall_any_all(m, rq, ids),
    "recall_all": lambda m, qrels, rq, ids: _recall_any_all(m, rq, ids),
    "judged": lambda m, qrels, rq, ids: judged_at(qrels, ids, m.k),  # every judged row counts, grade 0 included
}


ID_WIDTH = 32  # document ids go to ranx as fixed-width unicode arrays padded to a multiple of this many characters


def _ranx_table(d: dict[str, dict[str, float]], kind: type):
    """``{query: {doc: value}}`` as ranx's sorted numba dict, built as ``Qrels.from_dict`` / ``Run.from_dict`` build
    it except for the width of the document-id arrays: ranx uses the longest id's length (``<U{n}``), and numba
    compiles its table functions once per width (cold: tens of CPU seconds each; warm: the typed-list set-up
    again per process), so every dataset and every preset whose longest id differs paid another compile. Padding
    to a multiple of :data:`ID_WIDTH` keeps one width for ids up to 32 characters; the ids, their hashes and every
    score are unchanged (numpy strips the padding; tests/unit/evalkit/workflows/test_bench.py compares with ranx's
    own)."""
    from ranx.data_structures.common import create_and_sort  # lazy: startup (ranx + numba)
    from numba.typed import List as TypedList  # lazy: startup (numba)

    longest = max((len(doc) for docs in d.values() for doc in docs), default=1)
    dtype = f"<U{-(-max(longest, 1) // ID_WIDTH) * ID_WIDTH}"
    return create_and_sort(TypedList(list(d)), TypedList([np.array(list(v), dtype=dtype) for v in d.values()]),
                           TypedList([np.array(list(v.values()), dtype=kind) for v in d.values()]))


_DISCOUNTS: list[float] = []


def _discount(n: int) -> np.ndarray:
    """``log2(i + 1)`` for ranks ``i = 1..n``, each from the C library's ``log2`` as ranx's numba kernels take it
    (numpy's own vectorised ``log2`` may round differently in the last bit)."""
    while len(_DISCOUNTS) < n:
        _DISCOUNTS.append(math.log2(len(_DISCOUNTS) + 2))
    return np.array(_DISCOUNTS[:n], dtype=np.float64)


def _at(cum: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``cum[q, k_q - 1]`` per row (0 where ``k_q`` is 0)."""
    rows = np.arange(cum.shape[0])
    return np.where(k > 0, cum[rows, np.maximum(k, 1) - 1], 0.0)


class _Batch:
    """A batch of lists as ranx sees them, laid out once for the kernels of :data:`_NUMPY`: the gain matrix ``G``
    (Q, K), list lengths ``n``, relevant counts ``n_rel``, cumulative hits ``hits`` and, computed on first use,
    the cumulative sums :meth:`cum` names."""

    def __init__(self, rq: dict[str, dict[str, int]], ids: dict[str, list[str]]):
        self.qs = qs = list(rq)
        runs = [list(dict.fromkeys(ids[q])) or [_EMPTY] for q in qs]
        self.n = np.array([len(r) for r in runs], dtype=np.int64)
        self.n_rel = np.array([len(rq[q]) for q in qs], dtype=np.int64)
        self.K = K = int(self.n.max())
        self.G = G = np.zeros((len(qs), K))
        for qi, (q, r) in enumerate(zip(qs, runs)):
            rel = rq[q]
            G[qi, :len(r)] = [rel.get(d, 0) for d in r]
        R = int(self.n_rel.max())
        self.ideal = np.zeros((len(qs), R))
        for qi, q in enumerate(qs):
            g = sorted(rq[q].values(), reverse=True)
            self.ideal[qi, :len(g)] = g
        self.disc, self.idisc = _discount(K), _discount(R)
        self.hits = np.cumsum(G > 0, axis=1, dtype=np.float64)
        self._cache: dict[str, np.ndarray] = {}

    def cum(self, key: str) -> np.ndarray:
        """Cumulative ``dcg`` / ``idcg`` (linear gain), ``dcg_burges`` / ``idcg_burges`` (``2^g - 1``) or ``ap``
        (precision at each relevant rank) along each row."""
        if key not in self._cache:
            G, ideal = self.G, self.ideal
            self._cache[key] = {
                "dcg": lambda: np.cumsum(G / self.disc, axis=1),
                "idcg": lambda: np.cumsum(ideal / self.idisc, axis=1),
                "dcg_burges": lambda: np.cumsum((2.0 ** G - 1) / self.disc, axis=1),
                "idcg_burges": lambda: np.cumsum((2.0 ** ideal - 1) / self.idisc, axis=1),
                "ap": lambda: np.cumsum(np.where(G > 0, self.hits / np.arange(1.0, self.K + 1.0), 0.0), axis=1),
            }[key]()
        return self._cache[key]


def _dcg(burges: str, normalised: bool):
    """The kernel of ``dcg`` / ``ndcg`` (``burges=""``) or ``dcg_burges`` / ``ndcg_burges`` (``"_burges"``)."""
    def kernel(b: _Batch, m: catalogue.Measure, k, kk, h):
        v = _at(b.cum("dcg" + burges), kk)
        if normalised:
            ideal_v = _at(b.cum("idcg" + burges), b.n_rel if m.k is None else np.minimum(m.k, b.n_rel))
            v = v / np.where(ideal_v == 0.0, 1.0, ideal_v)
        return v
    return kernel


def _f1(b: _Batch, m, k, kk, h):
    p, r = h / k, h / b.n_rel
    return np.where(p + r == 0, 0.0, 2 * ((p * r) / np.where(p + r == 0, 1.0, p + r)))


def _mrr(b: _Batch, m, k, kk, h):
    first = np.argmax(b.G > 0, axis=1)
    return np.where((first < kk) & (b.G > 0).any(axis=1), 1 / (first + 1), 0.0)


# ranx's measures computed in numpy: family -> kernel(batch, measure, k, kk, hits@kk) giving one value per query,
# where k is the cut-off per query (the list length when the measure has none) and kk = min(k, length) (ranx's
# fix_k). A ranx family left out (bpref: its kernel reads judged non-relevant rows, which rq drops) goes to ranx.
_NUMPY = {
    "dcg": _dcg("", False),
    "ndcg": _dcg("", True),
    "dcg_burges": _dcg("_burges", False),
    "ndcg_burges": _dcg("_burges", True),
    "hits": lambda b, m, k, kk, h: h,
    "recall": lambda b, m, k, kk, h: h / b.n_rel,
    "precision": lambda b, m, k, kk, h: h / k,
    "r-precision": lambda b, m, k, kk, h: _at(b.hits, np.minimum(b.n_rel, b.n)) / b.n_rel,
    "f1": _f1,
    "mrr": _mrr,
    "map": lambda b, m, k, kk, h: _at(b.cum("ap"), kk) / b.n_rel,
    "hit_rate": lambda b, m, k, kk, h: (h > 0).astype(np.float64),
}


def _standard(measures: dict[str, catalogue.Measure], rq: dict[str, dict[str, int]],
              ids: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """ranx's per-query values of the standard ranking measures, in numpy, with ranx's own arithmetic (a family
    without a kernel in :data:`_NUMPY` is left out of the result, for ranx to score).

    Each list is seen as ranx sees the run dict built from it: a document listed twice counts at its first position,
    and an empty list is one non-relevant entry. Sums run left to right (``np.cumsum``), as ranx's kernels add
    (``np.sum`` in numba is a plain loop), so every value equals ranx's to the bit (tests/parity/test_lists_ranx.py).
    """
    b = _Batch(rq, ids)
    out: dict[str, dict[str, float]] = {}
    for name, m in measures.items():
        kernel = _NUMPY.get(m.measure)
        if kernel is None:
            continue
        k = b.n if m.k is None else np.full(len(b.qs), m.k, dtype=np.int64)  # ranx: k = 0 means the whole list
        kk = np.minimum(k, b.n)  # ranx's fix_k
        v = kernel(b, m, k, kk, _at(b.hits, kk))
        out[name] = {q: float(x) for q, x in zip(b.qs, v)}
    return out


def _ranx(names: list[str], rq: dict[str, dict[str, int]],
          ids: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per-query values straight from ranx (the reference; only bpref still needs it at run time)."""
    from ranx import Qrels, Run, evaluate as ranx_evaluate  # lazy: startup (ranx + numba compile its kernels)

    run_dict: dict[str, dict[str, float]] = {}
    for q in rq:
        lst = ids[q]
        if lst:
            # ranx sorts by score; make scores strictly decreasing in list order so ties keep our order
            scores: dict[str, float] = {}
            for i, d in enumerate(lst):
                scores.setdefault(d, float(len(lst) - i))  # a document listed twice counts at its first position
            run_dict[q] = scores
        else:
            run_dict[q] = {_EMPTY: 0.0}
    qr = Qrels()
    qr.qrels, qr.sorted = _ranx_table(rq, int), True
    rr = Run()
    rr.run, rr.sorted = _ranx_table(run_dict, float), True
    with warnings.catch_warnings():
        # ranx's nDCG kernel casts uint64 -> int64 when numba first compiles it (harmless for ranks); the
        # warning would otherwise land in every fresh environment's bench output
        warnings.filterwarnings("ignore", message="unsafe cast from uint64 to int64")
        ranx_evaluate(qr, rr, names, return_mean=True, make_comparable=True)
    return {m: {q: float(rr.scores[m][q]) for q in rq} for m in names}


def evaluate(qrels: dict[str, dict[str, int]], ranked: dict[str, list[tuple[str, float]]],
             metrics: list[str] | None = None, engine: str = "numpy") -> dict[str, dict[str, float]]:
    """Per-query scores ``{metric: {query_id: value}}`` over queries with at least one relevant document.

    ``engine="numpy"`` computes ranx's measures with ranx's arithmetic (no numba compile; bpref still goes to
    ranx); ``engine="ranx"`` sends them all to ranx, the reference the parity tests compare with.
    """
    if engine not in ("numpy", "ranx"):
        raise ConfigError(f"unknown list-scoring engine {engine!r} (valid: numpy, ranx)")
    metrics = metrics or DEFAULT_METRICS
    parsed = {m: _ranked_measure(m) for m in metrics}
    rq = relevant_qrels(qrels)
    if not rq:
        return {m: {} for m in metrics}
    ids = {q: [d for d, _ in ranked.get(q) or []] for q in rq}
    std = [m for m in metrics if parsed[m].family.ranx]
    out: dict[str, dict[str, float]] = {}
    fast = [m for m in std if engine == "numpy"]
    if fast:
        out.update(_standard({m: parsed[m] for m in fast}, rq, ids))
    slow = [m for m in std if m not in out]
    if slow:
        out.update(_ranx(slow, rq, ids))
    own = [m for m in metrics if m not in out]
    if own:
        judged = {q: qrels[q] for q in rq}
        out.update({m: _OWN[parsed[m].measure](parsed[m], judged, rq, ids) for m in own})
    return {m: out[m] for m in metrics}


def mean(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    return {m: (float(np.mean(list(v.values()))) if v else float("nan")) for m, v in per_query.items()}
