"""HookClaw's fusion and scoring stages (v2.0, v2.1), chained on OpenClaw's output: they read the incoming rows as
HookClaw's "vector results". References are to ``spec/PIPELINES.md``.

(``fuse.hookclaw_rrf``, HookClaw v2.0 ``fuseResults``, lives in :mod:`retrievers.stages.fuse.hookclaw`.)
* ``score.hookclaw_fts_boost`` — HookClaw v2.1 path-level FTS boost (§C.3).
* ``decay.hookclaw`` — HookClaw's hour-based half-life decay from the path date (§C.1 step 5).
"""
from __future__ import annotations

import math
import re

import numpy as np

from retrievers.candidates import CandidateSet, State, take_rows
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.decay import counts_ages, record_ages
from retrievers.stages.enrich import path_dates
from retrievers.stages.helpers.signals import file_ids, resolve_arm, stable_desc_perm

LN2 = math.log(2.0)


# ---- HookClaw v2.1 FTS boost ---------------------------------------------------------------------------------

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


# ---- HookClaw decay ------------------------------------------------------------------------------------------

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
