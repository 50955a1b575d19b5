"""evalkit.engine.sweep / evalkit.tune.run: sweep == Pipeline.run + evaluate per config; tune writes a loadable best preset
whose re-run reproduces the reported metric; bad space files exit non-zero with one line."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalkit.engine.sweep import Sweep, SweepConfig, deepest_arms
from evalkit.tune.expr import Expr
from evalkit.tune.search import fold_of
from evalkit.tune.space import load_space
from evalkit.tune.space_model import Simplex, compositions
from retrievers.errors import ConfigError
from tests.helpers import ROOT



@pytest.fixture(scope="module")
def ws():
    from evalkit.data.registry import load_dataset
    from retrievers.index.shared import SharedIndex
    ds = load_dataset("memory-workspace").split("train")
    return ds, SharedIndex(ds)


def _reference(p, cs, index, qrels, metrics):
    """Per-query values of ``metrics`` the slow, obvious way: Pipeline.run → collect → evalkit.measures.lists.evaluate."""
    from evalkit.measures.lists import evaluate
    from evalkit.engine.runner import arm_map, collect
    from retrievers.candidates.table import view
    from retrievers.stages import Context
    v = view(cs, arm_map(p))
    res = collect(p, v, p.run(v, Context(embedder=index.embedder)))
    ranked = evaluate(qrels, {q: r.ranked for q, r in res.items()}, [m for m in metrics if "injected" not in m])
    inj = evaluate(qrels, {q: [(d, 0.0) for d in r.injected] for q, r in res.items()},
                   [m.replace("injected_", "") for m in metrics if "injected" in m])
    ranked.update({f"injected_{m}": v for m, v in inj.items()})
    return ranked


CASES = {
    "openclaw_core_2026_2_26_decay_mmr": [
        SweepConfig(),
        SweepConfig({"decay": {"half_life_days": 90.0}, "mmr": {"lam": 0.5}}),
        SweepConfig({"decay": {"half_life_days": 90.0}, "mmr": {"lam": 0.9}}),
        SweepConfig({"decay": {"half_life_days": 7.0}, "mmr": {"lam": 0.5}, "min_score": {"threshold": 0.2}}),
        SweepConfig({"merge": {"vector_weight": 0.4, "text_weight": 0.6}}),
        SweepConfig({"decay": {"half_life_days": 90.0}}, arms={"vec": {"depth": 48}, "fts": {"depth": 8}}),
        # an inert parameter (decay disabled): identical States after the decay, so the MMR output is shared
        SweepConfig({"decay": {"enabled": False, "half_life_days": 10.0}, "mmr": {"lam": 0.6}}),
        SweepConfig({"decay": {"enabled": False, "half_life_days": 20.0}, "mmr": {"lam": 0.6}}),
    ],
    "lancedb_pro_6a50220": [
        SweepConfig(),
        SweepConfig({"recency": {"half_life_days": 3.0, "weight": 0.2}, "hard_min_score": {"threshold": 0.3}}),
        SweepConfig({"recency": {"half_life_days": 3.0, "weight": 0.2}, "hard_min_score": {"threshold": 0.45}}),
        SweepConfig({"decay": {"half_life_days": 365.0}, "diversity": {"threshold": 0.7}}),
    ],
}
METRICS = ["ndcg@10", "recall@10", "mrr@10", "map@100", "injected_ndcg@10", "recall_all@5"]


def test_sweep_equals_pipeline_run(ws):
    from retrievers.pipeline import load_preset
    from retrievers.candidates.search import build_candidates
    from retrievers.stages import Context
    ds, index = ws
    for name, configs in CASES.items():
        p = load_preset(name)
        cs = build_candidates(index, ds.queries, deepest_arms(p, configs))
        sw = Sweep(p, cs, ds.qrels, METRICS, ctx=Context(embedder=index.embedder), keep=METRICS)
        assert sw.run_budget  # injected_ndcg@10 needs the packer
        res = sw.run(configs)
        assert res.stage_calls < res.naive_stage_calls  # shared prefixes ran once
        if name.startswith("openclaw"):
            assert res.shared_outputs >= 1  # identical decay outputs: the MMR ran once for both
        for i, c in enumerate(configs):
            ref = _reference(c.pipeline(p), cs, index, ds.qrels, METRICS)
            for m in METRICS:
                want = np.array([ref[m][q] for q in res.query_ids])
                np.testing.assert_allclose(res.per_query[m][i], want, rtol=0, atol=1e-9, err_msg=f"{name} {i} {m}")
                assert abs(res.means[m][i] - want.mean()) < 1e-9
        # ranking metrics only: the budget packer is dropped, results unchanged; forked workers agree
        fast = Sweep(p, cs, ds.qrels, ["ndcg@10", "recall@10"], ctx=Context(embedder=index.embedder))
        assert not fast.run_budget
        r1 = fast.run(configs * 2)
        r2 = fast.run(configs * 2, workers=2)
        np.testing.assert_allclose(r1.means["ndcg@10"][:len(configs)], res.means["ndcg@10"], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(r1.means["ndcg@10"], r2.means["ndcg@10"])
        np.testing.assert_array_equal(r1.per_query["ndcg@10"], r2.per_query["ndcg@10"])


def _space(tmp_path: Path, body: str, name: str = "space.toml") -> Path:
    f = tmp_path / name
    f.write_text(body)
    return f


TINY = """
preset = "openclaw_core_2026_2_26_decay_mmr"
dataset = "memory-workspace"
split = "train"
heldout = "test"
objective = "ndcg@10"
method = "grid"
baselines = ["openclaw_core_2026_2_26"]

