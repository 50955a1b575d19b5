"""The ``score.*`` stages: they rescore the incoming rows.

* ``score.recency_boost`` — lancedb-pro's additive recency boost;
* ``score.importance``, ``score.length_norm`` — lancedb-pro's score multipliers;
* ``score.hookclaw_fts_boost`` — HookClaw v2.1 path-level FTS boost (§C.3);
* ``score.utility`` — HookClaw's utility tracker as a signal (:mod:`retrievers.stages.helpers.feedback`);
* ``score.neighbours`` — neighbour context: a document also scores by the documents beside it (no seed system);
* ``score.doc_cosine`` — the cosine to the document's own vector as an added signal (no seed system);
* ``score.feedback`` — pseudo-relevance feedback: resemblance to the list's own top documents (no seed system);
* ``score.rm3`` — pseudo-relevance feedback on the lexical side: RM3 query expansion, a second BM25 pass (no seed
  system).
"""
from __future__ import annotations

import numpy as np

from collections import Counter

from retrievers.candidates.table import CandidateSet, State, take_rows
from retrievers.index.lexical import TOKENIZERS, LexicalIndex
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.ages import decay_curve, lancedb_age_days, rescore
from retrievers.stages.helpers.feedback import learn_utility
from retrievers.stages.helpers.normalize import clamp01, row_standardise, score_spread
from retrievers.stages.helpers.signals import file_ids, resolve_arm, stable_desc_perm
from retrievers.text import utf16_truncate


