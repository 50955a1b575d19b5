"""Run reports: built from a real small run, rebuilt in place; marks and findings on a synthetic run with known
differences (the page in headless Chromium: tests/system/test_report_browser.py)."""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import evalkit.report.html as html_mod
import evalkit.report.markdown as md_mod
from evalkit.cli import main
from evalkit.report.analysis import summarize
from evalkit.report.section_registry import SECTIONS, title
from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter
from tests.helpers import REPORT_PRESETS, report_run



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return report_run(tmp_path_factory.mktemp("report") / "ws-run")


# --- the real run ---------------------------------------------------------------------------------------------

def test_run_writes_markdown_summary(run_dir):
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# evalkit run report: ws-run")
    assert "## Key findings" in md
    assert re.search(r"^- best on memory-workspace: \S+ \(nDCG@10 0\.\d{3}", md, re.M)
    assert "### Leaderboard" in md and "### As shipped vs fixed" in md
    assert "| openclaw_core_2026_2_26 | openclaw_core_2026_2_26_fixed_bm25_score | nDCG@10 |" in md
    # the fix is named in the key findings: on its own line when significant, else in a collapsed line
    assert re.search(r"^- (fix openclaw_core_2026_2_26_fixed_bm25_score vs as shipped openclaw_core_2026_2_26:"
                     r"|fixes (with no significant change|that change nothing)\b.*openclaw_core_2026_2_26_fixed_bm25"
                     r"_score)", md, re.M)
    lb = md.split("### Leaderboard", 1)[1].split("###", 1)[0]
    rows = [line for line in lb.splitlines() if re.match(r"^\| \d+(–\d+)? \|", line)]
    assert len(rows) == 3
    assert any("bm25 (reference)" in r for r in rows)
    assert "### nDCG@10 by query category" in md and "## How to read this report" in md


def test_html_is_self_contained(run_dir):
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "<script" not in page and "<link" not in page
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(imgs) >= 5  # bars, recall curves, category + age heatmaps, budget
    import base64
    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    for section in ("Key findings", "Leaderboard", "Means with 95% confidence intervals", "Recall@k",
                    "As shipped vs fixed", "by query category", "by evidence age", "Gates, abstention",
                    "What gets injected", "Quality at a token budget", "Where each retriever loses its relevant notes",
                    "Threshold sensitivity", "Harms: what reached the prompt"):
        assert section in page, section
    # the threshold of OpenClaw's score floor is named with the local embedding model beside it
    assert re.search(r"openclaw_core_2026_2_26</td><td[^>]*>min_score</td><td[^>]*>0\.35</td>", page)
    assert "all-MiniLM-L6-v2" in page.split("Threshold sensitivity")[1]


