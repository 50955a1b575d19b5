"""Nothing of the user's is ever replaced or removed (evalkit/runfolder/claim.py), and bad inputs found by trying
exit 2 with one line and write nothing.

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
from tests.helpers import ROOT

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


@pytest.fixture
def user_cwd(tmp_path, monkeypatch):
    """tmp/user (the current directory) with the user's notes.md, precious.txt and mydir/notes.md; a fake home."""
    from retrievers.embed.model import cache_root
    monkeypatch.setenv("EVALKIT_CACHE", str(cache_root()))  # the shared cache stays where it is
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("export X=1\n")
    monkeypatch.setenv("HOME", str(home))
    user = tmp_path / "user"
    (user / "mydir").mkdir(parents=True)
    (user / "notes.md").write_text("# my notes\nkeep me\n")
    (user / "precious.txt").write_bytes(b"precious \x00\xff bytes")
    (user / "mydir" / "notes.md").write_text("mine too\n")
    monkeypatch.chdir(user)
    return user


def _argv(command: str, out: str, tmp_path: Path) -> list[str]:
    if command == "run":
        return ["run", *CHEAP_RUN, "--retrievers", "bm25", "--out", out]
    if command == "replay":
        return ["replay", "--log", str(REPLAY_LOG), "--dataset", "memory-workspace", "--retrievers", "bm25",
                "--backend", "exact", "--out", out]
    if command == "bench":
        return ["bench", "--datasets", "memory-workspace", "--retrievers", "bm25", "--no-latency", "--backend",
                "exact", "--out", out]
    if command == "compare":  # the refusal comes before the run folders are read: they need not exist
        return ["compare", str(tmp_path / "run_a"), str(tmp_path / "run_b"), "--out", out]
    if command == "tune":
        space = tmp_path / "space.toml"
        space.write_text(TUNE_SPACE)
        return ["tune", "--space", str(space), "--backend", "exact", "--quiet", "--out", out]
    if command == "ablate":
        return ["ablate", "--preset", "bm25", "--limit", "5", "--latency-queries", "0", "--backend", "exact",
                "--out", out]
    if command == "report":
        return ["report", out]
    if command == "score":
        return ["score", "--preset", "openclaw_core_2026_2_26", "--candidates", str(CANDIDATES), "--out", out]
    if command == "perf":
        return ["perf", "--quick", "--sections", "5", "--json", out]
    raise ValueError(command)


COMMANDS = ["run", "replay", "bench", "compare", "tune", "ablate", "report", "score", "perf"]


@pytest.mark.parametrize("command", COMMANDS)
def test_command_never_replaces_a_users_path(command, user_cwd, tmp_path, capsys):
    home = str(tmp_path / "home")
    for out, why in ((".", "is the current directory"), ("..", "above the current directory"),
                     (home, "home directory"), ("precious.txt", ""), ("mydir", ""), ("mydir/notes.md", "")):
        argv = _argv(command, out, tmp_path)
        line = _refused(argv, capsys, tmp_path)
        assert out in line, line
        if command == "report":  # RUN_DIR is read first: none of these is a run folder
            assert "not a run folder" in line, line
        else:
            assert why in line and "never replaces" in line, line


def test_refusal_lines_name_what_is_there(user_cwd, tmp_path, capsys):
    run = ["run", *CHEAP_RUN, "--retrievers", "bm25", "--out"]
    assert "is an existing file, not a run folder" in _refused(run + ["precious.txt"], capsys, tmp_path)
    assert "evalkit did not write (it holds notes.md)" in _refused(run + ["mydir"], capsys, tmp_path)
    assert "is a folder, not a score output file" in _refused(_argv("score", "mydir", tmp_path), capsys, tmp_path)
    assert "not an earlier evalkit perf JSON file" in _refused(_argv("perf", "notes.md", tmp_path), capsys, tmp_path)
    os.symlink(user_cwd / "mydir", user_cwd / "link")
    assert "is a symbolic link" in _refused(run + ["link"], capsys, tmp_path)
    assert (user_cwd / "link").is_symlink()


@pytest.fixture(scope="module")
def two_retriever_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("own") / "run"
    assert main(["run", *CHEAP_RUN, "--retrievers", "bm25,openclaw_core_2026_2_26_fts_only", "--out", str(out)]) == 0
    return out


def test_rerun_into_own_output_replaces_it(two_retriever_run, tmp_path, capsys):
    from evalkit.runfolder.claim import MARKER
    out = tmp_path / "run"
    argv = ["run", *CHEAP_RUN, "--retrievers", "bm25", "--out", str(out)]
    assert main(argv) == 0
    marker = json.loads((out / MARKER).read_text())
    assert marker["kind"] == "run" and "metrics.json" in marker["files"] and "report.md" in marker["files"]
    first = (out / "metrics.json").read_bytes()
    assert main(argv) == 0
    assert (out / "metrics.json").read_bytes() == first
    assert sorted(os.listdir(tmp_path)) == ["run"]  # no temporary or moved-aside sibling is left
    # an earlier run folder written before the marker existed is still evalkit's own
    (out / MARKER).unlink()
    assert main(argv) == 0 and (out / MARKER).exists()
    # compare and score re-run into their own outputs
    cmp = tmp_path / "cmp"
    for _ in range(2):
        assert main(["compare", str(two_retriever_run), "--baseline", "bm25", "--out", str(cmp)]) == 0
    assert sorted(p.name for p in cmp.iterdir()) == [MARKER, "compare.csv", "compare.html", "compare.json",
                                                     "compare.md"]
    scored = tmp_path / "scored.json"
    for _ in range(2):
        assert main(_argv("score", str(scored), tmp_path)) == 0
    assert json.loads(scored.read_text())["preset"] == "openclaw_core_2026_2_26"
    capsys.readouterr()


