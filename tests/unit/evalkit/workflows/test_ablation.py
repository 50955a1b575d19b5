"""Stage-by-stage ablation (evalkit/workflows/ablation.py, `evalkit ablate`) on a small slice of memory-workspace."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from evalkit.workflows.ablation import (ABLATED, ALREADY_OFF, HOW_DISABLED, HOW_NO_BUDGET, REQUIRED, ablate, declared_budget,
                              stage_variants)
from retrievers.candidates.table import State
from retrievers.pipeline import Pipeline, load_preset
from retrievers.stages import Context, Stage, register

pytestmark = pytest.mark.slow  # the module fixture ablates a real preset with latency rounds (~10 s): make test runs it

N_QUERIES = 30


@register
class _Mark(Stage):
    """Test stage: writes ``st.info["test_mark"]`` (a later stage needs it)."""

    name = "test_ablation.mark"
    kind = "score"

    def apply(self, st: State, cs, ctx) -> State:
        st.info["test_mark"] = np.ones(cs.Q, dtype=bool)
        return st


@register
class _NeedsMark(Stage):
    """Test stage: fails without ``st.info["test_mark"]`` (as a stage reading a predecessor's output would)."""

    name = "test_ablation.needs_mark"
    kind = "score"

    def apply(self, st: State, cs, ctx) -> State:
        st.info["test_mark"].all()  # KeyError when the marking stage is missing
        return st


@pytest.fixture(scope="module")
def workspace():
    from evalkit.data.registry import load_dataset
    from retrievers.embed.model import Embedder
    from retrievers.index.shared import IndexSettings, SharedIndex
    ds = load_dataset("memory-workspace").split("test")
    ds = ds.head(N_QUERIES)
    emb = Embedder()
    index = SharedIndex(ds, embedder=emb, settings=IndexSettings())
    return ds, index, Context(embedder=emb, options={"render_blocks": False})


@pytest.fixture(scope="module")
def openclaw(workspace):
    ds, index, ctx = workspace
    return ablate(ds, load_preset("openclaw_core_2026_2_26"), index, ctx, latency_queries=3, n_permutations=2000,
                  log=lambda *a: None)


def test_one_row_per_stage_in_order(openclaw):
    p = load_preset("openclaw_core_2026_2_26")
    assert [r.label for r in openclaw.rows] == [s.display for s in p.stages]
    assert [r.position for r in openclaw.rows] == list(range(1, len(p.stages) + 1))
    assert [r.type for r in openclaw.rows] == [s.name for s in p.stages]
    frame = openclaw.frame()
    assert list(frame.index) == ["(full)"] + [s.display for s in p.stages]


def test_required_and_already_off_are_marked(openclaw):
    st = {r.label: r for r in openclaw.rows}
    assert st["merge"].status == REQUIRED and "creates the candidate list" in st["merge"].reason
    assert st["merge"].metrics == {} and st["merge"].p_holm == {}
    # OpenClaw's decay and MMR are shipped disabled: nothing to ablate
    assert st["decay"].status == ALREADY_OFF and st["mmr"].status == ALREADY_OFF
    assert {st[k].status for k in ("gate", "min_score", "top_k", "budget")} == {ABLATED}


def test_removing_min_score_keeps_what_the_filter_dropped(openclaw):
    """Without the 0.35 floor, each list is the full list followed by the rows the filter dropped (scores < 0.35)."""
    full = openclaw.runs["openclaw_core_2026_2_26"].results
    var = openclaw.runs["openclaw_core_2026_2_26~no-min_score"].results
    longer = 0
    for q, r in full.items():
        assert all(s >= 0.35 for _, s in r.ranked)
        v = var[q].ranked
        assert [d for d, _ in v[:len(r.ranked)]] == [d for d, _ in r.ranked]
        assert all(s < 0.35 for _, s in v[len(r.ranked):])
        longer += len(v) > len(r.ranked)
    assert longer > 0
    row = next(r for r in openclaw.rows if r.label == "min_score")
    assert row.how == "removed" and row.changed == longer
    assert row.delta["recall@10"] >= 0 and row.delta["ndcg@10"] >= 0
    w, t, l = row.wtl
    assert l == 0 and w + t + l == openclaw.n_judged
    assert row.metrics["ndcg@10"] == pytest.approx(openclaw.full["ndcg@10"] + row.delta["ndcg@10"])


def test_paired_tests_holm_adjusted(openclaw):
    rows = [r for r in openclaw.rows if r.status == ABLATED]
    for r in rows:
        for m in ("ndcg@10", "injected_ndcg@10"):
            assert 0 < r.p[m] <= 1 and r.p[m] <= r.p_holm[m] <= 1
    # a stage that changes nothing has p = 1 (all differences zero)
    gate = next(r for r in rows if r.label == "gate")
    assert gate.changed == 0 and gate.delta["ndcg@10"] == 0 and gate.p["ndcg@10"] == 1.0


def test_latency_per_stage_and_end_to_end(openclaw):
    assert openclaw.latency == {"queries": 3, "threads": 1, "repeats": 3, "warmup": 3, "interleaved": True}
    assert openclaw.full_ms["p50_ms"] > 0
    for r in openclaw.rows:  # every stage of the full pipeline is timed (also required / already-off ones)
        assert r.stage_ms["p50_ms"] >= 0 and r.stage_ms["p95_ms"] >= r.stage_ms["p50_ms"]
        if r.status == ABLATED:
            assert r.e2e_ms["p50_ms"] > 0 and np.isfinite(r.delta_e2e_p50_ms)
        else:
            assert r.e2e_ms == {} and r.delta_e2e_p50_ms is None
    assert "embed_query" in openclaw.fixed_ms and any(k.startswith("arm:") for k in openclaw.fixed_ms)


def test_outputs(openclaw, tmp_path):
    out = openclaw.write(tmp_path / "abl")
    rows = list(csv.DictReader(io.StringIO((out / "ablation.csv").read_text())))
    assert [r["stage"] for r in rows] == ["(full)"] + [r.label for r in openclaw.rows]
    assert rows[0]["status"] == "full" and rows[2]["status"] == REQUIRED
    md = (out / "ablation.md").read_text()
    table = [ln for ln in md.splitlines() if ln.startswith("| ")]
    assert len(table) == 1 + 1 + len(openclaw.rows)  # header, full row, one per stage
    assert "openclaw_core_2026_2_26" in md and "required" in md
    data = json.loads((out / "ablation.json").read_text())
    assert len(data["rows"]) == 1 + len(openclaw.rows)
    text = openclaw.to_text()
    assert "min_score" in text and "Δ nDCG@10" in text


def test_budget_and_router_variants(workspace):
    """Phase-3: 'no budget' injects more than the declared 6 chunks / 1,200 tokens (compliance drops, the ranking is
    unchanged); the router is turned off by pinning mode A (removing it would be a no-op)."""
    ds, index, ctx = workspace
    p = load_preset("phase3_policy")
    assert declared_budget(p) == {"max_chunks": 6, "max_tokens": 1200}
    res = ablate(ds, p, index, ctx, latency_queries=0, n_permutations=1000, log=lambda *a: None)
    st = {r.label: r for r in res.rows}
    assert st["fuse"].status == REQUIRED
    assert st["route"].how == "force_mode=A"
    b = st["budget"]
    assert b.how == HOW_NO_BUDGET and b.status == ABLATED
    assert res.full["budget_compliance"] == 1.0 and b.metrics["budget_compliance"] < 1.0
    assert b.delta["ndcg@10"] == 0  # the packer never reorders the ranked list
    nob = res.runs["phase3_policy~no-budget"].results
    assert max(r.budget["chunks"] for r in nob.values()) > 6
    assert res.latency == {} and all(r.stage_ms == {} for r in res.rows)


def test_stage_whose_removal_breaks_a_later_stage_is_required(workspace):
    ds, index, ctx = workspace
    base = load_preset("openclaw_core_2026_2_26")
    merge = next(s for s in base.stages if s.display == "merge")
    top = next(s for s in base.stages if s.display == "top_k")
    p = Pipeline("toy", "toy", base.arms, [merge, _Mark(label="mark"), _NeedsMark(label="needs"), top])
    res = ablate(ds, p, index, ctx, latency_queries=0, n_permutations=1000, log=lambda *a: None)
    st = {r.label: r for r in res.rows}
    assert st["mark"].status == REQUIRED and "stage needs fails without it" in st["mark"].reason
    assert "KeyError" in st["mark"].reason
    assert st["needs"].status == ABLATED and st["top_k"].status == ABLATED
    assert len(res.rows) == 4


def test_variants_without_data():
    """The variant list is static: enabled switches, the budget packer and removals."""
    p = load_preset("openclaw_core_2026_2_26_decay_mmr")
    vs = stage_variants(p)
    by = {v.label: v for v in vs}
    assert by["decay"].how == HOW_DISABLED and by["decay"].pipeline.stages[2].enabled is False
    assert by["decay"].pipeline.stages[2].sort is True  # OpenClaw's sort stays
    assert by["mmr"].how == HOW_DISABLED
    assert by["min_score"].how == "removed" and len(by["min_score"].pipeline.stages) == len(p.stages) - 1
    assert by["budget"].pipeline.stages[-1].max_chunks is None
    assert all(v.pipeline.budget == {"max_chunks": 6} for v in vs if v.pipeline is not None)
    assert p.stages[2].enabled is True  # the preset itself is untouched


def test_cli_bad_input(capsys):
    from evalkit.cli import main
    assert main(["ablate", "--preset", "no_such_preset"]) == 2
    assert "unknown retriever" in capsys.readouterr().err
    assert main(["ablate", "--preset", "two_stage_rerank"]) == 2
    assert "cannot run offline" in capsys.readouterr().err


def test_ablation_on_a_dask_cluster_equals_in_process(workspace, openclaw):
    """The variants' quality runs on a real in-process Dask LocalCluster give the same table, bit for bit."""
    from evalkit.engine.cluster import open_client
    ds, index, ctx = workspace
    lines: list[str] = []
    with open_client("local:2", processes=False) as client:
        dist = ablate(ds, load_preset("openclaw_core_2026_2_26"), index, ctx, latency_queries=0,
                      n_permutations=2000, log=lines.append, cluster=client)
    assert [(r.label, r.status) for r in dist.rows] == [(r.label, r.status) for r in openclaw.rows]
    for a, b in zip(dist.rows, openclaw.rows):
        assert a.metrics == b.metrics and a.delta == b.delta and a.wtl == b.wtl and a.changed == b.changed
    assert any("sent once per worker" in line for line in lines)
