"""Shared ranking helpers of the stages: arm lookup, effective ranks, file ids, tie orders, stable multi-key sorts,
building a state from per-query lists and carrying skip flags / trace / info over (:func:`carry`), and
:func:`doc_flags` (a per-document derived value computed lazily for the documents of a candidate set only).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from retrievers.candidates.table import (
    ArmHits,
    CandidateSet,
    State,
    desc_perm,
    flat_index,
    take_rows,
)
from retrievers.kernels.registry import jit_kernel, kernel_example


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


def carry(out: State, st: State, sort: bool = False) -> State:
    """``out`` with ``st``'s skip flags, trace and info (the stage's input); sorted by score when ``sort``."""
    out.skipped, out.trace, out.info = st.skipped, st.trace, st.info
    return out.sort() if sort else out


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
    current order: :func:`retrievers.candidates.table.desc_perm`); identity for queries where ``active`` is False."""
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


@kernel_example(lambda: (np.array([[True, True, False]]), np.array([[0.5, 0.5, 0.0]]), np.zeros((1, 3)),
                         np.array([[1, 0, 2]], dtype=np.int64), 3))
def order_present(present, key, key2, rank, keep):  # pragma: no cover - jitted
    """Per row, the ``present`` columns by ``key`` desc, then ``key2`` desc, then ``rank`` asc (a tie order,
    distinct within a row, so the order is total and any correct sort gives the same columns), at most ``keep``:
    ``(col, ok)`` with ``col`` (Q, n), n = the most present columns of any row (at most ``keep``), padded with
    −1. ``ok`` False (``col`` meaningless) when a present ``key`` or ``key2`` is not finite: callers then take
    their general sort, which places NaN and infinities.

    Each present column is inserted into the sorted prefix (its ``key`` kept beside it in a contiguous buffer):
    rows hold a few dozen columns, where this beats per-row argsorts and their allocations (LongMemEval-S's
    468 × 38 Phase-3 rows: about half the time of the argsort + tie-run pass it replaced; a merge sort was
    slower)."""
    Q, C = present.shape
    n = 0
    for q in range(Q):
        m = 0
        for c in range(C):
            if present[q, c]:
                m += 1
        n = max(n, m)
    n = min(n, keep)
    col = np.full((Q, n), -1, dtype=np.int64)
    srt = np.empty(C, dtype=np.int64)
    xs = np.empty(C)  # key of srt[i]
    for q in range(Q):
        m = 0
        for c in range(C):
            if not present[q, c]:
                continue
            x, b, r = key[q, c], key2[q, c], rank[q, c]
            if not (np.isfinite(x) and np.isfinite(b)):
                return col, False
            t = m
            while t > 0:
                y, d = xs[t - 1], srt[t - 1]
                if x > y or (x == y and (b > key2[q, d] or (b == key2[q, d] and r < rank[q, d]))):
                    srt[t], xs[t] = d, y
                    t -= 1
                else:
                    break
            srt[t], xs[t] = c, x
            m += 1
        for i in range(min(m, n)):
            col[q, i] = srt[i]
    return col, True


def rows_by_keys(present: np.ndarray, key: np.ndarray, key2: np.ndarray | None, rank: np.ndarray,
                 keep: int | None = None) -> np.ndarray | None:
    """:func:`order_present` (compiled): the ``present`` columns of every row by ``key`` desc, ``key2`` desc
    (None: ``key`` alone), then ``rank`` asc, at most ``keep``, as (Q, n) columns padded with −1 — or None when a
    present key is not finite (the caller's general sort then places it)."""
    keep = present.shape[1] if keep is None else int(keep)
    col, ok = jit_kernel(order_present)(present, key, key if key2 is None else key2, rank, keep)
    return col if ok else None


@kernel_example(lambda: (np.array([[1, 0, -1]], dtype=np.int64), np.array([[0.5, 0.25, 0.0]]), np.nan))
def gather_cols(col, a, fill):  # pragma: no cover - jitted
    """``a[q, col[q, i]]`` for every (q, i), ``fill`` where ``col`` is −1: one pass, no index arrays (numpy's
    take + where costs several times more on a sweep's (500 × 50) rows)."""
    Q, n = col.shape
    out = np.empty((Q, n), dtype=a.dtype)
    for q in range(Q):
        for i in range(n):
            c = col[q, i]
            out[q, i] = a[q, c] if c >= 0 else fill
    return out


def take_cols(col: np.ndarray, values: list[tuple[np.ndarray, float]]) -> list[np.ndarray]:
    """Each float ``(array (Q, C), fill)`` of ``values`` read at the columns ``col`` (Q, n) (``fill`` where
    ``col`` is −1): the rows of a new State (:func:`gather_cols`, compiled)."""
    return [jit_kernel(gather_cols)(col, a, float(fill)) for a, fill in values]


def doc_flags(cs, key, fn: Callable[[int], object], dtype=bool, fill=False) -> np.ndarray:
    """``fn(doc_index)`` for every document of the candidate set, as a (Q, C) array (``fill`` on padding).

    Values are cached per corpus (``corpus.cached``) for the documents computed so far and the (Q, C) gather is
    memoised on the candidate set, so only documents that ever appear as candidates are processed.
    """
    def build():
        store: dict = cs.corpus.cached(("doc_flags", key), dict)
        docs = np.unique(cs.doc[cs.valid])
        for d in docs.tolist():
            if d not in store:
                store[d] = fn(d)
        full = np.full(cs.corpus.n, fill, dtype=dtype)
        if len(docs):
            full[docs] = np.array([store[d] for d in docs.tolist()], dtype=dtype)
        out = full[np.where(cs.valid, cs.doc, 0)]
        return np.where(cs.valid, out, fill)
    return cs.memo(("doc_flags", key), build)


# ---- OpenClaw extractKeywords (2026.2.26) -------------------------------------------------------------------


__all__ = ["resolve_arm", "resolve_arm_name", "effective_rank", "rank_order", "arm_effective_rank", "stable_desc_perm",
           "tie_perm", "sort_desc_by", "file_ids", "carry", "state_from_lists", "doc_flags"]
