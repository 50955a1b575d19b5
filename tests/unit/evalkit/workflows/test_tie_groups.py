"""Tie groups on every leaderboard: compare's ranking table and bench's terminal leaderboards give the same rank
ranges as the run report (one function, evalkit.measures.stats.rank_ranges), resampling declared clusters."""
from __future__ import annotations

import numpy as np

from evalkit.measures import stats
from evalkit.runfolder.write import RunWriter
from evalkit.workflows import bench, compare

N = 120


def _writer(out, clustered: bool = False, datasets=("syn",)) -> RunWriter:
    """bm25 / same (one query differs) / better (+0.2) / worse (-0.1) on every query; ``shared``: +0.4 on three
    of four conversations and -0.1 on the fourth, so it wins per query but only 4 clusters carry the evidence."""
    rng = np.random.default_rng(1)
    w = RunWriter(out)
    conv = {f"q{i:03d}": f"c{i // 30}" for i in range(N)}
    w.manifest.update({"evalkit_version": "test", "datasets": {}})
    for ds in datasets:
        w.manifest["datasets"][ds] = {"queries": N, "documents": 50, "hash": "h"}
        if clustered:
            w.manifest["datasets"][ds]["clusters"] = {"by": "group", "what": "conversation", "of": conv}
        base = rng.uniform(0.1, 0.6, N)
        shift = np.array([0.4 if conv[f"q{i:03d}"] != "c3" else -0.1 for i in range(N)])
        systems = {"bm25": base, "same": base.copy(), "better": base + 0.2, "worse": base - 0.1,
                   "shared": base + shift + rng.normal(0, 0.01, N)}
        systems["same"][3] += 0.05
        for name, vals in systems.items():
            for i, v in enumerate(vals):
                w.per_query.append({"dataset": ds, "retriever": name, "query_id": f"q{i:03d}", "category": "",
                                    "metric": "ndcg@10", "value": float(v)})
            w.add_metric(ds, name, "ndcg@10", float(vals.mean()))
    return w


def _bench_ranks(w) -> dict[str, str]:
    lines: list[str] = []
    bench.summary(w, log=lines.append)
    return {ln.split()[1]: ln.split()[0] for ln in lines if ln[:5].strip() and ln[:5].strip()[0].isdigit()}


def test_bench_leaderboard_shows_rank_ranges_and_overall_mean_range(tmp_path):
    w = _writer(tmp_path / "b", datasets=("syn", "syn2"))
    lines: list[str] = []
    ties: dict = {}
    bench.summary(w, log=lines.append, ties=ties)
    board = [ln for ln in lines if ln[:5].strip()[:1].isdigit()]
    ranks = {ln.split()[1]: ln.split()[0] for ln in board[:5]}
    # per query, shared (+0.4 on 90 queries, -0.1 on 30) is best, better second, bm25 and same tied, worse last
    assert ranks == {"shared": "1", "better": "2", "bm25": "3–4", "same": "3–4", "worse": "5"}
    assert set(ties) == {"syn", "syn2"}
    overall = lines[lines.index(next(ln for ln in lines if ln.startswith("\n== overall"))) + 1:]
    assert any("3.0–4.0" in ln and "bm25" in ln for ln in overall)
    # a second call reuses the ranges it was given (the bench prints after every dataset)
    ties["syn"].ranks["worse"] = (9, 9)
    lines.clear()
    bench.summary(w, log=lines.append, only="syn", ties=ties)
    assert any(ln.split()[:2] == ["9", "worse"] for ln in lines if ln.strip())


def test_bench_ranks_resample_declared_clusters(tmp_path):
    plain = _bench_ranks(_writer(tmp_path / "p"))
    clustered = _bench_ranks(_writer(tmp_path / "c", clustered=True))
    assert plain["shared"] == "1"
    # four conversations: the exact cluster sign flip cannot reach p < 0.05 (min p = 2/16), not even one comparison
    # with the best: no "1–5" for every system, but the rank by the mean, said once, with the conversations won
    assert clustered == {"shared": "1", "better": "2", "same": "3", "bm25": "4", "worse": "5"}
    lines: list[str] = []
    bench.summary(_writer(tmp_path / "c2", clustered=True), log=lines.append)
    notes = [ln for ln in lines if "no difference between" in ln]
    assert notes == ["  ⚠ 4 conversations: no difference between 5 retrievers can reach p < 0.05 after Holm (the "
                     "smallest p of 4 conversations is 0.12; × 4 comparisons with the best = 0.5): ranked by the mean, "
                     "with the conversations the best wins against each and the per-question test (not clustered)"]
    assert any(ln.startswith("  per conversation: the best by the mean, shared, scores higher in 3/4 conversations "
                             "against") for ln in lines)


