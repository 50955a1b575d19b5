"""The ``query.*`` stages.

``query.hookclaw_enrich`` records the entities and the temporal window per query in ``st.info`` (it does not change
the ranking: the consumers — ``fuse.hookclaw_rrf`` and ``filter.temporal_window`` — compute the same memoised values
themselves, so a preset can include or omit this stage without changing results). The query processing itself
(entities, temporal parsing, query transforms) lives in :mod:`retrievers.stages.helpers.query_text`.
"""
from __future__ import annotations

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Context, Stage, register
from retrievers.stages.helpers.query_text import query_entities, temporal_windows


@register
class HookClawEnrich(Stage):
    """HookClaw's query enrichment (§C.2), recorded for traces and reports; the ranking is unchanged.

    Writes ``st.info["entities"]`` (list per query; :func:`extract_entities`) and ``st.info["temporal_window"]``
    ((Q, 2) epoch seconds, NaN = none; :func:`parse_temporal` against each query's ``as_of``). Used by the
    ``hookclaw_v2_*`` presets (v2.0 feeds both into RRF; v2.1 computes and discards them). No parameters.
    """

    name = "query.hookclaw_enrich"
    kind = "query"

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        st.info["entities"] = query_entities(cs)
        st.info["temporal_window"] = temporal_windows(cs)
        return st


__all__ = ["HookClawEnrich"]
