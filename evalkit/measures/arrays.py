"""Vectorised ranking metrics over a batch of final States (numpy; no per-query Python on the hot path).

:mod:`evalkit.measures.lists` scores Python lists through ranx, which is the reference but costs milliseconds per
run; a sweep scores thousands of configs over the same candidate set, so this module precomputes, once per
(qrels, queries, candidate set):

* a gain matrix ``G[q, c]`` — the grade of candidate column ``c`` for query ``q`` (0 = not relevant);
* per query: the number of relevant documents ``R_q`` and the cumulative ideal DCG, both from *all* the query's
  relevant documents (also those no arm retrieved, and those missing from the corpus);

and then scores a State's ``col`` (Q, K) with a handful of array operations.

Formulas (same conventions as :mod:`evalkit.measures.lists`, i.e. ranx 0.3 / trec_eval):

* only grades >= 1 are relevant; queries without a relevant document are not scored;
* ``rel_i = G[q, col[q, i]]`` (linear gain, Järvelin & Kekäläinen 2002, ranx ``ndcg``);
  ``DCG@k = Σ_{i<k} rel_i / log2(i + 2)``; ``nDCG@k = DCG@k / IDCG@k`` with ``IDCG@k`` over the query's grades
  sorted descending;
* ``recall@k = hits@k / R_q``; ``precision@k = hits@k / k`` (a short list is not padded down);
  ``mrr@k = 1 / (1 + first relevant position < k)``, else 0; ``map@k = Σ_{i<k, rel_i>0} (hits@(i+1) / (i+1)) / R_q``;
  ``hit_rate@k = [hits@k > 0]``;
* ``recall_any@k`` / ``recall_all@k`` (LongMemEval): any / all of the relevant documents among the first ``k``
  list entries;
* a metric without ``@k`` uses the whole list;
* a skipped query or an empty list scores 0 on every metric;
* a document listed twice counts once, at its first position (later copies are removed before cut-offs, as
  ranx sees a run dict). ``recall_any/all`` follow :func:`evalkit.measures.lists._recall_any_all`, which cuts the
  list *before* removing copies: identical results whenever a list has no duplicates (no seed preset produces them).

``injected_<metric>`` scores the injected block (the budget packer's ``info["injected"]`` rows, in list order)
instead of the ranked list — what ``evalkit.engine.evaluate`` reports as ``injected_ndcg@10``.

Run-level metrics over every query (judged or not), as :func:`evalkit.engine.evaluate.evaluate_run` computes them:
``skip_rate``, ``injection_rate``, ``secret_leak_rate`` (queries whose injected block holds a document the
dataset's harm labels flag as secret, as :func:`evalkit.measures.harms.harm_means`; NaN without such labels),
``correct_abstention`` (queries without relevant documents that inject
nothing), ``budget_compliance`` (injected chunks / tokens / chars within the preset's ``[budget]``),
one ``<policy>_compliance`` per common policy of ``evalkit/measures/policies.toml`` (the same rule as the list
engine, :mod:`evalkit.measures.budget`), ``injected_chunks_mean``, ``injected_tokens_mean``, ``injected_chars_mean``.

Parity with ranx to 1e-9 is tested in ``tests/parity/test_arrays_ranx.py`` (random fixtures and a real run).
"""
from __future__ import annotations

import numpy as np

from evalkit.measures import catalogue
from evalkit.measures.budget import compliance_arrays, has_limits
from evalkit.measures.catalogue import Measure
from evalkit.measures.harms import HarmLabels
from evalkit.measures.lists import relevant_qrels
from evalkit.measures.poison import POISON_FAMILIES, PoisonArrays
from retrievers.candidates.table import flat_index, take_rows
from retrievers.errors import ConfigError
from retrievers.kernels.registry import jit_kernel, kernel_example

RANKING = tuple(f.name for f in catalogue.FAMILIES if f.kind == "ranking" and "arrays" in f.engines)
RUN_LEVEL = tuple(f.name for f in catalogue.FAMILIES if f.kind in ("run", "budget") and "arrays" in f.engines)
Metric = Measure  # a parsed metric name (evalkit.measures.catalogue.Measure)