def test_compare_ranking_table_matches_the_report_function(tmp_path):
    folder = _writer(tmp_path / "run").write()
    cmp = compare.compare([folder], metrics=["ndcg@10"], with_examples=False)
    got = {x.retriever: stats.rank_text(rng) for x, _, rng in cmp.ranking[("syn", "ndcg@10")]}
    assert got == {"shared": "1", "better": "2", "bm25": "3–4", "same": "3–4", "worse": "5"}
    assert [x.retriever for x, _, _ in cmp.ranking[("syn", "ndcg@10")]][0] == "shared"   # best mean first
    md = cmp.to_markdown()
    assert "## Ranking with tie groups" in md and "| syn | nDCG@10 | 3–4 | same |" in md
    assert "Ranking with tie groups" in cmp.to_html() and "3–4" in cmp.to_text()
    js = cmp.to_dict()["ranking"]
    assert {(r["system"], r["rank_best"], r["rank_worst"]) for r in js} >= {("bm25", 3, 4), ("worse", 5, 5)}


def test_compare_ranking_resamples_declared_clusters(tmp_path):
    folder = _writer(tmp_path / "run", clustered=True).write()
    cmp = compare.compare([folder], metrics=["ndcg@10"], with_examples=False)
    got = {x.retriever: stats.rank_text(rng) for x, _, rng in cmp.ranking[("syn", "ndcg@10")]}
    assert got == {"shared": "1", "better": "2", "same": "3", "bm25": "4", "worse": "5"}  # by the mean, said so:
    for text in (cmp.to_text(), cmp.to_markdown(), cmp.to_html()):
        assert text.count("4 conversations: no difference between 5 systems can reach p &lt; 0.05" if "<html" in text
                          else "4 conversations: no difference between 5 systems can reach p < 0.05") == 1
    row = next(ln for ln in cmp.to_text().splitlines() if ln.split()[:4] == ["syn", "nDCG@10", "5", "worse"])
    assert row.split()[-3] == "3/4" and row.split()[-2].startswith("-")   # conversations; per-question Δ, p
    assert "per question, not clustered: Δ vs best, p (Holm)" in cmp.to_text()
    js = cmp.to_dict()
    assert {r["ranked_by"] for r in js["ranking"]} == {"mean"}
    assert next(r for r in js["ranking"] if r["system"] == "worse")["best_higher_in_clusters"] == [3, 0, 1]  # c3: -0.1 both


def test_bench_report_has_funnels_and_threshold_curves(tmp_path, capsys):
    """`evalkit bench --diagnostics` records diagnostics as `evalkit run` does: the combined report draws the recall funnel and
    the threshold sweep of a score floor (one preset keeps the test short), and the terminal leaderboard's # column
    is a rank range."""
    import json

    from evalkit.cli import main
    out = tmp_path / "bench"
    floor = "openclaw_core_2026_2_26"   # a filter.min_score preset
    assert main(["bench", "--datasets", "memory-workspace", "--retrievers", floor, "--no-latency", "--diagnostics",
                 "--backend", "exact", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# = rank range" in text
    diag = json.loads((out / "latest" / "diagnostics.json").read_text())["memory-workspace"]
    assert set(diag) == {floor} and diag[floor]["funnel"]
    assert diag[floor]["thresholds"] and diag[floor]["thresholds"][0]["param"] == "threshold"
    html = (out / "latest" / "report.html").read_text()
    assert "Where each retriever loses its relevant notes" in html and "Threshold sensitivity" in html


def test_report_terminal_and_heatmap_say_once_when_no_test_can_separate_any_pair(tmp_path, capsys):
    """Four conversations, five systems: no clustered test can reach p < 0.05 (not even one comparison with the
    best). The report says so once per dataset, ranks by the mean, shows the conversations the best wins and the
    per-question test marked as such; the heatmap bolds the best only; the terminal table says it once too."""
    import re

    from evalkit.report import print_table, write_reports
    w = _writer(tmp_path / "r", clustered=True, datasets=("syn", "syn2"))
    write_reports(w)
    md = w.extra_files["report.md"]
    note = "4 conversations: no difference between 5 retrievers can reach p < 0.05 after Holm"
    for ds in ("syn", "syn2"):
        section = md.split(f"## {ds}\n")[1].split("\n## ")[0]
        assert section.count(note) == 1 and "# = rank by the mean nDCG@10" in section
        board = section.split("### Leaderboard")[1].split("###")[0]
        assert "| shared higher in (conversations) | per question, not clustered: Δ vs shared, p (Holm) |" in board
        rows = {r.split("|")[2].strip(): r.split("|") for r in board.splitlines() if re.match(r"^\| \d \|", r)}
        assert [r.split("|")[1].strip() for r in board.splitlines() if re.match(r"^\| \d \|", r)] == list("12345")
        assert re.fullmatch(r"[34]/4", rows["worse"][-3].strip()) and rows["shared"][-3].strip() == "best"
        assert rows["worse"][-2].strip().startswith("-")   # Δ vs the best, per question
    html = w.extra_files["report.html"]
    heat = html.split("<svg")[1].split("</svg>")[0]
    assert heat.count('font-weight="700"') == 2              # the best of each dataset, nobody "tied" with it
    assert "rank 5 of 5 by the mean (no test can separate any pair)" in heat
    print_table(w)
    out = capsys.readouterr().out
    assert out.count(f"⚠ {note}") == 2                     # once per dataset
    assert "  per conversation: the best by the mean, shared, scores higher in" in out
