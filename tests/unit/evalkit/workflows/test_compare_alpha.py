"""`evalkit compare --alpha` / ``compare(alpha=...)``: the significance level decides the marks, the Holm-adjusted
intervals and the tie groups, every rendering states it, and a bad level is one clear error with nothing written.

The run: ``base``, ``edge`` (+0.05…+0.15 on 14 queries, −0.04…−0.10 on 6, the rest equal: significant at 0.05, not
at 0.01) and ``far`` (+0.3 on every query: significant at any level used here)."""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

import evalkit
from evalkit.cli import main
from evalkit.measures.stats import PairedResult
from evalkit.runfolder.write import RunWriter
from evalkit.workflows.compare import CompareError, Comparison, Row, System, compare

N = 60


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    rng = np.random.default_rng(7)
    base = rng.uniform(0.2, 0.6, N)
    d = np.zeros(N)
    d[:14] = np.linspace(0.05, 0.15, 14)
    d[14:20] = -np.linspace(0.04, 0.10, 6)
    systems = {"base": base, "edge": base + d, "far": base + 0.3 + rng.normal(0, 0.02, N)}
    w = RunWriter(tmp_path_factory.mktemp("alpha") / "run")
    w.manifest.update({"evalkit_version": "test",
                       "datasets": {"syn": {"queries": N, "documents": 10, "hash": "h"}}})
    for name, vals in systems.items():
        for i, v in enumerate(vals):
            w.per_query.append({"dataset": "syn", "retriever": name, "query_id": f"q{i:03d}", "category": "",
                                "metric": "ndcg@10", "value": float(v)})
        w.add_metric("syn", name, "ndcg@10", float(vals.mean()))
    return w.write()


def _cmp(folder, alpha=None):
    kw = {} if alpha is None else {"alpha": alpha}
    return compare([folder], metrics=["ndcg@10"], with_examples=False, **kw)


def _row(cmp, a, b):
    return next(r.result for r in cmp.rows if (r.a.retriever, r.b.retriever) == (a, b))


def _ranks(cmp) -> dict[str, tuple[int, int]]:
    return {x.retriever: rng for x, _, rng in cmp.ranking[("syn", "ndcg@10")]}


def test_alpha_decides_marks_intervals_and_tie_groups(folder):
    loose, strict = _cmp(folder), _cmp(folder, 0.01)
    assert (loose.alpha, strict.alpha) == (0.05, 0.01)
    e5, e1 = _row(loose, "base", "edge"), _row(strict, "base", "edge")
    assert 0.01 < e5.p_holm < 0.05 and e5.delta > 0           # the case this test is about
    # the tests themselves do not depend on alpha; only the decisions and the intervals' levels do
    assert [(r.result.p_randomization, r.result.p_holm) for r in loose.rows] == \
        [(r.result.p_randomization, r.result.p_holm) for r in strict.rows]
    assert (e5.mark(loose.alpha), e1.mark(strict.alpha)) == ("▲", "")
    assert e5.ci_holm_level == pytest.approx(1 - 0.05 * e5.p_randomization / e5.p_holm)
    assert e1.ci_holm_level == pytest.approx(1 - 0.01 * e1.p_randomization / e1.p_holm)
    assert e1.ci_holm_low < e5.ci_holm_low and e1.ci_holm_high > e5.ci_holm_high  # a stricter level: wider
    assert e5.ci_holm_low > 0 and e1.ci_holm_low <= 0 <= e1.ci_holm_high
    for cmp in (loose, strict):
        for r in cmp.rows:
            res = r.result
            assert math.isfinite(res.ci_holm_low) and math.isfinite(res.ci_holm_high)
            excludes0 = res.ci_holm_low > 0 or res.ci_holm_high < 0
            assert excludes0 == (res.p_holm < cmp.alpha) == (res.mark(cmp.alpha) != "")
    assert _row(strict, "base", "far").mark(0.01) == "▲" and _row(strict, "edge", "far").mark(0.01) == "▲"
    # tie groups: edge beats base at 0.05 only
    assert _ranks(loose) == {"far": (1, 1), "edge": (2, 2), "base": (3, 3)}
    assert _ranks(strict) == {"far": (1, 1), "edge": (2, 3), "base": (2, 3)}


