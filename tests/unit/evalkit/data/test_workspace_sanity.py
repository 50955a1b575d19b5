"""The memory-workspace labels behave as designed when real retrievers run on them (issue: label sanity)."""
import pytest

from evalkit.data.registry import load_dataset
from evalkit.engine.evaluate import evaluate_run
from evalkit.engine.runner import run_quality
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import load_preset


@pytest.fixture(scope="module")
def per_category():
    ds = load_dataset("memory-workspace").split("all")
    idx = SharedIndex(ds)
    runs = run_quality(ds, [load_preset("bm25"), load_preset("dense")], idx)
    out = {}
    for name, run in runs.items():
        ev = evaluate_run(ds, run, metrics=["ndcg@10"])
        out[name] = {r["bucket"]: r["value"] for r in ev.breakdown
                     if r["breakdown"] == "category" and r["metric"] == "ndcg@10"}
    return out


def test_bm25_wins_exact_identifiers_and_dense_wins_paraphrases(per_category):
    bm25, dense = per_category["bm25"], per_category["dense"]
    assert bm25["exact-identifier"] > dense["exact-identifier"] + 0.1
    assert dense["paraphrase"] > bm25["paraphrase"] + 0.1
