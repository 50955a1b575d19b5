"""decay.stated_age (rows whose age matches the age the question states score up) and its parser
:func:`stated_ages`: hand-computed examples."""
from __future__ import annotations

import math

import numpy as np
import pytest

from retrievers.candidates.table import CandidateSet, State
from retrievers.index.corpus import Corpus
from retrievers.stages import Context, build_stage
from retrievers.stages.helpers.stated_ages import stated_ages
from retrievers.types import Dataset, Document, Query

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

DAY = 86400.0
NOW = 1000 * DAY
MONTH = 365.2425 / 12


@pytest.mark.parametrize("text, spans", [
    ("What kitchen appliance did I buy 10 days ago?", ((10.0, 10.0),)),
    ("I cooked something a couple of days ago", ((2.0, 2.0),)),
    ("A week ago, and Two Months ago", ((7.0, 7.0), (2 * MONTH, 2 * MONTH))),
    ("a few years ago", ((3 * 365.2425, 3 * 365.2425),)),
    ("in the past 3 days", ((0.0, 3.0),)),
    ("over the past few days, the last couple of weeks", ((0.0, 3.0), (0.0, 14.0))),
    ("two weekends ago, a fortnight ago", ((14.0, 14.0),)),  # the same point once
    ("last weekend or the past week", ((0.0, 7.0),)),  # the same span once
    ("What should I cook this weekend?", ()),  # points ahead: no age
    ("any tips for tonight?", ()),
    ("over the past month", ((0.0, MONTH),)),
    ("the day before yesterday, then yesterday and today", ((2.0, 2.0), (1.0, 1.0), (0.0, 0.0))),
    ("day  before yesterday", ((2.0, 2.0),)),
    ("1,000 days ago, 2-3 days ago, 1.5 weeks ago", ()),  # no wrong span from the last digits
    ("\u017fix days ago, f\u0131ve days ago, five day\u017f ago", ()),  # Unicode look-alikes: no match, no crash
    ("12345 days ago", ()),
    ("How many months ago did I attend the workshop?", ()),  # asks for an age, states none
    ("an agony of days", ()),
    ("", ()),
])
def test_stated_ages(text, spans):
    got = stated_ages(text)
    assert len(got) == len(spans)
    for g, want in zip(got, spans):
        assert g == pytest.approx(want)


def _cs(ages, texts, as_of=NOW) -> CandidateSet:
    docs = [Document(f"d{i}", f"text {i}", timestamp=(NOW - a * DAY if a is not None else None),
                     created=(NOW - a * DAY if a is not None else None)) for i, a in enumerate(ages)]
    c = Corpus(Dataset("tiny", docs, [], {}))
    qs = [Query(f"q{i}", t, as_of=as_of) for i, t in enumerate(texts)]
    return CandidateSet(c, qs, np.tile(np.arange(len(ages)), (len(texts), 1)), {})


def _run(stage: dict, cs: CandidateSet, cols, scores) -> State:
    st = State(np.array(cols), np.array(scores, dtype=np.float64), np.zeros(len(cols), bool))
    return build_stage(dict({"type": "decay.stated_age"}, **stage)).apply(st, cs, Context())


def test_gauss_example_of_the_docstring():
    out = _run({"relative_tolerance": 0.0}, _cs([2, 3, 0], ["what did I buy 2 days ago?"]), [[0, 1, 2]], [[3, 2, 1]])
    assert out.extra["stated_age"][0] == pytest.approx([1.0, math.exp(-0.5), math.exp(-2.0)])
    assert out.score[0] == pytest.approx([3.816497, 2.495230, 1.110501], abs=1e-6)
    assert out.info["age_scored"].tolist() == [3] and out.info["negative_age"].tolist() == [0]


def test_a_matching_age_moves_a_row_up_and_the_box_counts_relative_slack():
    # "a month ago": 30.436875 d, box σ = 1 + 0.1·30.436875 = 4.0437 → row aged 27 (dist 3.44) in, aged 20 out
    cs = _cs([20, 27, 60], ["the charity event a month ago"])
    out = _run({"shape": "box", "relative_tolerance": 0.1, "weight": 2.0}, cs, [[0, 2, 1]], [[3.0, 2.5, 2.0]])
    # sd(3, 2.5, 2) = 0.408248 → d1 2 + 2·0.408248 = 2.816497 passes d0 3? no: 2.816 < 3 → order d0, d1, d2
    assert out.extra["stated_age"][0].tolist() == [0.0, 1.0, 0.0]
    assert out.col.tolist() == [[0, 1, 2]]
    assert out.score[0] == pytest.approx([3.0, 2.816497, 2.5], abs=1e-6)


