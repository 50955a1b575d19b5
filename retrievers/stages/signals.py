"""Shared ranking helpers of the multi-signal stages (arm lookup, effective ranks, file ids, tie orders, stable
multi-key sorts) and the seed-003 recall + hybrid stage. The HookClaw stages live in
:mod:`retrievers.stages.hookclaw`, the Phase-3 policy in :mod:`retrievers.stages.phase3`.

* ``fuse.two_stage`` — the seed-003 recall + hybrid stage (§6 steps 1–3); the reranker is ``rerank.yes_no``.
"""
from __future__ import annotations

import numpy as np

from retrievers.candidates import (
    ArmHits,
    CandidateSet,
    State,
    desc_perm,
    flat_index,
    take_rows,
)
from retrievers.stages.base import Context, Stage, param, register


def resolve_arm_name(cs: CandidateSet, name: str) -> str | None:
    """The key of the arm called ``name`` (or of its only variant ``name#0``); None when there is neither."""
    if name in cs.arms:
        return name
    return f"{name}#0" if f"{name}#0" in cs.arms else None


def resolve_arm(cs: CandidateSet, name: str) -> ArmHits | None:
    """The arm called ``name`` (or its only variant ``name#0``); None when the candidate set has neither (e.g.
    a query transform produced no variant: HookClaw's FTS query with no tokens)."""
    key = resolve_arm_name(cs, name)
    return None if key is None else cs.arms[key]


def effective_rank(rank: np.ndarray, keep: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Ranks (1-based, 0 = absent) recomputed among the rows where ``keep`` holds (Q, C): what a search that
    excluded the other rows up front would have returned. Rows are counted in rank order, equal ranks by
    column. ``order``: the rows already sorted that way (:func:`rank_order`; the result is the same)."""
    present = (rank > 0) & keep
    if order is None:
        order = rank_order(rank)
    pres_sorted = take_rows(present, order)
    r_sorted = np.cumsum(pres_sorted, axis=1)
    out = np.zeros_like(rank)
    np.put_along_axis(out, order, np.where(pres_sorted, r_sorted, 0), axis=1)
    return out


def rank_order(rank: np.ndarray) -> np.ndarray:
    """(Q, C) columns sorted by rank (absent rows last), equal ranks by column: a stable argsort."""
    return np.argsort(np.where(rank > 0, rank, np.iinfo(np.int32).max), axis=1, kind="stable")


def arm_effective_rank(cs: CandidateSet, arm: str, keep_key, keep_fn) -> np.ndarray:
    """:func:`effective_rank` of arm ``arm`` (an arm key) among the rows where ``keep_fn()`` holds, memoised on the
    candidate set under ``keep_key`` (the arm's rank order once per arm; a bounded number of keep masks, so a
    sweep over a threshold stays bounded)."""
    def build():
        rank = cs.arms[arm].rank
        order = cs.memo(("signals.rank_order", arm), lambda: rank_order(rank))
        return effective_rank(rank, keep_fn(), order)
    return cs.memo_lru("signals.effective_rank", (arm, keep_key), build, size=32)


def _rank_of(values: list) -> np.ndarray:
    """Rank of every element in sorted order (ties share the order of first appearance)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    r = np.empty(len(values), dtype=np.int64)
    r[order] = np.arange(len(values))
    return r


def path_rank(cs: CandidateSet) -> np.ndarray:
    """(Q, C) rank of each candidate's path among all corpus paths (ascending string order)."""
    full = cs.corpus.cached(("signals.path_rank",), lambda: _rank_of(cs.corpus.paths))
    return cs.memo(("signals.path_rank",), lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], 0))


def id_rank(cs: CandidateSet) -> np.ndarray:
    """(Q, C) rank of each candidate's document id (ascending string order)."""
    full = cs.corpus.cached(("signals.id_rank",), lambda: _rank_of(cs.corpus.ids))
    return cs.memo(("signals.id_rank",), lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], 0))


def file_ids(cs: CandidateSet, empty_is_own: bool = True) -> np.ndarray:
    """(Q, C) integer id of each candidate's file (path). Documents without a path get their own id when
    ``empty_is_own`` (else they all share one "" file, as a JS ``Map`` keyed by path would)."""
    def build():
        corpus = cs.corpus
        codes: dict = {}
        arr = np.empty(corpus.n, dtype=np.int64)
        for d, p in enumerate(corpus.paths):
            k = p if (p or not empty_is_own) else ("\0id", d)
            arr[d] = codes.setdefault(k, len(codes))
        return arr
    full = cs.corpus.cached(("signals.file_ids", empty_is_own), build)
    return cs.memo(("signals.file_ids", empty_is_own),
                   lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], -1))