def parse_metric(name) -> Measure:
    """``"ndcg@10"`` → Measure computed by this engine; ConfigError (one line, valid names listed) otherwise."""
    return catalogue.parse(name, engine="arrays")


def parse_metrics(names) -> list[Measure]:
    return catalogue.parse_all(names, engine="arrays")


class Judgments:
    """Relevance judgements of a query batch laid out for array scoring.

    ``query_ids`` is the batch order (``cs.queries``), ``doc_ids`` the corpus order (``cs.corpus.ids``);
    ``labels``: the dataset's harm labels (:class:`evalkit.measures.harms.HarmLabels`), for ``secret_leak_rate``.
    """

    def __init__(self, qrels: dict[str, dict[str, int]], query_ids: list[str], doc_ids: list[str],
                 labels: HarmLabels | None = None):
        rq = relevant_qrels(qrels)
        # harm labels (evalkit.measures.harms) as a flag per corpus document; None = not declared (n/a)
        self.secret = (np.array([labels.is_secret(d) for d in doc_ids], dtype=bool)
                       if labels is not None and labels.has_secret else None)
        # planted notes (evalkit.measures.poison); None = the dataset has none (no poison measure applies)
        self.poison = (PoisonArrays(labels.poison, list(query_ids), list(doc_ids))
                       if labels is not None and labels.poison is not None else None)
        self.query_ids = list(query_ids)
        self.Q = len(self.query_ids)
        self.judged = np.array([q in rq for q in self.query_ids], dtype=bool)
        self.judged_idx = np.flatnonzero(self.judged)
        self.judged_ids = [self.query_ids[i] for i in self.judged_idx]
        self.n_docs = len(doc_ids)
        index = {d: i for i, d in enumerate(doc_ids)}
        keys, grades = [], []
        n_rel = np.zeros(self.Q, dtype=np.float64)
        ideal: list[list[int]] = []
        for qi, q in enumerate(self.query_ids):
            rel = rq.get(q) or {}
            n_rel[qi] = len(rel)
            ideal.append(sorted(rel.values(), reverse=True))
            for d, g in rel.items():
                di = index.get(d)
                if di is not None:
                    keys.append(qi * self.n_docs + di)
                    grades.append(g)
        order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
        self._keys = np.asarray(keys, dtype=np.int64)[order]
        self._grades = np.asarray(grades, dtype=np.float64)[order]
        self.n_rel = n_rel
        L = max([len(x) for x in ideal] + [1])
        ig = np.zeros((self.Q, L))
        for qi, g in enumerate(ideal):
            ig[qi, :len(g)] = g
        self._ideal_cum = np.cumsum(ig / np.log2(np.arange(L) + 2.0), axis=1)
        self._idcg: dict[int | None, np.ndarray] = {}

    def idcg(self, k: int | None) -> np.ndarray:
        """IDCG@k per query (1.0 where it would be 0, as ranx)."""
        got = self._idcg.get(k)
        if got is None:
            L = self._ideal_cum.shape[1]
            kk = L if k is None else min(k, L)
            got = self._ideal_cum[:, kk - 1].copy() if kk > 0 else np.zeros(self.Q)
            got[got == 0] = 1.0
            self._idcg[k] = got
        return got

    def gain(self, doc: np.ndarray) -> np.ndarray:
        """Grades (Q, C) of a candidate set's ``doc`` matrix (-1 padding → 0)."""
        Q, C = doc.shape
        if Q != self.Q:
            raise ValueError(f"candidate set has {Q} queries, judgements {self.Q}")
        if not len(self._keys):
            return np.zeros((Q, C))
        key = np.arange(Q, dtype=np.int64)[:, None] * self.n_docs + np.where(doc >= 0, doc, 0)
        pos = np.minimum(np.searchsorted(self._keys, key), len(self._keys) - 1)
        hit = (self._keys[pos] == key) & (doc >= 0)
        return np.where(hit, self._grades[pos], 0.0)


# ---- list preparation ----------------------------------------------------------------------------------------

def _compact(col: np.ndarray) -> np.ndarray:
    """Entries (>= 0) moved left in order, -1 after them (no-op when already compact)."""
    valid = col >= 0
    if col.shape[1] < 2 or not (valid[:, 1:] & ~valid[:, :-1]).any():
        return col
    perm = np.argsort(~valid, axis=1, kind="stable")
    return np.where(take_rows(valid, perm), take_rows(col, perm), -1)


