"""Added signals (``score.*``, no seed system: tuner options): each computes one more piece of evidence per row and
blends it in as ``score + weight · sd(score) · z(signal)`` (standardised per query, in units of the list's own
spread), then re-sorts.

* ``score.neighbours`` — neighbour context: a document also scores by the documents beside it;
* ``score.doc_cosine`` — the cosine to the document's own vector;
* ``score.feedback`` — pseudo-relevance feedback: resemblance to the list's own top documents;
* ``score.rm3`` — pseudo-relevance feedback on the lexical side: RM3 query expansion, a second BM25 pass.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from retrievers.candidates.table import CandidateSet, State, take_rows
from retrievers.index.lexical import TOKENIZERS, LexicalIndex
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.normalize import row_standardise, score_spread


def neighbour_table(corpus, window: int) -> np.ndarray:
    """(n, 2·window) corpus index of each document's neighbours: the documents that share its path, ``window``
    before then ``window`` after it in corpus order (nearest first); -1 where there is none (start or end of
    the path, or no path: a document without a path has no neighbours). A path kept as a revision history (a
    document of it is ``retired``) is one file per version: its chunks neighbour those of the same version (same
    ``created`` and ``retired``) only."""
    def build():
        out = np.full((corpus.n, 2 * window), -1, dtype=np.int64)
        revised = {corpus.paths[d] for d in np.flatnonzero(np.isfinite(corpus.retired))}
        by_path: dict[object, list[int]] = {}
        for d, p in enumerate(corpus.paths):
            if p:
                key = (p, float(corpus.created[d]), float(corpus.retired[d])) if p in revised else p
                by_path.setdefault(key, []).append(d)
        for docs in by_path.values():
            a = np.asarray(docs, dtype=np.int64)
            for j in range(1, window + 1):
                out[a[j:], j - 1] = a[:-j]  # j-th before
                out[a[:-j], window + j - 1] = a[j:]  # j-th after
        return out
    return corpus.cached(("score.neighbours", window), build)


@register
class Neighbours(Stage):
    """Neighbour context: a document also scores by its neighbours — the ``window`` documents before and after it
    in corpus order that share its path (the adjacent turns of a conversation session, the adjacent chunks of a
    file; :func:`neighbour_table`). No seed system does this; it is a tuner option.

    Neighbour signal ``n`` of a row (``agg`` = ``max`` or ``mean`` over its neighbours, those that exist):

    * ``signal = "dense"``: cosine(query, neighbour) from the index's vectors, whether or not the neighbour is a
      candidate (a row without neighbours has no signal); a neighbour created after the query's ``as_of`` is
      not read;
    * ``signal = "list"``: the neighbour's incoming score where it is a row of the list; a neighbour that is not
      counts the query's lowest incoming score.

    ``score ← score + weight · sd(score) · z(n)``: ``z`` standardises ``n`` over the query's rows that have one
    (mean 0, sd 1; 0 for a row without, or when all are equal), ``sd(score)`` is the standard deviation of the
    query's incoming scores (1 when 0), so ``weight`` is in units of the list's own spread whatever the fusion's
    scale. ``weight = 0`` → stage skipped (nothing re-sorted). Then a stable sort by score. Extra column
    ``neighbours`` (= ``n``). Defaults: dense, window 1, max, weight 0.25.
    Example (list, window 1, max, weight 1): rows d1 3, d2 1, d3 2 in one path (d1 d2 d3 adjacent) →
    n = (1, 3, 1), z = (−0.7071, 1.4142, −0.7071), sd(score) = 0.8165 → 2.4226, 2.1547, 1.4226.
    """

    name = "score.neighbours"
    kind = "score"
    signal: str = param("dense", choices=("dense", "list"))
    window: int = param(1, ge=1, le=5, doc="neighbours on each side (same path, corpus order)")
    agg: str = param("max", choices=("max", "mean"))
    weight: float = param(0.25, ge=0.0, doc="in units of the query's score spread; 0 disables the stage")

    def uses_vectors(self) -> bool:
        return self.signal == "dense"

    def _visible(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C, 2·window) corpus index of each column's neighbours, -1 where there is none or where the query
        cannot see it: the stage reads documents beside the candidates, so it applies the as-of rule itself
        (:mod:`retrievers.index.visibility`; a neighbour written after the query's ``as_of`` was not in the memory yet,
        a version retired by then no longer)
        and the scoped-note rule (a note addressed to other queries is nobody else's neighbour, under either protocol).
        Under the ``all`` protocol (``cs.meta["visibility"]``) every document is visible; a set of unknown
        protocol (external candidates) gets the strict rule."""
        def build():
            nb = neighbour_table(cs.corpus, self.window)[np.where(cs.valid, cs.doc, 0)]
            nb = np.where(cs.valid[:, :, None], nb, -1)
            scoped = cs.corpus.visible_to  # a scoped note is a neighbour only for the queries it is addressed to
            if scoped:
                for q, c, j in zip(*np.nonzero(np.isin(nb, np.fromiter(scoped, dtype=np.int64)))):
                    if cs.queries[q].id not in scoped[int(nb[q, c, j])]:
                        nb[q, c, j] = -1
            if cs.meta.get("visibility") == "all":
                return nb
            at = np.where(nb >= 0, nb, 0)
            later = cs.corpus.created[at] > cs.as_of[:, None, None]  # NaN compares False
            later |= cs.corpus.retired[at] <= cs.as_of[:, None, None]  # a version replaced by then
            return np.where(later, -1, nb)
        return cs.memo(("score.neighbours.visible", self.window), build)

    def _dense(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C, 2·window) cosine(query, neighbour of each column), NaN where there is no neighbour."""
        def build():
            emb, q = cs.corpus.embeddings, cs.qemb
            if emb is None or q is None:
                raise ConfigError(f"stage {self.name!r} (signal dense) needs query and document vectors")
            nb = self._visible(cs)
            qn = q.astype(np.float64)
            qn = qn / np.where((n := np.linalg.norm(qn, axis=1, keepdims=True)) > 0, n, 1.0)
            out = np.full(nb.shape, np.nan)
            step = 64
            for s in range(0, cs.Q, step):  # bounded memory: (step, C, 2w, dim) at a time
                blk = nb[s:s + step]
                v = emb[np.where(blk >= 0, blk, 0)].astype(np.float64)
                nv = np.linalg.norm(v, axis=3)
                with np.errstate(invalid="ignore", divide="ignore"):
                    c = np.einsum("qcwd,qd->qcw", v, qn[s:s + step]) / np.where(nv > 0, nv, 1.0)
                out[s:s + step] = np.where(blk >= 0, c, np.nan)
            return out
        return cs.memo(("score.neighbours.dense", self.window), build)

    def _columns(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C, 2·window) candidate column of each column's neighbours in the same query, -1 where absent."""
        def build():
            nb = self._visible(cs)
            key = np.where(cs.valid, cs.doc, np.iinfo(np.int64).max)
            order = np.argsort(key, axis=1, kind="stable")
            sd = take_rows(key, order)
            out = np.full(nb.shape, -1, dtype=np.int64)
            for q in range(cs.Q):
                pos = np.searchsorted(sd[q], nb[q])
                pos = np.minimum(pos, cs.C - 1) if cs.C else pos
                hit = (nb[q] >= 0) & (sd[q][pos] == nb[q]) if cs.C else np.zeros(nb[q].shape, bool)
                out[q] = np.where(hit, order[q][pos], -1)
            return out
        return cs.memo(("score.neighbours.columns", self.window), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.weight == 0 or st.col.shape[1] == 0:
            return st
        valid = st.valid
        safe = np.where(valid, st.col, 0)
        if self.signal == "dense":
            per_col = self._dense(cs)  # (Q, C, 2w)
            vals = np.take_along_axis(per_col, safe[:, :, None], axis=1)
            vals = np.where(valid[:, :, None], vals, np.nan)
        else:
            cols = np.take_along_axis(self._columns(cs), safe[:, :, None], axis=1)  # (Q, K, 2w)
            has_nb = np.take_along_axis(self._visible(cs), safe[:, :, None], axis=1) >= 0
            by_col = np.full((cs.Q, cs.C), np.nan)
            qi = np.repeat(np.arange(cs.Q)[:, None], st.col.shape[1], axis=1)
            by_col[qi[valid], st.col[valid]] = st.score[valid]
            low = np.where(valid, st.score, np.inf).min(axis=1)
            v = np.take_along_axis(by_col, np.where(cols >= 0, cols, 0).reshape(cs.Q, -1), axis=1).reshape(cols.shape)
            v = np.where((cols >= 0) & np.isfinite(v), v, low[:, None, None])
            vals = np.where(has_nb & valid[:, :, None], v, np.nan)
        some = ~np.isnan(vals)
        with np.errstate(invalid="ignore"):
            if self.agg == "max":
                n = np.where(some, vals, -np.inf).max(axis=2)
            else:
                n = np.where(some, vals, 0.0).sum(axis=2) / np.maximum(some.sum(axis=2), 1)
        ok = some.any(axis=2) & valid
        return _add_standardised(st, np.where(ok, n, np.nan), ok, self.weight, "neighbours")


def _add_standardised(st: State, signal: np.ndarray, ok: np.ndarray, weight: float, column: str) -> State:
    """``score + weight · sd(score) · z(signal)`` per query (z over the rows where ``ok`` holds, 0 elsewhere; sd of
    the incoming scores, 1 when 0), ``signal`` kept as the extra column ``column``, then a stable sort."""
    valid = st.valid
    z = row_standardise(np.where(ok, signal, 0.0), ok)
    new = np.where(valid, st.score + weight * score_spread(st.score, valid) * z, -np.inf)
    return State(st.col, new, st.skipped, dict(st.extra, **{column: signal}), st.info, st.trace).sort()


@register
class DocCosine(Stage):
    """The document's own vector as an added signal: ``score ← score + weight · sd(score) · z(c)`` with ``c`` =
    cosine(query, document vector) for every row (whether or not the vector arm returned it) and ``z``, ``sd`` as
    in ``score.neighbours``. For a document the index splits into pieces (MaxP: the vector arm scores a document
    by its best piece) the document vector is the normalised mean of its pieces, so this blends max-of-pieces
    (the arm) with mean-of-pieces evidence. ``weight = 0`` → stage skipped. Extra column ``doc_cosine``.
    No seed system does this; it is a tuner option. Default weight 0.25.
    Example (weight 1): scores (2, 1), cosines (0.2, 0.6) → z (−1, 1), sd 0.5 → 1.5, 1.5 (stable: order kept).
    """

    name = "score.doc_cosine"
    kind = "score"
    vectors = True
    weight: float = param(0.25, ge=0.0, doc="in units of the query's score spread; 0 disables the stage")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.weight == 0 or st.col.shape[1] == 0:
            return st
        c = st.gather(cs.qd_cosine())
        ok = st.valid & np.isfinite(c)
        return _add_standardised(st, np.where(ok, c, np.nan), ok, self.weight, "doc_cosine")


def unit_vectors(corpus) -> np.ndarray:
    """(n, dim) float64 document vectors scaled to length 1 (a zero vector stays 0), built once per corpus."""
    def build():
        v = np.asarray(corpus.embeddings, dtype=np.float64)
        n = np.linalg.norm(v, axis=1, keepdims=True)
        return v / np.where(n > 0, n, 1.0)
    return corpus.cached(("unit_vectors",), build)


@register
class Feedback(Stage):
    """Pseudo-relevance feedback over document vectors: the first ``k`` rows of the incoming list (its top ``k``)
    are taken as relevant, and every row also scores by how much its vector resembles theirs — the evidence of
    one question tends to resemble each other (e.g. the sessions a multi-session question needs). Feedback
    signal ``f`` of a row (``agg``):

    * ``"max"``: the largest cosine to a feedback document other than the row itself (a row that is the only
      feedback document has no signal);
    * ``"centroid"``: the cosine to the normalised mean of the ``k`` feedback vectors (Rocchio's centroid; a
      feedback row counts itself).

    ``score ← score + weight · sd(score) · z(f)`` with ``z``, ``sd`` as in ``score.neighbours``; ``weight = 0`` →
    stage skipped. Then a stable sort. Extra column ``feedback``. The vectors are the index's document vectors
    (for MaxP documents the normalised mean of their pieces). No seed system does this; it is a tuner option.
    Defaults k 5, max, weight 0.5.
    Example (k 2, max, weight 1): rows a 3, b 2, c 1 with vectors a (1, 0), b (0.6, 0.8), c (0, 1) → f = (0.6,
    0.6, 0.8) (a ↔ b, b ↔ a, c ↔ b), z = (−0.7071, −0.7071, 1.4142), sd(score) 0.8165 → 2.4226, 1.4226, 2.1547:
    order a, c, b.
    """

    name = "score.feedback"
    kind = "score"
    vectors = True
    k: int = param(5, ge=1, le=100, doc="feedback rows: the incoming list's top k")
    agg: str = param("max", choices=("max", "centroid"))
    weight: float = param(0.5, ge=0.0, doc="in units of the query's score spread; 0 disables the stage")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.weight == 0 or st.col.shape[1] == 0:
            return st
        if cs.corpus.embeddings is None:
            raise ConfigError(f"stage {self.name!r} needs document vectors")
        unit = unit_vectors(cs.corpus)
        valid = st.valid
        docs = np.take_along_axis(cs.doc, np.where(valid, st.col, 0), axis=1)
        k = min(self.k, st.col.shape[1])
        fb = valid[:, :k]
        out = np.full(st.col.shape, np.nan)
        step = 64
        for s in range(0, cs.Q, step):  # bounded memory: (step, K, dim) at a time
            v = unit[docs[s:s + step]]
            f, ok = v[:, :k], fb[s:s + step]
            if self.agg == "centroid":
                cen = np.where(ok[:, :, None], f, 0.0).sum(axis=1)
                cen /= np.where((n := np.linalg.norm(cen, axis=1, keepdims=True)) > 0, n, 1.0)
                c = np.where(ok.any(axis=1, keepdims=True), np.einsum("qrd,qd->qr", v, cen), np.nan)
            else:
                sim = np.einsum("qrd,qjd->qrj", v, f)
                other = ok[:, None, :] & (np.arange(v.shape[1])[:, None] != np.arange(k)[None, :])[None]
                c = np.where(other, sim, -np.inf).max(axis=2)
                c = np.where(np.isfinite(c), c, np.nan)
            out[s:s + step] = c
        ok = valid & np.isfinite(out)
        return _add_standardised(st, np.where(ok, out, np.nan), ok, self.weight, "feedback")


def _term_counts(corpus, tokenizer: str, d: int) -> Counter:
    """Token counts of document ``d`` under ``tokenizer`` (filled lazily, kept on the corpus)."""
    table = corpus.cached(("score.rm3.tf", tokenizer), dict)
    if d not in table:
        table[d] = Counter(TOKENIZERS[tokenizer](corpus.texts[d]))
    return table[d]


@register
class RM3(Stage):
    """Pseudo-relevance feedback on the lexical side (RM3): the first ``k`` rows of the incoming list are taken
    as relevant, the query is expanded with their most likely terms and every row also scores by a second BM25
    pass with the expanded query.

    Per query: the BM25 index (:class:`retrievers.index.lexical.LexicalIndex`, ``tokenizer``, ``k1``, ``b``) is built
    over the documents of the query's candidate list (the documents already in the list, so no as-of question
    arises; on a per-question haystack this is the haystack). Relevance model ``P(t) = Σ_D P(D)·tf(t, D)/|D|``
    over the feedback documents, ``P(D)`` (``doc_weights``) ``"softmax"``: ``∝ exp(score − top score)`` of the incoming
    scores (RM3's ``P(D|q)`` with the list's score as the log-likelihood), or ``"uniform"``: 1/k; the ``terms``
    most likely terms (ties by first occurrence) are renormalised to sum 1. Expanded query weights
    ``w(t) = lam·tf(t, q)/|q| + (1 − lam)·P'(t)`` (terms the index does not know are dropped), signal
    ``r = Σ_t w(t)·BM25(t, D)``. ``score ← score + weight · sd(score) · z(r)`` with ``z``, ``sd`` as in
    ``score.neighbours``; ``weight = 0`` → stage skipped. Then a stable sort. Extra column ``rm3``. No seed
    system does this; it is a tuner option. Defaults k 5, terms 20, lam 0.5, softmax, weight 0.25, stem_en, k1 1.2,
    b 0.75.
    """

    name = "score.rm3"
    kind = "score"
    k: int = param(5, ge=1, le=100, doc="feedback rows: the incoming list's top k")
    terms: int = param(20, ge=1, le=1000, doc="expansion terms kept from the relevance model")
    lam: float = param(0.5, ge=0.0, le=1.0, doc="weight of the original query in the expanded query")
    doc_weights: str = param("softmax", choices=("softmax", "uniform"), doc="P(D) of a feedback document")
    weight: float = param(0.25, ge=0.0, doc="in units of the query's score spread; 0 disables the stage")
    tokenizer: str = param("stem_en", choices=tuple(TOKENIZERS))
    k1: float = param(1.2, ge=0.0)
    b: float = param(0.75, ge=0.0, le=1.0)

    def _indexes(self, cs: CandidateSet) -> list:
        """Per query: (corpus index of each candidate column, LexicalIndex over those documents)."""
        def build():
            out = []
            for q in range(cs.Q):
                docs = cs.doc[q][cs.valid[q]]
                out.append((docs, LexicalIndex([cs.corpus.texts[int(d)] for d in docs], self.tokenizer,
                                               self.k1, self.b)))
            return out
        return cs.memo(("score.rm3.index", self.tokenizer, self.k1, self.b), build)

    def _signal(self, q: int, feedback: np.ndarray, scores: np.ndarray, cs: CandidateSet, docs: np.ndarray,
                li: LexicalIndex):
        """BM25 of the expanded query for every candidate column of query ``q`` (0 where no term matches)."""
        pd = np.exp(scores - scores.max()) if self.doc_weights == "softmax" else np.ones(len(feedback))
        pd = pd / pd.sum()
        model: Counter = Counter()
        for d, p_d in zip(feedback.tolist(), pd.tolist()):
            tf = _term_counts(cs.corpus, self.tokenizer, int(d))
            n = sum(tf.values())
            for t, c in tf.items():
                model[t] += p_d * c / n
        expansion = [(t, p) for t, p in model.most_common(self.terms) if t in li.vocab]
        total = sum(p for _, p in expansion)
        qtf = Counter(t for t in li.query_tokens(cs.queries[q].text) if t in li.vocab)
        qn = sum(qtf.values())
        w: Counter = Counter({t: self.lam * c / qn for t, c in qtf.items()})
        for t, p in expansion:
            w[t] += (1.0 - self.lam) * p / total
        r = np.zeros(len(docs))
        for t, x in w.items():
            r += x * li.token_scores([li.vocab[t]])
        return r

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.weight == 0 or st.col.shape[1] == 0:
            return st
        indexes = self._indexes(cs)
        valid = st.valid
        out = np.full(st.col.shape, np.nan)
        k = min(self.k, st.col.shape[1])
        for q in range(cs.Q):
            docs, li = indexes[q]
            rows = st.col[q][valid[q]]
            if rows.size == 0 or li.n == 0:
                continue
            r = self._signal(q, cs.doc[q, rows[:k]], st.score[q][valid[q]][:k], cs, docs, li)
            by_doc = dict(zip(docs.tolist(), r.tolist()))
            out[q, valid[q]] = [by_doc[int(d)] for d in cs.doc[q, rows]]
        ok = valid & np.isfinite(out)
        return _add_standardised(st, np.where(ok, out, np.nan), ok, self.weight, "rm3")


__all__ = ["DocCosine", "Feedback", "Neighbours", "RM3", "neighbour_table", "unit_vectors"]
