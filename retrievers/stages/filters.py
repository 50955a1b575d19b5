"""Filters and cutoffs: drop rows by score, path or content; keep the first K."""
from __future__ import annotations

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import Context, Stage, param, register


@register
class TopK(Stage):
    """Keep the first ``k`` rows (every system's final ``maxResults`` / ``limit``)."""

    name = "cutoff.top_k"
    kind = "cutoff"
    k: int = param(10, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return st.head(self.k)


@register
class MinScore(Stage):
    """Keep rows with ``score >= threshold`` (inclusive), order unchanged.

    OpenClaw: ``minScore`` 0.35 after decay + MMR; lancedb-pro: ``minScore`` 0.3 after fusion and
    ``hardMinScore`` 0.35 after all multipliers; HookClaw passes 0.5 to OpenClaw.
    """

    name = "filter.min_score"
    kind = "filter"
    threshold: float = param(0.35)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return st.keep(st.score >= self.threshold)
