"""The candidate JSON schema (retrievers/candidates/files.py, `evalkit score`): errors name the field; vectors of
other sizes are kept as given; a malformed embedding is one error line."""
import json

import pytest

from evalkit.cli import main
from retrievers.candidates.files import candidates_from_json
from retrievers.types import DataError


def test_candidate_file_schema_errors_name_the_field():
    with pytest.raises(DataError, match=r"documents\[0\]\.text"):
        candidates_from_json({"query": "q", "documents": [{"id": "a"}], "arms": {}})
    with pytest.raises(DataError, match=r"arms\.vec\[0\]\.id.*unknown document"):
        candidates_from_json({"query": "q", "documents": [{"id": "a", "text": "x"}],
                              "arms": {"vec": [{"id": "zz", "score": 1}]}})


@pytest.mark.parametrize("case", ["query_dim", "mixed_doc_dims"])
def test_embeddings_of_other_sizes_are_kept_as_given(tmp_path, capsys, case):
    """Issue 19: a candidate file may hold vectors of other sizes than each other or than the query (the stages
    then do what the original does with a mismatch); `evalkit score` runs and writes its output."""
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
    obj = {"query": "q", "documents": [{"id": "a", "text": "alpha", "embedding": bad}],
           "arms": {"vec": [{"id": "a", "score": 0.9}], "fts": []}}
    src, out = tmp_path / "cands.json", tmp_path / "out.json"
    src.write_text(json.dumps(obj), encoding="utf-8")
    rc = main(["score", "--preset", "openclaw_core_2026_2_26", "--candidates", str(src), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("evalkit: error:") and field in err[0]
    assert "Traceback" not in err[0] and not out.exists()
