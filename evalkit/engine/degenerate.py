"""Degenerate configurations, named: a stage that removes every candidate for most queries, or a parameter outside
the range of the scores it is compared with. A run that scores 0 everywhere because a threshold was copied from a
system with another score scale must say why, in one line, not pass silently.

Read-only, from what the run already has: the per-stage trace of the pipeline run (:meth:`retrievers.pipeline.
Pipeline.run` with ``Context.trace``; rows, scores and skip flags after every stage) and the stages' own
declarations (``Stage.compares``: which parameter is compared with which score, and which side is kept;
:class:`retrievers.stages.base.Compared`). No stage or preset is named here.

Two checks, each one warning record (:mod:`evalkit.engine.run_warnings`):

* **removes everything** — among the queries that reach a stage with at least one row (or candidate, before the
  first stage that makes rows) and are not skipped, the share left with no row (or skipped) after it is at least
  :data:`REMOVAL_SHARE` (90 %); for a budget packer, the share of queries with rows that inject nothing. The first
  such stage is named (later ones see nothing);
* **outside the scores** — a declared parameter above every score it is compared with, or below every one (for
  ``"rows"``: the running scores of the rows entering the stage over all queries; for ``"info:<key>"``: the
  per-query score the stage recorded); the effect follows from the kept side: a floor above every score removes
  everything, below every score never removes anything. A stage's own output score (``"output"``, a reranker's
  floor) is not in the trace before the floor applies: such a floor is caught by the first check when it removes
  everything.
"""
from __future__ import annotations

import numpy as np

from evalkit.engine.run_warnings import warning

REMOVAL_SHARE = 0.9


def _present(col: np.ndarray, skipped: np.ndarray, fallback: np.ndarray | None) -> np.ndarray:
    """(Q,) queries that hold at least one row and are not skipped (``fallback``: the candidates, before any stage
    has made rows; None once one has — an empty table then means every row was removed)."""
    rows = (col >= 0).any(axis=1) if col.shape[1] or fallback is None else fallback
    return rows & ~skipped


def _label(s) -> str:
    """``filter.min_score``, or ``filter.min_score (hard_min)`` when the preset labels it differently."""
    return s.name if s.display in (s.name, s.name.rsplit(".", 1)[-1]) else f"{s.name} ({s.display})"


def removals(name: str, stages, cs, trace: list, injected: np.ndarray | None) -> list[dict]:
    """The first stage (in pipeline order) that leaves nothing for at least :data:`REMOVAL_SHARE` of the queries
    that reach it with rows; then the budget packer when it injects nothing for that share."""
    types = {s.display: s for s in stages}
    cands = (cs.doc >= 0).any(axis=1) if cs.doc.size else np.zeros(cs.Q, dtype=bool)
    before = cands.copy()
    rows_seen = False
    out = []
    for label, col, _score, skipped, _extra in trace:
        rows_seen = rows_seen or col.shape[1] > 0
        after = _present(col, skipped, None if rows_seen else cands)
        reached = int(before.sum())
        lost = int((before & ~after).sum())
        if reached and lost / reached >= REMOVAL_SHARE:
            s = types.get(label)
            what = "skips" if s is not None and s.kind == "gate" else "removes every candidate for"
            share = f"{100 * lost / reached:.0f} %"
            out.append(warning("degenerate_stage",
                               f"{name}: {_label(s) if s is not None else label} {what} {share} of "
                               f"the queries that reach it ({lost} of {reached}); every measure counts those queries "
                               f"as misses", name, lost))
            out[-1]["stage"] = label
            return out
        before = after
    if injected is not None and trace:
        packer = next((s for s in stages if s.kind == "budget"), None)
        has = before
        empty = has & ~injected.any(axis=1) if injected.size else has
        if packer is not None and has.sum() and empty.sum() / has.sum() >= REMOVAL_SHARE:
            share = f"{100 * empty.sum() / has.sum():.0f} %"
            out.append(warning("degenerate_stage",
                               f"{name}: {packer.name} injects nothing for {share} of the "
                               f"queries that have results ({int(empty.sum())} of {int(has.sum())}): its budget is "
                               f"smaller than one note", name, int(empty.sum())))
    return out


def _compared(stage, source: str, trace: list, info: dict) -> tuple[np.ndarray, str] | None:
    """(the scores a declared parameter meets, what they are) or None when the trace does not hold them."""
    if source == "rows":
        labels = [t[0] for t in trace]
        i = labels.index(stage.display) if stage.display in labels else -1
        if i <= 0:
            return None
        col, score, skipped = trace[i - 1][1], trace[i - 1][2], trace[i - 1][3]
        ok = (col >= 0) & np.isfinite(score) & ~skipped[:, None]
        return score[ok], "rows reaching it"
    if source.startswith("info:"):
        v = np.asarray(info.get(source.removeprefix("info:"), []), dtype=np.float64)
        return v[np.isfinite(v)], "queries"
    return None


def out_of_range(name: str, stages, trace: list, info: dict) -> list[dict]:
    """Every declared parameter (``Stage.compares``) above or below every score it is compared with."""
    out = []
    for s in stages:
        prm = s.params()
        for param, cmp in (getattr(s, "compares", {}) or {}).items():
            v = prm.get(param)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or s.params().get("enabled") is False:
                continue
            got = _compared(s, cmp.score, trace, info)
            if got is None or got[0].size == 0:
                continue
            vals, what = got
            lo, hi = float(vals.min()), float(vals.max())
            if lo <= v <= hi:
                continue
            above = v > hi
            keeps_all = above != cmp.kept_when_above()
            if s.kind == "gate":
                effect = "it never skips a query" if keeps_all else "it skips every query"
            else:
                effect = "it never removes anything" if keeps_all else "it removes all candidates"
            side = f"above every score seen (max {hi:.3g}" if above else f"below every score seen (min {lo:.3g}"
            out.append(warning("degenerate_parameter",
                               f"{name}: {_label(s)} {param} {v:g} is {side} over {vals.size:,} {what}): {effect}",
                               name))
            out[-1]["stage"] = s.display
    return out


def find_degenerate(name: str, pipeline, cs, st, injected: np.ndarray | None) -> list[dict]:
    """Both checks over one traced pipeline run (``st.trace`` must be set): warning records naming ``name``."""
    if st.trace is None:
        return []
    ranges = out_of_range(name, pipeline.stages, st.trace, st.info or {})
    named = {w["stage"] for w in ranges}  # a parameter outside its scores already says why the stage empties lists
    return [w for w in removals(name, pipeline.stages, cs, st.trace, injected) if w.get("stage") not in named] + ranges
