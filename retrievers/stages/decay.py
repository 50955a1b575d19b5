"""The ``decay.*`` stages: time decays (the additive recency boost ``score.recency_boost`` lives in
:mod:`retrievers.stages.score`; the shared time helpers in :mod:`retrievers.stages.helpers.ages`). Time is
``cs.as_of`` (epoch seconds); a query without ``as_of`` (NaN) has no notion of "now", so these stages leave its list
untouched (not even re-sorted).

Each system dates a document its own way, and the stages follow it:

* lancedb-pro stores a timestamp per entry → ``corpus.timestamp`` (missing, 0 or negative ⇒ "now").
* OpenClaw derives dates from *paths* (``memory/YYYY-MM-DD.md``), treats other memory files as evergreen and
  falls back to the file mtime (``corpus.mtime``) — see :func:`openclaw_file_timestamp`.

Stages: ``decay.floor`` (lancedb-pro multiplicative decay with a floor), ``decay.half_life`` (OpenClaw temporal
decay), ``decay.hookclaw`` (HookClaw's hour-based half-life decay from the path date, §C.1 step 5).

Negative ages: see :mod:`retrievers.stages.helpers.ages`.
"""
from __future__ import annotations

import math

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.corpus import DATED_MEMORY_PATH, dated_path_ts
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.helpers.ages import DAY, LN2, counts_ages, decay_curve, lancedb_age_days, record_ages, rescore
from retrievers.stages.helpers.normalize import clamp01
from retrievers.stages.helpers.query_text import path_dates
from retrievers.stages.helpers.signals import doc_flags, stable_desc_perm


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
    half_life_days: float = param(60.0, doc="raw, as the original reads it: <= 0 disables the stage")
    floor: float = param(0.5, ge=0.0, le=1.0)
    curve: str = param("exp", choices=("exp", "half_life"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_days <= 0:
            return st
        active = np.isfinite(cs.as_of)
        age = lancedb_age_days(st, cs, ctx, active)
        f = self.floor + (1.0 - self.floor) * decay_curve(age, self.half_life_days, self.curve)
        new = clamp01(st.score * f, self.floor * st.score)
        return rescore(st, new, active, self.sort)


@register
class HalfLifeDecay(Stage):
    """OpenClaw temporal decay: ``score ← score·exp(−ln2/h · age_days)`` (= ``2^(−age/h)``), no clamping.

    ``h = half_life_days`` raw, as ``calculateTemporalDecayMultiplier`` takes it: a non-integer half-life is used
    as is and ``h <= 0`` (or non-finite) disables the decay (multiplier 1). OpenClaw's config rule
    ``max(1, floor(halfLifeDays))`` (§A.1: 0 or 0.5 → 1) lives in the config front end
    (``retrievers/presets/config/openclaw.py``). ``age = max(0, now − ts)/DAY``:
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
    half_life_days: float = param(30.0, doc="raw half-life in days; <= 0 disables the decay")
    timestamps: str = param("openclaw_path", choices=("openclaw_path", "timestamp"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        active = np.isfinite(cs.as_of)
        if not self.enabled:
            return rescore(st, st.score, np.ones(cs.Q, dtype=bool), self.sort)
        if self.timestamps == "openclaw_path":
            ts = st.gather(_openclaw_ts(cs))
        else:
            ts = st.gather(cs.doc_feature("timestamp"))
        now = cs.as_of[:, None]
        if counts_ages(ctx):
            record_ages(st, now - ts, np.isfinite(ts) & st.valid & active[:, None])
        age = np.maximum(0.0, now - ts) / DAY
        h = self.half_life_days
        lam = LN2 / h if (math.isfinite(h) and h > 0) else 0.0
        with np.errstate(invalid="ignore"):
            mult = np.where(np.isfinite(ts), np.exp(-lam * age), 1.0)
        return rescore(st, st.score * mult, active, self.sort)


@register
class HookClawDecay(Stage):
    """HookClaw ``applyTemporalDecay`` (§C.1 step 5): ``score ×= exp(−ln2 · ageH / half_life_hours)``.

    Date = the first ``\\d{4}-\\d{2}-\\d{2}`` anywhere in the path at 00:00 UTC, parsed with V8 semantics
    (``2026-02-30`` → 2026-03-02; month 00/13+, day 00/32+ invalid → no date); ``ageH = max(0, as_of −
    date)/3600``: a date after ``as_of`` (negative age) counts as age 0, factor 1 (PIPELINES.md §C.1 step 5), and
    such rows are counted (:func:`retrievers.stages.decay.record_ages`); undated rows unchanged. Then a stable
    sort by score desc. ``half_life_hours <= 0`` → the list is returned untouched and not re-sorted (as is a
    query without ``as_of``). Defaults: 24 h (v2.0 handler default, seed 004 §1.1), v2.1 plugin default 168 h
    (12 h → 0.951695, 168 h → 0.5). ``date_source = "path_or_timestamp"`` falls back to the document timestamp
    (path-less datasets; not HookClaw). With ``respect_topic_shift`` queries flagged by ``gate.topic_shift``
    (option B) are not decayed.
    """

    name = "decay.hookclaw"
    kind = "score"
    half_life_hours: float = param(24.0)
    date_source: str = param("path", choices=("path", "path_or_timestamp"))
    respect_topic_shift: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_hours <= 0 or st.col.shape[1] == 0:
            return st
        dates = path_dates(cs)
        if self.date_source == "path_or_timestamp":
            dates = np.where(np.isnan(dates), cs.doc_feature("timestamp"), dates)
        d = st.gather(dates)
        now = cs.as_of[:, None]
        active = ~np.isnan(cs.as_of)
        shift = st.info.get("topic_shift")
        if self.respect_topic_shift and shift is not None:
            active &= ~np.asarray(shift, dtype=bool)
        apply = active[:, None] & st.valid & ~np.isnan(d)
        if counts_ages(ctx):
            record_ages(st, now - d, apply)
        age_h = np.maximum(0.0, now - d) / 3600.0
        factor = np.exp(-LN2 / self.half_life_hours * age_h)
        new = np.where(apply, st.score * np.where(apply, factor, 1.0), st.score)
        out = State(st.col, new, st.skipped, st.extra, st.info, st.trace)
        return out.permute(stable_desc_perm(new, st.valid, active))


__all__ = ["DecayFloor", "HalfLifeDecay", "HookClawDecay", "openclaw_file_timestamp", "openclaw_is_evergreen"]
