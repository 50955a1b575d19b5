"""Score mappings (raw arm score → a system's convention) and per-query normalisations.

Two registries live here:

* ``MAPPINGS`` — element-wise maps of *raw* arm scores (vector: cosine similarity; lexical: BM25 score, positive;
  SQLite FTS5's rank is ``-score``). NaN means "not returned" and stays NaN. Each mapping also knows what a row
  that *was* returned with a non-finite raw value maps to (``nonfinite``), as the original code does (OpenClaw:
  non-finite rank → 999 → 0.001; lancedb-pro: missing ``_distance`` → 0 → 1.0, missing ``_score`` → 0.5).
* ``NORMALISATIONS`` — per query over the present rows of one list (NaN = absent stays NaN), FUSION_CATALOG §5.2.

Mappings (name → formula, system):

==========================  ====================================================================  ==============
``identity``                raw (vector: ``1 − cosine distance`` = cosine; lexical: BM25 score)     OpenClaw vector
``inv_l2``                  ``1/(1 + d)``, d = LanceDB L2 on unit vectors *taken as squared*:       lancedb-pro
                            ``d = 2 − 2cos`` ⇒ ``1/(3 − 2cos)``; non-finite → 1.0                  @6a50220 vector
``inv_cos_distance``        ``1/(1 + (1 − cos))`` (LanceDB cosine metric, upstream c79a807)         lancedb-pro fix
``openclaw_rank``           ``1/(1 + max(0, rank))``, rank = −bm25 ⇒ **1.0 for every hit**;        OpenClaw 2026.2.26
                            non-finite → 0.001                                                     FTS (as shipped)
``rel_over_1_plus_rel``     rank < 0: ``rel/(1 + rel)``, rel = −rank; else ``1/(1 + rank)``;       OpenClaw latest
                            non-finite → 0.001                                                     upstream
``rel_over_1_plus_rel_pos`` ``rel/(1 + rel)`` for rel > 0, else 0                                  Phase-3 [A6]
``rel_over_rel_plus_2``     ``rel/(rel + 2)`` for rel > 0, else 0 (also non-finite)                HookClaw v2.1 FTS
``lancedb_sigmoid``         raw > 0: ``1/(1 + e^(−raw/5))``; raw ≤ 0 or non-finite → 0.5           lancedb-pro BM25
``clamp01``                 ``min(1, max(0, raw))``                                                 Phase-3 [A5]
==========================  ====================================================================  ==============

The ``inv_l2`` assumption: Lance's default ``l2`` distance is the *squared* Euclidean distance (as in Lance's
docs and source), so for unit-norm embeddings ``d = ‖a − b‖² = 2 − 2cos``. Its inverse (for tests that are given
post-mapping scores): ``cos = (3 − 1/s)/2``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from retrievers.errors import ConfigError


@dataclass(frozen=True)
class Mapping:
    """An element-wise raw-score map. ``m(x)`` keeps NaN (absent); ``m.present(x, mask)`` maps returned rows
    whose raw value is non-finite to ``nonfinite`` (None = leave the non-finite value as it is)."""

    name: str
    fn: Callable[[np.ndarray], np.ndarray]
    nonfinite: float | None
    doc: str = ""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(all="ignore"):
            y = np.asarray(self.fn(x), dtype=np.float64)
        if self.nonfinite is not None:
            y = np.where(np.isinf(x), self.nonfinite, y)
        return np.where(np.isnan(x), np.nan, y)

    def present(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mapped scores for the rows in ``mask`` (NaN elsewhere)."""
        y = self(x)
        if self.nonfinite is not None:
            y = np.where(np.isnan(x), self.nonfinite, y)
        return np.where(mask, y, np.nan)


MAPPINGS: dict[str, Mapping] = {}

NORMALISATIONS: dict[str, Callable[..., np.ndarray]] = {}


def mapping(name: str, nonfinite: float | None = None):
    def deco(fn):
        MAPPINGS[name] = Mapping(name, fn, nonfinite, (fn.__doc__ or "").strip())
        return fn
    return deco


def normalisation(name: str):
    def deco(fn):
        NORMALISATIONS[name] = fn
        return fn
    return deco


def check_registry(stage: str, field: str, value: str, registry: dict) -> None:
    if value not in registry:
        raise ConfigError(f"stage {stage!r} parameter {field!r} = {value!r} is not one of: "
                          f"{', '.join(sorted(registry))}")


@mapping("identity")
def _identity(x):
    """Raw score unchanged (vector: cosine similarity = 1 − cosine distance; lexical: BM25 score)."""
    return x


@mapping("inv_l2", nonfinite=1.0)
def _inv_l2(x):
    """lancedb-pro @6a50220: ``1/(1 + d)`` with d = squared L2 on unit vectors = 2 − 2cos ⇒ ``1/(3 − 2cos)``."""
    return 1.0 / (1.0 + (2.0 - 2.0 * x))


