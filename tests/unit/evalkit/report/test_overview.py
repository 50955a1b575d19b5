"""The bench report's opening pictures (evalkit/report/overview.py) and the HTML report fixes: short names with the
full name on hover, the tie-group heatmap, quality against harm, as shipped → fixed arrows, findings folded after
ten per dataset, the funnel's biggest loss not coloured as a best value, small buckets marked."""
from __future__ import annotations

import re

import numpy as np

from evalkit.report.overview import display_names, harm_measures, split_findings
from evalkit.report.tables import Cell, Table, to_html, to_markdown
from evalkit.runfolder.write import RunWriter


def test_display_names_drop_versions_and_commits_and_stay_unique():
    names = display_names(["sys_core_2026_2_26_fixed_bm25_score", "tool_v2_0_rrf", "lib_pro_6a50220_vector",
                           "bm25", "a_1", "a_2"])
    assert names["sys_core_2026_2_26_fixed_bm25_score"] == "sys core · fixed bm25 score"
    assert names["tool_v2_0_rrf"] == "tool v2.0 rrf"
    assert names["lib_pro_6a50220_vector"] == "lib pro vector"
    assert names["bm25"] == "bm25"
    assert names["a_1"] == "a_1" and names["a_2"] == "a_2"  # both would read "a": they keep their full names
    long = display_names(["x" * 80])["x" * 80]
    assert len(long) == 30 and long.endswith("…")


def _bench_writer(out, n=60):
    """Two datasets, a shipped preset with two fixed siblings (one by name, one by the fixes field), harms on one
    dataset, and enough retrievers for more than ten findings."""
    rng = np.random.default_rng(1)
    w = RunWriter(out, kind="bench-run")
    rets = {"bm25": 0.0, "tool_2026_1_1": -0.15, "tool_2026_1_1_fixed_scale": 0.1, "tool_2026_1_1_fixed_noop": -0.15,
            "dense": 0.05}
    rets.update({f"extra_{i}": rng.normal(0, 0.1) for i in range(6)})
    w.manifest.update({"evalkit_version": "test", "bench_seconds": {},
                       "datasets": {d: {"queries": n, "documents": 50, "hash": d} for d in ("dsa", "dsb")},
                       "retrievers": {"tool_2026_1_1_fixed_scale": {"fixes": "the scale bug"},
                                      "tool_2026_1_1_fixed_noop": {"fixes": "nothing measurable"}}})
    for ds in ("dsa", "dsb"):
        base = rng.uniform(0.2, 0.6, n)
        for name, shift in rets.items():
            vals = np.clip(base + shift + (0 if name.endswith("noop") or name == "tool_2026_1_1" else
                                           rng.normal(0, 0.02, n)), 0, 1)
            if name == "tool_2026_1_1_fixed_noop":
                vals = np.clip(base - 0.15, 0, 1)
            for i, v in enumerate(vals):
                w.per_query.append({"dataset": ds, "retriever": name, "query_id": f"q{i:03d}", "category": "c",
                                    "metric": "ndcg@10", "value": float(v)})
            w.add_metric(ds, name, "ndcg@10", float(vals.mean()))
            if ds == "dsa":
                w.add_metric(ds, name, "secret_leak_rate", 0.2 if name == "dense" else 0.0)
                w.add_metric(ds, name, "junk_rate", float(rng.uniform(0, 0.3)))
                w.add_metric(ds, name, "skip_rate", float(rng.uniform(0, 0.3)))
                w.add_metric(ds, name, "budget_compliance", float(rng.uniform(0.5, 0.9)))
    return w


