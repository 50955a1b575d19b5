"""Fusion stages: turn arm hits into the first ranked list of a pipeline.

Every fusion stage reads raw arm scores from the candidate set, maps them to the system's convention
(``stages/helpers/normalize.py`` MAPPINGS), optionally normalises them per query (NORMALISATIONS) and combines them.
Row order before the final stable sort is always *first seen*: the arms in the order given, each in its own
rank order — the insertion order of the JavaScript ``Map`` every seed system merges into — so score ties keep it.

Stages: ``fuse.single``, ``fuse.weighted_linear`` (OpenClaw), ``fuse.vector_bonus`` (lancedb-pro),
``fuse.rrf``, ``fuse.comb`` (CombSUM/MNZ/MAX/MIN/MED/ANZ), ``fuse.convex`` (the ``hybrid-cc`` baseline),
``fuse.openclaw_fts_only`` (OpenClaw's FTS-only per-keyword merge).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from retrievers.candidates.table import CandidateSet, State, take_rows
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.signals import carry
from retrievers.stages.helpers.normalize import MAPPINGS, NORMALISATIONS, check_registry, clamp01, normalise

# ---- helpers -----------------------------------------------------------------------------------------------

def arm_rows(cs: CandidateSet, arm: str, depth: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(present mask (Q, C), rank (Q, C)) of an arm truncated to ``depth``."""
    hits = cs.arm(arm)
    return hits.present(depth), hits.rank


def arm_scores(cs: CandidateSet, arm: str, depth: int | None, map_name: str) -> tuple[np.ndarray, np.ndarray]:
    """(present (Q, C), mapped score (Q, C), NaN where absent); memoised on the candidate set."""
    def build():
        present, _ = arm_rows(cs, arm, depth)
        return present, MAPPINGS[map_name].present(cs.arm(arm).score, present)
    return cs.memo(("arm_scores", arm, depth, map_name), build)


