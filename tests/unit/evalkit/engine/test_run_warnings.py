"""What a run warns about is printed once as `evalkit: warning:`, kept in the manifest and shown in the report:
qrels typos (refused, or dropped on request), an external run file's unknown ids / missing queries / documents from
after the query, degenerate stages; runs never replace runs (`evalkit runs`)."""
from __future__ import annotations

import io
import json
import os
import warnings
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.engine.degenerate import find_degenerate
from evalkit.engine.run_warnings import route_python_warnings
from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline
from retrievers.stages import Context
from tests.helpers import write_tiny_beir
from tests.helpers import ROOT

CHEAP = ["--retrievers", "bm25", "--backend", "exact"]


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return write_tiny_beir(tmp_path / "tiny")


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_qrels_typo_is_one_error_line_and_nothing_is_written(tiny, tmp_path, capsys):
    with open(tiny / "qrels" / "test.tsv", "a") as fh:
        fh.write("q2\tdb0\t1\n")  # the typo: db0 for db-0
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"evalkit: error: 1 qrels row names an id the dataset lacks: {tiny / 'qrels' / 'test.tsv'}:10: "
                   f"unknown document id 'db0' — fix the qrels file, or pass --qrels-unknown drop to score without it"]
    assert not out.exists()
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--out", str(out), "--qrels-unknown", "drop"]) == 0
    err = capsys.readouterr().err
    assert err.count("evalkit: warning: ") == 1 and "dropped 1 of 9 qrels rows" in err
    assert "Warning:" not in err and "warnings.warn" not in err  # no raw Python warning
    (w,) = _manifest(out)["datasets"]["tiny"]["warnings"]
    assert w["what"] == "qrels_unknown" and "test.tsv:10" in w["text"]
    assert "dropped 1 of 9 qrels rows" in (out / "report.md").read_text()
    assert "dropped 1 of 9 qrels rows" in (out / "report.html").read_text()


@pytest.mark.slow  # two runs and the Python API: ~10 s
def test_two_datasets_with_one_name_are_one_error_line_and_nothing_is_written(tiny, tmp_path, capsys):
    import shutil

    import evalkit
    from retrievers.types import DataError
    copy = tmp_path / "copy"
    shutil.copytree(tiny, copy)
    (copy / "evalkit.json").write_text(json.dumps({"name": "tiny"}))  # the copy keeps the original's name
    out = tmp_path / "out"
    assert main(["run", "--dataset", f"{tiny},{copy}", *CHEAP, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"evalkit: error: two datasets named 'tiny' in one run: {tiny} and {copy}; their rows would merge "
                   f"under one name (give the copy another \"name\" in its evalkit.json, or run them separately)"]
    assert not out.exists() and not (tmp_path / "reports").exists()  # no run folder, not even a default one
    with pytest.raises(DataError, match=f"two datasets named 'tiny' in one run: {tiny} and {copy}"):
        evalkit.run([str(tiny), str(copy)], "bm25", out=tmp_path / "api")
    assert not (tmp_path / "api").exists()
    (copy / "evalkit.json").write_text(json.dumps({"name": "tiny-copy"}))  # renamed: both run, side by side
    assert main(["run", "--dataset", f"{tiny},{copy}", *CHEAP, "--out", str(out)]) == 0
    assert sorted(_manifest(out)["datasets"]) == ["tiny", "tiny-copy"]


def test_queries_in_no_split_are_one_warning_line_naming_them(tiny, tmp_path, capsys):
    with open(tiny / "queries.jsonl", "a") as fh:  # no qrels row, no metadata.split: in no split
        for i in range(12):
            fh.write(json.dumps({"_id": f"orphan{i}", "text": "unjudged question", "metadata": {}}) + "\n")
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--out", str(out)]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("evalkit: warning: ")]
    assert lines == [f"evalkit: warning: {tiny}: 12 queries are in no split (no qrels row and no metadata.split) and "
                     f"are left out of every run: {', '.join(f'orphan{i}' for i in range(10))}, … (+2 more)"]
    man = _manifest(out)["datasets"]["tiny"]
    assert man["loader_info"]["queries_in_no_split"] == 12 and man["warnings"][0]["count"] == 12
    assert "12 queries are in no split" in (out / "report.md").read_text()


def test_run_file_warnings_reach_terminal_manifest_and_report(tiny, tmp_path, capsys):
    trec = tmp_path / "mine.trec"
    trec.write_text("q1 Q0 ghost 1 9.5 s\nq1 Q0 net-0 2 9.0 s\nq2 Q0 db-0 1 3.0 s\nq9 Q0 db-0 1 1.0 s\n")
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--run-file", f"mine={trec}", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    lines = [x for x in cap.err.splitlines() if x.startswith("evalkit: warning: ")]
    assert len(lines) == 3  # unknown query, unknown doc, missing queries (the tiny set's docs are all dated before)
    assert all(x.startswith(f"evalkit: warning: tiny: run file mine ({trec})") for x in lines)
    assert "ranking measures over 6 judged of 6 test queries" in cap.out
    man = _manifest(out)["datasets"]["tiny"]
    assert man["run_files"]["mine"] == {"runfile_unknown_queries": 1, "runfile_unknown_docs": 1,
                                        "runfile_missing_queries": 4, "runfile_future_docs": 0, "missing": "zero",
                                        "scored_queries": 6, "queries": 6}
    assert [w["retriever"] for w in man["warnings"]] == ["mine"] * 3
    md = (out / "report.md").read_text()
    assert "| mine ⚠ |" in md.replace("1–2 ", "").replace("| 1 ", "| ").replace("| 2 ", "| ") or "mine ⚠" in md
    assert "keeps its rank as a non-relevant hit" in md
    skip = tmp_path / "skip"
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--run-file", f"mine={trec}", "--run-file-missing", "skip",
                 "--out", str(skip)]) == 0
    cap = capsys.readouterr()
    assert "mine over 2 (its run file's answered queries)" in cap.out
    md = (skip / "report.md").read_text()
    assert "mine (2 of 6 queries)" in md and "mine over 2 (the queries its run file answers)" in md