@kernel_example(lambda: (np.array([[3, 1, 3, -1], [0, 1, 2, -1]], dtype=np.int64),))
def has_copies(col):  # pragma: no cover - jitted
    """Whether some row of ``col`` holds an entry (>= 0) twice: the cut-off prefixes the metrics read are short,
    so a pairwise check per row beats sorting the table."""
    Q, K = col.shape
    for q in range(Q):
        for i in range(1, K):
            a = col[q, i]
            if a < 0:
                continue
            for j in range(i):
                if col[q, j] == a:
                    return True
    return False


def _dedupe(col: np.ndarray) -> np.ndarray:
    """Later copies of an entry in a row replaced by -1 (then compacted); no-op without copies."""
    if col.shape[1] < 2:
        return col
    # cheap check first: lists almost never hold a copy (pairwise per row for a short prefix, else one sort)
    if col.shape[1] <= 32:
        if not jit_kernel(has_copies)(np.ascontiguousarray(col, dtype=np.int64)):
            return col
    else:
        s = np.sort(col, axis=1)
        if not ((s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)).any():
            return col
    order = np.argsort(col, axis=1, kind="stable")
    s = take_rows(col, order)
    dup_sorted = np.zeros(col.shape, dtype=bool)
    dup_sorted[:, 1:] = (s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)
    dup = np.zeros(col.shape, dtype=bool)
    np.put(dup, flat_index(order, col.shape[1]), dup_sorted)  # stable sort: the first position is never a "copy"
    return _compact(np.where(dup, -1, col))


_DISCOUNTS: dict[int, np.ndarray] = {}


def _discount(k: int) -> np.ndarray:
    """``log2(rank + 1)`` for ranks 1..k (the DCG discount), computed once per k."""
    d = _DISCOUNTS.get(k)
    if d is None:
        d = _DISCOUNTS[k] = np.log2(np.arange(k) + 2.0)
        d.setflags(write=False)
    return d


@kernel_example(lambda: (np.array([[2, 0, -1]], dtype=np.int64), np.array([[1.0, 0.0, 2.0]]), _discount(3)))
def list_gains(c, gain, disc):  # pragma: no cover - jitted
    """One pass over compact lists ``c`` (Q, K) (−1 padded) with candidate grades ``gain`` (Q, C): grades
    ``G[q, i] = gain[q, c[q, i]]`` (0 on padding), cumulative relevant counts ``hits`` and cumulative
    ``dcg = Σ G[q, i] / disc[i]`` (the same sequential sums as ``np.cumsum``, so the same bits), and list
    ``lengths`` — what numpy built in about ten (Q, K) passes, which dominated a lean sweep config's metrics."""
    Q, K = c.shape
    G = np.zeros((Q, K))
    hits = np.empty((Q, K))
    dcg = np.empty((Q, K))
    lengths = np.zeros(Q, dtype=np.int64)
    for q in range(Q):
        h = 0.0
        d = 0.0
        n = 0
        for i in range(K):
            col = c[q, i]
            g = 0.0
            if col >= 0:
                g = gain[q, col]
                n += 1
            G[q, i] = g
            if g > 0:
                h += 1.0
            hits[q, i] = h
            d = g / disc[i] if i == 0 else d + g / disc[i]  # cumsum's first term is the value itself
            dcg[q, i] = d
        lengths[q] = n
    return G, hits, dcg, lengths


