"""Tests for the dataset loaders (BEIR, LoCoMo, LongMemEval), the query-log reader and the BEIR exporter."""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path

import pytest

from evalkit.data import registry
from evalkit.data.readers.beir import load_beir
from retrievers.types import DataError, parse_time
from tests.helpers import FIXTURES

LOADERS = FIXTURES / "loaders"


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
    ds = load_beir(LOADERS / "beir_small")
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
    view = load_beir(LOADERS / "beir_small", split="test")
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


def test_beir_unknown_qrels_rows_are_an_error_naming_file_and_line(tmp_path):
    """A qrels typo is refused (it would change the score silently), naming file:line of each bad row."""
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {"test": "q1\td1\t1\nqX\td1\t1\nq1\tdX\t1\n"})
    with pytest.raises(DataError) as err:
        load_beir(root)
    msg = str(err.value)
    assert "\n" not in msg and "--qrels-unknown drop" in msg
    assert f"{root / 'qrels' / 'test.tsv'}:3: unknown query id 'qX'" in msg
    assert f"{root / 'qrels' / 'test.tsv'}:4: unknown document id 'dX'" in msg


def test_beir_unknown_qrels_rows_dropped_on_request_with_a_warning_record(tmp_path, recwarn):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {"test": "q1\td1\t1\nqX\td1\t1\nq1\tdX\t1\n"})
    ds = load_beir(root, qrels_unknown="drop")
    assert not recwarn.list  # never a Python warning: the command prints the dataset's own warning records
    assert ds.qrels == {"q1": {"d1": 1}}
    assert ds.info["dropped_qrels"] == 2
    assert {e["line"] for e in ds.info["dropped_qrels_examples"]} == {3, 4}
    w, left = ds.info["warnings"]  # the dropped rows, and the queries they leave in no split
    assert w["what"] == "qrels_unknown" and w["count"] == 2 and "dropped 2 of 3 qrels rows" in w["text"]
    assert left["what"] == "queries_in_no_split" and left["count"] == ds.info["queries_in_no_split"] > 0
    assert "test.tsv:4: unknown document id 'dX'" in w["text"]
    with pytest.raises(DataError, match="qrels_unknown must be one of error, drop"):
        load_beir(root, qrels_unknown="ignore")


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
    ds = registry.load_dataset(str(LOADERS / "beir_small"))
    assert len(ds.documents) == 2


# ---------------------------------------------------------------- LoCoMo
@pytest.fixture(scope="module")
def locomo_turn():
    from evalkit.data.readers.locomo import load_locomo
    return load_locomo(_real("locomo"))


def test_locomo_turn_counts(locomo_turn):
    ds = locomo_turn
    assert ds.unit == "turn"
    assert len({d.group for d in ds.documents}) == 10
    assert len(ds.documents) == 5882
    assert len(ds.queries) == 1986
    assert all(did in ds.doc_index for rel in ds.qrels.values() for did in rel)
    # 1,982 items have evidence; none loses all of it to the repairs
    assert len(ds.qrels) == 1982 == ds.info["queries_with_evidence"]
    assert sorted(ds.info["queries_without_evidence_ids"]) == ["conv-26:q30", "conv-26:q46", "conv-50:q39",
                                                               "conv-50:q42"]
    assert ds.splits["test"] == ds.splits["all"] and len(ds.splits["test"]) == 1982
    assert sorted(ds.splits["train"] + ds.splits["heldout"]) == sorted(ds.splits["test"])
    # train / heldout are whole conversations (a split by question put every conversation on both sides)
    conv = {q.id: q.group for q in ds.queries}
    tr, he = {conv[q] for q in ds.splits["train"]}, {conv[q] for q in ds.splits["heldout"]}
    assert not tr & he and len(tr) == len(he) == 5
    cats = {}
    for q in ds.queries:
        cats[q.category] = cats.get(q.category, 0) + 1
    assert cats == {"multi-hop": 282, "temporal": 321, "open-domain": 96, "single-hop": 841, "adversarial": 446}
    # conv-26 sessions 20-35 are dated but empty
    assert not any(d.metadata["session"] >= 20 for d in ds.documents if d.group == "conv-26")
    assert len(ds.info["empty_sessions"]) == 16


