"""Harm measures (evalkit.measures.harms) against hand computations on a small fixture, and n/a (not 0) where a
dataset declares no labels."""
from __future__ import annotations

import math

from evalkit.measures import catalogue
from evalkit.measures.harms import HarmLabels, harm_means
from evalkit.measures.lists import evaluate

# four queries: q1/q2 answerable, q3 a knowledge-update query with a superseded statement (grade 0), q4 no-memory
QRELS = {"q1": {"a": 2, "b": 1}, "q2": {"c": 2}, "q3": {"new": 2, "old": 0}}
RANKED = {"q1": ["s1", "a", "x", "b"], "q2": ["j1", "c"], "q3": ["old", "new", "a"], "q4": ["j1"]}
INJECTED = {"q1": ["s1", "a"], "q2": ["j1", "c"], "q3": ["old"], "q4": []}
LABELS = HarmLabels(secret=frozenset({"s1"}), junk=frozenset({"j1"}),
                    superseded={"q3": frozenset({"old"})})


def test_every_harm_is_a_catalogue_measure():
    for n in catalogue.names("harms"):
        m = catalogue.parse(n)
        assert m.family.help and m.label


def test_harms_match_a_hand_computation():
    means, pq = harm_means(LABELS, QRELS, RANKED, INJECTED)
    # secret: only q1 injects s1 → 1 of 4 queries
    assert means["secret_leak_rate"] == 1 / 4
    assert pq["secret_leak_rate"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 0.0}
    # junk: injected chunks s1, a, j1, c, old = 5; junk = j1 → 1/5
    assert math.isclose(means["junk_rate"], 1 / 5)
    # stale: q3 injects "old" → 1/1; "old" ranks above "new" → 1/1
    assert means["stale_rate"] == 1.0 and means["stale_above_current_rate"] == 1.0
    # abstention: q4 has no relevant note and injects nothing → 1/1
    assert means["abstention_accuracy"] == 1.0


def test_stale_above_current_only_when_ranked_above():
    ranked = dict(RANKED, q3=["new", "old"])
    means, _ = harm_means(LABELS, QRELS, ranked, dict(INJECTED, q3=["new"]))
    assert means["stale_rate"] == 0.0 and means["stale_above_current_rate"] == 0.0


def test_undeclared_labels_are_not_applicable_not_zero():
    means, pq = harm_means(HarmLabels(), {"q1": {"a": 1}}, {"q1": ["a"]}, {"q1": ["a"]})
    for name in ("secret_leak_rate", "junk_rate", "stale_rate", "stale_above_current_rate", "abstention_accuracy"):
        assert math.isnan(means[name]), name
    assert "secret_leak_rate" not in pq


def test_declared_patterns_flag_imported_data():
    lab = HarmLabels(secret_patterns=(r"ghp_[A-Za-z0-9]{8,}",), junk_patterns=("node_modules/*", "*.log"),
                     paths={"p": "node_modules/x/README.md", "l": "logs/run.log", "n": "notes/a.md"},
                     texts={"t": "token ghp_abcdefgh1234", "u": "nothing here"})
    means, _ = harm_means(lab, {}, {"q": ["t", "p"], "r": ["u", "l", "n"]},
                          {"q": ["t", "p"], "r": ["u", "l", "n"]})
    assert means["secret_leak_rate"] == 1 / 2          # q leaks "t"
    assert math.isclose(means["junk_rate"], 2 / 5)     # p and l of five injected chunks


def test_judged_at_k_counts_grade_zero_and_ignores_empty_lists():
    qrels = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}}
    ranked = {"q1": [("a", 3.0), ("x", 2.0), ("b", 1.0), ("y", 0.5)], "q2": []}
    out = evaluate(qrels, ranked, ["judged@2", "judged@10"])
    assert out["judged@2"] == {"q1": 0.5}               # a judged, x not
    assert out["judged@10"] == {"q1": 0.5}              # a, b judged of the 4 listed


def test_memory_workspace_declares_its_harm_labels():
    from evalkit.data.registry import load_dataset
    ds = load_dataset("memory-workspace")
    lab = ds.info["labels"]
    assert len(lab["secret"]) == 4 and lab["junk"]
    sup = {q: v for q, v in lab["superseded"].items() if v}
    ku = {q.id for q in ds.queries if q.category == "knowledge-update"}
    assert sup and set(sup) <= ku
    assert all(ds.qrels[q][d] == 0 for q, v in sup.items() for d in v)


def test_gate_holds_secret_leak_at_zero_for_guarded_presets():
    from evalkit.engine.evaluate import secret_guard
    from evalkit.workflows.gate import failed, guard_rows
    from retrievers.pipeline import load_preset
    assert secret_guard(load_preset("phase3_policy")) and secret_guard(load_preset("bm25")) is None
    ok = guard_rows({("ds", "phase3_policy"): (0.0, "fuse"), ("beir", "phase3_policy"): (math.nan, "fuse")})
    assert [r.state for r in ok] == ["OK", "OK"] and not failed(ok)
    bad = guard_rows({("ds", "phase3_policy"): (0.01, "fuse")})
    assert bad[0].state == "FAIL" and failed(bad)


def test_a_beir_folder_declares_labels_only_when_its_metadata_has_them(tmp_path):
    import json

    from evalkit.data.readers.beir import load_beir
    from evalkit.engine.evaluate import dataset_labels

    def folder(name, meta):
        d = tmp_path / name
        (d / "qrels").mkdir(parents=True)
        (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "text": f"t {i}", "metadata": m}) + "\n"
                                                for i, m in meta.items()))
        (d / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "x"}) + "\n")
        (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\ta\t1\n")
        return load_beir(d)

    plain = dataset_labels(folder("plain", {"a": {}, "b": {}}))
    assert not plain.has_secret and not plain.has_junk
    lab = dataset_labels(folder("lab", {"a": {"contains_secret": False}, "b": {"contains_secret": True}}))
    assert lab.has_secret and lab.is_secret("b") and not lab.is_secret("a") and not lab.has_junk