@mapping("inv_cos_distance", nonfinite=1.0)
def _inv_cos_distance(x):
    """lancedb-pro with the cosine metric (upstream c79a807): ``1/(1 + (1 − cos))``."""
    return 1.0 / (1.0 + (1.0 - x))


@mapping("openclaw_rank", nonfinite=0.001)
def _openclaw_rank(x):
    """OpenClaw 2026.2.26 ``bm25RankToScore``: ``1/(1 + max(0, rank))`` with rank = −bm25 (FTS5 convention)."""
    rank = -x
    return 1.0 / (1.0 + np.maximum(0.0, rank))


@mapping("rel_over_1_plus_rel", nonfinite=0.001)
def _rel_over_1_plus_rel(x):
    """OpenClaw latest upstream: rank < 0 → ``rel/(1 + rel)`` (rel = −rank), else ``1/(1 + rank)``."""
    rank = -x
    rel = -rank
    return np.where(rank < 0, rel / (1.0 + rel), 1.0 / (1.0 + rank))


@mapping("rel_over_1_plus_rel_pos", nonfinite=0.0)
def _rel_over_1_plus_rel_pos(x):
    """Phase-3 [A6]: ``rel/(1 + rel)`` with rel = −rank = bm25, 0 when rel ≤ 0."""
    return np.where(x > 0, x / (1.0 + x), 0.0)


@mapping("rel_over_rel_plus_2", nonfinite=0.0)
def _rel_over_rel_plus_2(x):
    """HookClaw v2.1 FTS: ``rel/(rel + 2)`` with rel = −rank = bm25; rel ≤ 0 → 0."""
    return np.where(x > 0, x / (x + 2.0), 0.0)


@mapping("lancedb_sigmoid", nonfinite=0.5)
def _lancedb_sigmoid(x):
    """lancedb-pro BM25: ``1/(1 + e^(−raw/5))`` for raw > 0, else 0.5."""
    return np.where(x > 0, 1.0 / (1.0 + np.exp(-x / 5.0)), 0.5)


@mapping("clamp01")
def _clamp01_map(x):
    """``min(1, max(0, raw))`` (Phase-3 [A5]: cosine clamped to [0, 1])."""
    return np.clip(x, 0.0, 1.0)


def inv_l2_to_cosine(s):
    """Inverse of ``inv_l2`` (for examples given post-mapping): ``cos = (3 − 1/s)/2``."""
    return (3.0 - 1.0 / np.asarray(s, dtype=np.float64)) / 2.0


def clamp01(v: np.ndarray, fallback: np.ndarray | float) -> np.ndarray:
    """lancedb-pro ``clamp01(v, fallback)``: non-finite v → fallback (0 if the fallback is non-finite too),
    else ``min(1, max(0, v))``. The fallback itself is not clamped."""
    v = np.asarray(v, dtype=np.float64)
    fb = np.broadcast_to(np.asarray(fallback, dtype=np.float64), v.shape)
    return np.where(np.isfinite(v), np.clip(v, 0.0, 1.0), np.where(np.isfinite(fb), fb, 0.0))


def _present(x: np.ndarray) -> np.ndarray:
    return ~np.isnan(x)


def _count(m: np.ndarray) -> np.ndarray:
    return m.sum(axis=1, keepdims=True)


def _rowmin(x, m):
    return np.min(np.where(m, x, np.inf), axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1))


def _rowmax(x, m):
    return np.max(np.where(m, x, -np.inf), axis=1, keepdims=True) if x.shape[1] else np.zeros((x.shape[0], 1))


def row_mean_std(x: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, 1) mean and population standard deviation of ``x`` per row (query) over the entries where ``m`` holds
    (mean 0, sd 0 for a row without any)."""
    n = np.maximum(_count(m), 1)
    mu = np.sum(np.where(m, x, 0.0), axis=1, keepdims=True) / n
    with np.errstate(invalid="ignore"):
        var = np.sum(np.where(m, (np.where(m, x, 0.0) - mu) ** 2, 0.0), axis=1, keepdims=True) / n
    return mu, np.sqrt(var)


def row_standardise(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Per row ``(x − mean) / sd`` over the entries where ``m`` holds (:func:`row_mean_std`); 0 elsewhere and in a
    row whose sd is 0."""
    mu, sd = row_mean_std(x, m)
    return np.where(m & (sd > 0), (np.where(m, x, 0.0) - mu) / np.where(sd > 0, sd, 1.0), 0.0)