def test_locomo_turn_format_time_and_queries(locomo_turn):
    ds = locomo_turn
    d = ds.documents[ds.doc_index["conv-26:D1:5"]]
    assert d.text.startswith("Caroline: ") and d.text.endswith("]") and " [shares a photo of " in d.text
    assert d.timestamp == parse_time("2023-05-08T13:56:00Z")
    assert (d.group, d.path, d.metadata["session"], d.metadata["dia_id"]) == ("conv-26", "conv-26/session_1", 1,
                                                                              "D1:5")
    q = next(q for q in ds.queries if q.id == "conv-26:q0")
    assert q.category == "temporal" and q.metadata["category_code"] == 2 and q.group == "conv-26"
    # as_of: day after conv-26's last session with turns (session 19, 9:55 am on 22 October, 2023)
    assert q.as_of == parse_time("2023-10-23T09:55:00Z")
    adv = [q for q in ds.queries if q.category == "adversarial"]
    assert all(q.metadata["answer"] is not None for q in adv)


def test_locomo_evidence_repairs(locomo_turn):
    reps = {(r["sample_id"], r["raw"]): r for r in locomo_turn.info["evidence_repairs"]}
    expect = {
        ("conv-26", "D8:6; D9:17"): ("split", ["D8:6", "D9:17"]),
        ("conv-49", "D9:1 D4:4 D4:6"): ("split", ["D9:1", "D4:4", "D4:6"]),
        ("conv-49", "D22:1 D22:2 D9:10 D9:11"): ("split", ["D22:1", "D22:2", "D9:10", "D9:11"]),
        ("conv-49", "D21:18 D21:22 D11:15 D11:19"): ("split", ["D21:18", "D21:22", "D11:15", "D11:19"]),
        ("conv-50", "D30:05"): ("normalised", "D30:5"),
        ("conv-43", "D:11:26"): ("repaired", "D11:26"),
        ("conv-42", "D"): ("dropped", None),
        ("conv-42", "D10:19"): ("dropped", None),
        ("conv-47", "D4:36"): ("dropped", None),
    }
    assert {k: (r["action"], r["result"]) for k, r in reps.items()} == expect
    assert locomo_turn.info["repaired"] == 6 and locomo_turn.info["dropped"] == 3
    r = reps[("conv-26", "D8:6; D9:17")]
    assert locomo_turn.qrels[f"conv-26:q{r['question_index']}"] == {"conv-26:D8:6": 1, "conv-26:D9:17": 1}
    r = reps[("conv-42", "D")]
    assert locomo_turn.qrels[f"conv-42:q{r['question_index']}"] == {"conv-42:D1:18": 1, "conv-42:D1:20": 1}


def test_locomo_paper_protocol():
    """protocol="paper": sessions 1-19 indexed, turns in the paper's format, every QA item kept; evidence in later
    sessions stays in the qrels (unreachable: a miss, as the paper's recall counts it)."""
    from evalkit.data.readers.locomo import load_locomo
    ds = load_locomo(_real("locomo"), protocol="paper")
    assert ds.name == "locomo-paper" and len(ds.queries) == 1986 and len(ds.qrels) == 1982
    assert all(d.metadata["session"] <= 19 for d in ds.documents)
    ours = load_locomo(_real("locomo"))
    assert len(ds.documents) == sum(1 for d in ours.documents if d.metadata["session"] <= 19) < len(ours.documents)
    d0 = ds.documents[0]
    assert d0.text == f'({d0.metadata["date_time"]}) Caroline said, "Hey Mel! Good to see you! How have you been?"'
    unreachable = [d for rel in ds.qrels.values() for d in rel if d not in ds.doc_index]
    assert unreachable and all(int(d.split(":D")[1].split(":")[0]) > 19 for d in unreachable)
    with pytest.raises(DataError, match="protocol"):
        load_locomo(_real("locomo"), level="session", protocol="paper")


