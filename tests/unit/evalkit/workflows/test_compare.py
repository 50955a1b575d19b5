"""`evalkit compare` on real saved run folders: pairing, statistics, outputs, and one-line errors."""
from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from evalkit.cli import main

BM25_VARIANT = """
name = "bm25"
description = "BM25 with k1=0.6, b=0.3 (a variant saved under the baseline's name, as after a code change)"
system = "baseline"

[[arms]]
name = "bm25"
kind = "lexical"
tokenizer = "stem_en"
k1 = 0.6
b = 0.3
depth = 100

[[stages]]
type = "fuse.single"
arm = "bm25"

[[stages]]
type = "cutoff.top_k"
k = 100
"""
OTHER = "openclaw_core_2026_2_26_fts_only"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    a, b = base / "before", base / "after"
    variant = base / "bm25_variant.toml"
    variant.write_text(BM25_VARIANT)
    common = ["--dataset", "memory-workspace", "--backend", "exact"]
    assert main(["run", *common, "--retrievers", f"bm25,{OTHER}", "--out", str(a)]) == 0
    assert main(["run", *common, "--retrievers", f"{variant},{OTHER}", "--out", str(b)]) == 0
    return a, b


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("evalkit: error: ")
    return err[0]


def test_compare_two_runs(runs, tmp_path, capsys):
    a, b = runs
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "before:bm25" in text and "after:bm25" in text and f"before:{OTHER}" in text
    data = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    rows = data["rows"]
    assert [(r["a"], r["b"], r["metric"]) for r in rows] == [
        ("before:bm25", "after:bm25", "ndcg@10"), ("before:bm25", "after:bm25", "recall@10"),
        (f"before:{OTHER}", f"after:{OTHER}", "ndcg@10"), (f"before:{OTHER}", f"after:{OTHER}", "recall@10")]
    for r in rows:
        assert r["n"] > 100
        assert r["wins"] + r["ties"] + r["losses"] == r["n"]
        assert r["delta"] == pytest.approx(r["mean_b"] - r["mean_a"], abs=1e-12)
        assert r["p_holm"] >= r["p_randomization"] - 1e-15
        assert 0 < r["p_randomization"] <= 1 and 0 <= r["p_ttest"] <= 1
        assert r["ci_low"] <= r["delta"] <= r["ci_high"]
        assert r["mark"] in ("", "▲", "▼")
        assert (r["mark"] != "") == (r["p_holm"] < 0.05)
    bm = rows[0]
    assert bm["wins"] + bm["losses"] > 0  # different BM25 parameters change some rankings
    same_data = len({json.loads((d / "manifest.json").read_text())["datasets"]["memory-workspace"]["hash"]
                     for d in (a, b)}) == 1
    if same_data:  # the unchanged preset on the unchanged dataset: identical per query
        for r in rows[2:]:
            assert (r["wins"], r["losses"], r["p_randomization"]) == (0, 0, 1.0)
    ex = [e for e in data["examples"] if e["a"] == "before:bm25"]
    assert ex and all(e["query"] for e in ex)
    assert all(e["top_a"] and e["top_a"][0] for e in ex)
    if not any("texts come from the dataset as it is now" in n for n in data["notes"]):
        assert all(e["top_a"][1] for e in ex if e["top_a"][0] != "(nothing retrieved)")
    assert max(e["delta"] for e in ex) > 0 or min(e["delta"] for e in ex) < 0
    table = list(csv.DictReader(io.StringIO((out / "compare.csv").read_text(encoding="utf-8"))))
    assert len(table) == 4 and table[0]["a"] == "before:bm25"
    md = (out / "compare.md").read_text(encoding="utf-8")
    assert "| memory-workspace | before:bm25 | after:bm25 | nDCG@10 |" in md
    assert "biggest per-query differences, after:bm25 vs before:bm25" in md
    page = (out / "compare.html").read_text(encoding="utf-8")
    assert "<table" in page and "data:image/png;base64," in page and 'src="http' not in page