def test_a_duplicate_run_file_pair_is_one_error(tiny, tmp_path, capsys):
    trec = tmp_path / "dup.trec"
    trec.write_text("q1 Q0 net-0 1 9.0 s\nq1 Q0 net-0 2 8.0 s\n")
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--run-file", f"d={trec}", "--out", str(tmp_path / "o")]) == 2
    assert "dup.trec:2: document 'net-0' listed twice for query 'q1' (first on line 1)" in capsys.readouterr().err


FLOOR = {"name": "floor", "arms": [{"name": "bm25", "kind": "lexical", "depth": 10}],
         "stages": [{"type": "fuse.single", "arm": "bm25"}, {"type": "filter.min_score", "threshold": 7.0},
                    {"type": "cutoff.top_k", "k": 10}]}


def _cands():
    return candidates_from_json({"documents": [{"id": d, "text": d} for d in "abc"],
                                 "queries": [{"id": f"q{i}", "query": "x",
                                              "arms": {"bm25": [{"id": "a", "score": 0.8 - i / 10},
                                                                {"id": "b", "score": 0.3}]}} for i in range(4)]})


def test_degenerate_threshold_above_every_score_is_one_warning():
    cs = _cands()
    p = build_pipeline(FLOOR)
    st = p.run(cs, Context(trace=True))
    (w,) = find_degenerate("floor", p, cs, st, None)
    assert w["what"] == "degenerate_parameter" and w["retriever"] == "floor"
    assert w["text"] == ("floor: filter.min_score threshold 7 is above every score seen (max 0.8 over 8 rows "
                         "reaching it): it removes all candidates")
    low = build_pipeline({**FLOOR, "stages": [FLOOR["stages"][0], {"type": "filter.min_score", "threshold": 0.1}]})
    (w,) = find_degenerate("low", low, cs, low.run(cs, Context(trace=True)), None)
    assert "below every score seen (min 0.3" in w["text"] and w["text"].endswith("it never removes anything")
    ok = build_pipeline({**FLOOR, "stages": [FLOOR["stages"][0], {"type": "filter.min_score", "threshold": 0.5}]})
    assert find_degenerate("ok", ok, cs, ok.run(cs, Context(trace=True)), None) == []


