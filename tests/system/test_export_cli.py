"""`evalkit export DATASET --out DIR`: a registered dataset written as a BEIR folder that `evalkit run` reads back
identically — the same metrics (every row of metrics.json) and the same per-query values, the planting record of a
poisoned dataset kept; bad input is one line, exit 2, nothing written."""
import csv
import json

import pytest

from evalkit.cli import main
from evalkit.data.registry import locate


def _metrics(run):
    rows = json.loads((run / "metrics.json").read_text())["rows"]
    return {(r["dataset"], r["retriever"], r["metric"]): r["value"] for r in rows}


def _per_query(run):
    with open(run / "per_query.csv", newline="") as fh:
        return list(csv.reader(fh))


def _same_run(tmp_path, name, folder, retrievers, split, capsys):
    for ds, out in ((name, tmp_path / "run-name"), (str(folder), tmp_path / "run-folder")):
        assert main(["run", "--dataset", ds, "--retrievers", retrievers, "--split", split, "--out", str(out)]) == 0
    capsys.readouterr()
    a, b = _metrics(tmp_path / "run-name"), _metrics(tmp_path / "run-folder")
    assert a and a == b
    assert _per_query(tmp_path / "run-name") == _per_query(tmp_path / "run-folder")
    return a


@pytest.mark.slow
def test_a_poisoned_workspace_exported_runs_to_the_same_metrics_with_its_planting_record(tmp_path, capsys):
    if locate("memory-workspace") is None:
        pytest.skip("memory-workspace not present")
    planted = tmp_path / "ws-p"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", "query-echo,instruction", "--rate", "0.01",
                 "--isolate", "--templates", "design", "--seed", "3", "--out", str(planted)]) == 0
    out = tmp_path / "ws-export"
    assert main(["export", str(planted), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "planting record" in text and f"exported {planted.name} to {out}" in text
    side = json.loads((out / "evalkit.json").read_text())
    assert side["info"]["poison"] == json.loads((planted / "evalkit.json").read_text())["info"]["poison"]
    m = _same_run(tmp_path, str(planted), out, "bm25,hybrid-cc", "test", capsys)
    assert m[(planted.name, "bm25", "poison_injected_rate")] is not None  # the poison measures came back too


def test_a_registered_dataset_exported_runs_to_the_same_metrics(tmp_path, capsys):
    if locate("memory-workspace") is None:
        pytest.skip("memory-workspace not present")
    out = tmp_path / "ws"
    assert main(["export", "memory-workspace", "--out", str(out)]) == 0
    assert "kept: unit" in capsys.readouterr().out
    m = _same_run(tmp_path, "memory-workspace", out, "bm25,hybrid-cc", "test", capsys)
    assert m[("memory-workspace", "hybrid-cc", "ndcg@10")] > 0.3


@pytest.mark.slow
def test_locomo_exported_runs_to_the_same_metrics(tmp_path, capsys):
    if locate("locomo") is None:
        pytest.skip("real LoCoMo not present (set EVALKIT_DATA)")
    out = tmp_path / "locomo"
    assert main(["export", "locomo", "--out", str(out)]) == 0
    assert "clusters by group" in capsys.readouterr().out
    m = _same_run(tmp_path, "locomo", out, "bm25,hybrid-cc", "heldout", capsys)
    assert m[("locomo", "bm25", "ndcg@10")] > 0.3


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["export", "no-such-dataset", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit: error: ")
    assert not out.exists()
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["export", "memory-workspace", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[0]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x")]
