"""Importers from fixtures in the real formats (tests/import_fixtures.py): OpenClaw's memory index, workspace
chunking and session transcripts; bad inputs → one line, exit 2, nothing written."""
from __future__ import annotations

import importlib
import json
import math
import random
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from evalkit.cli import main
from evalkit.data.readers.beir import load_beir
from evalkit.data.importers.openclaw_files import chunk_markdown
from evalkit.data.readers.querylog import load_querylog
from tests.import_fixtures import write_memory_db, write_sessions, write_workspace
from tests.helpers import FIXTURES


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("oc")
    ws = write_workspace(root / "workspace")
    write_memory_db(root / "memory.sqlite", ws)
    write_sessions(root / "state")
    return root


def _fails(capsys, argv: list[str], out: Path, needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit: error:") and needle in err[0], err
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]  # no temp left behind


# ---- OpenClaw chunking ------------------------------------------------------------------------------------------

def test_chunker_keeps_the_final_empty_line_and_line_ranges():
    # "a\nb\n" is three lines for OpenClaw (the empty one after the final newline counts and is kept)
    (c,) = chunk_markdown("a\nb\n")
    assert (c.start_line, c.end_line, c.text) == (1, 3, "a\nb\n")


def test_chunker_overlap_closed_form():
    # tokens=8 → max 32 chars, overlap=2 → 8 chars. Lines of 9 chars cost 10: three fit (30), the fourth flushes;
    # walking back, the last line alone (10) reaches 8 → one line carried.
    text = "\n".join(f"line-{i:03d}" for i in range(1, 6))
    chunks = chunk_markdown(text, tokens=8, overlap=2)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 3), (3, 5)]


def test_chunker_counts_utf16_units_like_javascript():
    # an astral character is 2 UTF-16 units: 16 of them = 32 units fill a 32-char chunk exactly (+1 newline cost
    # passes it), so a long line of them is cut every 32 units = 16 characters
    line = "😀" * 20
    chunks = chunk_markdown(line, tokens=8, overlap=0)
    assert [c.text for c in chunks] == ["😀" * 16, "😀" * 4]
    assert all((c.start_line, c.end_line) == (1, 1) for c in chunks)


# ---- import openclaw ----------------------------------------------------------------------------------------------

def test_import_openclaw_index_and_sessions(fx, tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "malformed_lines: 1" in printed and "unknown_results: 1" in printed
    ds = load_beir(out)
    ids = [d.id for d in ds.documents]
    assert "memory/projects/deploy.md#L15-L30" in ids and not any(i.startswith("notes/") for i in ids)
    by_id = {d.id: d for d in ds.documents}
    dated = by_id["memory/2026-11-09.md#L1-L5"]
    assert dated.timestamp is not None and by_id["MEMORY.md#L1-L6"].timestamp is None  # evergreen
    assert dated.metadata["mtime"] == "2025-11-24T16:00:00Z" and len(dated.metadata["openclaw_id"]) == 64
    cats = sorted(q.category for q in ds.queries)
    assert cats == ["memory_search"] * 2 + ["prompt"] * 4
    # pseudo-labels: the search result the reply cites; the uncited MEMORY.md hit is not relevant
    assert ds.qrels["sess-a:3"] == {"memory/2026-11-02.md#L1-L5": 1}
    log = load_querylog(out / "querylog.jsonl")
    assert not log.skipped
    search = [e for e in log.events if e.extra.get("event_kind") == "memory_search"]
    assert search[0].injected == ["memory/2026-11-02.md#L1-L5", "MEMORY.md#L1-L6"]  # OpenClaw's order
    assert search[0].context == [{"role": "user", "content": "How did I fix the SQLITE_BUSY errors?"}]
    assert "busy timeout" in search[0].response


def test_workspace_chunking_gives_the_index_documents(fx, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(a)]) == 0
    assert main(["import", "openclaw", "--workspace", str(fx / "workspace"), "--sessions", str(fx / "state"),
                 "--out", str(b)]) == 0
    da, db = load_beir(a), load_beir(b)
    assert [(d.id, d.text) for d in da.documents] == [(d.id, d.text) for d in db.documents]


