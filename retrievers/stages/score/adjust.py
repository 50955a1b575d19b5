"""The seed systems' own score adjustments (``score.*``): each rescales or shifts a row's score by a property of the
document — its age, importance, length, a path-level FTS hit, its learned utility.

* ``score.recency_boost`` — lancedb-pro's additive recency boost;
* ``score.importance``, ``score.length_norm`` — lancedb-pro's score multipliers;
* ``score.hookclaw_fts_boost`` — HookClaw v2.1 path-level FTS boost (§C.3);
* ``score.utility`` — HookClaw's utility tracker as a signal (:mod:`retrievers.stages.helpers.feedback`).
"""
from __future__ import annotations

import numpy as np

from retrievers.candidates.table import CandidateSet, State, take_rows
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.ages import decay_curve, lancedb_age_days, rescore
from retrievers.stages.helpers.feedback import learn_utility
from retrievers.stages.helpers.normalize import clamp01
from retrievers.stages.helpers.signals import file_ids, resolve_arm, stable_desc_perm
from retrievers.text import utf16_truncate


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
    half_life_days: float = param(14.0, doc="raw, as the original reads it: <= 0 disables the stage")
    weight: float = param(0.10, doc="raw: 0 disables the stage (a negative weight lowers recent rows, as shipped)")
    curve: str = param("exp", choices=("exp", "half_life"))
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_days <= 0 or self.weight == 0:
            return st
        active = np.isfinite(cs.as_of)
        age = lancedb_age_days(st, cs, ctx, active)
        boost = decay_curve(age, self.half_life_days, self.curve) * self.weight
        new = clamp01(st.score + boost, st.score)
        return rescore(st, new, active, self.sort)


_LEARNED: dict = {}


def _learned(events: list, corpus, key: str) -> dict[str, float]:
    """:func:`learn_utility` once per (log events, corpus, key) object triple: latency runs build a candidate set
    per query over the same corpus. The objects are kept with the value, so an id is never reused while cached."""
    ck = (id(events), id(corpus), key)
    hit = _LEARNED.get(ck)
    if hit is None or hit[0] is not events or hit[1] is not corpus:
        if len(_LEARNED) >= 8:
            _LEARNED.pop(next(iter(_LEARNED)))
        hit = _LEARNED[ck] = (events, corpus, learn_utility(events, corpus, key))
    return hit[2]


@register
class UtilityScore(Stage):
    """Feed HookClaw utility scores (§C.4) into the ranking (seed 004 §4.1: "Factor utility_score into RRF").

    Utilities come from ``ctx.options["utility"]`` (``{key: utility}``, e.g. :func:`learn_utility` on a training
    log) or, when ``log`` is set, are learned from that query-log file (JSONL, DESIGN.md §4) against the
    candidate corpus; unknown documents get the neutral 0.5. ``key``: ``"id"`` or ``"path"`` (HookClaw's key).

    * ``mode = "rrf"`` (default): the 5th RRF signal — rows ranked by utility desc (stable: ties keep the
      current order), ``score += weight/(k + rank)`` (weight 0.1, k 60; for lists already scored by RRF).
    * ``mode = "multiply"``: ``score ×= 1 + weight·(2u − 1)`` (neutral at u = 0.5; range [1 − w, 1 + w]).

    Then a stable sort by score desc. Extra column ``utility``.
    """

    name = "score.utility"
    kind = "score"
    mode: str = param("rrf", choices=("rrf", "multiply"))
    weight: float = param(0.1, ge=0.0)
    k: float = param(60.0, ge=0.0)
    key: str = param("id", choices=("id", "path"))
    log: str = param("", doc="query-log JSONL to learn from ('' = ctx.options['utility'])")
    query_log_param = "log"

    def _utilities(self, cs: CandidateSet, ctx: Context) -> dict[str, float]:
        opts = (ctx.options or {}) if ctx is not None else {}
        if self.log:
            events = opts.get("query_logs", {}).get(self.log)
            if events is None:
                raise ConfigError(f"stage {self.name!r}: query log {self.log!r} was not loaded (the harness loads "
                                  f"the logs a pipeline names; a library caller passes "
                                  f"ctx.options['query_logs'] = {{path: events}})")
            return _learned(events, cs.corpus, self.key)
        u = opts.get("utility")
        if u is None:
            raise ConfigError(f"stage {self.name!r} needs ctx.options['utility'] ({{key: utility}}) or a 'log' file")
        return u

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        util = self._utilities(cs, ctx)
        corpus = cs.corpus
        keys = corpus.ids if self.key == "id" else [p or utf16_truncate(t, 100)
                                                   for p, t in zip(corpus.paths, corpus.raw_texts)]
        sig = hash(frozenset(util.items()))
        per_col = cs.memo(("score.utility", self.key, sig), lambda: np.where(
            cs.valid, np.array([util.get(keys[d], 0.5) if d >= 0 else np.nan for d in cs.doc.ravel()],
                               dtype=np.float64).reshape(cs.doc.shape), np.nan))
        u = st.gather(per_col)
        valid = st.valid
        if self.mode == "rrf":
            key = np.where(valid, u, -np.inf)
            order = np.argsort(-key, axis=1, kind="stable")
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, np.arange(1, order.shape[1] + 1)[None, :].repeat(order.shape[0], 0),
                              axis=1)
            new = st.score + self.weight / (self.k + rank)
        else:
            new = st.score * (1.0 + self.weight * (2.0 * u - 1.0))
        out = State(st.col, np.where(valid, new, -np.inf), st.skipped, dict(st.extra, utility=u), st.info, st.trace)
        return out.sort()