def test_every_rendering_states_and_uses_its_alpha(folder):
    loose, strict = _cmp(folder), _cmp(folder, 0.01)
    assert "(Holm-adjusted p < 0.05)" in loose.to_text()
    text = strict.to_text()
    assert "(Holm-adjusted p < 0.01)" in text and "< 0.05" not in text
    edge_line = next(ln for ln in text.splitlines() if ln.split()[1:3] == ["base", "edge"])
    assert "▲" not in edge_line and "▲" in next(ln for ln in loose.to_text().splitlines()
                                                 if ln.split()[1:3] == ["base", "edge"])
    assert "2–3  edge" in text and "2–3  base" in text
    for page in (strict.to_markdown(), strict.to_html()):
        assert "(p Holm &lt; 0.01)" in page or "(p Holm < 0.01)" in page
        assert "p Holm < 0.05" not in page and "p Holm &lt; 0.05" not in page
    assert "| syn | nDCG@10 | 2–3 | edge |" in strict.to_markdown()
    data = json.loads(strict.to_json())
    assert data["method"]["alpha"] == 0.01 and json.loads(loose.to_json())["method"]["alpha"] == 0.05
    assert {(r["a"], r["b"]): r["mark"] for r in data["rows"]} == {("base", "edge"): "", ("base", "far"): "▲",
                                                                   ("edge", "far"): "▲"}
    rows = list(csv.DictReader(io.StringIO(strict.to_csv())))
    assert [r["mark"] for r in rows] == ["", "▲", "▲"]
    assert float(rows[0]["ci_holm_low"]) <= 0 <= float(rows[0]["ci_holm_high"])
    assert list(strict.table["mark"]) == ["", "▲", "▲"]


def test_p_values_keep_the_digits_that_put_them_on_their_side_of_the_comparisons_alpha():
    """A row with p = 0.0098 prints 0.0098 at alpha 0.01 (never "0.010" beside a ▲) and 0.010 at alpha 0.05."""
    a, b = System("run", "syn", "base", "base"), System("run", "syn", "edge", "edge")
    res = PairedResult(20, 0.40, 0.45, 0.05, 0.01, 0.09, 0.0098, 0.0098, 0.0098, 0.5, 10, 5, 5,
                       ci_holm_low=0.001, ci_holm_high=0.1, ci_holm_level=0.99)
    cells = {}
    for alpha in (0.01, 0.05):
        cmp = Comparison([], ["ndcg@10"], None, alpha, rows=[Row("syn", a, b, "ndcg@10", res)])
        line = next(ln for ln in cmp.to_text().splitlines() if ln.startswith("syn"))
        cells[alpha] = line.split()[-5:-2]   # p rand, p t-test, p Holm
        assert "▲" in line
    assert cells == {0.01: ["0.0098"] * 3, 0.05: ["0.010"] * 3}


def test_cli_alpha_end_to_end(folder, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(folder), "--metrics", "ndcg@10", "--alpha", "0.01", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "(Holm-adjusted p < 0.01)" in text
    data = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert data["method"]["alpha"] == 0.01
    edge = next(r for r in data["rows"] if (r["a"], r["b"]) == ("base", "edge"))
    assert edge["mark"] == "" and 0.01 < edge["p_holm"] < 0.05
    assert {(r["system"], r["rank_best"], r["rank_worst"]) for r in data["ranking"]} == {
        ("far", 1, 1), ("edge", 2, 3), ("base", 2, 3)}
    assert "(p Holm < 0.01)" in (out / "compare.md").read_text(encoding="utf-8")
    assert "(p Holm &lt; 0.01)" in (out / "compare.html").read_text(encoding="utf-8")
    assert main(["compare", str(folder), "--metrics", "ndcg@10"]) == 0   # the default is 0.05
    assert "(Holm-adjusted p < 0.05)" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "1.5", "1", "-0.05", "nan"])
def test_cli_bad_alpha_is_one_line_exit_2_nothing_written(folder, tmp_path, capsys, value):
    out = tmp_path / "cmp"
    assert main(["compare", str(folder), "--alpha", value, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit: error: --alpha must be between 0 and 1"), err
    assert captured.out == "" and not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_python_api_alpha(folder):
    cmp = evalkit.compare([folder], metrics=["ndcg@10"], alpha=0.01, examples=0)
    assert cmp.alpha == 0.01 and list(cmp.table["mark"]) == ["", "▲", "▲"]
    for bad in (0, 1.5, -1, float("nan")):
        with pytest.raises(ValueError) as info:
            evalkit.compare([folder], alpha=bad)
        assert "alpha must be between 0 and 1" in str(info.value) and "\n" not in str(info.value)
        with pytest.raises(CompareError, match="alpha must be between 0 and 1"):
            compare([folder], alpha=bad)