def score_spread(score: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(Q, 1) population sd of each query's scores over its ``valid`` rows — the unit in which the score stages
    add a signal (``score + weight · spread · signal``); 1 where it is 0 or not finite (one row, no rows, equal or
    infinite scores)."""
    sd = row_mean_std(np.where(valid, score, 0.0), valid)[1]
    return np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)


def _safe_div(num, den, ok, default):
    with np.errstate(all="ignore"):
        return np.where(ok, num / np.where(ok, den, 1.0), default)


@normalisation("none")
def _none(x, **_):
    """Scores unchanged."""
    return x


@normalisation("minmax")
def minmax(x, **_):
    """``(s − min)/(max − min)``; max == min → 1 for every present row (OpenClaw MMR convention; ranx gives 0)."""
    m = _present(x)
    lo, hi = _rowmin(x, m), _rowmax(x, m)
    out = _safe_div(x - lo, hi - lo, hi > lo, 1.0)
    return np.where(m, out, np.nan)


@normalisation("max")
def max_norm(x, **_):
    """``s/max``; max ≤ 0 → 0 (ranx divides by max(max, 1e-9))."""
    m = _present(x)
    hi = _rowmax(x, m)
    return np.where(m, _safe_div(x, hi, hi > 0, 0.0), np.nan)


@normalisation("sum")
def sum_norm(x, **_):
    """``(s − min)/(Σs − n·min)`` (ranx); a zero denominator (all equal) → 0."""
    m = _present(x)
    lo = _rowmin(x, m)
    with np.errstate(invalid="ignore"):
        den = np.sum(np.where(m, x, 0.0), axis=1, keepdims=True) - lo * _count(m)
    return np.where(m, _safe_div(x - lo, den, den > 0, 0.0), np.nan)


@normalisation("zscore")
def zscore(x, **_):
    """``(s − μ)/σ`` with the population σ (ranx ``zmuv``); σ = 0 → 0."""
    m = _present(x)
    mu, sd = row_mean_std(x, m)
    return np.where(m, _safe_div(x - mu, sd, sd > 0, 0.0), np.nan)


@normalisation("l2")
def l2_norm(x, **_):
    """``s/√Σs²`` (OpenSearch ``l2``, Elasticsearch ``l2_norm``); zero norm → 0."""
    m = _present(x)
    nrm = np.sqrt(np.sum(np.where(m, x * x, 0.0), axis=1, keepdims=True))
    return np.where(m, _safe_div(x, nrm, nrm > 0, 0.0), np.nan)


@normalisation("dbsf")
def dbsf(x, **_):
    """Distribution-based score fusion: ``(s − (μ − 3σ))/(6σ)``, population σ; σ = 0 → 0 (no clipping)."""
    m = _present(x)
    mu, sd = row_mean_std(x, m)
    return np.where(m, _safe_div(x - (mu - 3.0 * sd), 6.0 * sd, sd > 0, 0.0), np.nan)


@normalisation("tmm")
def tmm(x, *, lower: float = 0.0, **_):
    """Theoretical min-max (Bruch et al.): ``(s − m)/(max − m)``, m = the theoretical minimum (0 for BM25,
    −1 for cosine); max ≤ m → 0."""
    m = _present(x)
    hi = _rowmax(x, m)
    return np.where(m, _safe_div(x - lower, hi - lower, hi > lower, 0.0), np.nan)


@normalisation("rank")
def rank_norm(x, *, rank=None, **_):
    """``1 − i/n``: i = 0-based position by score desc (ties: the arm's rank, else column order), n = list size."""
    m = _present(x)
    key = np.where(m, -x, np.inf)
    tie = rank if rank is not None else np.broadcast_to(np.arange(x.shape[1]), x.shape)
    perm = np.lexsort((tie, key), axis=1)
    pos = np.empty_like(perm)
    np.put_along_axis(pos, perm, np.broadcast_to(np.arange(x.shape[1]), x.shape), axis=1)
    n = _count(m)
    return np.where(m, 1.0 - pos / np.maximum(n, 1), np.nan)


@normalisation("sigmoid")
def sigmoid(x, **_):
    """``1/(1 + e^(−s))`` (MongoDB ``$scoreFusion``)."""
    with np.errstate(over="ignore"):
        return np.where(_present(x), 1.0 / (1.0 + np.exp(-x)), np.nan)


def normalise(name: str, x: np.ndarray, *, rank=None, lower: float = 0.0) -> np.ndarray:
    return NORMALISATIONS[name](x, rank=rank, lower=lower)


__all__ = ["MAPPINGS", "Mapping", "NORMALISATIONS", "check_registry", "clamp01", "dbsf", "inv_l2_to_cosine",
           "l2_norm", "mapping", "max_norm", "minmax", "normalisation", "normalise", "rank_norm", "row_mean_std",
           "row_standardise", "score_spread", "sigmoid", "sum_norm", "tmm", "zscore"]