@register
class HookClawFTSBoost(Stage):
    """HookClaw v2.1 FTS path boost (§C.3; ``hook-handler.js`` + ``fts-search.js`` at 4cc4583).

    FTS rows = the lexical ``arm`` (query transform ``hookclaw_fts``: OR of the non-stop-word tokens) in rank
    order, first ``fetch`` (SQL ``LIMIT 2·(2·maxResults)`` = 12); ``fts = rel/(rel + rel_k)`` with ``rel`` = the raw
    BM25 score (= −FTS5 rank; non-finite or ≤ 0 → 0), rel_k 2 (−0.5 → 0.2, −2 → 0.5, −6 → 0.75); stable sort
    desc, keep ``keep`` (2·maxResults = 6). Per path the max fts. Every incoming row whose *path* has an fts
    score gets ``score = min(1, score + weight·fts)`` (weight = ``ftsBoostWeight`` 0.3; all chunks of a
    matching file are boosted); FTS-only hits are not added; rows are re-sorted (stable) only for queries where
    something was boosted. The FTS search only runs when the incoming list is non-empty (automatic here).
    ``key = "path"`` is as shipped (documents without a path all share the key ""); ``"path_or_id"`` keys a
    path-less document by its id. Ties: stable (the incoming order). Extra column ``fts``. Example C3: A 0.52 → 0.72, B 0.51 → 0.71, X 0.55.
    """

    name = "score.hookclaw_fts_boost"
    kind = "score"
    arm: str = param("fts")
    fetch: int = param(12, ge=0)
    keep: int = param(6, ge=0)
    weight: float = param(0.3, ge=0.0)
    rel_k: float = param(2.0, gt=0.0)
    key: str = param("path", choices=("path", "path_or_id"))

    def fts_by_col(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) fts score of the kept FTS rows (NaN elsewhere)."""
        def build():
            hits = resolve_arm(cs, self.arm)
            out = np.full((cs.Q, cs.C), np.nan)
            if hits is None:
                return out
            present = hits.present(self.fetch) if self.fetch else np.zeros((cs.Q, cs.C), bool)
            rel = np.where(np.isfinite(hits.score), hits.score, 0.0)
            rel = np.where(rel > 0, rel, 0.0)
            fts = rel / (rel + self.rel_k)
            # stable sort desc within the fetched rows (rank order breaks ties), keep the first `keep`
            order_key = np.where(present, hits.rank, np.iinfo(np.int32).max)
            by_rank = np.argsort(order_key, axis=1, kind="stable")
            f_sorted = take_rows(np.where(present, fts, -np.inf), by_rank)
            perm = np.argsort(-f_sorted, axis=1, kind="stable")
            cols = take_rows(by_rank, perm)[:, : self.keep]
            ok = take_rows(present, cols)
            qi = np.repeat(np.arange(cs.Q)[:, None], cols.shape[1], axis=1)
            out[qi[ok], cols[ok]] = fts[qi[ok], cols[ok]]
            return out
        return cs.memo(("score.hookclaw_fts_boost", self.arm, self.fetch, self.keep, self.rel_k), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        fts = self.fts_by_col(cs)
        files = file_ids(cs, empty_is_own=self.key == "path_or_id")
        row_files = st.gather(files, fill=-1)
        same = (row_files[:, :, None] == files[:, None, :]) & ~np.isnan(fts)[:, None, :] & st.valid[:, :, None]
        best = np.where(same, fts[:, None, :], -np.inf).max(axis=2) if cs.C else np.full(st.col.shape, -np.inf)
        hit = np.isfinite(best)
        new = np.where(hit, np.minimum(1.0, st.score + self.weight * np.where(hit, best, 0.0)), st.score)
        out = State(st.col, np.where(st.valid, new, -np.inf), st.skipped,
                    dict(st.extra, fts=np.where(hit, best, np.nan)), st.info, st.trace)
        return out.permute(stable_desc_perm(out.score, out.valid, hit.any(axis=1)))


def _finish(st: State, new: np.ndarray, sort: bool) -> State:
    out = st.with_score(new)
    return out.sort() if sort else out


@register
class Importance(Stage):
    """Importance weight: ``score ← clamp01(score·(base + weight·imp))``, ``imp = importance`` or
    ``default`` when missing (0 is kept). Non-finite result → ``base·score`` (lancedb-pro's fallback).

    Defaults base 0.7, weight 0.3, default 0.7 (lancedb-pro @6a50220 step 7: ×(0.7 + 0.3·imp)). Then a stable sort by
    score (ties keep the previous order) unless ``sort = false``.
    """

    name = "score.importance"
    kind = "score"
    base: float = param(0.7, ge=0.0, doc="factor at importance 0")
    weight: float = param(0.3, ge=0.0, doc="added factor per unit of importance")
    default: float = param(0.7, ge=0.0, le=1.0, doc="importance of an entry without one")
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        imp = st.gather(cs.doc_feature("importance"))
        imp = np.where(np.isnan(imp), self.default, imp)
        s = st.score
        with np.errstate(all="ignore"):
            new = clamp01(s * (self.base + self.weight * imp), self.base * s)
        return _finish(st, new, self.sort)


@register
class LengthNorm(Stage):
    """Length normalisation: ``score ← clamp01(score / (1 + strength·log2(max(len/anchor, 1))))``.

    ``len`` = text length in UTF-16 code units (``corpus.length``); entries shorter than the anchor are not
    boosted. ``anchor = 0`` → stage skipped (no sort either). Non-finite result → ``0.3·score``.
    Defaults anchor 500, strength 0.5 (lancedb-pro @6a50220 step 8: 500 → 1, 1000 → 0.666667, 2000 → 0.5).
    Then a stable sort by score unless ``sort = false``.
    """

    name = "score.length_norm"
    kind = "score"
    anchor: float = param(500.0, doc="characters (UTF-16 units); raw, <= 0 disables the stage")
    strength: float = param(0.5, ge=0.0)
    sort: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.anchor <= 0:
            return st
        ln = st.gather(cs.doc_feature("length"))
        with np.errstate(all="ignore"):
            f = 1.0 / (1.0 + self.strength * np.log2(np.maximum(ln / self.anchor, 1.0)))
            new = clamp01(st.score * f, 0.3 * st.score)
        return _finish(st, new, self.sort)


__all__ = ["HookClawFTSBoost", "Importance", "LengthNorm", "RecencyBoost", "UtilityScore"]
