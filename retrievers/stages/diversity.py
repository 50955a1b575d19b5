"""Diversity stages: reorder (or shorten) a ranked list so near-duplicates do not crowd the top. Scores are
never changed, so after these stages a list is not necessarily sorted by score.

Greedy algorithms (MMR, cosine deferral) are small per-query loops compiled with numba (``cache=True``; plain
Python when numba is missing), reading pairwise similarities straight from the memoised slabs of :mod:`retrievers.stages.helpers.similarity`
(snippet-token Jaccard, pairwise / query cosines: built once per candidate set, the per-document parts once per root
set, so every view of a sweep shares them).

Stages: ``diversity.openclaw_mmr`` (OpenClaw §A.7), ``diversity.hookclaw_mmr`` (HookClaw §C.1 step 7),
``diversity.cosine_defer`` (lancedb-pro ``applyMMRDiversity``), ``diversity.mmr`` (classic embedding MMR).
"""
from __future__ import annotations

import numpy as np

from retrievers.candidates.table import CandidateSet, State, take_rows
from retrievers.kernels.registry import jit_kernel, kernel_example
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.helpers.normalize import minmax
from retrievers.stages.helpers.similarity import cosine_slabs, jaccard_slabs, query_cosine


# ---- greedy kernels (numba when available, else the same loops in Python) --------------------------------------

def _example_pairs() -> tuple:
    """(valid, idx, M, mq) of one query with two rows: example arguments for :func:`warm_kernels`."""
    return np.ones((1, 2), dtype=np.bool_), np.zeros((1, 2), dtype=np.int64), np.zeros((1, 2, 2)), \
        np.zeros(1, dtype=np.int64)


def _example_greedy() -> tuple:
    valid, idx, M, mq = _example_pairs()
    return valid, np.zeros((1, 2)), np.zeros((1, 2)), idx, M, mq, 0.5, True, False, 2


@kernel_example(_example_greedy)
def greedy_loop(valid, rel, raw, idx, M, mq, lam, raw_tiebreak, first_fixed, steps):  # pragma: no cover - jitted
    """Pick step of every row (-1 = not picked); see :func:`greedy_select`."""
    Q, K = valid.shape
    order = np.full((Q, K), -1, dtype=np.int64)
    maxsim = np.empty(K)
    picked = np.zeros(K, dtype=np.bool_)
    for q in range(Q):
        for i in range(K):
            picked[i] = False
            maxsim[i] = -np.inf
        s = mq[q]
        for step in range(steps):
            best = -1
            best_m = 0.0
            best_r = 0.0
            if step == 0 and first_fixed:
                for i in range(K):
                    if valid[q, i]:
                        best = i
                        break
            else:
                for i in range(K):
                    if not valid[q, i] or picked[i]:
                        continue
                    pen = maxsim[i]
                    if pen == -np.inf:
                        pen = 0.0
                    r = rel[q, i]
                    if r != r:
                        r = -np.inf
                    m = lam * r - (1.0 - lam) * pen
                    if m != m:
                        m = -np.inf
                    w = raw[q, i]
                    if w != w:
                        w = -np.inf
                    if best < 0 or m > best_m or (raw_tiebreak and m == best_m and w > best_r):
                        best, best_m, best_r = i, m, w
            if best < 0:
                break
            picked[best] = True
            order[q, best] = step
            row = idx[q, best]
            for j in range(K):
                if valid[q, j] and not picked[j]:
                    v = M[s, row, idx[q, j]]
                    if v != v:
                        v = 0.0
                    if v > maxsim[j]:
                        maxsim[j] = v
    return order


@kernel_example(lambda: _example_pairs() + (0.5,))
def defer_loop(valid, idx, M, mq, threshold):  # pragma: no cover - jitted
    """Position of every kept row (-1 = deferred or empty); see :class:`CosineDefer`."""
    Q, K = valid.shape
    order = np.full((Q, K), -1, dtype=np.int64)
    for q in range(Q):
        s = mq[q]
        for i in range(K):
            ok = valid[q, i]
            if ok and i > 0:
                for j in range(i):
                    if order[q, j] >= 0 and M[s, idx[q, i], idx[q, j]] > threshold:  # NaN → not similar
                        ok = False
                        break
            if ok:
                order[q, i] = i
    return order