def test_locomo_session_level():
    from evalkit.data.readers.locomo import load_locomo
    ds = registry.load_dataset("locomo-session") if registry.locate("locomo-session") else pytest.skip("no data")
    assert ds.unit == "session"
    assert len(ds.documents) == 272  # 288 dated sessions minus conv-26's 16 empty ones
    assert len(ds.qrels) == 1982
    assert all(did in ds.doc_index for rel in ds.qrels.values() for did in rel)
    assert ds.qrels["conv-49:q38"] == {"conv-49:S22": 1, "conv-49:S9": 1}
    s1 = ds.documents[ds.doc_index["conv-26:S1"]]
    assert s1.text.split("\n")[0] == "Caroline: Hey Mel! Good to see you! How have you been?"
    one = load_locomo(_real("locomo"), level="session", conversations=["conv-30"])
    assert {d.group for d in one.documents} == {"conv-30"} and len(one.documents) == 19
    with pytest.raises(DataError, match="level"):
        load_locomo(_real("locomo"), level="paragraph")


def test_locomo_bad_file(tmp_path):
    from evalkit.data.readers.locomo import load_locomo
    p = tmp_path / "locomo10.json"
    p.write_text('[{"sample_id": "x",')
    with pytest.raises(DataError, match=r"locomo10\.json:1: malformed JSON"):
        load_locomo(p)
    with pytest.raises(DataError, match="not found"):
        load_locomo(tmp_path / "absent.json")


# ---------------------------------------------------------------- LongMemEval
def test_longmemeval_oracle_counts():
    from evalkit.data.readers.longmemeval import load_longmemeval
    p = _real("longmemeval-oracle")
    ds = load_longmemeval(p, variant="oracle")
    assert ds.name == "longmemeval-oracle" and ds.unit == "session"
    assert ds.info["questions_read"] == 500
    assert len(ds.queries) == 470 and ds.info["abstention_excluded"] == 30
    assert not any("_abs" in q.id for q in ds.queries)
    assert len(ds.splits["test"]) == 470
    assert all(did in ds.doc_index for rel in ds.qrels.values() for did in rel)
    assert all(d.group == d.id.split("/")[0] for d in ds.documents)
    q = next(q for q in ds.queries if q.id == "001be529")
    assert q.as_of == parse_time("2023-05-28T19:47:00Z") and q.category == "single-session-user"
    assert ds.qrels["001be529"] == {"001be529/answer_530960c1": 1}
    d = ds.documents[ds.doc_index["001be529/answer_530960c1"]]
    assert d.timestamp == parse_time("2023-05-21T19:50:00Z") and d.text.startswith("user: I'm trying to find")
    full = load_longmemeval(p, variant="oracle", include_abstention=True, level="turn")
    assert len(full.queries) == 500 and full.info["abstention_included"] == 30
    assert all(full.documents[full.doc_index[did]].metadata["has_answer"]
               for rel in full.qrels.values() for did in rel)


def test_longmemeval_s_slice():
    from evalkit.data.readers.longmemeval import load_longmemeval
    p = _real("longmemeval-s")
    ds = load_longmemeval(p, limit=5)
    assert len(ds.queries) == 5 and ds.info["partial"]
    assert 38 * 5 <= len(ds.documents) <= 58 * 5
    assert len({d.id for d in ds.documents}) == len(ds.documents)
    # 001be529 lists sharegpt_SYbLHTK_0 twice: both slots kept, the second id suffixed
    assert "001be529/sharegpt_SYbLHTK_0#2" in ds.doc_index and ds.info["duplicate_session_slots"] >= 1
    assert all(did in ds.doc_index for rel in ds.qrels.values() for did in rel)
    turn = load_longmemeval(p, level="turn", question_ids=["001be529"])
    assert [q.id for q in turn.queries] == ["001be529"]
    rel = turn.qrels["001be529"]
    assert rel and all(k.startswith("001be529/answer_530960c1/") for k in rel)
    assert all(turn.documents[turn.doc_index[k]].metadata["has_answer"] for k in rel)
    with pytest.raises(DataError, match="no question"):
        load_longmemeval(LOADERS / "lme_tiny.json", question_ids=["nope"])


