"""Tests for the dataset loaders (BEIR, LoCoMo, LongMemEval), the query-log reader and the BEIR exporter."""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from evalkit.data import registry
from evalkit.data.beir import load_beir
from evalkit.data.types import DataError, parse_time

FIXTURES = Path(__file__).parent / "fixtures" / "loaders"


def _real(name: str) -> Path:
    p = registry.locate(name)
    if p is None:
        pytest.skip(f"real data for {name!r} not present (set EVALKIT_DATA)")
    return p


def _write_beir(root: Path, corpus: list, queries: list, qrels: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in corpus))
    (root / "queries.jsonl").write_text("".join((q if isinstance(q, str) else json.dumps(q)) + "\n" for q in queries))
    (root / "qrels").mkdir(exist_ok=True)
    for split, body in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + body)
    return root


DOCS = [{"_id": "d1", "title": "T", "text": "alpha", "metadata": {"timestamp": "2026-02-27T10:00:00Z",
                                                                     "path": "memory/a.md", "importance": 0.5,
                                                                     "group": "g", "start_line": 3}},
        {"_id": "d2", "text": "beta"}]
QUERIES = [{"_id": "q1", "text": "alpha?", "metadata": {"as_of": "2026-03-01", "category": "fact", "group": "g"}},
           {"_id": "q2", "text": "no memory needed", "metadata": {"split": "test"}},
           {"_id": "q3", "text": "unlabelled"}]


# ---------------------------------------------------------------- BEIR
def test_beir_fixture_features_and_splits():
    ds = load_beir(FIXTURES / "beir_small")
    assert ds.name == "beir_small"
    d1 = ds.documents[ds.doc_index["d1"]]
    assert d1.timestamp == parse_time("2026-02-27T10:00:00Z")
    assert (d1.path, d1.importance, d1.group) == ("memory/a.md", 0.5, "g")
    assert d1.metadata == {"start_line": 3, "end_line": 9, "source": "memory", "contains_secret": False}
    assert d1.full_text == "T alpha"
    q1 = next(q for q in ds.queries if q.id == "q1")
    assert (q1.as_of, q1.category, q1.group) == (parse_time("2026-03-01"), "fact", "g")
    assert ds.qrels == {"q1": {"d1": 2, "d2": 0}, "q4": {"d2": 1}}
    # q2 has no judgements but metadata.split puts it in "test"; q3 is in no split but kept
    assert ds.splits["test"] == ["q1", "q2"]
    assert ds.splits["train"] == ["q4"]
    assert ds.splits["all"] == ["q1", "q2", "q4"]
    assert [q.id for q in ds.queries] == ["q1", "q2", "q3", "q4"]
    assert ds.info["dropped_qrels"] == 0
    view = load_beir(FIXTURES / "beir_small", split="test")
    assert [q.id for q in view.queries] == ["q1", "q2"] and set(view.qrels) == {"q1"}


def test_beir_scifact_counts():
    ds = load_beir(_real("scifact"))
    assert len(ds.documents) == 5183
    assert len(ds.splits["test"]) == 300 and len(ds.splits["train"]) == 809
    assert sum(len(ds.qrels[q]) for q in ds.splits["test"]) == 339
    assert sum(len(ds.qrels[q]) for q in ds.splits["train"]) == 919
    assert ds.info["dropped_qrels"] == 0


def test_beir_malformed_json_names_line(tmp_path):
    root = _write_beir(tmp_path / "b", [DOCS[0], '{"_id": "d2", "text": ', DOCS[1]], QUERIES, {})
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: malformed JSON") as ei:
        load_beir(root)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize("bad, msg", [
    ({"text": "no id"}, r"corpus\.jsonl:2: missing '_id'"),
    ({"_id": "d9"}, r"corpus\.jsonl:2: missing 'text'"),
    ({"_id": "d1", "text": "again"}, r"corpus\.jsonl:2: duplicate document id 'd1' \(first on line 1\)"),
    ({"_id": "d9", "text": "x", "metadata": {"timestamp": "yesterday"}}, r"corpus\.jsonl:2: metadata\.timestamp"),
    ("[1, 2]", r"corpus\.jsonl:2: expected a JSON object"),
])
def test_beir_bad_corpus_lines(tmp_path, bad, msg):
    root = _write_beir(tmp_path / "b", [DOCS[0], bad], QUERIES, {})
    with pytest.raises(DataError, match=msg):
        load_beir(root)


def test_beir_empty_corpus_and_missing_files(tmp_path):
    root = _write_beir(tmp_path / "b", [], QUERIES, {})
    with pytest.raises(DataError, match="empty corpus"):
        load_beir(root)
    root = _write_beir(tmp_path / "c", DOCS, QUERIES, {})
    (root / "queries.jsonl").unlink()
    with pytest.raises(DataError, match=r"missing queries\.jsonl in .*c$"):
        load_beir(root)
    (root / "corpus.jsonl").unlink()
    with pytest.raises(DataError, match=r"missing corpus\.jsonl"):
        load_beir(root)
    with pytest.raises(DataError, match="not a BEIR folder"):
        load_beir(tmp_path / "nope")


def test_beir_unknown_qrels_warn_and_drop(tmp_path):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {"test": "q1\td1\t1\nqX\td1\t1\nq1\tdX\t1\n"})
    with pytest.warns(UserWarning, match=r"test\.tsv: dropped 2 of 3 qrels rows"):
        ds = load_beir(root)
    assert ds.qrels == {"q1": {"d1": 1}}
    assert ds.info["dropped_qrels"] == 2
    assert {e["line"] for e in ds.info["dropped_qrels_examples"]} == {3, 4}


def test_beir_all_qrels_unknown_is_error(tmp_path):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {"test": "qX\td1\t1\nqY\td2\t1\n"})
    with pytest.raises(DataError, match=r"test\.tsv: all 2 qrels rows name unknown"):
        load_beir(root)


def test_beir_qrels_bad_score(tmp_path):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {"test": "q1\td1\t1\nq1\td2\thigh\n"})
    with pytest.raises(DataError, match=r"test\.tsv:3: score 'high' is not an integer"):
        load_beir(root)
    root = _write_beir(tmp_path / "c", DOCS, QUERIES, {"test": "q1\td1\n"})
    with pytest.raises(DataError, match=r"test\.tsv:2: expected 3"):
        load_beir(root)


def test_beir_duplicate_query_id(tmp_path):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES + [{"_id": "q1", "text": "dup"}], {})
    with pytest.raises(DataError, match=r"queries\.jsonl:4: duplicate query id 'q1'"):
        load_beir(root)


def test_registry_missing_data_is_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_DATA", str(tmp_path))
    monkeypatch.setattr(registry, "REPO_DATASETS", tmp_path / "absent")
    with pytest.raises(DataError, match=r"dataset 'locomo' not found: looked in") as ei:
        registry.load_dataset("locomo")
    assert "\n" not in str(ei.value)


def test_registry_folder_is_beir():
    ds = registry.load_dataset(str(FIXTURES / "beir_small"))
    assert len(ds.documents) == 2