[[param]]
stage = "decay"
name = "half_life_days"
values = [30, 365]

[[param]]
arm = "vec"
name = "depth"
tie = "6 * multiplier"

[[param]]
name = "multiplier"
values = [4, 6]

[[simplex]]
stage = "merge"
names = ["vector_weight", "text_weight"]
step = 0.5
"""


def test_tune_writes_loadable_best_preset_that_reproduces(ws, tmp_path):
    from evalkit.cli import main
    from evalkit.data.registry import load_dataset
    from evalkit.engine.evaluate import evaluate_run
    from evalkit.engine.runner import run_quality
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context
    out = tmp_path / "out"
    body = TINY.replace('method = "grid"', 'method = "grid"\nno_effect = "report"')  # the whole grid is evaluated
    rc = main(["tune", "--space", str(_space(tmp_path, body)), "--out", str(out), "--quiet", "--journal",
               str(tmp_path / "journal"), "--final"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["sweep"]["configs"] == 2 * 2 * 3 + 1  # grid + as shipped (the no-effect probes are grid points)
    assert all(r["pinned_to"] is None for r in s["no_effect"])  # reported, not pinned
    for f in ("leaderboard.csv", "leaderboard.md", "configs.csv", "report.md", "best.toml"):
        assert (out / f).stat().st_size > 0
    assert any(p.endswith(".png") for p in s["plots"])
    assert s["significance"] and 0.0 <= s["significance"][0]["p_randomization"] <= 1.0
    best = load_preset(str(out / "best.toml"))
    assert best.name.endswith("_tuned_space")
    # re-run the best preset through the ordinary runner: the reported tuning metric is reproduced
    ds, index = ws
    run = run_quality(ds, [best], index, Context(embedder=index.embedder))[best.name]
    ev = evaluate_run(ds, run, ["ndcg@10", "recall@10"])
    assert math.isclose(ev.means["ndcg@10"], s["best"]["train"]["ndcg@10"], abs_tol=1e-9)
    assert math.isclose(ev.means["recall@10"], s["best"]["train"]["recall@10"], abs_tol=1e-9)
    # the test split is the dataset's lockbox: --final scored the best config there, as the ordinary runner does
    held = load_dataset("memory-workspace").split("test")
    run = run_quality(held, [best], index, Context(embedder=index.embedder))[best.name]
    assert s["lockbox"]["opened"] == 1 and s["best"]["heldout"] is None
    assert math.isclose(evaluate_run(held, run, ["ndcg@10"]).means["ndcg@10"], s["lockbox"]["best"]["ndcg@10"],
                        abs_tol=1e-9)


def test_tune_bayes_with_folds(ws, tmp_path):
    from evalkit.tune.run import run_tune
    body = TINY.replace('heldout = "test"\n', "folds = 3\n").replace('method = "grid"', 'method = "bayes"\ntrials = 14'
                                                                     '\nbatch = 4\ninit = 6\nseed = 3')
    body = body.replace("values = [30, 365]", "low = 1\nhigh = 365\nlog = true")
    sp = load_space(_space(tmp_path, body))
    res = run_tune(sp, out=tmp_path / "cv", log=lambda m: None)
    s = res.summary
    assert s["folds"] == 3 and len(s["cv"]["rows"]) == 3
    assert s["sweep"]["configs"] <= 4 * 14 + 1
    assert 0.0 <= s["cv"]["heldout_mean"] <= 1.0
    assert s["significance"][0]["n"] == s["queries"]["tuning_judged"]


BAD = {
    "unknown preset": ('preset = "nope"\n[[param]]\nstage = "decay"\nname = "half_life_days"\nvalues = [1]\n',
                       "unknown retriever"),
    "unknown stage": (TINY.replace('stage = "decay"', 'stage = "decayy"'), "no stage 'decayy'"),
    "unknown param": (TINY.replace('name = "half_life_days"', 'name = "halflife"'), "no parameter 'halflife'"),
    # (a half-life <= 0 is a raw value the stage accepts — it switches decay off — so the range check uses λ)
    "out of range": (TINY + '\n[[param]]\nstage = "mmr"\nname = "lam"\nvalues = [0.5, 1.5]\n', "out of range"),
    "bad choice": (TINY + '\n[[param]]\nstage = "decay"\nname = "timestamps"\nvalues = ["mtime"]\n', "is not one of"),
    "bad tie": (TINY.replace('tie = "6 * multiplier"', 'tie = "__import__(1)"'), "tie"),
    "tie unknown id": (TINY.replace('tie = "6 * multiplier"', 'tie = "6 * mult"'), "unknown id"),
    "unknown key": (TINY + 'trails = 5\n', "unknown key"),
    "bad metric": (TINY.replace('objective = "ndcg@10"', 'objective = "ndgc@10"'), "unknown metric"),
    "grid without steps": (TINY.replace("values = [30, 365]", "low = 1\nhigh = 365"), "needs 'values' or 'steps'"),
    "ambiguous type": (TINY.replace('preset = "openclaw_core_2026_2_26_decay_mmr"', 'preset = "lancedb_pro_6a50220"')
                       .replace('stage = "decay"\nname = "half_life_days"', 'stage = "filter.min_score"\n'
                                'name = "threshold"').replace("values = [30, 365]", "values = [0.3]")
                       .replace('stage = "merge"', 'stage = "fuse"'), "several stages"),
    "bad depth": (TINY.replace('tie = "6 * multiplier"', 'tie = "-6 * multiplier"'), "depth"),
    "bad toml": ("preset = \n", "invalid TOML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_space_exits_non_zero_with_one_line(tmp_path, capsys, case):
    from evalkit.cli import main
    body, expect = BAD[case]
    rc = main(["tune", "--space", str(_space(tmp_path, body)), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert len(err.splitlines()) == 1 and err.startswith("evalkit: error:"), err
    assert expect in err, err
    assert not (tmp_path / "o").exists()


def test_expressions_simplex_and_folds():
    e = Expr("min(200, floor(6 * m)) - 1 + 2 ** 2", "t")
    assert e.names == {"m"} and e({"m": 4.5}) == 30
    with pytest.raises(ConfigError):
        Expr("open('x')", "t")
    with pytest.raises(ConfigError):
        Expr("a.b", "t")
    assert len(list(compositions(10, 3))) == 66
    s = Simplex("s", "merge", ["a", "b", "c"], 3, False, 0.1, 1.0, 0.0)
    assert len(s.grid_values()) == 66
    rng = np.random.default_rng(0)
    for u in rng.random((50, 2)):
        w = s.decode(u)
        assert abs(sum(w) - 1) < 1e-9 and min(w) >= 0
        assert all(abs(x * 10 - round(x * 10)) < 1e-9 for x in w)
    s2 = Simplex("s", "merge", ["a", "b"], 2, False, None, 1.0, 0.0)
    for x in (0.0, 0.3, 0.75):
        w = s2.decode(s2.encode((x, 1 - x)))
        assert abs(w[0] - x) < 1e-6
    f = fold_of([f"q{i}" for i in range(103)], 5, 0)
    assert sorted(np.bincount(f)) == [20, 20, 21, 21, 21]
    assert (f == fold_of([f"q{i}" for i in range(103)], 5, 0)).all()


@pytest.mark.parametrize("space", sorted(p.name for p in (ROOT / "tune").glob("*.toml")))
def test_example_spaces_validate(space):
    sp = load_space(ROOT / "tune" / space)
    assert sp.dims >= 1


# TINY's header (memory-workspace, train / test, nDCG@10, grid) over hybrid-rrf, with the leak constraint
GUARD = TINY.split("[[param]]")[0].replace('"openclaw_core_2026_2_26_decay_mmr"', '"hybrid-rrf"').replace(
    'baselines = ["openclaw_core_2026_2_26"]', 'no_effect = "report"\nconstraints = ["secret_leak_rate <= 0"]') + """