def test_report_command_rebuilds_in_place_deterministically(run_dir, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    for name in ("report.md", "report.html"):
        (copy / name).unlink()
    assert main(["report", str(copy)]) == 0
    first = {n: (copy / n).read_bytes() for n in ("report.md", "report.html")}
    assert main(["report", str(copy)]) == 0
    assert first == {n: (copy / n).read_bytes() for n in ("report.md", "report.html")}
    out = capsys.readouterr().out
    assert "report.html" in out
    assert b"As shipped vs fixed" in first["report.md"]
    # other files untouched
    assert (copy / "metrics.json").read_bytes() == (run_dir / "metrics.json").read_bytes()


def test_report_renders_latency_when_present(run_dir, tmp_path):
    copy = tmp_path / "lat"
    shutil.copytree(run_dir, copy)
    rng = np.random.default_rng(0)
    lat = {"memory-workspace": {r: {"arms": rng.lognormal(-6, 0.4, 50).tolist(),
                                    "fuse": rng.lognormal(-9, 0.4, 50).tolist(),
                                    "total": rng.lognormal(-5.5, 0.4, 50).tolist()} for r in REPORT_PRESETS.split(",")}}
    (copy / "latency.json").write_text(json.dumps(lat))
    assert main(["report", str(copy)]) == 0
    page = (copy / "report.html").read_text(encoding="utf-8")
    md = (copy / "report.md").read_text(encoding="utf-8")
    assert "Latency per stage" in page and "Latency per stage" in md
    assert "| bm25 | total | 50 |" in md
    assert page.count("data:image/png;base64,") >= 6


def test_both_renderers_draw_the_registry_sections_in_registry_order(run_dir):
    """One section registry: every heading report.md / report.html draws for a section comes from it, in its
    order, and neither renderer spells a section's title itself."""
    run = RunData.from_folder(run_dir)
    s = summarize(run)[0]
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    for fmt, text, head in (("md", md, "### {}\n"), ("html", page, "<h3>{}</h3>")):
        secs = [sec for sec in SECTIONS if fmt in sec.formats]
        heads = [head.format(title(sec, run, s, fmt)) for sec in secs]
        found = [h for h in heads if h in text]
        assert len(found) >= 5, (fmt, found)
        assert [text.index(h) for h in found] == sorted(text.index(h) for h in found)
    for mod in (md_mod, html_mod):
        src = Path(mod.__file__).read_text(encoding="utf-8")
        assert not [sec.key for sec in SECTIONS if isinstance(sec.title, str) and sec.title in src]


def test_report_command_bad_folder_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a run folder" in err[0]


# --- synthetic run with known differences ---------------------------------------------------------------------

def _synthetic_writer(out, n=120, extra=0):
    rng = np.random.default_rng(0)
    w = RunWriter(out)
    w.manifest.update({"evalkit_version": "test", "datasets": {"syn": {"queries": n, "documents": 50, "hash": "h"}},
                       "retrievers": {"tool_fixed_bug": {"fixes": "the bug"}}, "machine": {"cpus": 2}})
    base = rng.uniform(0.1, 0.6, n)
    systems = {"bm25": base, "better": np.clip(base + 0.2, 0, 1), "same": base.copy(),
               "tool": np.clip(base - 0.1, 0, 1), "tool_fixed_bug": np.clip(base - 0.1, 0, 1)}
    systems["same"][3] += 0.05  # one query differs: never significant
    for i in range(extra):
        systems[f"extra_{i:02d}"] = np.clip(base + rng.normal(0, 0.1, n), 0, 1)
    cats = ["a", "b", "c"]
    for name, vals in systems.items():
        for m in ("ndcg@10", "recall@10", "recall@5", "recall@50", "recall@100", "mrr@10"):
            for i, v in enumerate(vals):
                w.per_query.append({"dataset": "syn", "retriever": name, "query_id": f"q{i:03d}",
                                    "category": cats[i % 3], "metric": m, "value": float(v)})
            w.add_metric("syn", name, m, float(vals.mean()))
            for c in range(3):
                w.by_category.append({"dataset": "syn", "retriever": name, "breakdown": "category",
                                      "bucket": cats[c], "metric": m, "value": float(vals[c::3].mean()),
                                      "n": len(vals[c::3])})
        w.add_metric("syn", name, "skip_rate", 0.1 if name == "tool" else 0.0)
        w.add_metric("syn", name, "wrongly_skipped", 0.05 if name == "tool" else 0.0)
        w.results[("syn", name)] = [{"query_id": f"q{i:03d}", "ranked": [["d1", 1.0]], "injected": ["d1"],
                                     "skipped": False, "budget": {"chunks": i % 4, "chars": 100 * (i % 4)}}
                                    for i in range(n)]
    return w


def test_synthetic_marks_findings_and_fixed_pairs(tmp_path, capsys):
    from evalkit.report import print_table, write_reports
    w = _synthetic_writer(tmp_path / "syn-run")
    write_reports(w)
    md = w.extra_files["report.md"]
    line = {r.split("|")[2].strip(): r for r in md.splitlines() if re.match(r"^\| \d+(–\d+)? \|", r)}
    assert "▲" in line["better"] and "**" in line["better"]
    assert "▲" not in line["same"] and "▼" not in line["same"]
    assert "▼" in line["tool"]
    assert "+0.200" in line["better"]
    assert re.search(r"best on syn: better \(nDCG@10 0\.\d{3} over \d+ judged queries, \+0\.200 vs bm25, p[<=]0\.00\d\)", md)
    assert ("fixes that change nothing (identical nDCG@10 on every one of the 120 scored queries): tool_fixed_bug"
            in md)
    assert "tool skips 10.0% of queries" in md
    assert "- `tool_fixed_bug` fixes: the bug" in md
    print_table(w)
    assert "better" in capsys.readouterr().out
    # in-memory and saved-folder reports agree on the numbers
    w.write()
    from evalkit.report import rebuild
    rebuild(tmp_path / "syn-run")
    saved = (tmp_path / "syn-run" / "report.md").read_text(encoding="utf-8")
    assert saved == md


def test_report_failure_never_loses_the_run(tmp_path, monkeypatch, capsys):
    from evalkit.report import build as build_mod
    from evalkit.report import write_reports

    def boom(*a, **k):
        raise RuntimeError("plot exploded")
    monkeypatch.setattr(build_mod, "build_reports", boom)
    w = _synthetic_writer(tmp_path / "r")
    write_reports(w)
    assert "report.html" not in w.extra_files
    assert "| better |" in w.extra_files["report.md"] and "plot exploded" in w.extra_files["report.md"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "evalkit report" in err[0]


def test_many_retrievers_report_builds(tmp_path):
    from evalkit.report import build_reports
    from evalkit.runfolder.view import RunData
    w = _synthetic_writer(tmp_path / "big", extra=20)
    files = build_reports(RunData.from_writer(w), "big")
    assert files["report.html"].count("data:image/png;base64,") >= 4
    assert files["report.md"].count("| extra_") >= 20


def test_fixed_pairs_by_name_and_by_fixes_field():
    from evalkit.report.analysis import fixed_pairs
    names = ["a", "a_fixed_x", "a_fts", "a_fts_fixed_y", "b", "b_v2", "c"]
    man = {"a_fixed_x": {"fixes": "x"}, "b_v2": {"fixes": ["one", "two"]}}
    assert fixed_pairs(names, man) == [("a", "a_fixed_x", "x"), ("a_fts", "a_fts_fixed_y", ""),
                                       ("b", "b_v2", "one; two")]


def test_formatting_helpers():
    from evalkit.report.format import fmt, fmt_ci, fmt_delta, fmt_pct
    assert fmt(0.45678) == "0.457" and fmt(math.nan) == "–"
    assert fmt_delta(0.05) == "+0.050" and fmt_delta(-0.0001) == "±0.000"
    assert fmt_ci(-0.01, 0.02) == "[-0.010, +0.020]"
    assert fmt_pct(0.0667) == "6.7%"


def test_tie_groups_saturation_chance_and_harms_na(tmp_path):
    """Leaderboard ranks are ranges for retrievers the tests cannot separate; a cut-off at or above the pool a query
    can retrieve is flagged saturated and left out; the chance row is shown; harms without labels are n/a."""
    from evalkit.report import write_reports
    w = _synthetic_writer(tmp_path / "syn-sat")
    w.manifest["datasets"]["syn"].update({"visible_median": 48.0, "chance": {"ndcg@10": 0.05, "recall@10": 0.2083}})
    for name in ("bm25", "better"):
        w.add_metric("syn", name, "secret_leak_rate", float("nan"))
    write_reports(w)
    md = w.extra_files["report.md"]
    rows = {r.split("|")[2].strip(): r.split("|")[1].strip() for r in md.splitlines()
            if re.match(r"^\| \d+(–\d+)? \|", r)}
    assert rows["better"] == "1"                       # significantly ahead of every other
    assert rows["same"] == rows["bm25 (reference)"] == "2–3"   # one differing query: not separable
    assert rows["tool"] == rows["tool_fixed_bug"] == "4–5"
    board = md.split("### Leaderboard")[1].split("###")[0]
    assert "| R@100 |" not in board and "Saturated, left out of the table and the findings: R@100" in board
    assert "| R@10 |" in board and "chance (random ranking)" in board and "0.208" in board
    assert "R@100" not in md.split("## Key findings")[1].split("## syn")[0]
    # no harm labels: no harms table and no harm finding (n/a is never printed as 0)
    assert "### Harms" not in md and "SECRET LEAK" not in md