def test_openclaw_bad_inputs(fx, tmp_path, capsys):
    out = tmp_path / "never"
    sess = ["--sessions", str(fx / "state"), "--out", str(out)]
    wrong = tmp_path / "wrong.sqlite"
    con = sqlite3.connect(wrong)
    con.execute("CREATE TABLE chunks (id TEXT, body TEXT)")
    con.commit()
    con.close()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(wrong), *sess], out, "lacks")
    truncated = tmp_path / "truncated.sqlite"
    data = (fx / "memory.sqlite").read_bytes()
    truncated.write_bytes(data[: len(data) // 3])
    _fails(capsys, ["import", "openclaw", "--memory-db", str(truncated), *sess], out, "truncated.sqlite")
    empty = tmp_path / "empty.sqlite"
    ws = write_workspace(tmp_path / "ws-empty")
    write_memory_db(empty, ws)
    con = sqlite3.connect(empty)
    con.execute("DELETE FROM chunks")
    con.commit()
    con.close()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(empty), *sess], out, "empty")
    nosess = tmp_path / "nosess"
    nosess.mkdir()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(nosess),
                    "--out", str(out)], out, "no session transcripts")


# ---- import lancedb-pro --------------------------------------------------------------------------------------------

def test_import_lancedb_pro(tmp_path, capsys, monkeypatch):
    # A folder named `datasets` imported as a namespace package (this repository's own `datasets/`, when anything
    # run from its root imports sentence-transformers) used to make lancedb fail on `from datasets import Dataset`.
    (tmp_path / "shadow" / "datasets").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "shadow"))
    monkeypatch.delitem(sys.modules, "datasets", raising=False)
    shadow = importlib.import_module("datasets")
    from tests.import_fixtures import write_lance_queries, write_lancedb_store
    db = write_lancedb_store(tmp_path / "lancedb")
    out = tmp_path / "ds"
    assert main(["import", "lancedb-pro", "--db", str(db), "--queries",
                 str(write_lance_queries(tmp_path / "q.jsonl")), "--out", str(out)]) == 0
    assert "stored vectors not used" in capsys.readouterr().out
    ds = load_beir(out)
    assert [d.id for d in ds.documents] == [f"mem-{i}" for i in range(6)]  # the __schema__ row is gone
    d2 = ds.documents[2]
    assert d2.importance == 0.9 and d2.metadata["scope"] == "project:ledger" and d2.metadata["category"] == "decision"
    assert d2.timestamp == pytest.approx(1_762_000_000 + 2 * 86_400)
    assert ds.qrels["q3"] == {"mem-2": 1} and ds.splits["test"] == ["q1", "q2", "q3", "q4"]
    assert sys.modules["datasets"] is shadow  # put back as it was


def _cosine_top(q: list[float], docs: dict[str, list[float]], k: int) -> list[tuple[str, float]]:
    """The expected top-k by cosine, computed by hand (plain Python, no numpy)."""
    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
    return sorted(((d, cos(q, v)) for d, v in docs.items()), key=lambda t: (-t[1], t[0]))[:k]


def test_lancedb_pro_stored_vectors_are_searched_with_query_vectors(tmp_path, capsys):
    from retrievers.index.shared import SharedIndex, describe_representation
    from tests.import_fixtures import write_lance_queries, write_lancedb_store
    rng = random.Random(20)
    dvec = [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(6)]
    qvec = [[rng.uniform(-1, 1) for _ in range(8)] for _ in range(4)]
    db = write_lancedb_store(tmp_path / "lancedb", vectors=dvec)
    out = tmp_path / "ds"
    assert main(["import", "lancedb-pro", "--db", str(db), "--queries",
                 str(write_lance_queries(tmp_path / "q.jsonl", qvec)), "--out", str(out)]) == 0
    assert "stored vectors used (lancedb-pro, dim 8)" in capsys.readouterr().out
    ds = load_beir(out)
    assert "vector" not in ds.queries[0].metadata
    index = SharedIndex(ds, cache_dir=tmp_path / "cache")
    assert index.settings.backend == "exact" and index.embedder.model_id.startswith("stored:lancedb-pro:dim8:")
    man = index.manifest()
    assert "stored vectors (lancedb-pro, dim 8)" in describe_representation(man)
    assert man["work"]["embedded_texts"] == 0
    # float32 storage: cosines agree with the float64 hand computation to ~1e-6
    f32 = lambda v: [float(x) for x in np.asarray(v, dtype=np.float32)]  # noqa: E731
    docs = {f"mem-{i}": f32(v) for i, v in enumerate(dvec)}
    got = index.vector_search(index.embed_queries([q.text for q in ds.queries]), [""] * 4, 3)
    for q, (rows, scores) in zip(ds.queries, got):
        want = _cosine_top(f32(qvec[int(q.id[1:]) - 1]), docs, 3)
        assert [ds.documents[r].id for r in rows] == [d for d, _ in want]
        assert list(scores) == pytest.approx([c for _, c in want], abs=1e-5)
    # re-exporting the imported dataset carries its vectors along: the export searches exactly the same way
    from evalkit.data.export import export_beir
    export_beir(ds, tmp_path / "again")
    again = SharedIndex(load_beir(tmp_path / "again"), cache_dir=tmp_path / "cache")
    assert again.embedder.model_id == index.embedder.model_id and again.key == index.key
    # a text with no stored vector (a rewritten query) and latency mode (runs the model) have no model: one clear error
    from retrievers.types import DataError
    with pytest.raises(DataError, match="no stored query vector for the text 'which editors"):
        index.embed_queries(["which editors does the user like"])
    with pytest.raises(DataError, match="no embedding model to run"):
        index.embedder.model  # noqa: B018
    # two stores with the same texts but other vectors never share an index key (nor its caches)
    db2 = write_lancedb_store(tmp_path / "lancedb2", vectors=[list(reversed(v)) for v in dvec])
    assert main(["import", "lancedb-pro", "--db", str(db2), "--queries",
                 str(write_lance_queries(tmp_path / "q.jsonl", qvec)), "--out", str(tmp_path / "ds2")]) == 0
    assert SharedIndex(load_beir(tmp_path / "ds2"), cache_dir=tmp_path / "cache").key != index.key


