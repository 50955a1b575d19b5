"""Time helpers of the time stages: ``DAY``, ``LN2``, lancedb-pro's age rule (:func:`lancedb_age_days`), the decay
curves (:func:`decay_curve`), :func:`rescore` (new scores, re-sorted only for queries with an ``as_of``) and the
negative-age counters (:func:`counts_ages`, :func:`record_ages`) every time stage reports through.

Negative ages. Under the ``strict`` as-of visibility protocol (:mod:`retrievers.index.visibility`) a query never sees a
document created after its ``as_of``; where the protocol keeps such documents visible (LongMemEval's official
haystack) — or a document's date lies after its creation — a time stage meets an age below zero. Each stage then
does what its original system does (the PIPELINES.md section is cited in its docstring): lancedb-pro lets the
negative age through (a recency boost above its weight, a decay factor above 1, both clamped to 1 overall),
OpenClaw and HookClaw clamp the age at 0, the Phase-3 age penalty never fires. Every time stage also counts, per
query, the dated candidates it scored and those with a negative age (:func:`record_ages`): a run reports them as
``negative_age_*`` metrics, a finding rather than a silent boost.
"""
from __future__ import annotations

import math

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Context


DAY = 86400.0

LN2 = math.log(2.0)


def rescore(st: State, new: np.ndarray, active: np.ndarray, sort: bool) -> State:
    """Scores of active queries replaced (and stable-sorted); inactive queries untouched."""
    new = np.where(active[:, None], new, st.score)
    out = st.with_score(new)
    if not sort:
        return out
    if active.all():
        return out.sort()
    keep_order = -np.broadcast_to(np.arange(st.col.shape[1], dtype=np.float64), st.col.shape)
    return out.sort(np.where(active[:, None], out.score, keep_order))


def counts_ages(ctx: Context | None) -> bool:
    """Whether the run reads the negative-age counts: not a sweep, whose metrics never do (it sets
    ``ctx.options["count_ages"] = False``, so its many configs skip the counting)."""
    return ctx is None or bool((ctx.options or {}).get("count_ages", True))


def record_ages(st: State, age: np.ndarray, scored: np.ndarray) -> None:
    """Count, per query, the rows a time stage scored with a date (``scored``, (Q, K) bool) and those among them
    whose ``age`` ((Q, K), any unit, before any clamping) is negative — dated after the query's ``as_of`` — into
    ``st.info["age_scored"]`` / ``st.info["negative_age"]`` ((Q,) int). Over several time stages of one pipeline
    each count keeps its largest value (lancedb-pro's boost and decay read the same dates: a candidate is counted
    once). The runner turns them into the ``negative_age_*`` metrics (:func:`evalkit.engine.evaluate.age_metrics`)."""
    with np.errstate(invalid="ignore"):
        neg = (scored & (age < 0)).sum(axis=1)
    n = scored.sum(axis=1)
    for key, v in (("age_scored", n), ("negative_age", neg)):
        old = st.info.get(key)
        st.info[key] = v if old is None or old.shape != v.shape else np.maximum(old, v)


def lancedb_age_days(st: State, cs: CandidateSet, ctx: Context, active: np.ndarray) -> np.ndarray:
    """lancedb-pro age: ``(now − ts)/DAY`` with ts = now when the timestamp is missing, 0 or negative (ages of
    dated rows recorded, :func:`record_ages`)."""
    now = cs.as_of[:, None]
    ts = st.gather(cs.doc_feature("timestamp"))
    dated = np.isfinite(ts) & (ts > 0)
    age = (now - np.where(dated, ts, now)) / DAY
    if counts_ages(ctx):
        record_ages(st, age, dated & st.valid & active[:, None])
    return age


def decay_curve(age: np.ndarray, hl: float, curve: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if curve == "half_life":
            return np.exp(-LN2 * age / hl)
        return np.exp(-age / hl)


__all__ = ["DAY", "LN2", "counts_ages", "decay_curve", "lancedb_age_days", "record_ages", "rescore"]