def carry(out: State, st: State) -> State:
    out.skipped, out.trace, out.info = st.skipped, st.trace, st.info
    return out


def state_from_lists(cs: CandidateSet, cols: list[list[int]], scores: list[list[float]],
                      extra: dict[str, list[list[float]]] | None = None) -> State:
    K = max((len(c) for c in cols), default=0)
    col = np.full((cs.Q, K), -1, dtype=np.int64)
    sc = np.full((cs.Q, K), -np.inf)
    ex = {k: np.full((cs.Q, K), np.nan) for k in (extra or {})}
    for q, (c, s) in enumerate(zip(cols, scores)):
        col[q, :len(c)] = c
        sc[q, :len(s)] = s
        for k, v in (extra or {}).items():
            ex[k][q, :len(v[q])] = v[q]
    return State(col, sc, np.zeros(cs.Q, dtype=bool), ex)


def stable_desc_perm(score: np.ndarray, valid: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Permutation (Q, K) of a stable sort by score descending (NaN as −inf, empty slots last, ties in the
    current order: :func:`retrievers.candidates.desc_perm`); identity for queries where ``active`` is False."""
    perm = desc_perm(score, valid)
    if active is not None:
        perm = np.where(active[:, None], perm, np.arange(score.shape[1])[None, :])
    return perm


def tie_perm(cs: CandidateSet, key: tuple, keys_fn) -> tuple[np.ndarray, np.ndarray]:
    """Memoised per-row tie order of a candidate set: ``perm`` = ``np.lexsort(keys_fn(), axis=1)`` (last key
    primary, equal keys by column) and ``rank`` its inverse (the position of each column in that order)."""
    def build():
        perm = np.lexsort(keys_fn(), axis=1) if cs.C else np.zeros((cs.Q, 0), dtype=np.int64)
        rank = np.empty_like(perm)
        np.put_along_axis(rank, perm, np.broadcast_to(np.arange(cs.C), perm.shape), axis=1)
        return perm, rank
    return cs.memo(("signals.tie_perm",) + key, build)


def sort_desc_by(keys: list[np.ndarray], present: np.ndarray, tie: np.ndarray) -> np.ndarray | None:
    """Per-row order of the ``present`` columns by ``keys`` descending (first key primary), remaining ties in
    the ``tie`` permutation's order; the other columns after them in no particular order. None when a present
    row holds a non-finite key (callers then use their general sort).

    Fast path: one unstable argsort of the primary key — exact wherever a row's present keys are distinct; only
    rows where two present columns share a primary key are sorted again, stably in ``tie`` order, one key at a
    time (least significant first)."""
    negs = []
    for k in keys:
        if not np.isfinite(k).all() and not np.isfinite(k[present]).all():
            return None
        negs.append(np.where(present, -k, np.inf))
    perm = np.argsort(negs[0], axis=1)
    sp = np.take(negs[0], flat_index(perm, perm.shape[1]))
    rows = np.flatnonzero(((sp[:, 1:] == sp[:, :-1]) & (sp[:, 1:] < np.inf)).any(axis=1))
    if rows.size:
        sub = tie[rows]
        for neg in reversed(negs):
            sub = take_rows(sub, np.argsort(take_rows(neg[rows], sub), axis=1, kind="stable"))
        perm[rows] = sub
    return perm


@register
class TwoStageRecall(Stage):
    """Seed-003 stage 1 + hybrid (PIPELINES.md §6 steps 1–3, [B1]–[B5], [B8]); the reranker is ``rerank.yes_no``.

    1. Vector recall: the ``vec_depth`` (100) highest-cosine rows of ``vec_arm`` with ``cos >= min_cos`` (0.5).
    2. BM25 (k1 1.2, b 0.75 [B1] — the lexical arm's own scorer): the ``lex_depth`` (100) best rows of ``lex_arm``
       with a positive score [B2]; candidates = recall ∪ BM25 top. BM25-only candidates keep their true cosine
       even below 0.5 [B3]: the vector arm's score if it returned them, else ``cs.qd_cosine()`` when embeddings
       exist, else 0 [B8].
    3. ``bm25n = bm25 / max(bm25 over candidates)`` (0 if no match or max 0) [B4], where ``bm25`` is the lexical
       arm's raw score of the candidate (0 if the arm did not return it); ``hybrid = vec_weight·cos +
       lex_weight·bm25n`` (0.7/0.3); sort desc, ties → document id asc [B5]; keep ``keep`` (100).
    Extra columns ``cos``, ``bm25n``. Example D2-1: hybrid x2 0.765, x4 0.636, x1 0.574, x3 0.445, x5 0.42.
    """

    name = "fuse.two_stage"
    kind = "fusion"
    vec_arm: str = param("vec")
    lex_arm: str = param("bm25")
    vec_depth: int = param(100, ge=0)
    min_cos: float = param(0.5)
    lex_depth: int = param(100, ge=0)
    vec_weight: float = param(0.7)
    lex_weight: float = param(0.3)
    keep: int = param(100, ge=0)

    def _cosines(self, cs: CandidateSet, vkey: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(NaN mask of the vector arm's cosine, cosine with NaN → 0, the same with missing cosines taken from
        ``cs.qd_cosine()`` first when embeddings exist [B3]/[B8]); memoised per vector arm."""
        def build():
            vec = cs.arms[vkey] if vkey is not None else None
            cos = np.where(vec.rank > 0, vec.score, np.nan) if vec is not None else np.full((cs.Q, cs.C), np.nan)
            try:
                filled = np.where(np.isnan(cos), cs.qd_cosine(), cos)
            except RuntimeError:
                filled = cos
            return np.isnan(cos), np.nan_to_num(cos, nan=0.0), np.nan_to_num(filled, nan=0.0)
        return cs.memo(("two_stage.cos", vkey), build)

    def _lexical(self, cs: CandidateSet, lkey: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(rank among the lexical arm's positive-score rows [B2], raw score (0 when absent)); memoised."""
        def build():
            if lkey is None:
                return np.zeros((cs.Q, cs.C), dtype=np.int32), np.zeros((cs.Q, cs.C))
            lex = cs.arms[lkey]
            lr = arm_effective_rank(cs, lkey, ("two_stage.positive",),
                                    lambda: np.nan_to_num(lex.score, nan=0.0) > 0)
            return lr, np.where(lex.rank > 0, np.nan_to_num(lex.score, nan=0.0), 0.0)
        return cs.memo(("two_stage.lex", lkey), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, C = cs.Q, cs.C
        vkey, lkey = resolve_arm_name(cs, self.vec_arm), resolve_arm_name(cs, self.lex_arm)
        if vkey is not None:
            vec = cs.arms[vkey]
            vr = arm_effective_rank(cs, vkey, ("two_stage.min_cos", float(self.min_cos)),
                                    lambda: np.nan_to_num(vec.score, nan=-np.inf) >= self.min_cos)
            recall = (vr > 0) & (vr <= self.vec_depth)
        else:
            recall = np.zeros((Q, C), dtype=bool)
        lr, raw = self._lexical(cs, lkey)
        lex_top = (lr > 0) & (lr <= self.lex_depth)
        cand = (recall | lex_top) & cs.valid
        missing, cos, filled = self._cosines(cs, vkey)
        if (cand & missing).any():  # a candidate without the arm's cosine: use the true cosine for all
            cos = filled
        bm = np.where(cand, raw, 0.0)
        mx = bm.max(axis=1, keepdims=True) if C else np.zeros((Q, 1))
        bm25n = np.where(mx > 0, bm / np.where(mx > 0, mx, 1.0), 0.0)
        hybrid = self.vec_weight * cos + self.lex_weight * bm25n
        # [B5] hybrid desc, then document id asc (then column)
        order = sort_desc_by([hybrid], cand, tie_perm(cs, ("id",), lambda: (id_rank(cs),))[0])
        if order is None:  # non-finite weights: one general lexsort, NaN after every number
            qq = np.repeat(np.arange(Q), C)
            order = np.lexsort((id_rank(cs).ravel(), -np.where(cand, hybrid, -np.inf).ravel(), ~cand.ravel(), qq))
            order = (order.reshape(Q, C) - (np.arange(Q) * C)[:, None]).astype(np.int64)
        n = min(int(cand.sum(axis=1).max()) if cand.size else 0, self.keep)
        order = order[:, :n]
        flat = flat_index(order, C)
        ok = np.take(cand, flat)
        take = lambda a, fill: np.where(ok, np.take(a, flat), fill)  # noqa: E731
        out = State(np.where(ok, order, -1).astype(np.int64), take(hybrid, -np.inf), st.skipped,
                    {"cos": take(cos, np.nan), "bm25n": take(bm25n, np.nan)}, st.info, st.trace)
        return out


__all__ = ["resolve_arm", "resolve_arm_name", "effective_rank", "rank_order", "arm_effective_rank", "stable_desc_perm",
           "tie_perm", "sort_desc_by", "file_ids", "TwoStageRecall"]
