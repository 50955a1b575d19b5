"""The CI gate passes on an unchanged preset and fails on a deliberately degraded one."""
import json

import pytest

from evalkit.cli import main
from evalkit.workflows.gate import compare, gate_backend
from tests.helpers import write_tiny_beir

DEGRADED = """
name = "bm25"
description = "bm25 deliberately degraded: its ranking is reversed (worst match first)"
[[arms]]
name = "bm25"
kind = "lexical"
tokenizer = "stem_en"
depth = 100
[[stages]]
type = "fuse.single"
arm = "bm25"
[[stages]]
type = "filter.min_score"
threshold = 1e9
"""


@pytest.fixture()
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    return write_tiny_beir(tmp_path / "tiny")


def test_gate_passes_unchanged_and_fails_degraded(env, tmp_path, capsys):
    base = tmp_path / "expected.json"
    common = ["gate", "--datasets", str(env), "--baseline", str(base)]
    assert main(common + ["--retrievers", "bm25,dense", "--update"]) == 0
    data = json.loads(base.read_text())
    assert {r["retriever"] for r in data["rows"]} == {"bm25", "dense"}
    assert all(len(r["per_query"]) == 6 for r in data["rows"])
    capsys.readouterr()
    assert main(common) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out.split("gate:")[-1] and "OK" in out
    bad = tmp_path / "bm25.toml"
    bad.write_text(DEGRADED)
    assert main(common + ["--retrievers", f"{bad},dense"]) == 1
    out = capsys.readouterr().out
    fail_rows = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fail_rows and all(" bm25 " in line for line in fail_rows)


def test_gate_runs_the_backend_that_made_its_baseline(env, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("EVALKIT_EMBED_BACKEND", raising=False)
    monkeypatch.delenv("EVALKIT_EMBEDDER", raising=False)
    base = tmp_path / "expected.json"
    common = ["gate", "--datasets", str(env), "--baseline", str(base), "--retrievers", "dense"]
    assert main(common + ["--embed-backend", "torch", "--update"]) == 0
    data = json.loads(base.read_text())
    assert data["embedder"] == {"model": "all-MiniLM-L6-v2", "backend": "torch", "max_length": 256}
    capsys.readouterr()
    assert main(common) == 0  # no backend asked for: the baseline's (torch), whatever this machine's default is
    cap = capsys.readouterr()
    assert "baseline was made with" not in cap.err
    assert [line.split()[0] for line in cap.out.splitlines() if " dense " in line] == ["OK", "OK"]
    assert main(common + ["--embed-backend", "bf16"]) == 0
    err = capsys.readouterr().err
    assert "baseline was made with model all-MiniLM-L6-v2, backend torch" in err and "backend bf16" in err


def test_gate_backend_choice():
    made = {"embedder": {"backend": "torch"}}
    assert gate_backend(made, None, None, {}) == "torch"
    assert gate_backend(made, None, "bf16", {}) == "bf16"
    assert gate_backend(made, None, None, {"EVALKIT_EMBED_BACKEND": "onnx"}) is None  # left to the embedder
    assert gate_backend(made, "http://127.0.0.1:1/v1", None, {}) is None
    assert gate_backend({}, None, None, {}) is None  # an old baseline: this machine's default


def test_states_ok_warn_fail_missing():
    exp = {"schema": 1, "rows": [
        {"dataset": "d", "retriever": "a", "metric": "m", "expected": 0.5, "tolerance": 0.01,
         "per_query": {str(i): 0.5 for i in range(12)}},
        {"dataset": "d", "retriever": "b", "metric": "m", "expected": 0.5, "tolerance": 0.01, "per_query": {}},
        {"dataset": "d", "retriever": "c", "metric": "m", "expected": 0.5, "tolerance": 0.01,
         "per_query": {str(i): 0.5 for i in range(12)}},
        {"dataset": "d", "retriever": "gone", "metric": "m", "expected": 0.5, "tolerance": 0.01, "per_query": {}}]}
    cur = {("d", "a", "m"): (0.5, {}), ("d", "b", "m"): (0.495, {}),
           ("d", "c", "m"): (0.2, {str(i): 0.2 for i in range(12)}), ("d", "new", "m"): (0.1, {})}
    states = {r.retriever: r.state for r in compare(exp, cur)}
    assert states == {"a": "OK", "b": "WARN", "c": "FAIL", "gone": "MISSING", "new": "NEW"}


def test_drop_beyond_tolerance_but_not_significant_is_warn():
    per = {str(i): 0.5 for i in range(10)}
    cur = dict(per, **{"0": 0.0})  # one query drops: mean -0.05, not significant
    exp = {"schema": 1, "rows": [{"dataset": "d", "retriever": "a", "metric": "m", "expected": 0.5,
                                  "tolerance": 0.01, "per_query": per}]}
    (row,) = compare(exp, {("d", "a", "m"): (0.45, cur)})
    assert row.state == "WARN" and row.p_value > 0.05