def arm_normalised(cs: CandidateSet, arm: str, depth: int | None, map_name: str, norm: str,
                   lower: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(present, normalised mapped score, NaN where absent); memoised on the candidate set."""
    def build():
        present, s = arm_scores(cs, arm, depth, map_name)
        rank = np.where(present, cs.arm(arm).rank, 0)
        return present, normalise(norm, s, rank=rank, lower=lower)
    return cs.memo(("arm_norm", arm, depth, map_name, norm, lower), build)


def first_seen(cs: CandidateSet, presents: list[np.ndarray], arms: list[str]) -> np.ndarray:
    """Order key (Q, C): arm index, then the arm's rank (``inf`` for columns no arm returned)."""
    key = np.full((cs.Q, cs.C), np.inf)
    off = 0
    for p, a in zip(presents, arms):
        key = np.where(p & np.isinf(key), off + cs.arm(a).rank, key)
        off += cs.C + 1
    return key


def rows_from_order(cs: CandidateSet, present: np.ndarray, order_key: np.ndarray, score: np.ndarray) -> State:
    """A State holding the present columns sorted by ``order_key`` ascending (stable), scores attached."""
    key = np.where(present, order_key.astype(np.float64), np.inf)
    perm = np.argsort(key, axis=1, kind="stable")
    n = int(present.sum(axis=1).max()) if present.size else 0
    perm = perm[:, :n]
    ok = take_rows(present, perm)
    col = np.where(ok, perm, -1).astype(np.int64)
    sc = np.where(ok, take_rows(score, perm), -np.inf)
    return State(col, sc, np.zeros(cs.Q, dtype=bool))


def _check_map(stage: Stage, *fields: str) -> None:
    for f in fields:
        check_registry(stage.name, f, getattr(stage, f), MAPPINGS)


# ---- single arm --------------------------------------------------------------------------------------------

@register
class SingleArm(Stage):
    """One arm as the ranked list: rows in the arm's rank order, score = ``map(raw score)``.

    Used by the ``bm25`` and ``dense`` baselines and by every vector-only mode (lancedb-pro ``mode=vector`` with
    ``map = "inv_l2"``, HookClaw v1.1). Ties keep the arm's order (no re-sort: the arm is already ranked).
    """

    name = "fuse.single"
    kind = "fusion"
    arm: str = param("vec", doc="arm name")
    depth: int | None = param(None, ge=1, doc="keep the arm's top `depth` (default: the arm's own depth)")
    map: str = param("identity", doc="score mapping (stages/helpers/normalize.py MAPPINGS)")

    def __post_init__(self):
        super().__post_init__()
        _check_map(self, "map")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        present, score = arm_scores(cs, self.arm, self.depth, self.map)
        return carry(rows_from_order(cs, present, cs.arm(self.arm).rank, score), st)


# ---- OpenClaw ----------------------------------------------------------------------------------------------

@register
class WeightedLinear(Stage):
    """OpenClaw ``mergeHybridResults``: ``score = vw'·v + tw'·t``, missing side = 0, no clamping.

    ``v = vector_map(raw cosine)`` (identity: sqlite-vec ``1 − cosine distance``), ``t = text_map(bm25)``
    (``openclaw_rank`` as shipped in 2026.2.26 ⇒ t = 1.0 for every keyword hit; ``rel_over_1_plus_rel`` upstream).
    The weights are used raw, as ``mergeHybridResults`` takes them: no clamping, no renormalisation (0.5/0.25
    gives scores that sum to 0.75 of the renormalised ones; 0/0 makes every merged score 0). OpenClaw's config
    resolution (§A.1: clamp to [0, 1], renormalise, both 0 → 0.7/0.3) belongs to the config front end
    (``retrievers/presets/config/openclaw.py`` ``openclaw_weights``). Defaults 0.7/0.3. Row order: vector hits
    in vector order, then keyword-only hits in keyword
    order (Map insertion); ``sort = true`` then stable-sorts by score (OpenClaw sorts after temporal decay:
    presets with a ``decay.half_life`` stage set ``sort = false`` and let that stage sort).
    """

    name = "fuse.weighted_linear"
    kind = "fusion"
    vector_arm: str = param("vec")
    text_arm: str = param("fts")
    vector_weight: float = param(0.7, doc="raw weight (OpenClaw's resolved vectorWeight)")
    text_weight: float = param(0.3)
    vector_map: str = param("identity")
    text_map: str = param("openclaw_rank")
    depth: int | None = param(None, ge=1, doc="truncate both arms to this depth")
    sort: bool = param(True)

    def __post_init__(self):
        super().__post_init__()
        _check_map(self, "vector_map", "text_map")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        vw, tw = self.vector_weight, self.text_weight
        pv, v = arm_scores(cs, self.vector_arm, self.depth, self.vector_map)
        pt, t = arm_scores(cs, self.text_arm, self.depth, self.text_map)
        score = vw * np.where(pv, v, 0.0) + tw * np.where(pt, t, 0.0)
        order = first_seen(cs, [pv, pt], [self.vector_arm, self.text_arm])
        return carry(rows_from_order(cs, pv | pt, order, score), st, self.sort)


@register
class OpenClawFtsOnly(Stage):
    """OpenClaw FTS-only mode merge (§A.9): per-keyword result lists (variant arms ``{arm}#0``, ``#1`` …, one per
    keyword of the ``openclaw_keywords`` query transform) merged by chunk: a later list replaces an entry's
    score only when *strictly* higher; position = first seen (keyword order, then FTS rank). Score =
    ``map(bm25)`` (``openclaw_rank`` ⇒ every hit 1.0 in 2026.2.x, so the final order is the first-seen order).
    Then a stable sort by score. If the candidate set has a plain ``arm`` (no variants) it is used alone.
    """

    name = "fuse.openclaw_fts_only"
    kind = "fusion"
    arm: str = param("fts")
    map: str = param("openclaw_rank")
    depth: int | None = param(None, ge=1)

    def __post_init__(self):
        super().__post_init__()
        _check_map(self, "map")

    def variants(self, cs: CandidateSet) -> list[str]:
        if self.arm in cs.arms:
            return [self.arm]
        pre = self.arm + "#"
        names = [n for n in cs.arms if n.startswith(pre) and n[len(pre):].isdigit()]
        if not names:
            cs.arm(self.arm)  # raises with the list of arms
        return sorted(names, key=lambda n: int(n[len(pre):]))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        score = np.full((cs.Q, cs.C), np.nan)
        seen = np.zeros((cs.Q, cs.C), dtype=bool)
        order = np.full((cs.Q, cs.C), np.inf)
        off = 0
        for name in self.variants(cs):
            p, s = arm_scores(cs, name, self.depth, self.map)
            new = p & ~seen
            better = p & seen & (s > score)
            score = np.where(new | better, s, score)
            order = np.where(new, off + cs.arm(name).rank, order)
            seen |= p
            off += cs.C + 1
        return carry(rows_from_order(cs, seen, order, score), st, sort=True)


# ---- lancedb-pro -------------------------------------------------------------------------------------------

@register
class VectorBonus(Stage):
    """memory-lancedb-pro @6a50220 ``fuseResults`` (vector score as base, BM25 as a confirmation bonus).

    ``v = vector_map(cos)`` (``inv_l2``: ``1/(1 + d)``), ``b = text_map(bm25)`` (``lancedb_sigmoid``):
    in both lists → ``clamp01(v + bonus·v)``; vector only → ``clamp01(v)``; BM25 only → ``clamp01(max(b, floor))``;
    non-finite → 0.1. Vector hits with ``v < vector_min`` are dropped first (the store's minScore argument 0.1).
    Defaults bonus 0.15, floor 0.5, vector_min 0.1. The configured vectorWeight/bm25Weight are *not* used at this
    commit. Order: vector ids, then BM25-only ids (list order), then a stable sort by score.
    """

    name = "fuse.vector_bonus"
    kind = "fusion"
    vector_arm: str = param("vec")
    text_arm: str = param("fts")
    vector_map: str = param("inv_l2")
    text_map: str = param("lancedb_sigmoid")
    bonus: float = param(0.15, ge=0.0)
    floor: float = param(0.5, ge=0.0, le=1.0, doc="minimum score of a BM25-only hit")
    vector_min: float = param(0.1, doc="drop vector hits whose mapped score is below this")
    depth: int | None = param(None, ge=1)

    def __post_init__(self):
        super().__post_init__()
        _check_map(self, "vector_map", "text_map")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        pv, v = arm_scores(cs, self.vector_arm, self.depth, self.vector_map)
        pv = pv & ~(v < self.vector_min)
        pb, b = arm_scores(cs, self.text_arm, self.depth, self.text_map)
        with np.errstate(invalid="ignore"):
            fused = np.where(pv & pb, v + self.bonus * v, np.where(pv, v, np.maximum(b, self.floor)))
        fused = clamp01(fused, 0.1)
        order = first_seen(cs, [pv, pb], [self.vector_arm, self.text_arm])
        return carry(rows_from_order(cs, pv | pb, order, fused), st, sort=True)


# ---- rank fusion -------------------------------------------------------------------------------------------

#: named RRF conventions → (k, rank_base). Qdrant's equal-weight RrfQuery is 1/(pos + k) with 0-based pos, k = 2;
#: Haystack's 1/(61 + rank0) (times a constant) equals the canonical k = 60.
RRF_CONVENTIONS = {"cormack": (60.0, 1), "ranx": (60.0, 1), "elasticsearch": (60.0, 1), "opensearch": (60.0, 1),
                   "weaviate": (60.0, 0), "chroma": (60.0, 0), "haystack": (61.0, 0), "qdrant": (2.0, 0)}


@register
class RRF(Stage):
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): ``Σ_arm w_arm / (k + rank_arm(d))``.

    ``rank_base = 1`` is the canonical 1-based convention (ranx, Elasticsearch, OpenSearch); ``rank_base = 0``
    reproduces the 0-based conventions (Weaviate, Chroma Cloud: ``1/(k + i)`` with i from 0). ``convention``
    names a system's (k, rank_base) and overrides both (``RRF_CONVENTIONS``: cormack/ranx/elasticsearch/
    opensearch 60/1, weaviate/chroma 60/0, haystack 61/0, qdrant 2/0). Documents absent from an arm contribute 0
    unless ``missing_rank = "n_plus_1"`` (HookClaw v2.0: absent = N + 1, N = number of unique documents).
    Defaults: k = 60, equal weights. Used by the ``hybrid-rrf`` baseline.
    Ties: first-seen order over the arms (arm order, then rank).
    """

    name = "fuse.rrf"
    kind = "fusion"
    arms: list = param(["vec", "bm25"], doc="arm names")
    weights: list = param([], doc="per-arm weights (default: all 1)")
    k: float = param(60.0, ge=0.0)
    rank_base: int = param(1, choices=(0, 1))
    convention: str = param("custom", choices=("custom",) + tuple(RRF_CONVENTIONS))
    depth: int | None = param(None, ge=1, doc="truncate every arm to this depth")
    missing_rank: str = param("zero", choices=("zero", "n_plus_1"))

    def __post_init__(self):
        super().__post_init__()
        if self.convention != "custom":
            self.k, self.rank_base = RRF_CONVENTIONS[self.convention]
        if self.weights and len(self.weights) != len(self.arms):
            raise ConfigError(f"stage {self.name!r}: {len(self.arms)} arms but {len(self.weights)} weights")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        w = self.weights or [1.0] * len(self.arms)
        pres = [arm_rows(cs, a, self.depth) for a in self.arms]
        present_any = np.zeros((cs.Q, cs.C), dtype=bool)
        for p, _ in pres:
            present_any |= p
        n_unique = present_any.sum(axis=1, keepdims=True)
        score = np.zeros((cs.Q, cs.C))
        for (p, r), wa in zip(pres, w):
            contrib = np.where(p, wa / (self.k + (r - 1 + self.rank_base)), 0.0)
            if self.missing_rank == "n_plus_1":
                miss = wa / (self.k + (n_unique + self.rank_base))
                contrib = np.where(p, contrib, np.where(present_any, miss, 0.0))
            score = score + contrib
        order = first_seen(cs, [p for p, _ in pres], list(self.arms))
        return carry(rows_from_order(cs, present_any, order, score), st, sort=True)


# ---- score combination -------------------------------------------------------------------------------------

def _per_arm(stage: Stage, values: list, n: int, default, what: str) -> list:
    if not values:
        return [default] * n
    if len(values) != n:
        raise ConfigError(f"stage {stage.name!r}: {n} arms but {len(values)} {what}")
    return list(values)


@register
class Comb(Stage):
    """Fox & Shaw score combination over normalised arm scores (ranx ``comb_*``):

    * ``sum``: ``Σ_a w_a·norm_a(d)`` (absent = 0; with weights this is ranx ``wsum``)
    * ``mnz``: ``Σ_a w_a·norm_a(d) × |{a : d ∈ a}|``
    * ``max`` / ``min`` / ``med`` / ``anz``: max / min / median / mean over the arms that returned d.

    ``norm`` is any NORMALISATIONS entry (default ``minmax``; ``lower`` gives each arm's theoretical minimum for
    ``tmm``), ``maps`` each arm's raw-score mapping (default identity). Ties: first-seen order (arm order, rank).
    """

    name = "fuse.comb"
    kind = "fusion"
    arms: list = param(["vec", "bm25"])
    method: str = param("sum", choices=("sum", "mnz", "max", "min", "med", "anz"))
    norm: str = param("minmax")
    maps: list = param([], doc="per-arm score mapping (default identity)")
    weights: list = param([], doc="per-arm weights for sum/mnz (default 1)")
    lower: list = param([], doc="per-arm theoretical minimum for norm = tmm (default 0)")
    depth: int | None = param(None, ge=1)

    def __post_init__(self):
        super().__post_init__()
        check_registry(self.name, "norm", self.norm, NORMALISATIONS)
        n = len(self.arms)
        if n < 1:
            raise ConfigError(f"stage {self.name!r}: needs at least one arm")
        for m in _per_arm(self, self.maps, n, "identity", "maps"):
            check_registry(self.name, "maps", m, MAPPINGS)
        _per_arm(self, self.weights, n, 1.0, "weights")
        _per_arm(self, self.lower, n, 0.0, "lower bounds")
        if self.weights and self.method not in ("sum", "mnz"):
            raise ConfigError(f"stage {self.name!r}: weights only apply to method sum or mnz")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        n = len(self.arms)
        maps = _per_arm(self, self.maps, n, "identity", "maps")
        ws = _per_arm(self, self.weights, n, 1.0, "weights")
        lows = _per_arm(self, self.lower, n, 0.0, "lower bounds")
        got = [arm_normalised(cs, a, self.depth, m, self.norm, float(lo)) for a, m, lo in zip(self.arms, maps, lows)]
        pres = [p for p, _ in got]
        stack = np.stack([np.where(p, s, np.nan) for p, s in got])  # (A, Q, C)
        count = np.sum([p for p in pres], axis=0)
        any_p = count > 0
        with np.errstate(all="ignore"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                if self.method in ("sum", "mnz"):
                    score = np.zeros((cs.Q, cs.C))
                    for (p, s), w in zip(got, ws):
                        score = score + w * np.where(p, s, 0.0)
                    if self.method == "mnz":
                        score = score * count
                elif self.method == "max":
                    score = np.nanmax(stack, axis=0)
                elif self.method == "min":
                    score = np.nanmin(stack, axis=0)
                elif self.method == "med":
                    score = np.nanmedian(stack, axis=0)
                else:
                    score = np.nanmean(stack, axis=0)
        order = first_seen(cs, pres, list(self.arms))
        return carry(rows_from_order(cs, any_p, order, score), st, sort=True)


@register
class Convex(Stage):
    """Convex combination (Bruch, Gai & Ingber, TOIS 2023): ``α·norm(v) + (1 − α)·norm(l)``, absent = 0 after
    normalisation (= ranx ``wsum`` with weights [α, 1 − α] on normalised runs).

    ``norm`` is any NORMALISATIONS entry (``minmax`` default; ``tmm`` uses ``vector_lower`` −1 and ``text_lower``
    0 as theoretical minima). Default α = 0.5; the ``hybrid-cc`` baseline. Ties: first-seen order (vector arm,
    then lexical arm, each by rank).
    """

    name = "fuse.convex"
    kind = "fusion"
    vector_arm: str = param("vec")
    text_arm: str = param("bm25")
    alpha: float = param(0.5, ge=0.0, le=1.0, doc="weight of the vector arm")
    norm: str = param("minmax")
    vector_map: str = param("identity")
    text_map: str = param("identity")
    vector_lower: float = param(-1.0, doc="theoretical minimum of the vector score (norm = tmm)")
    text_lower: float = param(0.0, doc="theoretical minimum of the lexical score (norm = tmm)")
    depth: int | None = param(None, ge=1)

    def __post_init__(self):
        super().__post_init__()
        check_registry(self.name, "norm", self.norm, NORMALISATIONS)
        _check_map(self, "vector_map", "text_map")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        # everything but α is a function of the candidate set: the first-seen rows and both normalised scores
        # gathered into them, memoised (a sweep over α pays one multiply-add and one sort per config);
        # α·v[perm] + (1 − α)·l[perm] is (α·v + (1 − α)·l)[perm], bit for bit
        def rows():
            pv, v = arm_normalised(cs, self.vector_arm, self.depth, self.vector_map, self.norm, self.vector_lower)
            pl, l_ = arm_normalised(cs, self.text_arm, self.depth, self.text_map, self.norm, self.text_lower)
            order = first_seen(cs, [pv, pl], [self.vector_arm, self.text_arm])
            base = rows_from_order(cs, pv | pl, order, np.zeros((cs.Q, cs.C)))
            ok = base.col >= 0
            at = np.where(ok, base.col, 0)
            return base.col, ok, take_rows(np.where(pv, v, 0.0), at), take_rows(np.where(pl, l_, 0.0), at)
        col, ok, v_rows, l_rows = cs.memo(("convex.rows", self.vector_arm, self.text_arm, self.depth, self.vector_map,
                                           self.text_map, self.norm, self.vector_lower, self.text_lower), rows)
        score = np.where(ok, self.alpha * v_rows + (1.0 - self.alpha) * l_rows, -np.inf)
        return carry(State(col, score, np.zeros(cs.Q, dtype=bool)), st, sort=True)


__all__ = ["SingleArm", "WeightedLinear", "OpenClawFtsOnly", "VectorBonus", "RRF", "Comb", "Convex",
           "RRF_CONVENTIONS", "arm_scores", "arm_normalised",
           "rows_from_order", "arm_rows", "first_seen"]