def test_own_output_with_a_user_file_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", *CHEAP_RUN, "--retrievers", "bm25", "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    (out / "my_analysis.md").write_text("mine\n")
    line = _refused(argv, capsys, tmp_path)
    assert "earlier run folder but also holds my_analysis.md, which evalkit did not write" in line
    (out / "my_analysis.md").unlink()
    (out / "results" / "notes").mkdir()
    assert "results/notes/" in _refused(argv, capsys, tmp_path)  # even an empty folder of the user's
    (out / "results" / "notes").rmdir()
    with open(out / "report.md", "a") as fh:
        fh.write("\nmy edit\n")
    assert "report.md changed after evalkit wrote it" in _refused(argv, capsys, tmp_path)
    # `evalkit report` rewrites only the reports evalkit wrote: an edited one is refused, too
    assert "report.md changed after evalkit wrote it" in _refused(["report", str(out)], capsys, tmp_path)
    # another command's output is not this command's
    assert "is a run folder, not a replay run folder" in _refused(_argv("replay", str(out), tmp_path), capsys,
                                                                  tmp_path)
    assert "is a run folder, not an ablation folder" in _refused(_argv("ablate", str(out), tmp_path), capsys,
                                                                 tmp_path)


def test_report_leaves_user_files_alone(two_retriever_run, tmp_path, capsys):
    from evalkit.runfolder.claim import MARKER
    run = tmp_path / "run"
    shutil.copytree(two_retriever_run, run)
    (run / "notes.md").write_text("mine\n")
    (run / "report.md").unlink()
    assert main(["report", str(run)]) == 0
    assert (run / "notes.md").read_text() == "mine\n" and (run / "report.md").exists()
    marker = json.loads((run / MARKER).read_text())
    assert "report.md" in marker["files"] and "notes.md" not in marker["files"]
    assert main(["report", str(run)]) == 0  # its own rewritten reports are still its own
    capsys.readouterr()


def _bench_run(path: Path) -> None:
    from evalkit.runfolder.write import RunWriter
    w = RunWriter(path, kind="bench-run")
    w.add_metric("memory-workspace", "bm25", "ndcg@10", 0.5)
    w.write()


def test_bench_folder_holds_only_bench_runs(tmp_path, capsys):
    from evalkit.errors import OutputPathError
    from evalkit.runfolder.claim import claim_folder
    bench = tmp_path / "bench"
    _bench_run(bench / "latest")
    _bench_run(bench / "datasets" / "memory-workspace")
    claim_folder(bench, "bench")  # an earlier bench: fine
    argv = _argv("bench", str(bench), tmp_path)
    (bench / "datasets" / "memory-workspace" / "mine.txt").write_text("x")
    assert "datasets/memory-workspace is an earlier bench run folder but also holds mine.txt" in \
        _refused(argv, capsys, tmp_path)
    (bench / "datasets" / "memory-workspace" / "mine.txt").unlink()
    (bench / "todo.txt").write_text("x")
    assert "it holds todo.txt" in _refused(argv, capsys, tmp_path)
    (bench / "todo.txt").unlink()
    shutil.rmtree(bench / "latest")
    (bench / "latest").mkdir()
    (bench / "latest" / "notes.md").write_text("x")
    assert "latest is a folder evalkit did not write" in _refused(argv, capsys, tmp_path)
    with pytest.raises(OutputPathError):
        claim_folder(tmp_path / "bench" / "latest", "run")


def test_file_outputs_replace_only_their_own_kind(tmp_path):
    from evalkit.errors import OutputPathError
    from evalkit.runfolder.claim import claim_file
    perf = tmp_path / "perf.json"
    claim_file(perf, "perf", "--json").write_text(json.dumps({"machine": {}, "mode": "--quick", "sections": {}}))
    claim_file(perf, "perf", "--json").write_text(json.dumps({"machine": {}, "mode": "full", "sections": {},
                                                              "seconds": 1.0}))
    assert json.loads(perf.read_text())["mode"] == "full"
    with pytest.raises(OutputPathError, match="not an earlier evalkit score output file"):
        claim_file(perf, "score")
    user = tmp_path / "user.json"
    user.write_text('{"sections": [], "mine": true}')
    with pytest.raises(OutputPathError, match="never replaces it"):
        claim_file(user, "perf", "--json")
    assert sorted(os.listdir(tmp_path)) == ["perf.json", "user.json"]


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


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_run_limit_below_one_is_one_error(limit, tmp_path, capsys):
    line = _refused(["run", "--dataset", "memory-workspace", "--retrievers", "bm25", "--limit", limit, "--out",
                     str(tmp_path / "out")], capsys, tmp_path)
    assert f"--limit must be >= 1, got {limit}" in line


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
