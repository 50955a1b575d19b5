"""Time stages: recency boosts and decays. Time is ``cs.as_of`` (epoch seconds); a query without ``as_of``
(NaN) has no notion of "now", so these stages leave its list untouched (not even re-sorted).

Each system dates a document its own way, and the stages follow it:

* lancedb-pro stores a timestamp per entry → ``corpus.timestamp`` (missing, 0 or negative ⇒ "now").
* OpenClaw derives dates from *paths* (``memory/YYYY-MM-DD.md``), treats other memory files as evergreen and
  falls back to the file mtime (``corpus.mtime``) — see :func:`openclaw_file_timestamp`.

Stages: ``score.recency_boost`` (lancedb-pro additive boost), ``decay.floor`` (lancedb-pro multiplicative decay
with a floor), ``decay.half_life`` (OpenClaw temporal decay).

Negative ages. Under the ``strict`` as-of visibility protocol (:mod:`retrievers.visibility`) a query never sees a
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

from retrievers.candidates import CandidateSet, State
from retrievers.corpus import DATED_MEMORY_PATH, dated_path_ts
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.normalize import clamp01
from retrievers.stages.helpers.signals import doc_flags

DAY = 86400.0
LN2 = math.log(2.0)


def _norm_path(path: str) -> str:
    p = path.replace("\\", "/")
    return p[2:] if p.startswith("./") else p


def openclaw_is_evergreen(path: str, source: str) -> bool:
    """Evergreen (never decays): source ``memory`` and the path is ``MEMORY.md`` / ``memory.md``, or under
    ``memory/`` without matching the dated pattern (``memory/2026-02-10-standup.md``, ``memory/archive/…``)."""
    if source != "memory":
        return False
    p = _norm_path(path)
    if p in ("MEMORY.md", "memory.md"):
        return True
    return p.startswith("memory/") and not DATED_MEMORY_PATH.search(p)


def openclaw_file_timestamp(path: str, source: str, mtime: float) -> float:
    """OpenClaw 2026.2.26 timestamp of a chunk (§A.6, Appendix D): dated path → that date; else evergreen →
    NaN (no decay); else the file mtime (NaN when unknown → no decay)."""
    ts = dated_path_ts(path)
    if ts is not None:
        return ts
    if openclaw_is_evergreen(path, source):
        return float("nan")
    return float(mtime) if mtime is not None else float("nan")


def _openclaw_ts(cs: CandidateSet) -> np.ndarray:
    c = cs.corpus
    return doc_flags(cs, "openclaw_file_ts",
                     lambda d: openclaw_file_timestamp(c.paths[d], c.source[d], c.mtime[d]),
                     dtype=np.float64, fill=np.nan)


def _finish(st: State, new: np.ndarray, active: np.ndarray, sort: bool) -> State:
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


def _lancedb_age_days(st: State, cs: CandidateSet, ctx: Context, active: np.ndarray) -> np.ndarray:
    """lancedb-pro age: ``(now − ts)/DAY`` with ts = now when the timestamp is missing, 0 or negative (ages of
    dated rows recorded, :func:`record_ages`)."""
    now = cs.as_of[:, None]
    ts = st.gather(cs.doc_feature("timestamp"))
    dated = np.isfinite(ts) & (ts > 0)
    age = (now - np.where(dated, ts, now)) / DAY
    if counts_ages(ctx):
        record_ages(st, age, dated & st.valid & active[:, None])
    return age


def _curve(age: np.ndarray, hl: float, curve: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        if curve == "half_life":
            return np.exp(-LN2 * age / hl)
        return np.exp(-age / hl)


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
    half_life_days: float = param(14.0, ge=0.0, doc="0 disables the stage")
    weight: float = param(0.10, ge=0.0, doc="0 disables the stage")
    curve: str = param("exp", choices=("exp", "half_life"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_days <= 0 or self.weight == 0:
            return st
        active = np.isfinite(cs.as_of)
        age = _lancedb_age_days(st, cs, ctx, active)
        boost = _curve(age, self.half_life_days, self.curve) * self.weight
        new = clamp01(st.score + boost, st.score)
        return _finish(st, new, active, self.sort)


@register
class DecayFloor(Stage):
    """lancedb-pro time decay: ``score ← clamp01(score·(floor + (1 − floor)·exp(−age/half_life)))``.

    Same timestamp rule as ``score.recency_boost`` (missing ⇒ now ⇒ factor 1); a future timestamp (negative age)
    gives a factor > 1, the score clamped to 1, as shipped (PIPELINES.md §B.4 step 9, "same missing-timestamp
    rule" as step 6); such rows are counted (:func:`record_ages`). ``half_life_days = 0`` → skipped.
    Non-finite result → ``floor·score``. 7 d 0.944941, 60 d 0.683940, 240 d 0.509158 (defaults half_life 60,
    floor 0.5; lancedb-pro @6a50220 step 9). ``curve = "half_life"`` uses ``2^(−age/half_life)`` instead.
    Then a stable sort unless ``sort = false``.
    """

    name = "decay.floor"
    kind = "score"
    half_life_days: float = param(60.0, ge=0.0, doc="0 disables the stage")
    floor: float = param(0.5, ge=0.0, le=1.0)
    curve: str = param("exp", choices=("exp", "half_life"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_days <= 0:
            return st
        active = np.isfinite(cs.as_of)
        age = _lancedb_age_days(st, cs, ctx, active)
        f = self.floor + (1.0 - self.floor) * _curve(age, self.half_life_days, self.curve)
        new = clamp01(st.score * f, self.floor * st.score)
        return _finish(st, new, active, self.sort)


@register
class HalfLifeDecay(Stage):
    """OpenClaw temporal decay: ``score ← score·exp(−ln2/h · age_days)`` (= ``2^(−age/h)``), no clamping.

    ``h = max(1, floor(half_life_days))`` (OpenClaw's config rule: 0 or 0.5 → 1). ``age = max(0, now − ts)/DAY``:
    a future date (negative age) counts as age 0, multiplier 1 (PIPELINES.md §A.6, "future dates → age 0"); such
    rows are counted (:func:`record_ages`). ``timestamps = "openclaw_path"`` (as shipped): dated
    ``memory/YYYY-MM-DD.md`` path → that date; evergreen memory files (``MEMORY.md``, ``memory.md``, other files
    under ``memory/``) → no decay; else mtime; else no decay. ``timestamps = "timestamp"`` uses
    ``corpus.timestamp`` (NaN → no decay) for datasets whose documents carry their own dates. 30 d → 0.5,
    90 d → 0.125 (default h 30).
    ``enabled = false`` (OpenClaw's default) skips the decay but keeps the stable sort OpenClaw performs after it.
    Ties keep the previous order (vector order, then keyword-only order).
    """

    name = "decay.half_life"
    kind = "score"
    enabled: bool = param(True)
    half_life_days: float = param(30.0, ge=0.0, doc="floored to an integer >= 1 (OpenClaw)")
    timestamps: str = param("openclaw_path", choices=("openclaw_path", "timestamp"))
    sort: bool = param(True)

    @property
    def effective_half_life(self) -> int:
        return max(1, math.floor(self.half_life_days))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        active = np.isfinite(cs.as_of)
        if not self.enabled:
            return _finish(st, st.score, np.ones(cs.Q, dtype=bool), self.sort)
        if self.timestamps == "openclaw_path":
            ts = st.gather(_openclaw_ts(cs))
        else:
            ts = st.gather(cs.doc_feature("timestamp"))
        now = cs.as_of[:, None]
        if counts_ages(ctx):
            record_ages(st, now - ts, np.isfinite(ts) & st.valid & active[:, None])
        age = np.maximum(0.0, now - ts) / DAY
        lam = LN2 / self.effective_half_life
        with np.errstate(invalid="ignore"):
            mult = np.where(np.isfinite(ts), np.exp(-lam * age), 1.0)
        return _finish(st, st.score * mult, active, self.sort)


__all__ = ["RecencyBoost", "DecayFloor", "HalfLifeDecay", "openclaw_file_timestamp", 
           "openclaw_is_evergreen", "counts_ages", "record_ages", "DAY"]
