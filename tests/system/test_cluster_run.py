"""`evalkit run --cluster local:2` on a real Dask LocalCluster (two worker processes, one thread each): the corpus
embedding and the pipelines' query blocks run on the workers, and metrics.csv / per_query.csv are byte-identical to
one process (issue 46). Each run starts from its own empty cache, so the cluster run embeds every text remotely."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrievers.embed.model import cache_root

PRESETS = "bm25,dense,hybrid-rrf"


def _run(cache: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVALKIT_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "CI": "1",
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR") or str(cache_root() / "numba")}
    return subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--dataset", "memory-workspace",
                           "--retrievers", PRESETS, "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_cluster_run_is_byte_identical_to_one_process(tmp_path):
    one = _run(tmp_path / "cache-one", tmp_path / "one")
    assert one.returncode == 0, one.stderr[-2000:]
    two = _run(tmp_path / "cache-two", tmp_path / "two", "--cluster", "local:2")
    assert two.returncode == 0, two.stderr[-2000:]
    said = two.stdout + two.stderr
    assert "embedding chunks done" in said and "query blocks done" in said, said[-2000:]  # the workers did the work
    for name in ("metrics.csv", "per_query.csv"):
        a, b = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert len(a) > 1000 and a == b, name


def test_bad_cluster_spec_is_one_error_line(tmp_path):
    r = _run(tmp_path / "cache", tmp_path / "out", "--cluster", "udp://nowhere")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("evalkit: error: --cluster"), r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_unreachable_scheduler_is_one_error_line_and_nothing_written(tmp_path):
    r = _run(tmp_path / "cache", tmp_path / "out", "--limit", "5", "--cluster", "tcp://127.0.0.1:9")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], r.stderr
    assert not (tmp_path / "out").exists()


def test_query_blocks_merge_to_the_one_process_state():
    """Every preset of the gate (none carries a cross-query stage) over memory-workspace's train queries: its
    stages run on eight query blocks and merged (:func:`evalkit.engine.distribute.merge_states`) give the same
    columns, scores (of filled slots), skips, trace length and collected results as one run over all queries (no
    stage reads a neighbouring query or the block's width); a pipeline whose blocks cannot be merged without
    guessing is refused (``Unmergeable``: the driver runs it whole), which must stay the exception."""
    import json

    import numpy as np

    from evalkit.data.registry import load_dataset
    from evalkit.engine.distribute import Unmergeable, blocks_of, distributable, merge_states, rows
    from evalkit.engine.runner import arm_map, collect, shared_candidates
    from retrievers.candidates.table import view
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context
    from tests.helpers import ROOT

    gate = json.loads((ROOT / "reports" / "gate" / "expected.json").read_text())["retrievers"]
    pipes = [p for p in (load_preset(r["name"] if isinstance(r, dict) else r) for r in gate) if distributable(p)]
    assert len(pipes) >= 25
    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    cs = shared_candidates(index, ds.queries, pipes)
    _ = cs.qemb
    ctx = Context(index.embedder, True)
    left: list[str] = []
    for p in pipes:
        v = view(cs, arm_map(p))
        full = p.run(v, ctx)
        try:
            merged = merge_states([p.run(view(rows(cs, a, b), arm_map(p)), ctx) for a, b in blocks_of(cs.Q, 8)])
        except Unmergeable:  # e.g. a gate skipped a whole block, so its later stages wrote nothing: run whole
            left.append(p.name)
            continue
        k = full.col.shape[1]
        assert np.array_equal(merged.col[:, :k], full.col) and (merged.col[:, k:] == -1).all(), p.name
        ok = full.col >= 0  # an empty slot's score is never read
        assert np.array_equal(merged.score[:, :k][ok], full.score[ok], equal_nan=True), p.name
        assert np.array_equal(merged.skipped, full.skipped), p.name
        assert len(merged.trace) == len(full.trace), p.name
        assert collect(p, v, merged) == collect(p, v, full), p.name  # ranked, injected, skips, budget, block
    assert len(left) <= len(pipes) // 2, left  # most presets do run in blocks


def test_a_cross_query_stage_keeps_its_pipeline_on_the_driver():
    from evalkit.engine.distribute import distributable
    from retrievers.pipeline import Pipeline, load_preset
    from retrievers.stages.base import REGISTRY

    p = load_preset("bm25")
    assert distributable(p)
    cached = Pipeline(p.name + "+cache", p.description, p.arms, [REGISTRY["gate.hookclaw_cache"]()] + list(p.stages),
                      p.budget, p.meta)
    assert not distributable(cached)
