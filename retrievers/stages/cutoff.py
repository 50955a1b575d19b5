"""The ``cutoff.*`` stages: ``cutoff.top_k`` keeps the first K rows."""
from __future__ import annotations

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Context, Stage, param, register


@register
class TopK(Stage):
    """Keep the first ``k`` rows (every system's final ``maxResults`` / ``limit``). Order unchanged."""

    name = "cutoff.top_k"
    kind = "cutoff"
    k: int = param(10, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return st.head(self.k)


__all__ = ["TopK"]