def test_lancedb_pro_query_vector_refusals(tmp_path, capsys):
    from tests.import_fixtures import write_lance_queries, write_lancedb_store
    db = write_lancedb_store(tmp_path / "lancedb")
    out = tmp_path / "ds"
    wrong = str(write_lance_queries(tmp_path / "wrong.jsonl", [[0.5] * 8, [0.5] * 8, [0.5] * 7, [0.5] * 8]))
    _fails(capsys, ["import", "lancedb-pro", "--db", str(db), "--queries", wrong, "--out", str(out)], out,
           "Vector dimension mismatch: expected 8 (the store's), got 7")
    some = str(write_lance_queries(tmp_path / "some.jsonl", [[0.5] * 8, None, [0.5] * 8, [0.5] * 8]))
    _fails(capsys, ["import", "lancedb-pro", "--db", str(db), "--queries", some, "--out", str(out)], out,
           "some.jsonl:2: no 'vector'")
    bad = str(write_lance_queries(tmp_path / "bad.jsonl", [[0.5] * 8, ["x"] * 8, [0.5] * 8, [0.0] * 8]))
    _fails(capsys, ["import", "lancedb-pro", "--db", str(db), "--queries", bad, "--out", str(out)], out,
           "bad.jsonl:2: 'vector' must be a non-empty list of finite numbers")


def test_lancedb_pro_bad_inputs(tmp_path, capsys):
    from evalkit.data.importers.lancedb_pro import lancedb_api
    from tests.import_fixtures import write_lance_queries, write_lancedb_store
    q = str(write_lance_queries(tmp_path / "q.jsonl"))
    out = tmp_path / "never"
    wrong = tmp_path / "wrong"
    with lancedb_api() as lancedb:
        lancedb.connect(str(wrong)).create_table("memories", data=[{"id": "a", "body": "x"}])
    _fails(capsys, ["import", "lancedb-pro", "--db", str(wrong), "--queries", q, "--out", str(out)], out,
           "not a memory-lancedb-pro store")
    empty = write_lancedb_store(tmp_path / "empty", rows=[])
    _fails(capsys, ["import", "lancedb-pro", "--db", str(empty), "--queries", q, "--out", str(out)], out, "empty")
    trunc = write_lancedb_store(tmp_path / "trunc")
    for f in (trunc / "memories.lance" / "data").glob("*.lance"):
        f.write_bytes(f.read_bytes()[:40])
    _fails(capsys, ["import", "lancedb-pro", "--db", str(trunc), "--queries", q, "--out", str(out)], out, "trunc")


# ---- import hookclaw-log ---------------------------------------------------------------------------------------------

