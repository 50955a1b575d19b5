"""Optuna search in `evalkit tune`: seeded and deterministic, resumable from its journals, the same on a Dask
cluster (a real in-process LocalCluster), and the sampler's overhead per config reported."""
from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.tune.space import load_space

SPACE = """
preset = "openclaw_core_2026_2_26_decay_mmr"
dataset = "memory-workspace"
split = "train"
heldout = "test"
objective = "ndcg@10"
method = "tpe"
trials = 12
batch = 4
init = 4
seed = 5
constraints = ["recall@10 >= 0.0"]

[[param]]
stage = "decay"
name = "half_life_days"
low = 1
high = 365
log = true

[[param]]
stage = "mmr"
name = "lam"
values = [0.3, 0.5, 0.7, 0.9]

[[simplex]]
stage = "merge"
names = ["vector_weight", "text_weight"]
"""


def _space(tmp_path: Path, body: str = SPACE, **kw):
    f = tmp_path / "space.toml"
    f.write_text(body)
    return load_space(f, **kw)


def _configs(res) -> list:
    return [r for r in (res.out / "configs.csv").read_text().splitlines()]


@pytest.mark.parametrize("sampler", ["tpe", "gp"])
def test_optuna_samplers_are_seeded_and_deterministic(tmp_path, sampler):
    from evalkit.tune.run import run_tune
    trials = 5 if sampler == "gp" else 8
    a = run_tune(_space(tmp_path, method=sampler, trials=trials), out=tmp_path / "a", log=lambda m: None,
                 journal=tmp_path / "ja")
    b = run_tune(_space(tmp_path, method=sampler, trials=trials), out=tmp_path / "b", log=lambda m: None,
                 journal=tmp_path / "jb")
    assert _configs(a) == _configs(b)
    assert a.summary["best"] == b.summary["best"]
    sw = a.summary["sweep"]
    assert a.summary["method"] == sampler
    assert 2 <= sw["configs"] <= trials + 1 + 9 and sw["resumed_from_journal"] == 0  # + the no-effect probes
    assert sw["sampler_ms_per_config"] is not None and sw["sampler_ms_per_config"] > 0


def test_optuna_search_resumes_from_its_journal_and_runs_on_a_cluster(tmp_path):
    from evalkit.engine.cluster import open_client
    from evalkit.tune.run import run_tune
    first = run_tune(_space(tmp_path, method="random", trials=6), out=tmp_path / "a", log=lambda m: None,
                     journal=tmp_path / "j")
    lines: list[str] = []
    more = run_tune(_space(tmp_path, method="random", trials=10), out=tmp_path / "b", log=lines.append, journal=tmp_path / "j")
    # the 6 finished trials (and the as-shipped config) are read back, not recomputed; 4 more are asked
    assert more.summary["sweep"]["resumed_from_journal"] == first.summary["sweep"]["configs"]
    assert set(_configs(first)[1:]) <= set(_configs(more)[1:])
    assert more.summary["sweep"]["configs"] > first.summary["sweep"]["configs"]
    # the same search on a Dask cluster gives the same configs and metrics
    with open_client("local:2", processes=False) as client:
        dist = run_tune(_space(tmp_path, method="random", trials=6), out=tmp_path / "d", log=lines.append,
                        cluster=client, journal=tmp_path / "jd")
    assert _configs(dist) == _configs(first)
    assert dist.summary["best"] == first.summary["best"]
    assert dist.summary["sweep"]["cluster_workers"] == 2
    assert any("sent once per worker" in line for line in lines)


STRUCTURAL = """
preset = "hybrid-rrf"
dataset = "memory-workspace"
split = "train"
heldout = "test"
objective = "ndcg@10"
method = "grid"
no_effect = "pin"

[[arm]]                 # an AND keyword query beside the preset's OR one
name = "bm25_and"
kind = "lexical"
match = "all"
depth = 100

[[choice]]
stage = "fuse.rrf"
names = ["rrf", "rrf-weaviate", "mnz-zscore", "convex-minmax", "rrf-and"]
options = ["keep",
           { type = "fuse.rrf", arms = ["vec", "bm25"], convention = "weaviate" },
           { type = "fuse.comb", arms = ["vec", "bm25"], method = "mnz", norm = "zscore" },
           { type = "fuse.convex", vector_arm = "vec", text_arm = "bm25", alpha = 0.7 },
           { type = "fuse.rrf", arms = ["vec", "bm25_and"] }]

[[choice]]               # the top-100 cutoff changes nothing that nDCG@10 reads
stage = "cutoff.top_k"
options = ["keep", "off"]
"""


def test_structural_choices_and_no_effect(tmp_path):
    from evalkit.tune.run import run_tune
    from retrievers.pipeline import load_preset
    res = run_tune(_space(tmp_path, STRUCTURAL), out=tmp_path / "s", log=lambda m: None, journal=None)
    s = res.summary
    # the cutoff on/off choice has no effect on nDCG@10 and is pinned; the fusion choice is searched
    assert [r["param"] for r in s["no_effect"]] == ["choice_cutoff_top_k"]
    rows = (res.out / "configs.csv").read_text()
    for name in ("rrf-weaviate", "mnz-zscore", "convex-minmax", "rrf-and"):
        assert name in rows
    # the fusion rules give different results, and the best config written as a preset reproduces its score
    best = load_preset(str(res.out / "best.toml"))
    text = (res.out / "best.toml").read_text()
    assert "# provenance: space" in text and "held out 'test'" in text
    from evalkit.data.registry import load_dataset
    from evalkit.engine.evaluate import evaluate_run
    from evalkit.engine.runner import run_quality
    from retrievers.index import SharedIndex
    from retrievers.stages import Context
    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    run = run_quality(ds, [best], index, Context(embedder=index.embedder))[best.name]
    assert abs(evaluate_run(ds, run, ["ndcg@10"]).means["ndcg@10"] - s["best"]["train"]["ndcg@10"]) < 1e-9
