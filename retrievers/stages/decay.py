"""The ``decay.*`` stages: time decays (the additive recency boost ``score.recency_boost`` lives in
:mod:`retrievers.stages.score.adjust`; the shared time helpers in :mod:`retrievers.stages.helpers.ages`). Time is
``cs.as_of`` (epoch seconds); a query without ``as_of`` (NaN) has no notion of "now", so these stages leave its list
untouched (not even re-sorted).

Each system dates a document its own way, and the stages follow it:

* lancedb-pro stores a timestamp per entry → ``corpus.timestamp`` (missing, 0 or negative ⇒ "now").
* OpenClaw derives dates from *paths* (``memory/YYYY-MM-DD.md``), treats other memory files as evergreen and
  falls back to the file mtime (``corpus.mtime``) — see :func:`openclaw_file_timestamp`.

Stages: ``decay.floor`` (lancedb-pro multiplicative decay with a floor), ``decay.half_life`` (OpenClaw temporal
decay), ``decay.hookclaw`` (HookClaw's hour-based half-life decay from the path date, §C.1 step 5),
``decay.stated_age`` (rows whose age matches the age the question states score up; no seed system).

Negative ages: see :mod:`retrievers.stages.helpers.ages`.
"""
from __future__ import annotations

import math

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.index.corpus import DATED_MEMORY_PATH, dated_path_ts
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.helpers.ages import DAY, LN2, counts_ages, decay_curve, lancedb_age_days, record_ages, rescore
from retrievers.stages.helpers.normalize import clamp01, score_spread
from retrievers.stages.helpers.query_text import path_dates
from retrievers.stages.helpers.stated_ages import query_stated_ages
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


@register
class StatedAge(Stage):
    """Time-aware scoring from the question's own words: a question that states when something happened ("what did
    I buy 10 days ago?", "last week") lifts the rows whose age matches. No seed system does this (HookClaw's
    ``filter.hookclaw_temporal`` *filters* on a window of its own rules); it is a tuner option.

    Spans: :func:`retrievers.stages.helpers.stated_ages.stated_ages` of the query text, in days before its
    ``as_of`` (``10 days ago`` → [10, 10], ``last week`` → [0, 7]). A row's age ``a = (as_of − timestamp)/DAY``
    (``corpus.timestamp``); its distance to a span ``[lo, hi]`` is ``max(lo − a, a − hi, 0)`` and the tolerance
    ``σ = tolerance_days + relative_tolerance · hi`` (a far-back age is stated less precisely). Match ``m`` = the
    best over the query's spans of ``exp(−½·(dist/σ)²)`` (``shape = "gauss"``) or ``1[dist ≤ σ]`` (``"box"``);
    σ = 0 matches only ``dist = 0``; an undated row has ``m = 0``. Then ``score ← score + weight · sd(score) · m``
    (``sd`` the population spread of the query's incoming scores over its rows, 1 when 0 or not finite:
    :func:`retrievers.stages.helpers.normalize.score_spread`) and a stable sort. A query without an ``as_of`` or
    without a stated age keeps its rows, scores and order (not re-sorted); ``weight = 0``, or no query of the batch
    stating an age, → the input state itself. For the queries it scores, rows dated after ``as_of`` (negative age;
    matched like any other age) are counted (:func:`record_ages`). Extra column ``stated_age`` (= ``m``; NaN for
    the queries it leaves alone). Defaults tolerance 1 day, relative 0.2, gauss, weight 1.
    Example (gauss, tolerance 1, relative 0, weight 1): "what did I buy 2 days ago?", rows aged 2, 3, 0 days with
    scores 3, 2, 1 → m = 1, exp(−½) = 0.606531, exp(−2) = 0.135335; sd(3, 2, 1) = 0.816497 → 3.816497, 2.495230,
    1.110501.
    """

    name = "decay.stated_age"
    kind = "score"
    tolerance_days: float = param(1.0, ge=0.0, le=36525.0, doc="days of slack around every stated age")
    relative_tolerance: float = param(0.2, ge=0.0, le=10.0,
                                      doc="extra slack per day of stated age (0.2: ±6 days a month)")
    shape: str = param("gauss", choices=("gauss", "box"))
    weight: float = param(1.0, ge=0.0, le=100.0, doc="in units of the query's score spread; 0 disables the stage")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.weight == 0 or st.col.shape[1] == 0:
            return st
        spans = query_stated_ages(cs)
        width = max((len(s) for s in spans), default=0)
        active = np.isfinite(cs.as_of) & np.array([len(s) > 0 for s in spans], dtype=bool)
        if width == 0 or not active.any():
            return st
        lo = np.full((cs.Q, width), np.nan)
        hi = np.full((cs.Q, width), np.nan)
        for q, s in enumerate(spans):
            for j, (a, b) in enumerate(s):
                lo[q, j], hi[q, j] = a, b
        ts = st.gather(cs.doc_feature("timestamp"))
        dated = np.isfinite(ts) & st.valid & active[:, None]
        if counts_ages(ctx):
            record_ages(st, cs.as_of[:, None] - ts, dated)
        with np.errstate(invalid="ignore"):
            age = ((cs.as_of[:, None] - ts) / DAY)[:, :, None]
            dist = np.maximum(np.maximum(lo[:, None, :] - age, age - hi[:, None, :]), 0.0)
            sigma = self.tolerance_days + self.relative_tolerance * hi[:, None, :]
            if self.shape == "box":
                m = (dist <= sigma).astype(np.float64)
            else:
                m = np.where(sigma > 0, np.exp(-0.5 * (dist / np.where(sigma > 0, sigma, 1.0)) ** 2),
                             (dist == 0).astype(np.float64))
        m = np.where(np.isfinite(lo)[:, None, :], m, 0.0).max(axis=2)
        m = np.where(dated, m, 0.0)
        valid = st.valid
        spread = score_spread(st.score, valid)
        extra = dict(st.extra, stated_age=np.where(valid & active[:, None], m, np.nan))
        out = State(st.col, st.score, st.skipped, extra, st.info, st.trace)
        return rescore(out, st.score + self.weight * spread * m, active, True)


__all__ = ["DecayFloor", "HalfLifeDecay", "HookClawDecay", "StatedAge", "openclaw_file_timestamp",
           "openclaw_is_evergreen"]
