"""RunWriter.include: a finished run folder's per-query rows and results held on disk give the same folder, byte for
byte, and the same report data as the rows held in memory (the bench's combined folder)."""
from __future__ import annotations

import math

from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter


def _fill(w: RunWriter, ds: str, shift: float) -> None:
    for ret in ("bm25", "dense+x"):  # a name safe() rewrites
        w.add_metric(ds, ret, "ndcg@10", 0.5 + shift)
        for i, q in enumerate(["q10", "q2", "q1"]):
            for m in ("recall@10", "ndcg@10"):
                v = float("nan") if (q, m) == ("q2", "recall@10") else (i + 1) / 7 + shift
                w.per_query.append({"dataset": ds, "retriever": ret, "query_id": q, "category": "c" if i else None,
                                    "metric": m, "value": v})
        w.results[(ds, ret)] = [{"query_id": q, "ranked": [["d1", 0.5], ["d2", 0.5], ["d3", 0.25 + shift]],
                                 "injected": ["d1"], "skipped": False,
                                 "budget": {"chunks": 1, "chars": 10 + i}, "injected_block": "d1 — é"}
                                for i, q in enumerate(["q1", "q2"])]


def _files(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name not in ("manifest.json", ".evalkit-output.json")}


def test_included_folders_write_and_read_as_the_rows_in_memory(tmp_path):
    folders = []
    for ds, shift in (("zeta", 0.01), ("alpha", 0.02)):
        w = RunWriter(tmp_path / ds)
        _fill(w, ds, shift)
        folders.append(w.write())
    memory = RunWriter(tmp_path / "memory")
    for ds, shift in (("zeta", 0.01), ("alpha", 0.02)):
        _fill(memory, ds, shift)
    disk = RunWriter(tmp_path / "disk")
    _fill(disk, "mid", 0.03)  # rows in memory and included folders together, merged in order
    _fill(memory, "mid", 0.03)
    for f in folders:
        disk.include(f)
    disk.metrics = list(memory.metrics)
    assert _files(memory.write()) == _files(disk.write())
    a, b = RunData.from_writer(memory), RunData.from_writer(disk)
    for ds in ("zeta", "alpha", "mid"):
        for ret in ("bm25", "dense+x"):
            for m in ("recall@10", "ndcg@10"):
                pa, pb = a.per_query(ds, ret, m), b.per_query(ds, ret, m)
                assert pa.keys() == pb.keys() and len(pa) == 3
                assert all(pa[q] == pb[q] or (math.isnan(pa[q]) and math.isnan(pb[q])) for q in pa)
            assert a.budgets(ds, ret) == b.budgets(ds, ret) == [{"chunks": 1, "chars": 10}, {"chunks": 1, "chars": 11}]
            assert a.results(ds, ret) == b.results(ds, ret)
    assert b.categories("zeta") == a.categories("zeta") == {"q2": "c", "q1": "c"}
    assert len(disk.per_query) == 12 and {r["dataset"] for r in disk.per_query} == {"mid"}  # included: on disk
