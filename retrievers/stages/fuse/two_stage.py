"""``fuse.two_stage`` — the seed-003 recall + hybrid stage (§6 steps 1–3); the reranker is ``rerank.yes_no``."""
from __future__ import annotations

import numpy as np

from retrievers.candidates.table import CandidateSet, State, flat_index
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.helpers.signals import (
    arm_effective_rank,
    id_rank,
    resolve_arm_name,
    rows_by_keys,
    take_cols,
    tie_perm,
)


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

    def _candidates(self, cs: CandidateSet, vkey: str | None, lkey: str | None):
        """(candidates (Q, C) [B2]/[B3], the cosine they are scored with, ``bm25n`` [B4]): a function of the
        candidate set and the recall parameters only (not of the weights), so it is memoised (bounded): a sweep
        over ``vec_weight`` reuses it. The arrays are shared: never written."""
        def build():
            Q, C = cs.Q, cs.C
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
            return cand, cos, bm25n
        key = (vkey, lkey, float(self.min_cos), self.vec_depth, self.lex_depth)
        return cs.memo_lru("two_stage.candidates", key, build, size=32)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, C = cs.Q, cs.C
        vkey, lkey = resolve_arm_name(cs, self.vec_arm), resolve_arm_name(cs, self.lex_arm)
        cand, cos, bm25n = self._candidates(cs, vkey, lkey)
        hybrid = self.vec_weight * cos + self.lex_weight * bm25n
        # [B5] hybrid desc, then document id asc (then column)
        col = rows_by_keys(cand, hybrid, None, tie_perm(cs, ("id",), lambda: (id_rank(cs),))[1], self.keep)
        if col is None:  # non-finite weights: one general lexsort, NaN after every number
            qq = np.repeat(np.arange(Q), C)
            order = np.lexsort((id_rank(cs).ravel(), -np.where(cand, hybrid, -np.inf).ravel(), ~cand.ravel(), qq))
            order = (order.reshape(Q, C) - (np.arange(Q) * C)[:, None]).astype(np.int64)
            order = order[:, :min(int(cand.sum(axis=1).max()) if cand.size else 0, self.keep)]
            col = np.where(np.take(cand, flat_index(order, C)), order, -1)
        score, cos_k, bm25n_k = take_cols(col, [(hybrid, -np.inf), (cos, np.nan), (bm25n, np.nan)])
        return State(col, score, st.skipped, {"cos": cos_k, "bm25n": bm25n_k}, st.info, st.trace)


__all__ = ["TwoStageRecall"]