@register
class RecencyBoost(Stage):
    """lancedb-pro recency boost: ``score ← clamp01(score + weight·exp(−age/half_life))`` (age in days).

    Timestamp = ``corpus.timestamp``; missing / 0 / negative ⇒ "now" (full boost); a future timestamp (negative
    age) gives a boost > weight, as shipped (PIPELINES.md §B.4 step 6: "Future timestamps give boost > 0.1
    (clamped to 1 overall)"); such rows are counted (:func:`record_ages`). ``half_life_days = 0`` or
    ``weight = 0`` → stage skipped. Non-finite result → the old score.
    ``curve = "exp"`` is the code as shipped (an *e-folding* time: 14 d → +0.0368, not +0.05);
    ``"half_life"`` uses ``2^(−age/half_life)`` (what the name and the docs promise: 14 d → +0.05).
    Defaults half_life 14, weight 0.10 (lancedb-pro @6a50220 step 6). Then a stable sort unless ``sort = false``.
    """

    name = "score.recency_boost"
    kind = "score"
    half_life_days: float = param(14.0, doc="raw, as the original reads it: <= 0 disables the stage")
    weight: float = param(0.10, doc="raw: 0 disables the stage (a negative weight lowers recent rows, as shipped)")
    curve: str = param("exp", choices=("exp", "half_life"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_days <= 0 or self.weight == 0:
            return st
        active = np.isfinite(cs.as_of)
        age = lancedb_age_days(st, cs, ctx, active)
        boost = decay_curve(age, self.half_life_days, self.curve) * self.weight
        new = clamp01(st.score + boost, st.score)
        return rescore(st, new, active, self.sort)


_LEARNED: dict = {}


def _learned(events: list, corpus, key: str) -> dict[str, float]:
    """:func:`learn_utility` once per (log events, corpus, key) object triple: latency runs build a candidate set
    per query over the same corpus. The objects are kept with the value, so an id is never reused while cached."""
    ck = (id(events), id(corpus), key)
    hit = _LEARNED.get(ck)
    if hit is None or hit[0] is not events or hit[1] is not corpus:
        if len(_LEARNED) >= 8:
            _LEARNED.pop(next(iter(_LEARNED)))
        hit = _LEARNED[ck] = (events, corpus, learn_utility(events, corpus, key))
    return hit[2]


@register
class UtilityScore(Stage):
    """Feed HookClaw utility scores (§C.4) into the ranking (seed 004 §4.1: "Factor utility_score into RRF").

    Utilities come from ``ctx.options["utility"]`` (``{key: utility}``, e.g. :func:`learn_utility` on a training
    log) or, when ``log`` is set, are learned from that query-log file (JSONL, DESIGN.md §4) against the
    candidate corpus; unknown documents get the neutral 0.5. ``key``: ``"id"`` or ``"path"`` (HookClaw's key).

    * ``mode = "rrf"`` (default): the 5th RRF signal — rows ranked by utility desc (stable: ties keep the
      current order), ``score += weight/(k + rank)`` (weight 0.1, k 60; for lists already scored by RRF).
    * ``mode = "multiply"``: ``score ×= 1 + weight·(2u − 1)`` (neutral at u = 0.5; range [1 − w, 1 + w]).

    Then a stable sort by score desc. Extra column ``utility``.
    """

    name = "score.utility"
    kind = "score"
    mode: str = param("rrf", choices=("rrf", "multiply"))
    weight: float = param(0.1, ge=0.0)
    k: float = param(60.0, ge=0.0)
    key: str = param("id", choices=("id", "path"))
    log: str = param("", doc="query-log JSONL to learn from ('' = ctx.options['utility'])")
    query_log_param = "log"

    def _utilities(self, cs: CandidateSet, ctx: Context) -> dict[str, float]:
        opts = (ctx.options or {}) if ctx is not None else {}
        if self.log:
            events = opts.get("query_logs", {}).get(self.log)
            if events is None:
                raise ConfigError(f"stage {self.name!r}: query log {self.log!r} was not loaded (the harness loads "
                                  f"the logs a pipeline names; a library caller passes "
                                  f"ctx.options['query_logs'] = {{path: events}})")
            return _learned(events, cs.corpus, self.key)
        u = opts.get("utility")
        if u is None:
            raise ConfigError(f"stage {self.name!r} needs ctx.options['utility'] ({{key: utility}}) or a 'log' file")
        return u

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        util = self._utilities(cs, ctx)
        corpus = cs.corpus
        keys = corpus.ids if self.key == "id" else [p or utf16_truncate(t, 100)
                                                   for p, t in zip(corpus.paths, corpus.raw_texts)]
        sig = hash(frozenset(util.items()))
        per_col = cs.memo(("score.utility", self.key, sig), lambda: np.where(
            cs.valid, np.array([util.get(keys[d], 0.5) if d >= 0 else np.nan for d in cs.doc.ravel()],
                               dtype=np.float64).reshape(cs.doc.shape), np.nan))
        u = st.gather(per_col)
        valid = st.valid
        if self.mode == "rrf":
            key = np.where(valid, u, -np.inf)
            order = np.argsort(-key, axis=1, kind="stable")
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, np.arange(1, order.shape[1] + 1)[None, :].repeat(order.shape[0], 0),
                              axis=1)
            new = st.score + self.weight / (self.k + rank)
        else:
            new = st.score * (1.0 + self.weight * (2.0 * u - 1.0))
        out = State(st.col, np.where(valid, new, -np.inf), st.skipped, dict(st.extra, utility=u), st.info, st.trace)
        return out.sort()


@register
class HookClawFTSBoost(Stage):
    """HookClaw v2.1 FTS path boost (§C.3; ``hook-handler.js`` + ``fts-search.js`` at 4cc4583).

    FTS rows = the lexical ``arm`` (query transform ``hookclaw_fts``: OR of the non-stop-word tokens) in rank
    order, first ``fetch`` (SQL ``LIMIT 2·(2·maxResults)`` = 12); ``fts = rel/(rel + rel_k)`` with ``rel`` = the raw
    BM25 score (= −FTS5 rank; non-finite or ≤ 0 → 0), rel_k 2 (−0.5 → 0.2, −2 → 0.5, −6 → 0.75); stable sort
    desc, keep ``keep`` (2·maxResults = 6). Per path the max fts. Every incoming row whose *path* has an fts
    score gets ``score = min(1, score + weight·fts)`` (weight = ``ftsBoostWeight`` 0.3; all chunks of a
    matching file are boosted); FTS-only hits are not added; rows are re-sorted (stable) only for queries where
    something was boosted. The FTS search only runs when the incoming list is non-empty (automatic here).
    ``key = "path"`` is as shipped (documents without a path all share the key ""); ``"path_or_id"`` keys a
    path-less document by its id. Ties: stable (the incoming order). Extra column ``fts``. Example C3: A 0.52 → 0.72, B 0.51 → 0.71, X 0.55.
    """

    name = "score.hookclaw_fts_boost"
    kind = "score"
    arm: str = param("fts")
    fetch: int = param(12, ge=0)
    keep: int = param(6, ge=0)
    weight: float = param(0.3, ge=0.0)
    rel_k: float = param(2.0, gt=0.0)
    key: str = param("path", choices=("path", "path_or_id"))

    def fts_by_col(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) fts score of the kept FTS rows (NaN elsewhere)."""
        def build():
            hits = resolve_arm(cs, self.arm)
            out = np.full((cs.Q, cs.C), np.nan)
            if hits is None:
                return out
            present = hits.present(self.fetch) if self.fetch else np.zeros((cs.Q, cs.C), bool)
            rel = np.where(np.isfinite(hits.score), hits.score, 0.0)
            rel = np.where(rel > 0, rel, 0.0)
            fts = rel / (rel + self.rel_k)
            # stable sort desc within the fetched rows (rank order breaks ties), keep the first `keep`
            order_key = np.where(present, hits.rank, np.iinfo(np.int32).max)
            by_rank = np.argsort(order_key, axis=1, kind="stable")
            f_sorted = take_rows(np.where(present, fts, -np.inf), by_rank)
            perm = np.argsort(-f_sorted, axis=1, kind="stable")
            cols = take_rows(by_rank, perm)[:, : self.keep]
            ok = take_rows(present, cols)
            qi = np.repeat(np.arange(cs.Q)[:, None], cols.shape[1], axis=1)
            out[qi[ok], cols[ok]] = fts[qi[ok], cols[ok]]
            return out
        return cs.memo(("score.hookclaw_fts_boost", self.arm, self.fetch, self.keep, self.rel_k), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        fts = self.fts_by_col(cs)
        files = file_ids(cs, empty_is_own=self.key == "path_or_id")
        row_files = st.gather(files, fill=-1)
        same = (row_files[:, :, None] == files[:, None, :]) & ~np.isnan(fts)[:, None, :] & st.valid[:, :, None]
        best = np.where(same, fts[:, None, :], -np.inf).max(axis=2) if cs.C else np.full(st.col.shape, -np.inf)
        hit = np.isfinite(best)
        new = np.where(hit, np.minimum(1.0, st.score + self.weight * np.where(hit, best, 0.0)), st.score)
        out = State(st.col, np.where(st.valid, new, -np.inf), st.skipped,
                    dict(st.extra, fts=np.where(hit, best, np.nan)), st.info, st.trace)
        return out.permute(stable_desc_perm(out.score, out.valid, hit.any(axis=1)))


def _finish(st: State, new: np.ndarray, sort: bool) -> State:
    out = st.with_score(new)
    return out.sort() if sort else out


@register
class Importance(Stage):
    """Importance weight: ``score ← clamp01(score·(base + weight·imp))``, ``imp = importance`` or
    ``default`` when missing (0 is kept). Non-finite result → ``base·score`` (lancedb-pro's fallback).

    Defaults base 0.7, weight 0.3, default 0.7 (lancedb-pro @6a50220 step 7: ×(0.7 + 0.3·imp)). Then a stable sort by
    score (ties keep the previous order) unless ``sort = false``.
    """

    name = "score.importance"
    kind = "score"
    base: float = param(0.7, ge=0.0, doc="factor at importance 0")
    weight: float = param(0.3, ge=0.0, doc="added factor per unit of importance")
    default: float = param(0.7, ge=0.0, le=1.0, doc="importance of an entry without one")
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        imp = st.gather(cs.doc_feature("importance"))
        imp = np.where(np.isnan(imp), self.default, imp)
        s = st.score
        with np.errstate(all="ignore"):
            new = clamp01(s * (self.base + self.weight * imp), self.base * s)
        return _finish(st, new, self.sort)


@register
class LengthNorm(Stage):
    """Length normalisation: ``score ← clamp01(score / (1 + strength·log2(max(len/anchor, 1))))``.

    ``len`` = text length in UTF-16 code units (``corpus.length``); entries shorter than the anchor are not
    boosted. ``anchor = 0`` → stage skipped (no sort either). Non-finite result → ``0.3·score``.
    Defaults anchor 500, strength 0.5 (lancedb-pro @6a50220 step 8: 500 → 1, 1000 → 0.666667, 2000 → 0.5).
    Then a stable sort by score unless ``sort = false``.
    """

    name = "score.length_norm"
    kind = "score"
    anchor: float = param(500.0, doc="characters (UTF-16 units); raw, <= 0 disables the stage")
    strength: float = param(0.5, ge=0.0)
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.anchor <= 0:
            return st
        ln = st.gather(cs.doc_feature("length"))
        with np.errstate(all="ignore"):
            f = 1.0 / (1.0 + self.strength * np.log2(np.maximum(ln / self.anchor, 1.0)))
            new = clamp01(st.score * f, 0.3 * st.score)
        return _finish(st, new, self.sort)


def neighbour_table(corpus, window: int) -> np.ndarray:
    """(n, 2·window) corpus index of each document's neighbours: the documents that share its path, ``window``
    before then ``window`` after it in corpus order (nearest first); -1 where there is none (start or end of
    the path, or no path: a document without a path has no neighbours)."""
    def build():
        out = np.full((corpus.n, 2 * window), -1, dtype=np.int64)
        by_path: dict[str, list[int]] = {}
        for d, p in enumerate(corpus.paths):
            if p:
                by_path.setdefault(p, []).append(d)
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
        (:mod:`retrievers.index.visibility`; a neighbour written after the query's ``as_of`` was not in the memory yet)
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
            later = cs.corpus.created[np.where(nb >= 0, nb, 0)] > cs.as_of[:, None, None]  # NaN compares False
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


__all__ = ["DocCosine", "Feedback", "HookClawFTSBoost", "Importance", "LengthNorm", "Neighbours", "RM3",
           "RecencyBoost", "UtilityScore", "neighbour_table", "unit_vectors"]
