"""Every `evalkit perf` sweep family (tune/perf/presets.toml) and the fusion grid: a sweep — planned stages built
once per parameter set, shared prefixes, shared stage outputs, stage inputs memoised on the candidate set
(fuse.phase3's stacked passes, fuse.convex's rows) — gives the same bits as each config evaluated alone on a
fresh copy of the candidate set (nothing memoised, nothing shared)."""
from __future__ import annotations

import numpy as np
import pytest

from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.perf.throughput import FAMILIES, grid
from retrievers.candidates.table import CandidateSet

METRICS = ["ndcg@10", "recall@10", "mrr@10"]


@pytest.fixture(scope="module")
def ws():
    from evalkit.data.registry import load_dataset
    from retrievers.candidates.search import build_candidates
    from retrievers.index.shared import SharedIndex
    from retrievers.pipeline import load_preset
    ds = load_dataset("memory-workspace").split("train")
    index = SharedIndex(ds)
    pipes = {n: load_preset(n) for n in list(FAMILIES) + ["hybrid-cc"]}
    cs = build_candidates(index, ds.queries, [a for p in pipes.values() for a in p.arms])
    return ds, index, pipes, cs


def _fresh(cs: CandidateSet) -> CandidateSet:
    return CandidateSet(cs.corpus, cs.queries, cs.doc, dict(cs.arms), qemb=cs.qemb, meta=dict(cs.meta))


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES) + ["hybrid-cc"])
def test_sweep_equals_each_config_alone(ws, family):
    from retrievers.stages import Context
    ds, index, pipes, cs = ws
    p = pipes[family]
    cfgs = (grid(FAMILIES[family], limit=10) if family in FAMILIES
            else [SweepConfig({"fuse": {"alpha": a}}) for a in (0.0, 0.3, 0.31, 0.5, 1.0)])
    ctx = Context(embedder=index.embedder)
    res = Sweep(p, cs, ds.qrels, METRICS, ctx=ctx, keep=METRICS).run(cfgs)
    for i, c in enumerate(cfgs):
        alone = Sweep(c.pipeline(p), _fresh(cs), ds.qrels, METRICS, ctx=ctx, keep=METRICS,
                      share_outputs=False).run([SweepConfig()])
        for m in METRICS:
            assert res.means[m][i].tobytes() == alone.means[m][0].tobytes(), (family, i, m)
            np.testing.assert_array_equal(res.per_query[m][i], alone.per_query[m][0], err_msg=f"{family} {i} {m}")
    assert len(set(res.means["ndcg@10"].tolist())) > 1  # the grid moves the metric: configs really differ
