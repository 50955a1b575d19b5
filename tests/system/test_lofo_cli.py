"""`evalkit lofo` end to end on a real design planting of memory-workspace: one fold model per payload family, each
without that family's planted notes; the table's counts are the run's own per-attack counts; each guard alone and an
extra guard are measured; the by-construction column says no guard reads a sourced fact; bad input is one line."""
import json

import pytest

from evalkit.cli import main
from evalkit.runfolder.view import RunData

pytestmark = pytest.mark.slow  # fits the learned guard three times and runs nine pipelines


@pytest.fixture(scope="module")
def planting(tmp_path_factory):
    out = tmp_path_factory.mktemp("p") / "ws-design"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", "instruction,trigger,sourced-fact",
                 "--rate", "0.01", "--isolate", "--templates", "design", "--seed", "3", "--targets", "90",
                 "--out", str(out)]) == 0
    return out


def test_lofo_fits_a_guard_per_family_and_reports_the_runs_counts(planting, tmp_path, capsys):
    out = tmp_path / "lofo"
    capsys.readouterr()
    assert main(["lofo", "--preset", "tune/best/workspace_poison.toml", "--dataset", str(planting),
                 "--guard", '{type = "guard.payload"}', "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "headline (leave one family out, worst held-out family):" in text
    assert (out / "lofo.md").read_text().startswith("tune/best/workspace_poison.toml: leave-one-family-out")
    # one model per payload family, each trained without that family's notes, plus the every-family one
    specs = {p.name: json.loads(p.read_text())["trained_on"] for p in (out / "models").glob("*.json")}
    assert set(specs) == {"guard-every-family.json", "guard-without-instruction.json", "guard-without-trigger.json"}
    assert specs["guard-without-trigger.json"]["attacks"] == ["instruction"]  # the payload families it learned from
    assert specs["guard-every-family.json"]["attacks"] == ["instruction", "trigger"]
    assert specs["guard-every-family.json"]["positive_notes"] > specs["guard-without-trigger.json"]["positive_notes"]
    # the table's k/n are the run's per-attack injected counts of the fold pipeline
    run = RunData.from_folder(out / "run-design")
    name = "hybrid-cc_tuned_workspace_poison"
    v, n = run.breakdown[(planting.name, "attack")][f"{name}-without-instruction"]["poison_injected_rate"]["instruction"]
    row = next(line for line in text.splitlines() if line.startswith("instruction "))
    assert f"({round(v * n)}/{n})" in row
    assert {r for r in run.retrievers(planting.name)} >= {name, f"{name}-no-guard", f"{name}-only-guard.payload",
                                                            f"{name}-only-guard.query_echo"}
    sourced = next(line for line in text.splitlines() if line.startswith("sourced-fact "))
    assert " none " in sourced  # no guard of the pipeline (nor guard.payload) can catch it by construction


def test_bad_input_is_one_line(planting, tmp_path, capsys):
    for args, msg in [(["--preset", "bm25", "--dataset", str(planting)], "has no guard.* stage"),
                      (["--preset", "tune/best/workspace_poison.toml", "--dataset", "memory-workspace"],
                       "has no planted notes"),
                      (["--preset", "tune/best/workspace_poison.toml", "--dataset", str(planting), "--guard", "{x"],
                       "not a TOML inline table")]:
        assert main(["lofo", *args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("evalkit: error: ") and msg in err[0], err