def test_compare_against_a_retriever_in_one_folder(runs, capsys):
    a, _ = runs
    from evalkit.workflows.compare import compare
    cmp = compare([a], metrics=["ndcg@10", "mrr@10"], baseline="bm25", n_examples=2)
    assert [(r.a.label, r.b.label, r.metric) for r in cmp.rows] == [("bm25", OTHER, "ndcg@10"),
                                                                    ("bm25", OTHER, "mrr@10")]
    assert len(cmp.examples) <= 4
    every_pair = compare([a], with_examples=False)  # one folder, no baseline: every pair within the dataset
    assert [(r.a.label, r.b.label) for r in every_pair.rows] == [("bm25", OTHER)] * 2
    assert main(["compare", str(a), "--baseline", "bm25", "--metrics", "ndcg@10"]) == 0
    assert OTHER in capsys.readouterr().out


def test_compare_baseline_folder(runs):
    a, b = runs
    from evalkit.workflows.compare import compare
    cmp = compare([b, a], baseline=str(a), with_examples=False)
    assert {(r.a.run, r.b.run) for r in cmp.rows} == {("before", "after")}
    assert len(cmp.rows) == 4


def test_identical_runs_are_never_significant(runs, tmp_path):
    a, _ = runs
    copy = tmp_path / "before-again"
    shutil.copytree(a, copy)
    from evalkit.workflows.compare import compare
    cmp = compare([a, copy])
    assert len(cmp.rows) == 4
    for r in cmp.rows:
        res = r.result
        assert res.delta == 0 and res.p_randomization == 1.0 and res.p_holm == 1.0 and res.p_ttest == 1.0
        assert (res.wins, res.losses) == (0, 0) and res.mark() == ""
    assert cmp.examples == []


def test_same_folder_name_in_two_places_is_labelled_by_parent(runs, tmp_path):
    a, _ = runs
    x, y = tmp_path / "x" / "run", tmp_path / "y" / "run"
    shutil.copytree(a, x)
    shutil.copytree(a, y)
    from evalkit.workflows.compare import load_runs
    assert [r.label for r in load_runs([x, y])] == ["x/run", "y/run"]


def test_wrong_schema_version_one_line_error(runs, tmp_path, capsys):
    a, b = runs
    old = tmp_path / "old-run"
    shutil.copytree(a, old)
    man = json.loads((old / "manifest.json").read_text())
    man["schema_version"] = 0
    (old / "manifest.json").write_text(json.dumps(man))
    assert main(["compare", str(old), str(b)]) != 0
    line = _one_line_error(capsys)
    assert "schema version 0" in line and "old-run" in line


@pytest.mark.parametrize("damage", ["metrics_json", "per_query_missing", "per_query_header", "not_a_folder"])
def test_damaged_run_folder_one_line_error(runs, tmp_path, capsys, damage):
    a, b = runs
    bad = tmp_path / "bad-run"
    shutil.copytree(a, bad)
    if damage == "metrics_json":
        (bad / "metrics.json").write_text('{"rows": [')
    elif damage == "per_query_missing":
        (bad / "per_query.csv").unlink()
    elif damage == "per_query_header":
        (bad / "per_query.csv").write_text("what,is,this\n1,2,3\n")
    else:
        shutil.rmtree(bad)
        bad.write_text("not a folder")
    assert main(["compare", str(bad), str(b)]) != 0
    line = _one_line_error(capsys)
    assert "bad-run" in line


def test_unknown_metric_or_baseline_one_line_error(runs, capsys):
    a, b = runs
    assert main(["compare", str(a), str(b), "--metrics", "ndcg@7"]) != 0
    assert "ndcg@7" in _one_line_error(capsys)
    assert main(["compare", str(a), str(b), "--baseline", "nope"]) != 0
    assert "nope" in _one_line_error(capsys)
    assert main(["compare", str(a), str(b), "--baseline", "bm25"]) != 0
    assert "ambiguous" in _one_line_error(capsys)
