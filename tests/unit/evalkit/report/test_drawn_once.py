"""Report figures are drawn once per process for the same arguments (evalkit.report.plots.drawn_once): the same
PNG string comes back without drawing, different data draws again, arguments that do not pickle are always drawn,
and the kept figures stay under their size bound."""
from __future__ import annotations

from evalkit.report import plots

RETRIEVERS = ["bm25", "dense"]
METRICS = [("ndcg@10", "nDCG@10")]


def _means(x: float) -> dict:
    return {"bm25": {"ndcg@10": x}, "dense": {"ndcg@10": 0.5}}


def _counting(monkeypatch) -> list:
    saves = []
    real = plots.png_base64

    def png(fig):
        saves.append(1)
        return real(fig)
    monkeypatch.setattr(plots, "png_base64", png)
    return saves


def test_the_same_arguments_give_the_same_png_drawn_once(monkeypatch):
    saves = _counting(monkeypatch)
    ci = {("bm25", "ndcg@10"): (0.2, 0.4)}
    first = plots.metric_bars(RETRIEVERS, METRICS, _means(0.3125), ci, "bm25")
    again = plots.metric_bars(RETRIEVERS, METRICS, _means(0.3125), dict(ci), "bm25")  # equal, not the same objects
    assert first and again == first and len(saves) == 1
    other = plots.metric_bars(RETRIEVERS, METRICS, _means(0.3126), ci, "bm25")  # one value changed: drawn again
    assert other != first and len(saves) == 2


def test_unpicklable_arguments_are_drawn_every_time():
    calls = []

    @plots.drawn_once
    def fig(f):
        calls.append(1)
        return "png"
    fig(lambda: 1)
    fig(lambda: 1)
    assert len(calls) == 2


def test_kept_figures_stay_under_the_bound(monkeypatch):
    saves = _counting(monkeypatch)
    monkeypatch.setattr(plots, "DRAWN_MAX_CHARS", 1)  # keeps only the newest figure
    a = plots.metric_bars(RETRIEVERS, METRICS, _means(0.11), {}, None)
    plots.metric_bars(RETRIEVERS, METRICS, _means(0.22), {}, None)
    assert plots.metric_bars(RETRIEVERS, METRICS, _means(0.11), {}, None) == a  # dropped, so drawn again
    assert len(saves) == 3