def _import_both(fx: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The OpenClaw fixture imported as a dataset, and the HookClaw journal imported against it."""
    from tests.import_fixtures import write_hookclaw_log
    ds, hc = tmp_path / "ds", tmp_path / "hc"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(ds)]) == 0
    assert main(["import", "hookclaw-log", str(write_hookclaw_log(tmp_path / "j.log")), "--dataset", str(ds),
                 "--out", str(hc)]) == 0
    return ds, hc


def test_import_hookclaw_log(fx, tmp_path, capsys):
    ds, out = _import_both(fx, tmp_path)
    summary = json.loads((out / "summary.json").read_text())
    prod = summary["production"]
    # 8 calls over two gateway starts: 2 skips, 3 injections (one from the cache), 2 no-relevant, 1 cache hit
    assert prod["events"] == 8 and summary["parse"]["restarts"] == 2
    assert prod["skipped_rate"] == 2 / 8 and prod["injection_rate"] == 4 / 8 and prod["no_relevant_rate"] == 2 / 8
    assert prod["latency_ms_p50"] == 120.0  # calls that searched: 143, 88, 97, 120, 131
    log = load_querylog(out / "querylog.jsonl")
    assert [e.query for e in log.events][0] == "How did I fix the SQLITE_BUSY errors in the ledger tests?"
    assert log.events[0].injected == ["memory/2026-11-02.md#L1-L5", "MEMORY.md#L1-L6"]
    assert log.events[1].injected == [] and log.events[-1].extra["call"] == 1  # counter restarted


def test_hookclaw_log_bad_inputs(tmp_path, capsys):
    from tests.import_fixtures import write_hookclaw_log
    out = tmp_path / "never"
    none = tmp_path / "none.log"
    none.write_text("2026-11-21T08:00:01+0000 gw01 node[1]: [gateway] listening\n")
    _fails(capsys, ["import", "hookclaw-log", str(none), "--out", str(out)], out, "no HookClaw call lines")
    short = tmp_path / "short.log"
    short.write_text("Nov 21 08:01:00 gw01 node[4242]: [plugins] hookclaw: #1 skip — matches skip pattern\n")
    _fails(capsys, ["import", "hookclaw-log", str(short), "--out", str(out)], out, "--year")
    import gzip
    trunc = tmp_path / "journal.log.gz"
    trunc.write_bytes(gzip.compress(write_hookclaw_log(tmp_path / "j.log").read_bytes())[:-30])
    _fails(capsys, ["import", "hookclaw-log", str(trunc), "--out", str(out)], out, "journal.log.gz")
    assert main(["import", "hookclaw-log", str(short), "--year", "2026", "--out", str(out)]) == 0
    ev = json.loads((out / "events.jsonl").read_text())
    assert ev["ts"] == "2026-11-21T08:01:00Z" and ev["outcome"] == "skipped"


# ---- qrels from graded labels; TREC run files ------------------------------------------------------------------------

def _labels(path: Path, rows: list[tuple]) -> Path:
    import csv
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query_id", "as_of", "query", "doc_id", "path", "text", "grade"])
        w.writerows(rows)
    return path


def test_qrels_round_trip_and_refusals(fx, tmp_path, capsys):
    ds = tmp_path / "ds"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(ds)]) == 0
    a, b = "memory/2026-11-02.md#L1-L5", "MEMORY.md#L1-L6"
    bad = _labels(tmp_path / "bad.csv", [("sess-a:2", "", "q", a, "", "", "2"), ("sess-a:2", "", "q", a, "", "", "0"),
                                          ("sess-a:2", "", "q", b, "", "", "5"), ("sess-a:2", "", "q", b, "", "", ""),
                                          ("sess-a:2", "", "q", "nope#L1-L2", "", "", "1")])
    out = ds / "qrels" / "test.tsv"
    assert main(["qrels", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 + 4 and "graded 0 here but 2" in err[1] and "not 0, 1 or 2" in err[2]
    assert "not graded" in err[3] and "not in the dataset" in err[4] and not out.exists()
    good = _labels(tmp_path / "good.csv", [("sess-a:2", "", "q", a, "", "", "2"), ("sess-a:2", "", "q", b, "", "", "0"),
                                           ("log-x", "2026-11-30T00:00:00Z", "new question", b, "", "", "1")])
    assert main(["qrels", str(good), "--out", str(out)]) == 0
    loaded = load_beir(ds, split="test")
    assert loaded.qrels["sess-a:2"] == {a: 2, b: 0} and loaded.qrels["log-x"] == {b: 1}
    assert {q.id for q in loaded.queries} == {"sess-a:2", "log-x"}  # log-x appended to queries.jsonl


def test_run_file_counts_unknown_ids(tmp_path):
    from evalkit.engine.trec_runs import external_run
    from tests.helpers import write_tiny_beir
    ds = load_beir(write_tiny_beir(tmp_path / "tiny"))
    run = tmp_path / "x.trec"
    run.write_text("q1 Q0 net-1 2 5.0 x\nq1 Q0 net-0 1 5.0 x\nq1 Q0 ghost 3 9.0 x\nq2 Q0 db-0 1 1.5 x\n"
                   "q99 Q0 db-0 1 1.0 x\n")
    r = external_run("x", run, ds, {q.id for q in ds.queries})
    # trec_eval's order: score, then doc id descending (the rank column is ignored); ghost keeps its rank as a miss
    assert r.results["q1"].ranked == [("ghost", 9.0), ("net-1", 5.0), ("net-0", 5.0)]
    assert {k: r.info[k] for k in ("runfile_unknown_queries", "runfile_unknown_docs", "runfile_missing_queries",
                                   "runfile_future_docs")} == {
        "runfile_unknown_queries": 1.0, "runfile_unknown_docs": 1.0,
        "runfile_missing_queries": float(len(ds.queries) - 2), "runfile_future_docs": 0.0}
    assert [w["what"] for w in r.info["warnings"]] == ["runfile_unknown_queries", "runfile_unknown_docs",
                                                       "runfile_missing_queries"]
    assert all(str(run) in w["text"] for w in r.info["warnings"])


def test_chunker_matches_openclaws_own_output():
    """Golden outputs of the real chunkMarkdown (tests/fixtures/importers/openclaw_chunks.json): line ranges, texts
    and sha256 (lone surrogates from cutting inside an emoji hashed as Node hashes them)."""
    data = json.loads((FIXTURES / "importers" / "openclaw_chunks.json").read_text())
    assert len(data["cases"]) == 41
    for case in data["cases"]:
        got = [[c.start_line, c.end_line, c.text, c.hash]
               for c in chunk_markdown(case["text"], case["tokens"], case["overlap"])]
        assert got == case["chunks"]


def test_pool_grade_qrels_run_file_round_trip(fx, tmp_path, capsys):
    """An imported OpenClaw dataset + an imported HookClaw log → blind pool → grades → qrels → `evalkit run` with a
    TREC run file beside a preset (real bm25s / Chroma index, real ranx)."""
    import csv
    ds, hc = _import_both(fx, tmp_path)
    labels, again = tmp_path / "labels.csv", tmp_path / "again.csv"
    for out in (labels, again):
        assert main(["pool", "--dataset", str(ds), "--log", str(hc / "querylog.jsonl"), "--retrievers",
                     "bm25,openclaw_core_2026_2_26", "--depth", "3", "--out", str(out)]) == 0
    assert labels.read_bytes() == again.read_bytes()  # seeded shuffle: same inputs, same sheet
    rows = list(csv.DictReader(labels.open()))
    assert list(rows[0]) == ["query_id", "as_of", "query", "doc_id", "path", "text", "grade"]
    assert "bm25" not in labels.read_text() and "openclaw_core" not in labels.read_text()  # system-blind
    assert len({(r["query_id"], r["doc_id"]) for r in rows}) == len(rows)
    sqlite_q = [r for r in rows if "SQLITE_BUSY" in r["query"]]
    assert "memory/2026-11-02.md#L1-L5" in {r["doc_id"] for r in sqlite_q}
    for r in rows:  # a person grades: the note that answers the question is highly relevant
        r["grade"] = "2" if ("SQLITE_BUSY" in r["query"] and "2026-11-02" in r["doc_id"]) or \
            ("VLAN" in r["query"] and r["doc_id"].startswith("MEMORY.md")) else "0"
    with labels.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["qrels", str(labels), "--out", str(ds / "qrels" / "test.tsv")]) == 0
    qid = sqlite_q[0]["query_id"]
    trec = tmp_path / "live.trec"
    trec.write_text(f"{qid} Q0 MEMORY.md#L1-L6 1 9.0 live\n{qid} Q0 memory/2026-11-02.md#L1-L5 2 8.0 live\n"
                    f"{qid} Q0 memory/deleted.md#L1-L4 3 7.0 live\nnot-a-query Q0 MEMORY.md#L1-L6 1 1.0 live\n")
    run = tmp_path / "run"
    assert main(["run", "--dataset", str(ds), "--split", "test", "--retrievers", "bm25", "--run-file",
                 f"live={trec}", "--out", str(run)]) == 0
    m = {(r["retriever"], r["metric"]): r["value"] for r in json.loads((run / "metrics.json").read_text())["rows"]}
    assert m[("live", "runfile_unknown_docs")] == 1 and m[("live", "runfile_unknown_queries")] == 1
    graded = len({r["query_id"] for r in rows})
    assert m[("live", "runfile_missing_queries")] == graded - 1  # the file answers one graded query
    assert m[("live", "mrr@10")] < m[("bm25", "mrr@10")]  # live put the relevant note second on its one query


def test_replay_production_skip_rate_from_logged_outcomes(tmp_path):
    from evalkit.workflows.replay import build_replay_set, production_metrics
    from tests.helpers import write_tiny_beir
    base = load_beir(write_tiny_beir(tmp_path / "tiny", groups=False))
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [
        {"ts": "2026-01-01T00:00:00Z", "query": "vlan", "outcome": "skipped", "injected": []},
        {"ts": "2026-01-01T00:01:00Z", "query": "sqlite busy", "outcome": "injected", "injected": ["db-0"]},
        {"ts": "2026-01-01T00:02:00Z", "query": "haiku", "outcome": "no_relevant", "injected": []},
        {"ts": "2026-01-01T00:03:00Z", "query": "backups", "outcome": "cache_hit", "injected": ["db-2"]}]))
    p = production_metrics(build_replay_set(base, load_querylog(log)))
    assert p["skip_rate"] == 0.25 and p["injection_rate"] == 0.5 and p["outcome_events"] == 4


def test_hookclaw_log_console_styles(tmp_path):
    """OpenClaw's console line for the plugin logger: coloured (ANSI) or JSON style; both read as the plain line."""
    from evalkit.data.importers.hookclaw_log import parse_log
    plain = "2026-11-21T08:02:00+0000 gw node[1]: [plugins] hookclaw: #2 injecting 2 memories (143ms, top score: 0.712)"
    colour = ("2026-11-21T08:02:00+0000 gw node[1]: \x1b[90m2026-11-21T08:02:00.000Z\x1b[39m \x1b[36m[plugins]\x1b[39m "
              "\x1b[36mhookclaw: #2 injecting 2 memories (143ms, top score: 0.712)\x1b[39m")
    as_json = ('2026-11-21T08:02:00+0000 gw node[1]: {"time":"2026-11-21T08:02:00.000Z","level":"info",'
               '"subsystem":"plugins","message":"hookclaw: #2 injecting 2 memories (143ms, top score: 0.712)"}')
    for line in (plain, colour, as_json):
        (ev,), stats = parse_log(line + "\n", None)
        assert (ev["outcome"], ev["injected_count"], ev["latency_ms"], ev["top_score"]) == ("injected", 2, 143.0, 0.712)
        assert stats["unparsed"] == 0


def test_state_written_by_openclaw_itself(fx, tmp_path, capsys):
    """The index and the transcript OpenClaw 2026.2.26 wrote itself (tests/fixtures/importers/README.md): the index
    imports to exactly the documents of the schema-built fixture (OpenClaw's chunk ids, line ranges, texts), and
    the real memory_search call becomes an event whose production ranking is what OpenClaw returned."""
    real = FIXTURES / "importers" / "openclaw-2026.2.26"
    con = sqlite3.connect(f"file:{real / 'memory' / 'main.sqlite'}?mode=ro", uri=True)
    assert con.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()[0] == 1
    con.close()
    a, b = tmp_path / "real", tmp_path / "fixture"
    assert main(["import", "openclaw", "--memory-db", str(real / "memory" / "main.sqlite"), "--sessions", str(real),
                 "--out", str(a)]) == 0
    assert "malformed_lines: 0" in capsys.readouterr().out
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(b)]) == 0
    da, db_ = load_beir(a), load_beir(b)

    def key(ds):
        return [(d.id, d.text, d.metadata["openclaw_id"], d.metadata["start_line"], d.metadata["end_line"])
                for d in ds.documents]
    assert key(da) == key(db_) and len(key(da)) == 6
    log = load_querylog(a / "querylog.jsonl")
    search = [e for e in log.events if e.extra["event_kind"] == "memory_search"]
    assert len(search) == 1 and search[0].query == "How did I fix the SQLITE_BUSY errors in the ledger tests?"
    assert search[0].injected[0] == "memory/2026-11-02.md#L1-L5"  # OpenClaw's top result
    assert search[0].response.startswith("From your notes: # 2026-11-02")
    assert da.qrels[search[0].extra["query_id"]] == {"memory/2026-11-02.md#L1-L5": 1}  # the reply cites it
