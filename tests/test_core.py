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


def test_candidate_file_schema_errors_name_the_field():
    from retrievers.types import DataError
    with pytest.raises(DataError, match=r"documents\[0\]\.text"):
        candidates_from_json({"query": "q", "documents": [{"id": "a"}], "arms": {}})
    with pytest.raises(DataError, match=r"arms\.vec\[0\]\.id.*unknown document"):
        candidates_from_json({"query": "q", "documents": [{"id": "a", "text": "x"}],
                              "arms": {"vec": [{"id": "zz", "score": 1}]}})


def test_state_sort_is_stable_and_empty_last():
    cs = _cs()
    p = build_pipeline({"name": "x", "stages": [{"type": "fuse.single", "arm": "vec"}]})
    st = p.run(cs)
    st2 = st.with_score(np.zeros_like(st.score)).sort()
    assert list(st2.col[0]) == list(st.col[0])


@pytest.mark.parametrize("case", ["query_dim", "mixed_doc_dims"])
def test_embeddings_of_other_sizes_are_kept_as_given(tmp_path, capsys, case):
    """Issue 19: a candidate file may hold vectors of other sizes than each other or than the query (the stages
    then do what the original does with a mismatch); `evalkit score` runs and writes its output."""
    import json

    from evalkit.cli import main
    docs = [{"id": "a", "text": "alpha", "embedding": [1.0, 0.0, 0.0]},
            {"id": "b", "text": "beta", "embedding": [0.0, 1.0, 0.0]}]
    obj = {"query": "q", "documents": docs, "arms": {"vec": [{"id": "a", "score": 0.9}, {"id": "b", "score": 0.2}],
                                                "fts": []}}
    if case == "query_dim":
        obj["query_embedding"] = [1.0, 0.0]  # 2-d query against 3-d documents
    else:
        docs[1]["embedding"] = [0.0, 1.0]
    src, out = tmp_path / "cands.json", tmp_path / "out.json"
    src.write_text(json.dumps(obj), encoding="utf-8")
    rc = main(["score", "--preset", "openclaw_core_2026_2_26", "--candidates", str(src), "--out", str(out)])
    assert rc == 0 and capsys.readouterr().err == ""
    got = json.loads(out.read_text())["queries"][0]["ranked"]
    assert [(r["id"], r["score"]) for r in got] == [("a", pytest.approx(0.63))]


@pytest.mark.parametrize("bad, field", [
    ([1.0, "x", 0.0], "documents[0].embedding[1]"),
    ({"a": 1}, "documents[0].embedding"),
])
def test_a_malformed_embedding_in_a_candidate_file_is_one_line_and_nonzero(tmp_path, capsys, bad, field):
    """`evalkit score` with an embedding that is not a list of numbers: exit 2, one `evalkit: error:` line naming
    the field, no output file written."""
    import json

    from evalkit.cli import main
    obj = {"query": "q", "documents": [{"id": "a", "text": "alpha", "embedding": bad}],
           "arms": {"vec": [{"id": "a", "score": 0.9}], "fts": []}}
    src, out = tmp_path / "cands.json", tmp_path / "out.json"
    src.write_text(json.dumps(obj), encoding="utf-8")
    rc = main(["score", "--preset", "openclaw_core_2026_2_26", "--candidates", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("evalkit: error:") and field in err[0]
    assert "Traceback" not in err[0] and not out.exists()
