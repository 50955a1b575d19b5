"""Pipelines from dicts: stage order, validation of stage names and parameters, the trace, the State sort."""
import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked
from retrievers.stages import ConfigError, Context


def _cs():
    return candidates_from_json({"query": "q", "documents": [{"id": i, "text": i} for i in "abcde"],
                                 "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.5},
                                                  {"id": "c", "score": 0.4}],
                                          "bm25": [{"id": "c", "score": 9}, {"id": "d", "score": 3},
                                                   {"id": "a", "score": 1}]}})


def test_rrf_tie_keeps_first_seen_order_and_closed_form():
    cs = _cs()
    p = build_pipeline({"name": "x", "stages": [{"type": "fuse.rrf", "arms": ["vec", "bm25"]}]})
    out = ranked(p.run(cs), cs, 0)
    assert [d for d, _ in out] == ["a", "c", "b", "d"]
    assert out[0][1] == pytest.approx(1 / 61 + 1 / 63)
    assert out[3][1] == pytest.approx(1 / 62)


def test_min_score_and_topk_keep_order():
    cs = _cs()
    p = build_pipeline({"name": "x", "stages": [{"type": "fuse.single", "arm": "bm25"},
                                                {"type": "filter.min_score", "threshold": 2},
                                                {"type": "cutoff.top_k", "k": 1}]})
    assert ranked(p.run(cs), cs, 0) == [("c", 9.0)]


def test_unknown_stage_and_param_are_rejected_with_choices():
    with pytest.raises(ConfigError, match="unknown stage 'nope'.*valid:"):
        build_pipeline({"name": "x", "stages": [{"type": "nope"}]})
    with pytest.raises(ConfigError, match="unknown parameter.*wat.*valid:"):
        build_pipeline({"name": "x", "stages": [{"type": "cutoff.top_k", "wat": 1}]})
    with pytest.raises(ConfigError, match="out of range"):
        build_pipeline({"name": "x", "stages": [{"type": "cutoff.top_k", "k": -1}]})


def test_trace_records_every_stage():
    cs = _cs()
    p = build_pipeline({"name": "x", "stages": [{"type": "fuse.single", "arm": "vec"},
                                                {"type": "cutoff.top_k", "k": 2}]})
    st = p.run(cs, Context(trace=True))
    assert [t[0] for t in st.trace] == ["fuse.single", "cutoff.top_k"]
    assert (st.trace[0][1][0] >= 0).sum() == 3 and (st.trace[1][1][0] >= 0).sum() == 2


def test_state_sort_is_stable_and_empty_last():
    cs = _cs()
    p = build_pipeline({"name": "x", "stages": [{"type": "fuse.single", "arm": "vec"}]})
    st = p.run(cs)
    st2 = st.with_score(np.zeros_like(st.score)).sort()
    assert list(st2.col[0]) == list(st.col[0])
