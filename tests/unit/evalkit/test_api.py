"""The public Python API (evalkit/api.py behind the lazy evalkit/__init__.py): its views equal the run folder's files,
a folder reads back equal, a user's own protocol object is scored exactly like the same ranking as a TREC run file
through `evalkit run`, compare renders, the gate fails when it should, bad input is one clear error."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import bm25s
import pytest

import evalkit
import retrievers
from evalkit.errors import OutputPathError
from evalkit.runfolder.read import RunFolderError
from retrievers.errors import ConfigError
from retrievers.types import DataError
from tests.helpers import ROOT

RANKING = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "recall@5", "recall@10", "mrr@10", "map@100", "precision@1",
           "precision@5"]


@pytest.fixture(scope="module")
def two(tiny, tmp_path_factory):
    """bm25 and a top-3 variant over the tiny dataset, written to a folder by run(out=...)."""
    top3 = evalkit.load_preset("bm25").with_params({"cutoff.top_k": {"k": 3}}, name="bm25_top3")
    out = tmp_path_factory.mktemp("api") / "run"
    return evalkit.run(str(tiny), ["bm25", top3], out=out), out


def test_import_evalkit_imports_nothing_heavy():
    code = ("import sys, evalkit; print(sorted(m for m in sys.modules if m.startswith(('evalkit.', 'retrievers.', "
            "'pandas', 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
    assert {"run", "Run", "compare", "gate", "read_run", "load_dataset"} <= set(dir(evalkit))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        evalkit.nope  # noqa: B018


def test_retrievers_exports_are_the_library_objects():
    from retrievers.candidates.table import CandidateSet
    from retrievers.pipeline import Pipeline, build_pipeline, load_preset
    from retrievers.stages.base import Stage, param, register
    from retrievers.systems.protocol import Hit, MemorySystem
    from retrievers.types import Dataset, Document, Query

    for name, obj in dict(Dataset=Dataset, Document=Document, Query=Query, Pipeline=Pipeline,
                          build_pipeline=build_pipeline, load_preset=load_preset, Stage=Stage, param=param,
                          register=register, CandidateSet=CandidateSet, Hit=Hit, MemorySystem=MemorySystem).items():
        assert getattr(retrievers, name) is obj, name
    assert evalkit.load_preset("bm25").hash == load_preset("bm25").hash


def test_run_views_equal_the_run_folders_files(two):
    run, out = two
    assert run.path == out
    with open(out / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    m = run.metrics.set_index(["dataset", "retriever"])
    assert len(m) == 2 and len(rows) == m.size  # every (dataset, retriever, metric) of the file, and no other
    for r in rows:
        v = m.loc[(r["dataset"], r["retriever"]), r["metric"]]
        assert (math.isnan(v) and r["value"] == "") or v == float(r["value"]), r
    pq = run.per_query.set_index(["dataset", "retriever", "query_id"])
    with open(out / "per_query.csv", newline="") as fh:
        prow = list(csv.DictReader(fh))
    assert prow and all(pq.loc[(r["dataset"], r["retriever"], r["query_id"]), r["metric"]] == float(r["value"])
                        for r in prow if r["value"])
    res = run.results
    trec = (out / "runs" / run.datasets[0] / "bm25.trec").read_text().split("\n")
    mine = res[res.retriever == "bm25"]
    assert [f"{q} Q0 {d} {k} {s:.6f} bm25" for q, d, k, s in
            zip(mine.query_id, mine.doc_id, mine["rank"], mine.score)] == [t for t in trec if t]
    assert (res[res.retriever == "bm25_top3"].groupby("query_id")["rank"].max() <= 3).all()


def test_read_run_round_trip(two, tmp_path):
    run, out = two
    back = evalkit.read_run(out)
    assert back.metrics.equals(run.metrics) and back.per_query.equals(run.per_query)
    assert back.results.equals(run.results)
    copy = back.report(tmp_path / "copy")  # a read run is copied
    assert evalkit.read_run(copy).metrics.equals(run.metrics)
    assert "bm25_top3" in run.to_markdown()


def test_a_run_in_memory_equals_the_written_one(tiny, two, tmp_path):
    run, _ = two
    mem = evalkit.run(str(tiny), "bm25")
    assert mem.path is None
    assert mem.metrics.equals(run.metrics[run.metrics.retriever == "bm25"].reset_index(drop=True))
    folder = mem.report(tmp_path / "later")
    assert mem.path == folder and (folder / "report.html").exists()
    assert evalkit.read_run(folder).metrics.equals(mem.metrics)


class MyBM25:
    """A user's own memory system (the live protocol): bm25s over the texts it is given, per group."""

    name = "my_bm25"

    def __init__(self):
        self.docs: dict[str | None, list] = {}

    def reset(self, group):
        self.docs.pop(group, None)

    def ingest(self, documents, *, group):
        self.docs.setdefault(group, []).extend(documents)

    def search(self, query, *, k, as_of, group, context):
        docs = self.docs.get(group, [])
        if not docs:
            return []
        index = bm25s.BM25()
        index.index(bm25s.tokenize([d.text for d in docs], stopwords="en", show_progress=False),
                    show_progress=False)
        words = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        scores = index.get_scores(words)
        # best first; equal scores by doc id descending (trec_eval's order, so the TREC file ranks the same)
        order = sorted(range(len(docs)), key=lambda i: docs[i].id, reverse=True)
        order = sorted(order, key=lambda i: -scores[i])
        return [retrievers.Hit(id=docs[i].id, score=float(scores[i])) for i in order[:k] if scores[i] > 0]