def test_longmemeval_tiny_fixture_rules():
    from evalkit.data.readers.longmemeval import load_longmemeval
    ds = load_longmemeval(LOADERS / "lme_tiny.json")
    assert [q.id for q in ds.queries] == ["q1"]  # q2_abs excluded by default
    assert ds.info["abstention_excluded"] == 1
    assert ds.info["sessions_after_question"] == 1 and ds.info["evidence_sessions_after_question"] == 1
    assert ds.info["haystacks_out_of_order"] == 1
    late = ds.documents[ds.doc_index["q1/s3"]]
    assert late.metadata["after_question"] and ds.qrels["q1"] == {"q1/s1": 1, "q1/s3": 1}
    assert ds.documents[ds.doc_index["q1/s1"]].text == "user: I adopted a cat named Miso.\nassistant: Lovely!"
    ds2 = load_longmemeval(LOADERS / "lme_tiny.json", include_abstention=True, level="turn")
    assert [q.id for q in ds2.queries] == ["q1", "q2_abs"]
    assert ds2.qrels["q1"] == {"q1/s1/0": 1, "q1/s3/0": 1}
    assert "q2_abs" not in ds2.splits["test"]  # no has_answer turns -> no qrels -> not scored


def test_longmemeval_bad_files(tmp_path):
    import gzip
    from evalkit.data.readers.longmemeval import load_longmemeval
    good = (LOADERS / "lme_tiny.json").read_bytes()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(good)[:-20])
    with pytest.raises(DataError, match="truncated gzip|malformed JSON|end of file"):
        load_longmemeval(p)
    p = tmp_path / "t.json"
    p.write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match="malformed JSON|end of file"):
        load_longmemeval(p)
    p.write_text('{"a": 1}')
    with pytest.raises(DataError, match="expected a JSON list"):
        load_longmemeval(p)
    with pytest.raises(DataError, match="not found"):
        load_longmemeval(tmp_path / "absent.json.gz")
    q = json.loads(good)[0]
    q["haystack_dates"][0] = "yesterday"
    p.write_text(json.dumps([q]))
    with pytest.raises(DataError, match="question q1: not a LongMemEval date: 'yesterday'"):
        load_longmemeval(p)


# ---------------------------------------------------------------- query log
def test_querylog_bad_lines_counted_rest_loaded():
    from evalkit.data.readers.querylog import load_querylog
    log = load_querylog(LOADERS / "querylog.jsonl")
    assert [e.line_no for e in log.events] == [1, 7, 9]
    assert [ln for ln, _ in log.skipped] == [2, 3, 4, 5, 8]
    reasons = dict(log.skipped)
    assert reasons[2].startswith("not JSON") and reasons[3] == "no 'query'"
    assert reasons[4].startswith("invalid 'ts'") and reasons[5] == "no 'ts'" and reasons[8].startswith("not a JSON")
    assert log.notes == [(7, "'latency_ms' ignored (not a number: 'fast')")]
    qs = log.queries()
    q = qs[0]
    assert q.id == "log:1" and q.as_of == parse_time("2026-02-27T10:00:00Z")
    assert q.context == ["user: hi", "hello"]
    assert q.metadata["injected"] == ["memory/2026-02-26.md#3"] and q.metadata["session"] == "s1"
    assert q.metadata["response"].startswith("We decided") and q.metadata["latency_ms"] == 41.5
    assert q.metadata["agent"] == "main"  # unknown keys kept
    assert qs[1].metadata["injected"] == [] and qs[1].as_of == parse_time("2026-02-27T09:06:00Z")
    assert qs[2].context == ["just one message"] and qs[2].as_of == 1772186400.0
    assert log.summary()["skipped"] == 5