class _Lists:
    """Lists ``c`` of the judged queries ``rows`` (copies removed, cut at the longest cut-off ``kmax``) laid out
    once for the kernels of :data:`_KERNELS` by :func:`list_gains`: grades ``G``, relevance ``rel``, cumulative
    ``hits`` and ``dcg``, list ``lengths``; ``prec_sum`` is computed on first use."""

    def __init__(self, c: np.ndarray, gain: np.ndarray, n_rel: np.ndarray, judg: Judgments, rows: np.ndarray,
                 kmax: int):
        self.n_rel, self.judg, self.rows, self.kmax = n_rel, judg, rows, kmax
        self.G, self.hits, self.dcg, self.lengths = jit_kernel(list_gains)(
            np.ascontiguousarray(c, dtype=np.int64), gain, _discount(kmax))
        self.rel = self.G > 0
        self._prec_sum = None

    def at(self, cum: np.ndarray, kk: int) -> np.ndarray:
        """``cum[:, kk - 1]`` (zeros when ``kk`` is 0)."""
        return cum[:, kk - 1] if kk > 0 else np.zeros(len(self.rows))

    @property
    def prec_sum(self) -> np.ndarray:
        if self._prec_sum is None:
            self._prec_sum = np.cumsum(np.where(self.rel, self.hits / np.arange(1.0, self.kmax + 1.0), 0.0), axis=1)
        return self._prec_sum


def _precision(x: _Lists, m: Metric, kk: int, h: np.ndarray) -> np.ndarray:
    if m.k is None:
        return np.where(x.lengths > 0, h / np.maximum(x.lengths, 1), 0.0)
    return h / m.k


def _mrr(x: _Lists, m: Metric, kk: int, h: np.ndarray) -> np.ndarray:
    if kk <= 0:
        return np.zeros(len(x.rows))
    r = x.rel[:, :kk]
    return np.where(r.any(axis=1), 1.0 / (np.argmax(r, axis=1) + 1.0), 0.0)


# ranking families: family -> kernel(lists, measure, kk = cut-off within kmax, hits@kk) giving one value per query
_KERNELS = {
    "ndcg": lambda x, m, kk, h: x.at(x.dcg, kk) / x.judg.idcg(m.k)[x.rows],
    "recall": lambda x, m, kk, h: h / x.n_rel,
    "precision": _precision,
    "mrr": _mrr,
    "map": lambda x, m, kk, h: x.at(x.prec_sum, kk) / x.n_rel,
    "hit_rate": lambda x, m, kk, h: (h > 0).astype(np.float64),
}


def _prefix_hits(gain: np.ndarray, col: np.ndarray, k: int) -> np.ndarray:
    """Relevant documents among the first ``k`` entries of each list as given (copies removed after the cut, as
    :func:`evalkit.measures.lists._recall_any_all`)."""
    c = _dedupe(col[:, :k])
    safe = np.where(c >= 0, c, 0)
    return (np.where(c >= 0, take_rows(gain, safe), 0.0) > 0).sum(axis=1)


# ranking families that read the first k entries of the list as given (not the deduplicated list):
# family -> kernel(relevant documents in the first k entries, relevant count) giving one value per query
_PREFIX_KERNELS = {
    "recall_any": lambda n, n_rel: (n > 0).astype(np.float64),
    "recall_all": lambda n, n_rel: (n >= n_rel).astype(np.float64),
}


