"""The real OpenClaw 2026.2.26 (npm), nobody here wrote it, indexing the memory-workspace folder through evalkit's
embedding server on 127.0.0.1 and answering every test query through its own memory search (one Node 22 process).
Compared with the `openclaw_core_2026_2_26` preset under `--as-of-visibility all` (`evalkit agree`): every query
whose top-6 differs under the preset as prescribed is explained by a matching setting, and under all of them the
preset and the live system agree on every query, ids, order and scores.

The install (Node 22 + the npm package, ~95 s, 670 MB, content-keyed under $EVALKIT_CACHE) is done by
`make systems-install` before the tests (`make test` depends on it); here it is only reused (or done once if missing).
"""
from __future__ import annotations

import pytest

from evalkit.data.registry import load_dataset, locate
from evalkit.workflows.agree import agree
from retrievers.systems.adapters import openclaw

pytestmark = pytest.mark.skipif(locate("memory-workspace") is None, reason="memory-workspace not found")


@pytest.fixture(scope="module")
def installed():
    return openclaw.install(log=print)


def test_live_openclaw_agrees_with_its_preset_and_every_difference_is_explained(installed):
    ag = agree("openclaw", "memory-workspace", refresh=True, log=lambda *a: None)
    rows = {r["config"]: r for r in ag.rows()}
    n = len(ag.queries)
    prescribed = rows["as prescribed"]
    matched = rows[" + ".join(("embed_backend", "representation", "backend", "indexed_only"))]
    n_test = len(load_dataset("memory-workspace").splits["test"])
    assert n == n_test and prescribed["identical"] < n  # the preset as shipped differs somewhere …
    assert set(ag.causes) and "unexplained" not in ag.causes.values()  # … and each difference has a cause
    assert len(ag.causes) == n - prescribed["identical"]
    assert matched["identical"] == n and matched["max_abs_dscore"] < 1e-5  # residual 0
    assert matched["ndcg@10_live"] == pytest.approx(matched["ndcg@10_preset"], abs=1e-12)
    # OpenClaw indexes only MEMORY.md and memory/**/*.md: the workspace's junk files never reach its index
    assert ag.settings["indexed_only"]["matching"].startswith("165 documents")


def test_driver_reports_the_embedding_provider_and_what_it_indexed(installed, tmp_path):
    from retrievers.types import Document
    oc = openclaw.OpenClaw()
    oc.start()
    try:
        assert oc.ready["status"]["provider"] == "openai" and oc.ready["version"] == "2026.2.26"
        docs = [Document("a", "# Decisions\n\nWe pick Postgres 16 for billing.", path="MEMORY.md",
                         metadata={"start_line": 1, "end_line": 3}),
                Document("b", "notes about the garage wifi access point", path="notes/todo.txt"),
                Document("c", "daily log: garage wifi fixed with a new access point", path=None)]
        oc.ingest(docs, group="g")
        assert oc.indexed("g") == ["a", "c"]  # .txt outside memory/ is never indexed by OpenClaw
        ans = oc.search("garage wifi access point", k=6, as_of=None, group="g", context=[])
        assert ans.hits and ans.hits[0].id == "c" and ans.hits[0].injected.endswith("#L1-L2")
        # OpenClaw's end line counts the empty line after the file's final newline (the one-line file ends at L2)
        assert ans.hits[0].metadata["endLine"] == 2
        assert '"provider": "openai"' in ans.injected and "Source: memory/evalkit/" in ans.injected
        oc.reset("g")
        assert oc.search("garage wifi", k=6, as_of=None, group="g", context=[]).hits == []
    finally:
        oc.close()
