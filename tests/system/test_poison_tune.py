"""A tune space constrained on the poison measures: on a memory-workspace planting (design templates), configs
without guards fail ``poison_max_injected_rate <= 0.01`` and the best meets it; the sweep's poison figures on
the tuning split equal what the ordinary runner and evaluate_run give for the best preset (the arrays and list
engines agree); the held-out split, the dataset's lockbox (kept by the planting), is not read."""
from __future__ import annotations

import math

from evalkit.cli import main
from evalkit.data.readers.beir import load_beir
from evalkit.engine.evaluate import evaluate_run
from evalkit.engine.runner import run_quality
from evalkit.tune.run import run_tune
from evalkit.tune.space import load_space
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import load_preset
from retrievers.stages import Context

SPACE = """
name = "poison_tiny"
preset = "hybrid-cc"
dataset = "{dataset}"
split = "train"
heldout = "test"
objective = "ndcg@10"
method = "grid"
seed = 1
no_effect = "report"
metrics = ["poison_injected_rate", "poison_max_injected_rate", "poison_rate@10"]
constraints = ["poison_max_injected_rate <= 0.01"]

[[choice]]
id = "payload"
stage = "fuse"
names = ["off", "on"]
options = ["keep", ["keep", {{ type = "guard.payload" }}]]

[[choice]]
id = "echo"
stage = "top_k"
names = ["off", "on"]
options = ["keep", [{{ type = "guard.query_echo", threshold = 1.0, min_tokens = 1, lead = 3 }}, "keep"]]

[[choice]]
id = "conflict"
stage = "budget"
names = ["off", "on"]
options = ["keep", [{{ type = "guard.conflict", similarity = "max", threshold = 0.85, depth = 30 }}, "keep"]]
"""


def test_tune_constraint_on_poison_injected_rate(tmp_path):
    planted = tmp_path / "ws-design"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks",
                 "query-echo,instruction,trigger,keyword-stuff,false-fact", "--rate", "0.01", "--isolate",
                 "--templates", "design", "--seed", "35", "--out", str(planted)]) == 0
    space = tmp_path / "space.toml"
    space.write_text(SPACE.format(dataset=planted))
    out = tmp_path / "tuned"
    s = run_tune(load_space(space), out=out, log=lambda m: None).summary
    assert s["shipped"]["constraints"] == {"poison_max_injected_rate <= 0.01": "fail"}
    assert s["shipped"]["train"]["poison_max_injected_rate"] > 0.5  # hybrid-cc injects most planted notes
    assert s["best"]["feasible"] and s["best"]["train"]["poison_max_injected_rate"] <= 0.01
    assert all(v == "on" for k, v in s["best"]["config"].items() if k.endswith(":stage"))
    assert s["best"]["heldout"] is None  # "test" is the lockbox: not read
    ds = load_beir(planted).split("train")
    best = load_preset(str(out / "best.toml"))
    index = SharedIndex(ds)
    ev = evaluate_run(ds, run_quality(ds, [best], index, Context(embedder=index.embedder))[best.name])
    for m in ("poison_injected_rate", "poison_max_injected_rate", "poison_rate@10", "ndcg@10"):
        assert math.isclose(ev.means[m], s["best"]["train"][m], abs_tol=1e-9), m