def picks_first(order: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Permutation (Q, K): rows with ``order >= 0`` by that order, then the other valid rows in their order,
    then empty slots."""
    K = order.shape[1]
    pos = np.arange(K, dtype=np.int64)[None, :]
    key = np.where(order >= 0, order, np.where(valid, K + pos, 2 * K + pos))
    return np.argsort(key, axis=1, kind="stable")


def _rows(st: State, slabs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(valid, M, mq, idx per state row) for the kernels: the state's columns mapped into the slabs."""
    M, mq, idx = slabs
    col = np.where(st.valid, st.col, 0)
    return (np.ascontiguousarray(st.valid), M, mq,
            np.ascontiguousarray(take_rows(idx, col), dtype=np.int64))


def _greedy(valid, rel, raw, idx, M, mq, lam: float, *, raw_tiebreak: bool, first_fixed: bool = False,
            max_select: int | None = None) -> np.ndarray:
    K = valid.shape[1]
    steps = K if max_select is None else min(K, max_select)
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    valid = np.ascontiguousarray(valid, dtype=np.bool_)
    order = jit_kernel(greedy_loop)(valid, f64(rel), f64(raw), np.ascontiguousarray(idx, dtype=np.int64), f64(M),
                                  np.ascontiguousarray(mq, dtype=np.int64), float(lam), bool(raw_tiebreak),
                                  bool(first_fixed), int(steps))
    return picks_first(order, valid)


def greedy_select(valid: np.ndarray, rel: np.ndarray, raw: np.ndarray, sim: np.ndarray, lam: float, *,
                  raw_tiebreak: bool, first_fixed: bool = False, max_select: int | None = None) -> np.ndarray:
    """Greedy MMR over queries at once: each step picks, per query, the candidate maximising
    ``lam·rel − (1 − lam)·max_{j∈selected} sim(·, j)`` (0 while nothing is selected; NaN rel → −inf, NaN sim →
    0, a NaN objective → −inf). Ties: higher ``raw`` (if ``raw_tiebreak``; NaN → −inf), then the earliest
    position. ``first_fixed``: position 0 is picked first. At most ``max_select`` picks.
    Returns a permutation (Q, K): picks in order, then unpicked rows in their order, then empty slots.
    ``sim`` is (Q, K, K); the stages pass the memoised similarity slabs instead (no per-config gather)."""
    Q, K = valid.shape
    idx = np.broadcast_to(np.arange(K, dtype=np.int64), (Q, K))
    return _greedy(valid, rel, raw, idx, sim, np.arange(Q, dtype=np.int64), lam, raw_tiebreak=raw_tiebreak,
                   first_fixed=first_fixed, max_select=max_select)


@register
class OpenClawMMR(Stage):
    """OpenClaw MMR (§A.7), applied to the whole sorted list *before* the minScore filter; scores unchanged.

    Relevance = min-max of the score over all items (max == min → 1); similarity = Jaccard of snippet token
    sets (snippet = text cut to 700 UTF-16 units, lower-cased ASCII ``[a-z0-9_]+``; both empty → 1, one empty →
    0). Greedy: pick argmax ``λ·rel − (1 − λ)·max Jaccard(item, selected)``; ties → higher raw score → earlier
    position. The whole list is returned reordered; λ = 1 → plain stable sort by score; ≤ 1 item → unchanged.
    Defaults λ 0.7; ``enabled = false`` (OpenClaw's default) is a no-op.
    """

    name = "diversity.openclaw_mmr"
    kind = "diversity"
    enabled: bool = param(True)
    lam: float = param(0.7, ge=0.0, le=1.0, doc="λ: relevance weight (OpenClaw clamps its config to [0, 1])")
    snippet_chars: int = param(700, ge=0, doc="UTF-16 units of text used for tokens (0 = whole text)")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if not self.enabled or st.col.shape[1] <= 1:
            return st
        if self.lam == 1.0:
            return st.sort()
        raw = np.where(st.valid, st.score, np.nan)
        valid, M, mq, idx = _rows(st, jaccard_slabs(cs, self.snippet_chars))
        perm = _greedy(valid, minmax(raw), raw, idx, M, mq, self.lam, raw_tiebreak=True)
        return st.permute(perm)


@register
class HookClawMMR(Stage):
    """HookClaw MMR (§C.1 step 7) on *raw* scores: the first item is always selected, then repeatedly the
    candidate maximising ``λ·score − (1 − λ)·max Jaccard(candidate, selected)`` (tokens: lower-cased ASCII
    ``\\b\\w+\\b`` of the snippet; both empty → 1), ties → earliest; stops after ``k`` (maxResults) picks and
    returns only the picks. ≤ 1 item → as is. Defaults λ 0.7, k 3, snippet 700 (HookClaw's items are OpenClaw
    snippets). Scores unchanged.
    """

    name = "diversity.hookclaw_mmr"
    kind = "diversity"
    lam: float = param(0.7, ge=0.0, le=1.0)
    k: int = param(3, ge=1, doc="maxResults: stop after this many picks")
    snippet_chars: int = param(700, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        raw = np.where(st.valid, st.score, np.nan)
        valid, M, mq, idx = _rows(st, jaccard_slabs(cs, self.snippet_chars))
        perm = _greedy(valid, raw, raw, idx, M, mq, self.lam, raw_tiebreak=False, first_fixed=True,
                       max_select=self.k)
        return st.permute(perm).head(self.k)


@register
class CosineDefer(Stage):
    """lancedb-pro ``applyMMRDiversity``: walk the list in order; an item whose cosine with *any already selected*
    item is ``> threshold`` is deferred (compared only with selected items, never with deferred ones). Output =
    selected (in order) + deferred (in order); scores unchanged, so the list may no longer be score-sorted.
    A missing/empty vector is never "too similar". Default threshold 0.85 (lancedb-pro @6a50220 step 12).

    On a candidate file (vectors as given, ``corpus.raw_vectors``) the cosine is the original's, in float64 on the
    given vectors, and ``selected.some`` is walked in order, stopping at the first too-similar item: a comparison
    between vectors of different sizes throws there, and the error leaves retrieval — the query returns nothing
    (auto-recall catches it and injects nothing); ``info["diversity_error"][q]`` is True for such a query.
    """

    name = "diversity.cosine_defer"
    kind = "diversity"
    vectors = True
    threshold: float = param(0.85, ge=-1.0, le=1.0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] <= 1:
            return st
        if getattr(cs.corpus, "raw_vectors", None) is not None:
            return self._apply_raw(st, cs)
        valid, M, mq, idx = _rows(st, cosine_slabs(cs))
        kept = jit_kernel(defer_loop)(valid, idx, np.ascontiguousarray(M, dtype=np.float64), mq, float(self.threshold))
        return st.permute(picks_first(kept, valid))

    def _apply_raw(self, st: State, cs: CandidateSet) -> State:
        from retrievers.stages.rerank.lancedb import lancedb_cosine  # lazy: startup
        raw = cs.corpus.raw_vectors
        perm = np.tile(np.arange(st.col.shape[1]), (cs.Q, 1))
        failed = np.zeros(cs.Q, dtype=bool)
        for q in range(cs.Q):
            rows = [k for k in range(st.col.shape[1]) if st.col[q, k] >= 0]
            selected: list[int] = []
            deferred: list[int] = []
            try:
                for k in rows:
                    cv = raw[int(cs.doc[q, st.col[q, k]])]
                    too = False
                    for j in selected:
                        sv = raw[int(cs.doc[q, st.col[q, j]])]
                        if sv is None or cv is None or not len(sv) or not len(cv):
                            continue
                        if lancedb_cosine(sv, cv) > self.threshold:
                            too = True
                            break
                    (deferred if too else selected).append(k)
            except ValueError:
                failed[q] = True
                continue
            rest = [k for k in range(st.col.shape[1]) if st.col[q, k] < 0]
            perm[q] = selected + deferred + rest
        out = st.permute(perm)
        if failed.any():
            out.info["diversity_error"] = failed
            out = out.skip(failed)
        return out


@register
class MMR(Stage):
    """Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998) on embeddings: greedily pick
    ``argmax λ·rel(d) − (1 − λ)·max_{s∈S} cos(d, s)``; ``relevance = "query_cosine"`` (cos(query, doc), the
    classic form) or ``"score"`` (min-max of the running score). Ties → earliest position. ``k > 0`` keeps only
    the first k picks (Haystack ``top_k``, LangChain ``k``); ``k = 0`` reorders the whole list. Defaults λ 0.5,
    k 0. Not used by a seed system (a baseline / tuning knob). Scores unchanged.
    """

    name = "diversity.mmr"
    kind = "diversity"
    vectors = True
    lam: float = param(0.5, ge=0.0, le=1.0)
    k: int = param(0, ge=0)
    relevance: str = param("query_cosine", choices=("query_cosine", "score"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        raw = np.where(st.valid, st.score, np.nan)
        rel = st.gather(query_cosine(cs)) if self.relevance == "query_cosine" else minmax(raw)
        valid, M, mq, idx = _rows(st, cosine_slabs(cs))
        perm = _greedy(valid, rel, raw, idx, M, mq, self.lam, raw_tiebreak=False, max_select=self.k or None)
        out = st.permute(perm)
        return out.head(self.k) if self.k else out


__all__ = ["OpenClawMMR", "HookClawMMR", "CosineDefer", "MMR", "greedy_select", "greedy_loop", "defer_loop",
           "picks_first"]