def test_degenerate_stage_without_a_declared_parameter_is_named():
    cs = _cands()
    p = build_pipeline({**FLOOR, "stages": [FLOOR["stages"][0], {"type": "cutoff.top_k", "k": 0}]})
    (w,) = find_degenerate("zero", p, cs, p.run(cs, Context(trace=True)), None)
    assert w["what"] == "degenerate_stage"
    assert w["text"].startswith("zero: cutoff.top_k removes every candidate for 100 % of the queries that reach it "
                                "(4 of 4)")


def test_degenerate_filter_in_a_real_run_is_printed_and_reported(tiny, tmp_path, capsys):
    preset = tmp_path / "floor.toml"
    preset.write_text('name = "floor"\n[[arms]]\nname = "bm25"\nkind = "lexical"\ndepth = 10\n'
                      '[[stages]]\ntype = "fuse.single"\narm = "bm25"\n'
                      '[[stages]]\ntype = "filter.min_score"\nthreshold = 1e9\n')
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(tiny), "--retrievers", f"bm25,{preset}", "--backend", "exact",
                 "--out", str(out)]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("evalkit: warning:")]
    assert len(err) == 1 and err[0].startswith("evalkit: warning: tiny: floor: filter.min_score threshold 1e+09 is "
                                               "above every score seen")
    assert "it removes all candidates" in (out / "report.md").read_text()


def test_python_warnings_become_one_evalkit_line():
    buf = io.StringIO()
    saved = warnings.showwarning
    try:
        route_python_warnings(buf)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("Data has no positive values,\n and therefore cannot be log-scaled.", UserWarning)
    finally:
        warnings.showwarning = saved
    (line,) = buf.getvalue().splitlines()
    assert line.startswith("evalkit: warning: UserWarning: Data has no positive values, and therefore cannot be "
                           "log-scaled. (test_run_warnings.py:")


def test_runs_never_replace_runs(tiny, tmp_path, capsys):
    """Two default runs, then a third with another retriever: all kept, `latest` on the newest, `evalkit runs` lists
    them; compare and report read reports/runs/<dataset> as its latest run; an earlier-layout folder is kept."""
    legacy = tmp_path / "reports" / "runs" / "tiny"
    assert main(["run", "--dataset", str(tiny), *CHEAP, "--out", str(legacy)]) == 0  # the earlier layout
    for rets in ("bm25", "bm25,bm25_again"):
        if rets != "bm25":
            (tmp_path / "bm25_again.toml").write_text(
                (ROOT / "retrievers/presets/bm25.toml").read_text()
                .replace('name = "bm25"\ndescription', 'name = "bm25_again"\ndescription'))
            rets = f"bm25,{tmp_path / 'bm25_again.toml'}"
        assert main(["run", "--dataset", str(tiny), "--retrievers", rets, "--backend", "exact"]) == 0
    out = capsys.readouterr().out
    assert "kept the earlier run reports/runs/tiny as reports/runs/tiny/" in out
    names = {p.name for p in legacy.iterdir()}
    earlier = [n for n in names if n.endswith("-earlier")]
    # in the order they were made (two runs within one second have the same time stamp in their names)
    runs = sorted((n for n in names if n not in earlier and n != "latest"),
                  key=lambda n: (legacy / n / "manifest.json").stat().st_mtime_ns)
    assert len(names) == 4 and "latest" in names and len(earlier) == 1 and len(runs) == 2
    kids = [earlier[0], *runs]
    assert os.readlink(legacy / "latest") == kids[2]
    assert {r["retriever"] for r in json.loads((legacy / kids[2] / "metrics.json").read_text())["rows"]} == {
        "bm25", "bm25_again"}
    assert main(["runs"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 4 and listing[-1].endswith("(latest)") and "bm25, bm25_again" in listing[-1]
    assert all("tiny" in x and "ndcg@10" in x for x in listing[1:])
    assert main(["compare", str(legacy), str(legacy / kids[1])]) == 0
    assert f"runs: {kids[2]} ({legacy / kids[2]})" in capsys.readouterr().out  # the folder of runs: its latest
    assert main(["report", str(legacy)]) == 0
    assert f"wrote {legacy / kids[2] / 'report.md'}" in capsys.readouterr().out
