"""Nothing of the user's is ever replaced or removed (evalkit/claim.py), and bad inputs found by trying exit 2 with
one line and write nothing.

Every writing command is pointed at the current directory, a folder above it, the home directory, an existing file
and a folder of the user's: each must exit 2 with one `evalkit: error:` line before doing any work, and leave every
byte where it was. Re-running into a command's own earlier output works; an earlier output the user added a file
to, or edited, is refused and the file named.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evalkit.cli import main

ROOT = Path(__file__).resolve().parents[1]
REPLAY_LOG = ROOT / "tests" / "fixtures" / "replay" / "bad_lines.jsonl"
CANDIDATES = ROOT / "docs" / "examples" / "openclaw_a1.json"
CHEAP_RUN = ["--dataset", "memory-workspace", "--backend", "exact", "--limit", "20"]
TUNE_SPACE = """
preset = "bm25"
dataset = "memory-workspace"
split = "train"
heldout = "test"
objective = "ndcg@10"
method = "grid"

[[param]]
arm = "bm25"
name = "depth"
values = [50, 100]
"""


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for folders): equal snapshots = nothing touched or added."""
    return {p.relative_to(root).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("evalkit: error: "), err
    return err[0]


def _refused(argv: list[str], capsys, root: Path) -> str:
    """``argv`` exits 2 with one error line and changes nothing under ``root``."""
    before = _snapshot(root)
    assert main(argv) == 2
    line = _one_error(capsys)
    assert _snapshot(root) == before
    return line


# ---- bad inputs found by trying ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["", ",", " , "])
def test_empty_retriever_list_is_one_error(value, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out")
    for argv in (["run", *CHEAP_RUN, "--retrievers", value, "--out", out],
                 ["replay", "--log", str(REPLAY_LOG), "--dataset", "memory-workspace", "--retrievers", value,
                  "--out", out],
                 ["bench", "--datasets", "memory-workspace", "--retrievers", value, "--out", out],
                 ["bench", "--datasets", value, "--retrievers", "bm25", "--out", out],
                 ["gate", "--datasets", "memory-workspace", "--retrievers", value],
                 ["run", "--dataset", value, "--retrievers", "bm25", "--out", out]):
        line = _refused(argv, capsys, tmp_path)
        assert "no names given" in line, line
    assert list(tmp_path.iterdir()) == []


def test_bench_with_no_dataset_to_run_is_one_error(tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "bench")
    assert "unknown dataset(s) nosuch (valid: memory-workspace" in \
        _refused(["bench", "--datasets", "nosuch", "--out", out], capsys, tmp_path)
    monkeypatch.setenv("EVALKIT_DATA", str(tmp_path))  # scifact is found only in the shared data directory
    assert "none of scifact is in the data directory" in \
        _refused(["bench", "--datasets", "scifact", "--out", out], capsys, tmp_path)
    assert list(tmp_path.iterdir()) == []


BAD_ARM = """
name = "typo"
[[arms]]
name = "v"
kind = "vectr"
"""


def test_unknown_arm_kind_is_named(tmp_path, capsys):
    for body in (BAD_ARM, BAD_ARM + '\n[[stages]]\ntype = "fuse.single"\narm = "v"\n'):
        preset = tmp_path / "typo.toml"
        preset.write_text(body)
        line = _refused(["run", *CHEAP_RUN, "--retrievers", str(preset), "--out", str(tmp_path / "out")], capsys,
                        tmp_path)
        assert "unknown kind 'vectr' (valid kinds: vector, lexical)" in line and "typo" in line, line
    assert not (tmp_path / "out").exists()


def _beir(tmp_path: Path, test_qrels: str | None, train_qrels: bool = False, extra_query: bool = False) -> Path:
    """The tests' tiny BEIR folder with qrels/test.tsv replaced by ``test_qrels`` (None: no such file)."""
    from tests.helpers import write_tiny_beir
    root = write_tiny_beir(tmp_path / "beir")
    rows = (root / "qrels" / "test.tsv").read_text()
    if train_qrels:
        (root / "qrels" / "train.tsv").write_text(rows)
    if test_qrels is None:
        (root / "qrels" / "test.tsv").unlink()
    else:
        (root / "qrels" / "test.tsv").write_text(test_qrels)
    if extra_query:  # in split "later" through its metadata, judged nowhere
        with open(root / "queries.jsonl", "a") as fh:
            fh.write(json.dumps({"_id": "q7", "text": "what is for dinner", "metadata": {"split": "later"}}) + "\n")
    return root


@pytest.mark.parametrize("case", ["empty_file", "header_only", "test_unjudged_train_judged", "split_unjudged"])
def test_no_judged_query_is_one_error(case, tmp_path, capsys):
    data = {"empty_file": lambda: _beir(tmp_path, ""),
            "header_only": lambda: _beir(tmp_path, "query-id\tcorpus-id\tscore\n"),
            "test_unjudged_train_judged": lambda: _beir(tmp_path, "query-id\tcorpus-id\tscore\n", train_qrels=True),
            "split_unjudged": lambda: _beir(tmp_path, None, train_qrels=True, extra_query=True)}[case]()
    split = ["--split", "later"] if case == "split_unjudged" else []
    out = str(tmp_path / "out")
    for argv in (["run", "--dataset", str(data), "--retrievers", "bm25", "--backend", "exact", *split, "--out", out],
                 ["ablate", "--preset", "bm25", "--dataset", str(data), "--latency-queries", "0", "--backend",
                  "exact", *split, "--out", out]):
        line = _refused(argv, capsys, tmp_path)
        assert "is judged" in line and "nothing to score" in line, line
    assert not (tmp_path / "out").exists()
