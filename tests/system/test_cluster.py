"""Sweeps on a real Dask cluster (in-process LocalCluster) and resumable journals: byte-identical to the
single-process sweep, resumed sweeps compute only what is missing."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from evalkit.engine.cluster import open_client, parse_spec, slices_of
from evalkit.engine.journal import SweepJournal
from evalkit.engine.sweep import Sweep, SweepConfig, deepest_arms
from retrievers.errors import ConfigError

PRESET = "openclaw_core_2026_2_26_decay_mmr"
METRICS = ["ndcg@10", "recall@10", "mrr@10"]


def _configs() -> list[SweepConfig]:
    out = []
    for hl, lam, w in itertools.product([7.0, 30.0, 365.0], [0.3, 0.6, 0.9], [0.3, 0.7]):
        out.append(SweepConfig({"decay": {"half_life_days": hl}, "mmr": {"lam": lam},
                                "merge": {"vector_weight": w, "text_weight": round(1 - w, 6)}}))
    out.append(SweepConfig({"decay": {"half_life_days": 30.0}}, arms={"vec": {"depth": 12}}))
    return out


@pytest.fixture(scope="module")
def sweep_env():
    from evalkit.data.registry import load_dataset
    from retrievers.candidates.search import build_candidates
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context
    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    p = load_preset(PRESET)
    configs = _configs()
    cs = build_candidates(index, ds.queries, deepest_arms(p, configs))
    return p, cs, ds.qrels, Context(embedder=index.embedder), configs


def _new(env) -> Sweep:
    p, cs, qrels, ctx, _ = env
    return Sweep(p, cs, qrels, METRICS, ctx=ctx, keep=METRICS)


def _board(res) -> bytes:
    """The leaderboard as bytes: config keys in rank order with every metric's mean and per-query values."""
    rows = [(res.configs[i].key(), {m: res.means[m][i].tobytes().hex() for m in res.metrics},
             {m: res.per_query[m][i].tobytes().hex() for m in res.per_query}) for i in res.order("ndcg@10")]
    return json.dumps(rows).encode()


def test_cluster_sweep_is_byte_identical_to_single_process(sweep_env):
    configs = sweep_env[-1]
    single = _new(sweep_env).run(configs)
    lines: list[str] = []
    with open_client("local:2", processes=False) as client:
        sw = _new(sweep_env)
        dist = sw.run(configs, cluster=client, log=lines.append)
        # a second batch on the same sweep (as a Bayesian search asks them) reuses the broadcast
        again = sw.run(configs, cluster=client, log=lines.append)
    assert any("already on the workers" in line for line in lines)
    assert _board(again) == _board(single)
    assert dist.workers == 2
    assert _board(dist) == _board(single)
    assert any("sent once per worker" in line for line in lines)
    assert any("slice 1/" in line and "configs/s" in line for line in lines)  # progress per slice


def test_killed_sweep_resumes_computing_only_the_missing(sweep_env, tmp_path):
    configs = sweep_env[-1]
    key = {"preset": sweep_env[0].hash, "test": "resume"}
    whole = _new(sweep_env).run(configs)
    half = len(configs) // 2
    j1 = SweepJournal(tmp_path, key, flush_every=1)
    _new(sweep_env).run(configs[:half], journal=j1)  # "killed" after the first half
    # a torn last line, as a kill mid-write leaves it
    with open(j1.path, "ab") as fh:
        fh.write(b'{"c": "partial')
    j2 = SweepJournal(tmp_path, key)
    assert len(j2) == half
    lines: list[str] = []
    res = _new(sweep_env).run(configs, journal=j2, log=lines.append)
    assert res.resumed == half  # the finished half is read back, not recomputed
    assert res.naive_stage_calls < whole.naive_stage_calls
    assert f"{half} of {len(configs)} configs already done, computing {len(configs) - half}" in lines[0]
    assert _board(res) == _board(whole)
    # a third start computes nothing and still gives the same leaderboard; the file has one line per config
    again = _new(sweep_env).run(configs, journal=SweepJournal(tmp_path, key))
    assert again.resumed == len(configs) and again.stage_calls == 0
    assert _board(again) == _board(whole)
    assert len(j2.path.read_text().splitlines()) == 1 + len(configs)
    with pytest.raises(ConfigError, match="another sweep"):
        j2.path.rename(tmp_path / (SweepJournal(tmp_path, {"other": 1}).id + ".jsonl"))
        SweepJournal(tmp_path, {"other": 1})


def test_cluster_spec_and_slices():
    assert parse_spec("local") == ("local", 2)
    assert parse_spec("local:3") == ("local", 3)
    assert parse_spec("tcp://10.0.0.5:8786") == ("address", "tcp://10.0.0.5:8786")
    for bad in ("local:0", "locale", "http://x:1", "tcp://host"):
        with pytest.raises(ConfigError, match="--cluster"):
            parse_spec(bad)
    sl = slices_of(list(range(10)), 4)
    assert [len(s) for s in sl] == [2, 3, 2, 3] and sum(sl, []) == list(range(10))  # contiguous, in order
    assert slices_of([1, 2], 8) == [[1], [2]]
    assert np.array_equal(sum(slices_of(list(range(7)), 1), []), np.arange(7))
