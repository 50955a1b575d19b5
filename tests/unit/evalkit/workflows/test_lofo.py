"""evalkit lofo's pieces: the Wilson interval (closed form and against scipy's binomial test inversion bounds), the
rate cells and the headline's "beaten beyond its interval" rule, each guard alone, and the by-construction
vocabulary (every attack declares what its notes show, every guard what it reads)."""
import math

import pytest
from scipy.stats import binomtest

from evalkit.data.poison.attacks import ATTACKS
from evalkit.measures.intervals import wilson_interval
from evalkit.report import lofo as report
from evalkit.workflows.lofo import FamilyRow, LofoResult, Rate, guard_alone
from retrievers.pipeline import load_preset
import retrievers.stages  # noqa: F401  (registers every stage)
from retrievers.stages.base import REGISTRY as STAGES


@pytest.mark.parametrize("k, n", [(0, 30), (1, 39), (4, 30), (30, 30), (17, 105), (2, 1052)])
def test_wilson_interval_is_the_closed_form_and_scipys(k, n):
    lo, hi = wilson_interval(k, n)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)
    assert 0 <= lo <= k / n <= hi <= 1
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def _res(rows, evaluation=True):
    return LofoResult("p.toml", ["d1"], ["e1"] if evaluation else [], "all", "test", ["guard.classifier"], rows, {},
                      {}, ["fixed"])


def _row(fam, lofo, ev=None, catchers=("guard.classifier",)):
    return FamilyRow(fam, lofo, lofo, lofo, ev, list(catchers), {"guard.classifier": lofo, "no guard": Rate(9, 10)})


def test_headline_names_the_worst_held_out_family_and_what_beats_the_evaluation_figure():
    rows = [_row("instruction", Rate(2, 100), Rate(1, 100)), _row("sourced-fact", Rate(60, 100), None, ()),
            _row("trigger", Rate(4, 100), Rate(0, 100))]
    lines = report.headline(_res(rows))
    assert lines[0].startswith("headline (leave one family out, worst held-out family): sourced-fact 60.0% (60/100)")
    assert lines[1] == ("worst held-out family a guard of the pipeline can catch by construction: trigger 4.0% (4/100) "
                        "[1.6%, 9.8%]; no guard reads sourced-fact")
    assert lines[2].startswith("evaluation set, families pooled (as shipped): 0.5% (1/200)")
    # the pooled evaluation figure's upper bound is 2.8%: 60/100 lies wholly above it, 4/100 (lower 1.6%) does not
    assert lines[3] == "held-out families that beat it beyond its interval: sourced-fact (60.0%, lower bound 50.2%)"
    text = report.to_text(_res(rows))
    assert "sourced-fact" in text and "none" in text and "limit: fixed" in text
    assert report.rate_cell(Rate(1, 39)).text == "2.6% (1/39) [0.5%, 13.2%]"
    assert report.rate_cell(None).text == "–"
    md = report.to_markdown(_res(rows))
    assert "| held-out family |" in md and "| only guard.classifier |" in md


def test_each_guard_alone_keeps_one_guard_and_the_rest_of_the_pipeline():
    p = load_preset("tune/best/workspace_poison.toml")
    guards = [s.name for s in p.stages if s.name.startswith("guard.")]
    assert guards == ["guard.classifier", "guard.query_echo", "guard.conflict"]
    only = guard_alone(p, "guard.query_echo")
    assert [s.name for s in only.stages] == [s.name for s in p.stages if s.name not in ("guard.classifier",
                                                                                          "guard.conflict")]
    assert only.name.endswith("-only-guard.query_echo") and only.hash != p.hash
    assert not any(s.name.startswith("guard.") for s in guard_alone(p, None).stages)


def test_every_attack_declares_what_it_shows_and_every_guard_what_it_reads():
    vocab = {"payload", "echo-lead", "echo-inside", "near-copy"}
    for name, a in ATTACKS.items():
        assert a.shows is not None and set(a.shows) <= vocab, name
    reads = {n: set(c.reads) for n, c in STAGES.items() if n.startswith("guard.")}
    assert reads["guard.payload"] == reads["guard.classifier"] == {"payload"}
    assert reads["guard.provenance"] == set()  # reads a path's trust, which no planted note's text shows
    # a confident wrong fact with no payload, no echo and no near-copy: no guard can catch it by construction
    assert not any(reads[g] & set(ATTACKS["sourced-fact"].shows) for g in reads)
    assert {g for g in reads if reads[g] & set(ATTACKS["chat-echo"].shows)} == {"guard.payload", "guard.classifier"}


def test_the_fold_figure_is_the_retuned_one_and_the_table_shows_what_the_fold_chose():
    refit, retuned = Rate(1, 100), Rate(9, 100)
    row = FamilyRow("keyword-stuff", refit, Rate(0, 100), Rate(0, 100), None, ["guard.classifier"],
                    {"guard.classifier": refit, "no guard": Rate(99, 100)}, retuned,
                    {"guard.classifier": {"margin": 2.0}, "guard.conflict": {"threshold": 0.9}})
    assert report.fold_rate(row) is retuned
    lines = report.headline(_res([row]))
    assert lines[0].startswith("headline (leave one family out, worst held-out family): keyword-stuff 9.0% (9/100)")
    t = report.family_table(_res([row]))
    assert t.header[2:5] == ["LOFO injected (refit + re-tuned)", "fold's thresholds", "refit only"]
    assert t.rows[0][3].text == "classifier margin 2, conflict threshold 0.9"
    assert t.rows[0][4].text == report.rate_cell(refit).text
    # not re-tuned: one LOFO column, the refit figure
    plain = FamilyRow("keyword-stuff", refit, refit, refit, None, ["guard.classifier"], {"no guard": refit})
    assert report.family_table(_res([plain])).header[2] == "LOFO injected" and report.fold_rate(plain) is refit


def test_a_clustered_rate_is_wider_than_wilson_and_a_zero_cell_borrows_the_tables_design_effect():
    from evalkit.workflows.lofo import borrow_design_effect
    spread = Rate(12, 200, {"c1": [10, 50], "c2": [0, 50], "c3": [2, 50], "c4": [0, 50]})
    zero = Rate(0, 200, {"c1": [0, 50], "c2": [0, 50], "c3": [0, 50], "c4": [0, 50]})
    assert spread.deff > 1 and spread.interval[1] > wilson_interval(12, 200)[1]
    worst = zero.interval
    borrow_design_effect([spread, zero])
    assert zero.borrowed == pytest.approx(spread.deff)
    assert wilson_interval(0, 200)[1] < zero.interval[1] < worst[1]
    assert Rate(3, 30).interval == wilson_interval(3, 30)  # no clusters: independent targets