def test_a_users_own_object_scores_like_its_ranking_as_a_trec_file(tiny, tmp_path):
    from evalkit.cli import main

    obj = MyBM25()
    api = evalkit.run(str(tiny), [obj])
    ds = evalkit.load_dataset(str(tiny))
    lines = []
    for q in ds.queries:  # the same object, the whole group ingested, asked directly
        ref = MyBM25()
        ref.ingest([d for d in ds.documents if d.group == q.group], group=q.group)
        hits = ref.search(q.text, k=10, as_of=q.as_of, group=q.group, context=[])
        lines += [f"{q.id} Q0 {h.id} {r} {h.score:.6f} mine" for r, h in enumerate(hits, 1)]
    (tmp_path / "mine.trec").write_text("\n".join(lines) + "\n")
    assert main(["run", "--dataset", str(tiny), "--retrievers", "bm25", "--run-file",
                 f"mine={tmp_path / 'mine.trec'}", "--out", str(tmp_path / "cli")]) == 0
    with open(tmp_path / "cli" / "metrics.csv", newline="") as fh:
        cli = {r["metric"]: float(r["value"]) for r in csv.DictReader(fh) if r["retriever"] == "mine" and r["value"]}
    got = api.metrics.set_index("retriever").loc["my_bm25"]
    assert 0 < got["ndcg@10"] < 1  # not a degenerate ranking
    shallow = [m for m in RANKING if int(m.split("@")[1]) <= 10]  # the object answers k = 10 hits
    assert {m: got[m] for m in shallow} == {m: cli[m] for m in shallow}
    assert "map@100" not in got or got.isna()["map@100"]  # deeper than its k: left empty, not map@10 again
    ranked = [(ln.split()[0], ln.split()[2]) for ln in lines]  # (query, doc) in the TREC file's order
    assert list(zip(api.results.query_id, api.results.doc_id)) == ranked


def test_compare_renders_itself(two, tiny, tmp_path):
    run, out = two
    cmp = evalkit.compare([run], baseline="bm25", metrics=["ndcg@10", "recall@10"])
    assert isinstance(cmp, evalkit.Comparison)
    t = cmp.table
    assert set(t.b) == {"bm25_top3"} and list(t.metric) == ["ndcg@10", "recall@10"]
    assert t.set_index("metric").loc["ndcg@10", "mean_a"] == pytest.approx(
        run.metrics.set_index("retriever").loc["bm25", "ndcg@10"], abs=1e-6)
    assert "bm25_top3" in cmp.to_text() and cmp.to_markdown().startswith("# evalkit compare")
    assert "<html" in cmp.to_html()
    written = cmp.save(tmp_path / "cmp")
    assert sorted(p.name for p in written) == ["compare.csv", "compare.html", "compare.json", "compare.md"]
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"][0]["b"] == "bm25_top3"
    # a folder path and a run in memory side by side
    both = evalkit.compare([out, evalkit.run(str(tiny), "bm25")], metrics=["ndcg@10"])
    assert [r.label for r in both.runs] == ["run", "run2"]
    # the same retriever on the same data: the folder keeps every per-query float whole, so every query is a tie
    assert list(both.table.b) == ["run2:bm25"] and both.table["delta"].abs().max() == 0
    assert (both.table["wins"] + both.table["losses"]).max() == 0 and both.table["p_randomization"].min() == 1


def test_gate_fails_when_it_should(tiny, tmp_path):
    base = tmp_path / "expected.json"
    ok = evalkit.gate(base, datasets=[str(tiny)], retrievers=["bm25"], update=True)
    assert not ok.failed and base.exists()
    assert not evalkit.gate(base).failed
    data = json.loads(base.read_text())
    row = next(r for r in data["rows"] if r["metric"] == "ndcg@10")
    assert row["expected"] < 1
    row["expected"] = 1.0  # a baseline where every query was perfect: bm25 now dropped beyond the tolerance
    row["per_query"] = {q: 1.0 for q in row["per_query"]}
    base.write_text(json.dumps(data))
    bad = evalkit.gate(base)
    assert bad.failed
    assert "FAIL" in bad.to_text() and "FAIL" in bad.to_markdown()


def test_bad_input_is_one_clear_error(tiny, tmp_path):
    cases = [
        (lambda: evalkit.run(str(tiny), ["no_such_preset"]), ConfigError, "no_such_preset"),
        (lambda: evalkit.run("no-such-dataset", ["bm25"]), DataError, "unknown dataset 'no-such-dataset'"),
        (lambda: evalkit.run(str(tiny), ["bm25"], limit=0), ValueError, "limit must be >= 1"),
        (lambda: evalkit.run(str(tiny), [object()]), ValueError, "search"),
        (lambda: evalkit.run(str(tiny), ["bm25", "bm25"]), ValueError, "given twice"),
        (lambda: evalkit.run(str(tiny), []), ValueError, "no retriever"),
        (lambda: evalkit.read_run(tmp_path), RunFolderError, "not a run folder"),
        (lambda: evalkit.compare([], metrics=["ndcg@10"]), ValueError, "no run"),
        (lambda: evalkit.gate(tmp_path / "missing.json"), Exception, "missing.json"),
    ]
    for fn, exc, text in cases:
        with pytest.raises(exc) as info:
            fn()
        msg = str(info.value)
        assert text in msg and "\n" not in msg, msg
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(OutputPathError):
        evalkit.run(str(tiny), ["bm25"], out=mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]  # nothing written, nothing replaced


def test_listings():
    assert "memory-workspace" in evalkit.datasets() and "bm25" in evalkit.presets()
    assert set(evalkit.systems()) >= {"mem0", "openclaw"}
    names = evalkit.measure_names()
    assert "ndcg@k" in names and len(names) == len(dict(evalkit.measure_names(with_help=True)))