def _ranking_values(metrics: list[Metric], gain: np.ndarray, col: np.ndarray, n_rel: np.ndarray,
                    judg: Judgments, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query values of ranking metrics for lists ``col`` (compact, -1 padded) over queries ``rows``."""
    out: dict[str, np.ndarray] = {}
    K = col.shape[1]
    need = [m for m in metrics if m.measure not in _PREFIX_KERNELS]
    if need:
        kmax = max((K if m.k is None else min(m.k, K)) for m in need)
        whole = any(m.k is None for m in need)
        # copies are removed keeping first occurrences: when the first kmax entries are distinct they stay the
        # first kmax entries, so only that prefix needs checking (the whole list when a metric reads its length)
        if whole:
            c = _dedupe(col)
        else:
            head = col[:, :kmax]
            c = _dedupe(head)
            if c is not head:  # copies inside the prefix: later entries move up
                c = _dedupe(col)
        x = _Lists(c[:, :kmax], gain, n_rel, judg, rows, kmax)
        for m in need:
            kernel = _KERNELS.get(m.measure)
            if kernel is None:  # pragma: no cover - parse_metric rejects anything else
                raise ConfigError(f"unsupported metric {m.name!r}")
            kk = kmax if m.k is None else min(m.k, kmax)
            out[m.name] = kernel(x, m, kk, x.at(x.hits, kk))
    for m in metrics:
        if m.measure in _PREFIX_KERNELS:
            out[m.name] = _PREFIX_KERNELS[m.measure](_prefix_hits(gain, col, m.k), n_rel)
    return out


class Scorer:
    """Scores final States of one candidate set (or view) against judgements, vectorised over queries.
    Example (``judgments``, ``view_cs``, ``pipeline`` and ``state`` come from a sweep; not a doctest)::

        sc = Scorer(judgments, view_cs, ["ndcg@10", "recall@10", "injected_ndcg@10", "budget_compliance"],
                    budget=pipeline.budget)
        per_query, means = sc.score(state)
    """

    def __init__(self, judg: Judgments, cs, metrics, budget: dict | None = None):
        self.judg = judg
        self.cs = cs
        self.metrics = parse_metrics(metrics) if metrics and not isinstance(metrics[0], Metric) else list(metrics)
        self.budget = dict(budget or {})
        self.gain = judg.gain(cs.doc)
        self.rows = judg.judged_idx
        self._gain_j = self.gain[self.rows]
        self._nrel_j = judg.n_rel[self.rows]
        self._ranked = [m for m in self.metrics if not m.run_level and not m.injected]
        self._inj = [m for m in self.metrics if not m.run_level and m.injected]
        self._run = [m for m in self.metrics if m.run_level and m.family.name not in POISON_FAMILIES]
        self._poison = [m for m in self.metrics if m.family.name in POISON_FAMILIES]
        self._text_len = None

    @property
    def needs_budget(self) -> bool:
        return any(m.needs_budget for m in self.metrics)

    def score(self, st) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """(per-query values over judged queries, means) of every metric (run-level ones have no per-query)."""
        col = st.col
        if st.skipped.any():
            col = np.where(st.skipped[:, None], -1, col)
        per: dict[str, np.ndarray] = {}
        judged = self.rows
        if self._ranked:
            c = _compact(col[judged])
            per.update(_ranking_values(self._ranked, self._gain_j, c, self._nrel_j, self.judg, judged))
        inj = None
        if self._inj or self._run or self._poison:
            inj = self._injected(st, col)
        if self._inj:
            c = _compact(np.where(inj, col, -1)[judged])
            vals = _ranking_values(self._inj, self._gain_j, c, self._nrel_j, self.judg, judged)
            per.update(vals)
        means = {m: (float(v.mean()) if v.size else float("nan")) for m, v in per.items()}
        if self._run:
            means.update(self._run_level(st, col, inj))
        if self._poison:
            means.update(self._poison_values(col, inj))
        return per, means

    def _poison_values(self, col: np.ndarray, inj: np.ndarray) -> dict[str, float]:
        """The poison measures (:mod:`evalkit.measures.poison`) over every query: NaN when the dataset has no
        planted note."""
        pa = self.judg.poison
        if pa is None:
            return {str(m): float("nan") for m in self._poison}
        c = _compact(col)
        ci = _compact(np.where(inj, col, -1))
        doc = np.where(c >= 0, take_rows(self.cs.doc, np.where(c >= 0, c, 0)), -1)
        injected_doc = np.where(ci >= 0, take_rows(self.cs.doc, np.where(ci >= 0, ci, 0)), -1)
        nd: dict[int, float] = {}
        rows = ~pa.target[self.rows]
        for m in self._poison:
            if m.family.name == "nontarget_ndcg" and m.k not in nd:
                v = _ranking_values([catalogue.parse(f"ndcg@{m.k}")], self._gain_j, _compact(col[self.rows]),
                                    self._nrel_j, self.judg, self.rows)[f"ndcg@{m.k}"]
                nd[m.k] = float(v[rows].mean()) if rows.any() else float("nan")
        out = {}
        ranked = [str(m) for m in self._poison if not m.family.reads_injection]
        injected = [str(m) for m in self._poison if m.family.reads_injection]
        if ranked:  # the ranked list, compacted (its first k entries)
            out.update(pa.values(ranked, doc, doc >= 0, nd))
        if injected:  # the injected block, in its own order
            out.update(pa.values(injected, injected_doc, injected_doc >= 0, nd))
        return out

    # -- injected block and run-level metrics ------------------------------------------------------------------
    @staticmethod
    def _injected(st, col: np.ndarray) -> np.ndarray:
        m = st.info.get("injected")
        if m is None or m.shape != col.shape:
            return col >= 0
        return m & (col >= 0)

    def _budget_arrays(self, st, col, inj) -> dict[str, np.ndarray]:
        b = st.info.get("budget")
        if b:
            return {k: np.asarray(v) for k, v in b.items()}
        if self._text_len is None:
            self._text_len = np.array([len(t) for t in self.cs.corpus.texts], dtype=np.int64)
        doc = take_rows(self.cs.doc, np.where(col >= 0, col, 0))
        chars = np.where(inj, self._text_len[np.where(doc >= 0, doc, 0)], 0).sum(axis=1)
        return {"chunks": inj.sum(axis=1), "chars": chars}

    def _run_level(self, st, col, inj) -> dict[str, float]:
        if not col.shape[0]:
            return {m.measure: float("nan") for m in self._run}
        r = _RunBatch(self, st, col, inj)
        out: dict[str, float] = {}
        for m in self._run:
            kernel = _RUN_KERNELS.get(m.measure) or _RUN_KIND_KERNELS[m.family.kind]
            out[m.measure] = kernel(r, m)
        return out


class _RunBatch:
    """A batch's final State as the run-level kernels of :data:`_RUN_KERNELS` read it: ``col`` (-1 where skipped),
    the injected mask ``inj``, and the budget arrays (chunks / tokens / chars per query) computed on first use."""

    def __init__(self, scorer: Scorer, st, col: np.ndarray, inj: np.ndarray):
        self.scorer, self.st, self.col, self.inj = scorer, st, col, inj
        self.Q = col.shape[0]
        self.any_inj = inj.any(axis=1)
        self._budget: dict[str, np.ndarray] | None = None

    @property
    def budget(self) -> dict[str, np.ndarray]:
        if self._budget is None:
            self._budget = self.scorer._budget_arrays(self.st, self.col, self.inj)
        return self._budget


def _secret_leak_rate(r: _RunBatch, m: Metric) -> float:
    """evalkit.measures.harms: share of all queries whose injected block holds a secret document."""
    secret = r.scorer.judg.secret
    if secret is None:
        return float("nan")
    doc = take_rows(r.scorer.cs.doc, np.where(r.col >= 0, r.col, 0))
    leak = r.inj & (doc >= 0) & secret[np.where(doc >= 0, doc, 0)]
    return float(leak.any(axis=1).mean())


def _correct_abstention(r: _RunBatch, m: Metric) -> float:
    no_rel = ~r.scorer.judg.judged
    return float((~r.any_inj[no_rel]).mean()) if no_rel.any() else float("nan")


def _compliance(r: _RunBatch, m: Metric) -> float:
    """``budget_compliance`` (the preset's own budget, checked on its packer's token count as the list engine does)
    or ``<policy>_compliance``."""
    lim = r.scorer.budget if m.family.policy is None else m.family.policy.limit_dict
    if not has_limits(lim):
        return 1.0  # no declared budget: nothing can exceed it
    return compliance_arrays(r.budget, lim, r.Q, packer_tokens=m.family.policy is None)


def _injected_mean(key: str):
    """The kernel of ``injected_<key>_mean``: the mean per query of the budget array ``key`` (NaN without it)."""
    def kernel(r: _RunBatch, m: Metric) -> float:
        b = r.budget
        return float(np.mean(b[key])) if key in b else float("nan")
    return kernel


# run-level families (over every query, judged or not): family -> kernel(run batch, measure) giving one value
_RUN_KERNELS = {
    "skip_rate": lambda r, m: float(r.st.skipped.mean()),
    "injection_rate": lambda r, m: float(r.any_inj.mean()),
    "secret_leak_rate": _secret_leak_rate,
    "correct_abstention": _correct_abstention,
    "injected_chunks_mean": _injected_mean("chunks"),
    "injected_tokens_mean": _injected_mean("tokens"),
    "injected_chars_mean": _injected_mean("chars"),
}
# families declared by kind rather than by name (one per common policy of policies.toml): kind -> kernel
_RUN_KIND_KERNELS = {"budget": _compliance}


__all__ = ["Metric", "parse_metric", "parse_metrics", "Judgments", "Scorer", "RANKING", "RUN_LEVEL"]