[[choice]]
id = "fusion"
stage = "fuse.rrf"
options = ["keep", { type = "fuse.convex", vector_arm = "vec", text_arm = "bm25", alpha = 0.7, norm = "dbsf" }]
names = ["rrf60", "convex"]

[[choice]]
id = "secret_guard"
stage = "cutoff.top_k"
options = ["keep", { type = "filter.secret_guard" }]
names = ["keep", "secret_guard"]
"""


def test_tune_constraint_secret_leak_rate(ws, tmp_path):
    """``secret_leak_rate <= 0`` in a tune space: unguarded configs leak on memory-workspace and fail it, the best
    is a guarded one, and its held-out leak rate (scored by the sweep) is 0, as the ordinary runner finds."""
    from evalkit.data.registry import load_dataset
    from evalkit.engine.evaluate import evaluate_run
    from evalkit.engine.runner import run_quality
    from evalkit.tune.run import run_tune
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context
    out = tmp_path / "guard"
    from evalkit.tune.protocol import Options
    s = run_tune(load_space(_space(tmp_path, GUARD)), out=out, log=lambda m: None,
                 options=Options(final=True)).summary
    assert s["shipped"]["constraints"] == {"secret_leak_rate <= 0": "fail"}
    assert s["shipped"]["train"]["secret_leak_rate"] > 0
    assert s["best"]["constraints"] == {"secret_leak_rate <= 0": "pass"} and s["best"]["feasible"]
    assert s["best"]["config"]["cutoff.top_k:stage"] == "secret_guard"
    assert s["lockbox"]["best"]["secret_leak_rate"] == 0.0
    ds, index = ws
    held = load_dataset("memory-workspace").split("test")
    best = load_preset(str(out / "best.toml"))
    run = run_quality(held, [best], index, Context(embedder=index.embedder))[best.name]
    ev = evaluate_run(held, run, ["ndcg@10"])
    assert ev.means["secret_leak_rate"] == 0.0
    assert math.isclose(ev.means["ndcg@10"], s["lockbox"]["best"]["ndcg@10"], abs_tol=1e-9)
