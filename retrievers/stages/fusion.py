"""Fusion stages: turn arm hits into the first ranked list of a pipeline."""
from __future__ import annotations

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.normalize import MAPPINGS


def arm_rows(cs: CandidateSet, arm: str, depth: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(present mask (Q, C), rank (Q, C)) of an arm truncated to ``depth``."""
    hits = cs.arm(arm)
    return hits.present(depth), hits.rank


def rows_from_order(cs: CandidateSet, present: np.ndarray, order_key: np.ndarray, score: np.ndarray) -> State:
    """A State holding the present columns sorted by ``order_key`` ascending (stable), scores attached."""
    key = np.where(present, order_key.astype(np.float64), np.inf)
    perm = np.argsort(key, axis=1, kind="stable")
    n = int(present.sum(axis=1).max()) if present.size else 0
    perm = perm[:, :n]
    ok = np.take_along_axis(present, perm, axis=1)
    col = np.where(ok, perm, -1).astype(np.int64)
    sc = np.where(ok, np.take_along_axis(score, perm, axis=1), -np.inf)
    return State(col, sc, np.zeros(cs.Q, dtype=bool))


@register
class SingleArm(Stage):
    """One arm as the ranked list: rows in the arm's rank order, score = ``map(raw score)``.

    Used by the ``bm25`` and ``dense`` baselines and by every vector-only mode (lancedb-pro ``mode=vector``,
    HookClaw v1.1). Ties keep the arm's order.
    """

    name = "fuse.single"
    kind = "fusion"
    arm: str = param("vec", doc="arm name")
    depth: int | None = param(None, ge=1, doc="keep the arm's top `depth` (default: the arm's own depth)")
    map: str = param("identity", doc="score mapping (stages/normalize.py MAPPINGS)")

    def __post_init__(self):
        super().__post_init__()
        if self.map not in MAPPINGS:
            raise ConfigError(f"stage {self.name!r} parameter 'map' = {self.map!r} is not one of: "
                              f"{', '.join(sorted(MAPPINGS))}")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        present, rank = arm_rows(cs, self.arm, self.depth)
        score = MAPPINGS[self.map](cs.arm(self.arm).score)
        out = rows_from_order(cs, present, rank, score)
        out.skipped = st.skipped
        out.trace = st.trace
        out.info = st.info
        return out


@register
class RRF(Stage):
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): ``Σ_arm w_arm / (k + rank_arm(d))``.

    ``rank_base = 1`` is the canonical 1-based convention (ranx, Elasticsearch, OpenSearch); ``rank_base = 0``
    reproduces the 0-based conventions (Weaviate, Chroma Cloud: ``1/(k + i)`` with i from 0). Documents absent
    from an arm contribute 0 unless ``missing_rank = "n_plus_1"`` (HookClaw v2.0: absent = N + 1, N = number of
    unique documents). Defaults: k = 60, equal weights. Used by the ``hybrid-rrf`` baseline.
    Ties: first-seen order over the arms (arm order, then rank).
    """

    name = "fuse.rrf"
    kind = "fusion"
    arms: list = param(["vec", "bm25"], doc="arm names")
    weights: list = param([], doc="per-arm weights (default: all 1)")
    k: float = param(60.0, ge=0.0)
    rank_base: int = param(1, choices=(0, 1))
    depth: int | None = param(None, ge=1, doc="truncate every arm to this depth")
    missing_rank: str = param("zero", choices=("zero", "n_plus_1"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        w = self.weights or [1.0] * len(self.arms)
        if len(w) != len(self.arms):
            raise ConfigError(f"stage {self.name!r}: {len(self.arms)} arms but {len(w)} weights")
        present_any = np.zeros((cs.Q, cs.C), dtype=bool)
        pres = []
        for a in self.arms:
            p, r = arm_rows(cs, a, self.depth)
            pres.append((p, r))
            present_any |= p
        n_unique = present_any.sum(axis=1, keepdims=True)
        score = np.zeros((cs.Q, cs.C))
        first_seen = np.full((cs.Q, cs.C), np.inf)
        offset = 0
        for (p, r), wa in zip(pres, w):
            eff = r - 1 + self.rank_base
            contrib = np.where(p, wa / (self.k + eff), 0.0)
            if self.missing_rank == "n_plus_1":
                miss = wa / (self.k + (n_unique + 1 - 1 + self.rank_base))
                contrib = np.where(p, contrib, np.where(present_any, miss, 0.0))
            score += contrib
            first_seen = np.where(p & np.isinf(first_seen), offset + r, first_seen)
            offset += cs.C + 1
        base = rows_from_order(cs, present_any, first_seen, score)
        base.skipped, base.trace, base.info = st.skipped, st.trace, st.info
        return base.sort()