def test_bench_report_opens_with_pictures_and_folds_findings(tmp_path):
    from evalkit.report import write_reports
    w = _bench_writer(tmp_path / "bench")
    write_reports(w)
    page = w.extra_files["report.html"]
    glance = page[page.index("At a glance"):page.index('class="findings"')]
    assert glance.count("<svg") == 3  # heatmap, quality vs harm, as shipped → fixed
    # the heatmap: every retriever × dataset cell with its value and tie-group rank, the full name on hover
    cells = re.findall(r"<title>([^<]+) on (dsa|dsb): nDCG@10 (0\.\d{3}), rank ([\d–]+) of 11", glance)
    assert len(cells) == 22
    assert '<text x="' in glance and "<title>tool_2026_1_1_fixed_scale</title>" in glance
    assert ">tool · fixed scale<" in glance  # the short name is what is shown
    # quality vs harm: one panel per measured harm (dsa only), one point per retriever
    assert "dsa: nDCG@10 vs secret leak rate" in glance and "dsa: nDCG@10 vs junk rate" in glance
    assert "dsb: nDCG@10 vs" not in glance
    assert len(re.findall(r"<circle [^>]*r=\"4\"", glance)) == 2 * 11
    # arrows: both fixed siblings under their shipped preset on both datasets (pairs from the metadata)
    assert glance.count("tool_2026_1_1_fixed_scale vs as shipped tool_2026_1_1") == 2
    assert glance.count("tool_2026_1_1_fixed_noop vs as shipped tool_2026_1_1") == 2
    assert "fixes: the scale bug" in glance
    # findings: at most ten shown per dataset, the rest folded; names short with the full one on hover
    findings = page[page.index('class="findings"'):page.index("</section>", page.index('class="findings"'))]
    for block in re.findall(r"<li><a href=\"#ds-[^\"]+\"><b>[^<]+</b></a><ul>(.*?)</ul></li>(?=<li><a|</ul>)",
                            findings, flags=re.S):
        top = block.split("<details>")[0]
        assert top.count("<li>") <= 11  # ten findings + the folded list's own item
    assert re.search(r"<summary>\d+ more finding\(s\)</summary>", findings)
    assert '<abbr title="tool_2026_1_1_fixed_scale">tool · fixed scale</abbr>' in findings
    md = w.extra_files["report.md"]
    assert re.search(r"<details><summary>\d+ more finding\(s\)</summary>", md)


def test_single_dataset_run_report_has_no_overview(tmp_path):
    from evalkit.report import write_reports
    w = _bench_writer(tmp_path / "one")
    w.manifest.pop("bench_seconds")
    w.metrics = [m for m in w.metrics if m["dataset"] == "dsa"]
    w.per_query = [r for r in w.per_query if r["dataset"] == "dsa"]
    write_reports(w)
    assert "At a glance" not in w.extra_files["report.html"]
    assert "more finding(s)" not in w.extra_files["report.md"]


def test_harm_measures_take_poison_rates_when_present():
    from evalkit.report.analysis import DatasetSummary
    s = DatasetSummary("d", ["a"], {"a": {"ndcg@10": 0.5, "junk_rate": 0.1, "poison_rate@5": 0.2}}, "ndcg@10",
                       [], None, "", {}, {}, {}, [], None, 1, {})
    assert harm_measures([s]) == ["junk_rate", "poison_rate@5"]


def test_split_findings_keeps_order():
    lines = [f"f{i}" for i in range(14)]
    shown, rest = split_findings(lines)
    assert shown == lines[:10] and rest == lines[10:]


def test_biggest_loss_is_marked_as_a_loss_not_as_best():
    t = Table(["retriever", "biggest loss"])
    t.add(Cell("a", num=False), Cell("filter −40%", num=False, worst=True))
    page = to_html(t)
    assert 'class="worst"' in page and "best" not in page
    assert "**filter −40%**" in to_markdown(t)


def test_funnel_table_marks_off_stages_and_small_buckets_carry_a_caution(tmp_path):
    from evalkit.report.sections import SMALL_MARK, breakdown_table, funnel_table, step_name
    from evalkit.report.analysis import summarize
    from evalkit.runfolder.view import RunData
    assert step_name({"step": "decay", "type": "decay.half_life (off)"}) == "decay (off)"
    assert step_name({"step": "decay", "type": "decay.half_life"}) == "decay"
    w = _bench_writer(tmp_path / "f")
    w.by_category += [{"dataset": "dsa", "retriever": r, "breakdown": "category", "bucket": b, "metric": "ndcg@10",
                       "value": 0.5, "n": n} for r in ("bm25", "dense") for b, n in (("big", 50), ("tiny", 4))]
    w.diagnostics = {"dsa": {"bm25": {"funnel": {"k": 10, "steps": [
        {"step": "candidates", "type": "arms", "kept": 0.9}, {"step": "decay", "type": "decay.half_life (off)",
                                                               "kept": 0.9},
        {"step": "floor", "type": "filter.min_score", "kept": 0.5}, {"step": "injected", "type": "budget",
                                                                     "kept": 0.4}]}}}}
    run = RunData.from_writer(w)
    s = next(x for x in summarize(run) if x.name == "dsa")
    ft = funnel_table(run, s)
    row = next(r for r in ft.rows if r[0].text.startswith("bm25"))
    assert "decay (off) 90%" in row[3].text
    assert row[-1].worst and not row[-1].best and row[-1].text.startswith("floor")
    bt = breakdown_table(run, s, "category")
    assert f"tiny (n=4{SMALL_MARK})" in bt.header and "big (n=50)" in bt.header
