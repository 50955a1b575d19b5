"""`evalkit lofo` end to end on a real design planting of memory-workspace: one fold model per payload family, each
without that family's planted notes; the table's counts are the run's own per-attack counts; each guard alone and an
extra guard are measured; the by-construction column says no guard reads a sourced fact; bad input is one line."""
import json

import pytest

from evalkit.cli import main
from evalkit.runfolder.view import RunData
from evalkit.workflows.lofo import retune_grid
from retrievers.pipeline import load_preset


def lofo_rows(out):
    """The rows of lofo.json (family, tuned) as the command wrote them."""
    return [{"family": r["family"], "tuned": r["tuned"]} for r in json.loads((out / "lofo.json").read_text())["rows"]]

pytestmark = pytest.mark.slow  # fits the learned guard three times and runs 60 pipelines (18 re-tuning points a fold)


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
                 "--split", "train", "--guard", '{type = "guard.payload"}', "--out", str(out)]) == 0
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
    # every fold re-tuned the thresholds without its family, by the tuner's rule, recomputed here from the run
    res = lofo_rows(out)
    grid = retune_grid(load_preset("tune/best/workspace_poison.toml"))
    ds = planting.name
    targets = run.dataset_info(ds)["poison"]["targets"]
    for row in res:
        fam, chosen = row["family"], row["tuned"]
        tag = f"without-{fam}" if fam in ("instruction", "trigger") else "every-family"
        keys = []
        for i, _ in enumerate(grid):
            r = f"{name}-{tag}" if i == 0 else f"{name}-{tag}-t{i}"
            by = run.breakdown[(ds, "attack")][r]["poison_injected_rate"]
            worst = max(v for f, (v, n) in by.items() if f != fam and n)
            nd = [v for q, v in run.per_query(ds, r, "ndcg@10").items() if q not in set(targets[fam])]
            keys.append((worst > 0.01, -sum(nd) / len(nd), i))
        assert chosen == grid[min(keys)[2]], fam
    assert "fold's thresholds" in text
    # --report-only computes the same tables again from the folders, fitting and running nothing
    first = (out / "lofo.md").read_text()
    assert main(["lofo", "--preset", "tune/best/workspace_poison.toml", "--dataset", str(planting),
                 "--split", "train", "--guard", '{type = "guard.payload"}', "--out", str(out), "--report-only"]) == 0
    assert (out / "lofo.md").read_text() == first


def test_bad_input_is_one_line(planting, tmp_path, capsys):
    for args, msg in [(["--preset", "bm25", "--dataset", str(planting)], "has no guard.* stage"),
                      (["--preset", "tune/best/workspace_poison.toml", "--dataset", "memory-workspace"],
                       "has no planted notes"),
                      (["--preset", "tune/best/workspace_poison.toml", "--dataset", str(planting), "--guard", "{x"],
                       "not a TOML inline table"),
                      (["--preset", "tune/best/workspace_poison.toml", "--dataset", str(planting), "--report-only"],
                       "holds no finished lofo run")]:
        assert main(["lofo", *args, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("evalkit: error: ") and msg in err[0], err
