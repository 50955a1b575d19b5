"""The newcomer's rough edges of the command line: --version, "did you mean", a presets listing that fits 100
columns and says what a preset needs to run, from-config's default name, the data directory beside the clone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit import __version__
from evalkit.cli import main
from retrievers.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "from_config"


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"evalkit {__version__}"


@pytest.mark.parametrize("argv, hint", [
    (["run", "--dataset", "memory-workspace", "--retrievers", "bm52"], "unknown retriever 'bm52' — did you mean 'bm25'?"),
    (["run", "--dataset", "memory-worksapce", "--retrievers", "bm25"], "did you mean 'memory-workspace'?"),
])
def test_did_you_mean_on_the_command_line(argv, hint, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalkit: error: ") and hint in err and len(err.strip().splitlines()) == 1


def test_did_you_mean_for_stages_parameters_and_override_labels(tmp_path):
    from retrievers.pipeline import load_preset
    from retrievers.stages import build_stage
    with pytest.raises(ConfigError, match=r"unknown stage 'fuse\.rff' \(valid: .*\) — did you mean 'fuse\.rrf'\?"):
        build_stage({"type": "fuse.rff"})
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) kk \(valid: k, label\) — did you mean 'k'\?"):
        build_stage({"type": "cutoff.top_k", "kk": 3})
    p = tmp_path / "x.toml"
    p.write_text('extends = "bm25"\nname = "x"\n[overrides."cutoff.top_kk"]\nk = 3\n')
    with pytest.raises(ConfigError, match=r"did you mean 'cutoff\.top_k'\?"):
        load_preset(str(p))
    with pytest.raises(ConfigError) as exc:
        load_preset("zzzzzz")  # nothing close: the whole list instead
    assert "did you mean" not in str(exc.value) and "presets: bm25, dense" in str(exc.value)


def test_presets_listing_fits_100_columns_and_says_what_a_preset_needs(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    row = next(line for line in lines if line.startswith("two_stage_rerank "))
    assert "needs a reranker: set rerank.provider" in row
    assert 'extends = "two_stage_rerank" and [overrides.rerank] provider = "local"' in " ".join(out.split())
    assert "no reranker probability" not in out  # the error `evalkit run` used to be the only hint
    assert main(["presets", "--long"]) == 0
    long = capsys.readouterr().out
    from retrievers.pipeline import load_preset
    p = load_preset("bm25")
    assert f"bm25  {p.hash}\n  {p.description}\n" in long


def test_from_config_names_the_preset_from_the_file(tmp_path, capsys):
    from evalkit.commands.presets import default_name
    assert default_name("openclaw", Path("openclaw.json")) == "openclaw"
    assert default_name("openclaw", Path("work-agent.json")) == "openclaw_work_agent"
    assert default_name("openclaw", Path("openclaw.json"), agent="main") == "openclaw_main"
    assert default_name("hookclaw-v2.0", Path("hookclaw_v2_0.json")) == "hookclaw_v2_0"
    assert default_name("baseline", Path("bm25.json")) == "baseline_bm25"
    assert main(["preset", "from-config", "--system", "openclaw", str(FIXTURES / "openclaw.json")]) == 0
    cap = capsys.readouterr()
    assert "  preset openclaw (hash " in cap.err and "openclaw_openclaw" not in cap.err + cap.out
    assert cap.out.startswith("# openclaw: written by")


def test_datasets_found_beside_the_clone_without_evalkit_data(tmp_path, monkeypatch, capsys):
    from evalkit.data import registry
    shared = tmp_path / "shared" / "datasets"
    (shared / "scifact").mkdir(parents=True)
    monkeypatch.delenv("EVALKIT_DATA", raising=False)
    monkeypatch.setattr(registry, "SIBLING_DATASETS", shared)
    assert registry.data_dirs() == [shared, registry.REPO_DATASETS]
    assert registry.locate("scifact") == shared / "scifact"
    monkeypatch.setenv("EVALKIT_DATA", str(tmp_path / "elsewhere"))  # an explicit setting wins, as in make
    assert registry.data_dirs() == [tmp_path / "elsewhere", registry.REPO_DATASETS]
    monkeypatch.delenv("EVALKIT_DATA")
    monkeypatch.setattr(registry, "SIBLING_DATASETS", tmp_path / "absent")
    assert registry.data_dirs() == [registry.REPO_DATASETS]
    assert json.dumps([str(d) for d in registry.data_dirs()])  # plain paths


@pytest.mark.parametrize("argv, line", [
    (["rnu"], "evalkit: error: unknown command 'rnu' — did you mean 'run'?"),
    (["import", "openclw"], "evalkit: error: argument SOURCE: invalid choice: 'openclw' — did you mean 'openclaw'?"),
    (["tune", "--sampler", "zzz", "x.toml"], "evalkit: error: argument --sampler: invalid choice: 'zzz' (one of: "),
])
def test_a_mistyped_command_or_choice_is_one_line_with_a_suggestion(argv, line, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(line) and len(err.strip().splitlines()) == 1
    assert "usage:" not in err


def test_a_mistyped_dataset_folder_names_the_folder_beside_it(tmp_path, capsys):
    (tmp_path / "my-notes").mkdir()
    assert main(["run", "--dataset", str(tmp_path / "my-notse"), "--retrievers", "bm25"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalkit: error: unknown dataset") and len(err.strip().splitlines()) == 1
    assert f"did you mean {str(tmp_path / 'my-notes')!r}?" in err


def test_a_stage_class_defined_again_replaces_itself_but_no_other_class_takes_its_name():
    from retrievers.stages.base import REGISTRY, Stage, register
    src = ("@register\nclass NotebookBoost(Stage):\n    name = 'score.notebook_boost_test'\n"
           "    def apply(self, st, cs, ctx):\n        return st\n")
    first, again = {}, {}
    exec(src, {"register": register, "Stage": Stage, "__name__": "nb"}, first)  # a notebook cell run twice
    exec(src, {"register": register, "Stage": Stage, "__name__": "nb"}, again)
    assert REGISTRY["score.notebook_boost_test"] is again["NotebookBoost"]
    with pytest.raises(TypeError, match="registered twice"):
        exec(src.replace("NotebookBoost", "OtherBoost"), {"register": register, "Stage": Stage, "__name__": "nb"}, {})
    del REGISTRY["score.notebook_boost_test"]


def test_malformed_json_names_the_column_once(tmp_path, capsys):
    d = tmp_path / "ds"
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text('{"_id": "d1", "text": "unterminated}\n')
    (d / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert main(["run", "--dataset", str(d), "--retrievers", "bm25"]) == 2
    err = capsys.readouterr().err
    assert "corpus.jsonl:1: malformed JSON (" in err and " at column " in err and "at at" not in err


def test_the_gate_diff_names_the_embedder_in_words():
    from evalkit.workflows.gate_baseline import updated
    emb = {"model": "all-MiniLM-L6-v2", "backend": "openvino", "max_length": 256}
    _, diff = updated({}, None, emb, 0.02, [], [])
    line = next(d for d in diff if "embedder" in d)
    assert line == "~ embedder: none recorded -> all-MiniLM-L6-v2 (openvino, max 256 word pieces)"


def test_every_registered_dataset_is_in_the_datasets_page():
    from evalkit.data.registry import DATASETS
    page = (Path(__file__).resolve().parents[4] / "docs" / "datasets.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    named = " ".join(line.split("|")[1] for line in rows)
    missing = [n for n in DATASETS if f"`{n}`" not in named]
    assert not missing, f"registered but not in docs/datasets.md: {missing}"


def test_a_bm25_only_run_does_not_describe_embeddings(tmp_path, capsys):
    assert main(["run", "--dataset", "memory-workspace", "--retrievers", "bm25", "--limit", "10",
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "no embeddings: no retriever of the run reads vectors" in out and "word pieces" not in out
    header = (tmp_path / "r" / "report.md").read_text(encoding="utf-8").splitlines()[2]
    assert header.startswith("evalkit ") and "embeddings" not in header
    assert main(["run", "--dataset", "memory-workspace", "--retrievers", "bm25,dense", "--limit", "10",
                 "--out", str(tmp_path / "d")]) == 0
    assert "embeddings all-MiniLM-L6-v2" in (tmp_path / "d" / "report.md").read_text(encoding="utf-8")
