"""`evalkit train-guard` end to end on a real design planting of memory-workspace: the same inputs write the same
bytes, the model it writes drops the planted payload notes of its training split, both design sets train together,
an evaluation planting is refused in one line with nothing written, and bad options are one line each."""
import json

import numpy as np
import pytest

from evalkit.cli import main
from evalkit.data.registry import load_dataset
from retrievers.embed.model import Embedder
from retrievers.stages.guard.learned import PayloadModel


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    out = tmp_path_factory.mktemp("p") / "ws-design"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", "instruction,trigger,keyword-stuff",
                 "--rate", "0.01", "--isolate", "--templates", "design", "--seed", "3", "--out", str(out)]) == 0
    return out


def test_training_is_reproducible_and_the_model_drops_its_planted_notes(design, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["train-guard", "--dataset", str(design), "--out", str(a)]) == 0
    text = capsys.readouterr().out
    assert "trained guard.classifier on" in text and f"wrote {a}" in text
    assert main(["train-guard", "--dataset", str(design), "--out", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    spec = json.loads(a.read_text())
    assert spec["trained_on"]["templates"] == ["design"] and spec["trained_on"]["split"] == "train"
    ds = load_dataset(str(design))
    train = set(ds.splits["train"])
    planted = [d.text for d in ds.documents if d.metadata.get("poison") and train & set(d.metadata["poison_target"])]
    clean = [d.text for d in ds.documents if not d.metadata.get("poison")]
    m = PayloadModel.load(a)
    emb = Embedder(progress=False)
    assert (m.note_scores(planted, emb) > m.threshold).mean() > 0.95
    assert (m.note_scores(clean, emb) > m.threshold).mean() < 0.02
    assert spec["trained_on"]["training_false_positive"] == pytest.approx(
        float((m.note_scores(clean, emb) > m.threshold).mean()))


def test_both_design_sets_train_together_and_the_model_says_so(design, tmp_path, capsys):
    d2 = tmp_path / "ws-design-2"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", "instruction", "--rate", "0.01",
                 "--isolate", "--templates", "design-2", "--seed", "4", "--out", str(d2)]) == 0
    out = tmp_path / "m.json"
    assert main(["train-guard", "--dataset", f"{design},{d2}", "--out", str(out)]) == 0
    spec = json.loads(out.read_text())["trained_on"]
    assert spec["templates"] == ["design", "design-2"]
    single = [d["positive_notes"] for d in spec["datasets"]]
    assert len(single) == 2 and all(n > 0 for n in single) and spec["positive_notes"] == sum(single)


def test_an_evaluation_planting_is_refused_and_nothing_is_written(tmp_path, capsys):
    ev = tmp_path / "ws-eval"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", "instruction", "--rate", "0.01",
                 "--isolate", "--templates", "evaluation", "--seed", "3", "--out", str(ev)]) == 0
    capsys.readouterr()
    out = tmp_path / "m.json"
    assert main(["train-guard", "--dataset", str(ev), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "planted from the evaluation templates" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("args, msg", [
    (["--dataset", "memory-workspace"], "has no planted notes"),
    (["--quantile", "1.5"], "--quantile 1.5 must be in [0.5, 1)"),
    (["--split", "nope"], "has no split 'nope'"),
    (["--dataset", ","], "--dataset ',': no names given"),
])
def test_bad_input_is_one_line(design, tmp_path, capsys, args, msg):
    base = {"--dataset": str(design)}
    argv = ["train-guard", "--out", str(tmp_path / "m.json")]
    opts = dict(base, **dict(zip(args[::2], args[1::2])))
    for k, v in opts.items():
        argv += [k, v]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]
    assert not (tmp_path / "m.json").exists()
