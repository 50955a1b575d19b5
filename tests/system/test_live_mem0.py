"""mem0 (PyPI mem0ai 2.2), nobody here wrote it, driven live in-process: a fresh Chroma store per run, its HuggingFace
embedder on the shipped MiniLM folder, infer=False. Its vector search must rank exactly as evalkit's dense preset does
under the matching index settings (the same model in float32, one vector per chunk, exact cosine) — an independent
check of both the adapter (ingest, user_id isolation, echoed ids) and the preset."""
from __future__ import annotations

import pytest

from evalkit.data.registry import load_dataset, locate
from evalkit.engine.experiment import run_dataset, select_queries
from evalkit.engine.options import RunOptions
from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.retriever import find, run_system
from retrievers.embed import Embedder
from retrievers.index.shared import IndexSettings
from retrievers.pipeline import load_preset
from tests.memory_service import timed_dataset

pytestmark = pytest.mark.skipif(locate("memory-workspace") is None, reason="memory-workspace not found")


@pytest.fixture
def cache(tmp_path):
    c = ResponseCache(tmp_path / "responses.sqlite")
    yield c
    c.close()


def test_mem0_ranks_as_the_dense_preset_in_matching_settings(cache):
    ds = select_queries(load_dataset("memory-workspace"), "test")
    spec = find("mem0")
    run = run_system(spec, ds, "all", cache=cache, refresh=True, log=lambda *a: None)
    assert run.info["live_asked"] == len(ds.queries) and run.info["live_ingested_docs"] == len(ds.documents)
    assert run.info["live_unmapped_hits"] == 0 and run.info["live_duplicate_hits"] == 0
    assert run.info["live"]["version"].startswith("2.2.")
    settings = IndexSettings(as_of_visibility="all", representation="truncate", backend="exact")
    dr = run_dataset(ds.name, [load_preset("dense")], RunOptions(settings=settings), Embedder(backend="torch"),
                     dataset=ds, log=lambda *a: None)
    preset = dr.runs["dense"].results
    same = [q.id for q in ds.queries
            if [d for d, _ in run.results[q.id].ranked] == [d for d, _ in preset[q.id].ranked[:spec.k]]]
    assert len(same) == len(ds.queries)
    # mem0's score is 1 / (1 + squared L2) of unit vectors = 1 / (3 - 2 cos): a monotone map of the cosine
    q = ds.queries[0].id
    for (d, s), (d2, cos) in zip(run.results[q].ranked, preset[q].ranked):
        assert d == d2 and s == pytest.approx(1.0 / (3.0 - 2.0 * cos), abs=2e-5)


def test_mem0_strict_ingest_and_group_isolation(cache):
    ds = timed_dataset()
    run = run_system(find("mem0"), ds, "strict", cache=cache, refresh=True, log=lambda *a: None)
    docs = {d.id: d for d in ds.documents}
    for q in ds.queries:
        got = [d for d, _ in run.results[q.id].ranked]
        assert got, q.id  # vector search always returns what the user's memory holds
        assert all(docs[d].group == q.group for d in got)  # mem0's user_id filter: no other group's memory
        visible = {d.id for d in ds.documents if d.group == q.group and
                   (q.as_of is None or d.created is None or d.created <= q.as_of)}
        assert set(got) == visible  # all of what was ingested by then, nothing created later