def test_spans_undated_rows_and_rows_after_now():
    # "last week" → [0, 7]: ages 5 (inside, m 1), 9 (dist 2, σ 1 + 0.2·7 = 2.4 → exp(−½·(2/2.4)²)), undated (0),
    # −1 (after now: dist 1 → exp(−½·(1/2.4)²), counted as a negative age)
    cs = _cs([5, 9, None, -1], ["what did I do last week?"])
    out = _run({"weight": 1.0}, cs, [[0, 1, 2, 3]], [[1.0, 1.0, 1.0, 1.0]])
    m = [1.0, math.exp(-0.5 * (2 / 2.4) ** 2), 0.0, math.exp(-0.5 * (1 / 2.4) ** 2)]
    # equal scores: sd 0 → 1, so score = 1 + m; order by m: d0, d3, d1, d2 (the column moves with its rows)
    assert out.col.tolist() == [[0, 3, 1, 2]]
    assert out.extra["stated_age"][0] == pytest.approx([m[0], m[3], m[1], m[2]])
    assert out.info["age_scored"].tolist() == [3] and out.info["negative_age"].tolist() == [1]


def test_queries_without_a_stated_age_or_a_now_are_untouched_and_weight_zero_is_the_identity():
    cs = _cs([2, 3, 0], ["what did I buy?", "what did I buy 2 days ago?"])
    out = _run({"relative_tolerance": 0.0, "weight": 3.0}, cs, [[2, 1, 0], [2, 1, 0]], [[3, 2, 1], [3, 2, 1]])
    assert out.col[0].tolist() == [2, 1, 0] and out.score[0].tolist() == [3, 2, 1]  # no stated age: as it came
    # sd 0.816497·3 = 2.449490: d2 (age 0) 3 + 2.449490·e^−2 = 3.331502, d1 (age 3) 2 + 2.449490·e^−½ = 3.485691,
    # d0 (age 2) 1 + 2.449490 = 3.449490
    assert out.col[1].tolist() == [1, 0, 2]
    assert out.score[1] == pytest.approx([3.485691, 3.449490, 3.331502], abs=1e-6)
    no_now = _cs([2, 3, 0], ["what did I buy 2 days ago?"], as_of=None)
    same = _run({}, no_now, [[2, 1, 0]], [[3, 2, 1]])
    assert same.col.tolist() == [[2, 1, 0]] and same.score.tolist() == [[3, 2, 1]]
    st = State(np.array([[2, 1, 0]]), np.array([[3.0, 2.0, 1.0]]), np.zeros(1, bool))
    assert build_stage({"type": "decay.stated_age", "weight": 0.0}).apply(st, cs, Context()) is st


def test_padding_is_ignored():
    cs = _cs([2, 3, 0], ["what did I buy 2 days ago?"])
    out = _run({"relative_tolerance": 0.0}, cs, [[1, 0, -1]], [[2.0, 1.0, -np.inf]])
    # two rows: sd(2, 1) 0.5; d1 m exp(−½) → 2.303265, d0 m 1 → 1.5
    assert out.col.tolist() == [[1, 0, -1]]
    assert out.score[0][:2] == pytest.approx([2 + 0.5 * math.exp(-0.5), 1.5])
    assert np.isnan(out.extra["stated_age"][0][2])


def test_a_query_without_rows_gives_no_warning_and_stays_empty():
    import warnings
    cs = _cs([2, 3, 0], ["what did I buy 2 days ago?", "what did I buy 2 days ago?"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _run({}, cs, [[0, 1, 2], [-1, -1, -1]], [[3, 2, 1], [-np.inf, -np.inf, -np.inf]])
    assert out.col[1].tolist() == [-1, -1, -1] and out.col[0].tolist()[0] == 0


def test_out_of_range_parameters_are_refused():
    from retrievers.stages import ConfigError
    for bad in ({"weight": float("inf")}, {"weight": -1.0}, {"relative_tolerance": 11.0}, {"shape": "cone"}):
        with pytest.raises(ConfigError):
            build_stage(dict({"type": "decay.stated_age"}, **bad))
