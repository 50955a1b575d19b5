"""HookClaw's utility tracker (PIPELINES.md §C.4) and the ``score.utility`` stage."""
import json

import pytest

from evalkit.engine.context import make_context
from retrievers.types import DataError

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked
from retrievers.stages import ConfigError, Context
from retrievers.stages.helpers.feedback import UtilityTracker, is_citation, learn_utility, significant_words

CHUNK = "Fixed DatePicker validation bug in RouteOps; root cause was timezone handling"
RESPONSES = [
    ("The DatePicker bug in RouteOps was caused by timezone handling, which we fixed.", 6, 0.5),
    ("Sure, here is a haiku.", 0, 0.5),
    ("RouteOps DatePicker timezone handling", 4, 0.6),
    ("Root cause: timezone handling in the DatePicker validation", 6, 4 / 6),
    ("Fixed.", 1, 4 / 7),
]


def test_significant_words():
    assert significant_words(CHUNK) == ["fixed", "datepicker", "validation", "routeops", "root", "cause",
                                        "timezone", "handling"]
    assert significant_words("a/b-c_d.e,f:g;h!i?j(k)l") == []
    assert significant_words("same same same") == ["same", "same", "same"]  # duplicates kept


def test_utility_tracker_vector():
    tr = UtilityTracker()
    words = significant_words(CHUNK)
    for response, matched, utility in RESPONSES:
        assert sum(w in response.lower() for w in words) == matched
        tr.record_injection("s", [("memory/2026-02-13.md", CHUNK)])
        tr.record_response("s", response)
        assert tr.utility("memory/2026-02-13.md") == pytest.approx(utility, abs=1e-6)
    assert tr.scores["memory/2026-02-13.md"] == {"retrievals": 5, "citations": 3}
    assert tr.utility("unknown") == 0.5
    assert is_citation(CHUNK, RESPONSES[2][0]) and not is_citation(CHUNK, RESPONSES[4][0])
    assert not is_citation("a b c", "a b c")  # no significant word → ratio 0


def test_pending_is_per_session_and_cleared():
    tr = UtilityTracker()
    tr.record_injection("s1", [("k", CHUNK)])
    tr.record_response("s2", RESPONSES[0][0])  # other session: nothing pending there
    tr.record_response("s1", "")  # empty response clears the pending list without a citation
    tr.record_response("s1", RESPONSES[0][0])
    assert tr.scores["k"] == {"retrievals": 1, "citations": 0}


def test_learn_utility_from_a_query_log(tmp_path):
    docs = [{"id": "d1", "path": "memory/2026-02-13.md", "text": CHUNK}, {"id": "d2", "text": "Serilog sinks to Seq"}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {}})
    events = [{"ts": f"2026-02-1{i}T10:00:00Z", "query": "what broke?", "session": "s", "injected": ["d1", "d2", "zz"],
               "response": r} for i, (r, _, _) in enumerate(RESPONSES)]
    u = learn_utility(events, cs.corpus)
    assert u == {"d1": pytest.approx(4 / 7), "d2": pytest.approx(1 / 7)}
    assert learn_utility(events, cs.corpus, key="path")["memory/2026-02-13.md"] == pytest.approx(4 / 7)
    assert learn_utility(events, {"d1": CHUNK}) == {"d1": pytest.approx(4 / 7)}
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    from evalkit.data.readers.querylog import load_querylog
    assert learn_utility(load_querylog(log).events, cs.corpus) == u
    assert learn_utility(load_querylog(log).queries(), cs.corpus) == u


def _cs():
    docs = [{"id": d, "text": d} for d in ("a", "b", "c")]
    return candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.88}, {"id": "c", "score": 0.5}]}})


def test_utility_stage_rrf_and_multiply(tmp_path):
    cs = _cs()
    util = {"b": 0.9, "a": 0.2}
    stages = [{"type": "fuse.single", "arm": "vec"}, {"type": "score.utility", "mode": "rrf", "weight": 1.0}]
    st = build_pipeline({"name": "t", "stages": stages}).run(cs, Context(options={"utility": util}))
    r = dict(ranked(st, cs, 0))
    # utility ranks: b (0.9) 1, c (0.5, unknown) 2, a (0.2) 3
    assert r == {"b": pytest.approx(0.88 + 1 / 61), "a": pytest.approx(0.9 + 1 / 63), "c": pytest.approx(0.5 + 1 / 62)}
    assert [d for d, _ in ranked(st, cs, 0)] == ["a", "b", "c"]
    st = build_pipeline({"name": "t", "stages": [stages[0], {"type": "score.utility", "mode": "multiply",
                                                             "weight": 0.5}]}).run(cs, Context(options={"utility": util}))
    assert dict(ranked(st, cs, 0)) == {"a": pytest.approx(0.9 * 0.7), "b": pytest.approx(0.88 * 1.4), "c": 0.5}
    with pytest.raises(ConfigError, match="utility"):
        build_pipeline({"name": "t", "stages": stages}).run(cs)
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"ts": "2026-02-10T00:00:00Z", "query": "q", "injected": ["c"], "response": "c"}) + "\n")
    p = build_pipeline({"name": "t", "stages": [stages[0], {"type": "score.utility", "log": str(log)}]})
    assert p.query_logs() == [str(log)]
    with pytest.raises(ConfigError, match="not loaded"):  # the stage never opens the file itself
        p.run(cs)
    st = p.run(cs, make_context([p]))  # the harness loads the logs a pipeline names
    assert st.extra["utility"][0].tolist() == [0.5, 0.5, 0.5]  # 1 retrieval < 3 → neutral
    gone = build_pipeline({"name": "t", "stages": [{"type": "score.utility", "log": str(tmp_path / "nope.jsonl")}]})
    with pytest.raises(DataError, match="nope.jsonl.*not found"):
        make_context([gone])