def test_querylog_unusable_files(tmp_path):
    from evalkit.data.readers.querylog import load_querylog
    p = tmp_path / "log.jsonl"
    p.write_text('{"query": "x"}\nnope\n')
    with pytest.raises(DataError, match=r"no valid events: 2 line\(s\) skipped \(first: line 1: no 'ts'\)"):
        load_querylog(p)
    with pytest.raises(DataError, match="query log not found"):
        load_querylog(tmp_path / "absent.jsonl")
    with pytest.raises(DataError, match="folder"):
        load_querylog(tmp_path)


# ---------------------------------------------------------------- export
def _same(a, b):
    assert [dataclasses.asdict(d) for d in a.documents] == [dataclasses.asdict(d) for d in b.documents]
    key = lambda q: (q.id, q.text, q.as_of, q.group, q.category, q.metadata)
    assert [key(q) for q in a.queries] == [key(q) for q in b.queries]
    assert a.qrels == b.qrels
    assert a.unit == b.unit


def test_export_roundtrip_locomo(tmp_path):
    from evalkit.data.export import export_beir
    from evalkit.data.readers.locomo import load_locomo
    ds = load_locomo(_real("locomo"))
    counts = export_beir(ds, tmp_path / "locomo-beir")
    assert counts["documents"] == 5882
    back = load_beir(tmp_path / "locomo-beir")
    _same(ds, back)
    assert back.name == "locomo" and back.splits == ds.splits
    assert back.info["exported_info"]["repaired"] == 6
    line = json.loads((tmp_path / "locomo-beir" / "corpus.jsonl").open().readline())
    assert line["metadata"]["timestamp"] == "2023-05-08T13:56:00Z" and line["metadata"]["group"] == "conv-26"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_export_roundtrip_fixture_and_longmemeval(tmp_path):
    from evalkit.data.export import export_beir
    from evalkit.data.readers.longmemeval import load_longmemeval
    ds = load_beir(LOADERS / "beir_small")
    export_beir(ds, tmp_path / "b")
    back = load_beir(tmp_path / "b")
    _same(ds, back)
    assert back.splits == ds.splits  # q2 (no judgements) stays in test via metadata.split; q3 in no split
    lme = load_longmemeval(LOADERS / "lme_tiny.json", include_abstention=True, level="turn")
    export_beir(lme, tmp_path / "l")
    _same(lme, load_beir(tmp_path / "l"))


def test_export_is_atomic(tmp_path):
    from evalkit.data.export import export_beir
    from retrievers.types import Dataset, Document
    ds = load_beir(LOADERS / "beir_small")
    out = tmp_path / "out"
    export_beir(ds, out)
    before = (out / "corpus.jsonl").read_text()
    with pytest.raises(DataError, match="not empty"):
        export_beir(ds, out)
    bad = Dataset(name="bad", documents=[Document(id="x", text="t"), Document(id="y", text="t", metadata={"o": object()})],
                  queries=ds.queries, qrels={}, splits={})
    with pytest.raises(DataError, match="cannot export document 'y'"):
        export_beir(bad, out, overwrite=True)
    assert (out / "corpus.jsonl").read_text() == before
    with pytest.raises(DataError):
        export_beir(bad, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    export_beir(load_beir(LOADERS / "beir_small", split="train"), out, overwrite=True)
    assert load_beir(out).splits["train"] == ["q4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_beir_qrels_without_header_or_other_header(tmp_path):
    root = _write_beir(tmp_path / "b", DOCS, QUERIES, {})
    (root / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    (root / "qrels" / "dev.tsv").write_text("qid\tdocid\trelevance\nq1\td2\t2\n")
    ds = load_beir(root)
    assert ds.qrels == {"q1": {"d1": 1, "d2": 2}}
    assert ds.splits["test"] == ["q1", "q2"] and ds.splits["dev"] == ["q1"]
