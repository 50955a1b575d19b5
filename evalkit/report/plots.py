"""Report figures as base64 PNG strings (matplotlib, Agg, no pyplot global state, no files on disk).

Each function returns ``None`` when it has nothing to draw. Figures scale their height with the number of
retrievers, so 30 retrievers stay legible; colours are colour-blind friendly (tab10 / viridis).

Each figure is a pure function of its arguments, so it is drawn once per process for the same arguments
(:func:`drawn_once`): the bench rewrites its report after every dataset and again after the latency pass, and each
rewrite draws only the figures whose data changed.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import io
import math
import pickle
import threading
from collections import OrderedDict

import numpy as np

_STYLE = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8,
          "legend.fontsize": 8, "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 100,
          "savefig.dpi": 100}
REF_COLOR = "#d62728"
BAR_COLOR = "#4c72b0"


def figure_module():
    import matplotlib  # lazy: startup
    matplotlib.use("Agg", force=False)
    matplotlib.rcParams.update(_STYLE)
    from matplotlib.figure import Figure  # lazy: startup
    return Figure


def png_base64(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white", pil_kwargs={"compress_level": 3})
    return base64.b64encode(buf.getvalue()).decode("ascii")


_DRAWN: OrderedDict[str, str | None] = OrderedDict()
_DRAWN_LOCK = threading.Lock()
DRAWN_MAX_CHARS = 64 * 2**20  # the figures kept: at most ~64 MB of base64 PNG, least recently used dropped first


def drawn_once(fn):
    """Keep a figure function's PNG by the content of its arguments (a SHA-256 of their pickle, with the
    function's name): the same arguments return the same string without drawing again. Arguments that do not
    pickle are drawn every time. A figure must depend on nothing but its arguments (rcParams are this module's).

    >>> calls = []
    >>> @drawn_once
    ... def fig(values): calls.append(1); return f"png of {values}"
    >>> fig([1, 2]), fig([1, 2]), fig([1, 3]), len(calls)
    ('png of [1, 2]', 'png of [1, 2]', 'png of [1, 3]', 2)
    """
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            key = hashlib.sha256(pickle.dumps((name, args, kwargs), protocol=5)).hexdigest()
        except (pickle.PicklingError, TypeError, AttributeError):
            return fn(*args, **kwargs)
        with _DRAWN_LOCK:
            if key in _DRAWN:
                _DRAWN.move_to_end(key)
                return _DRAWN[key]
        out = fn(*args, **kwargs)
        with _DRAWN_LOCK:
            _DRAWN[key] = out
            while sum(len(v or "") for v in _DRAWN.values()) > DRAWN_MAX_CHARS and len(_DRAWN) > 1:
                _DRAWN.popitem(last=False)
        return out
    return wrapper


def _short(name: str, n: int = 38) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _label_width(labels: list[str]) -> float:
    """Inches needed for y tick labels at 8 pt (fixed margins instead of constrained layout: 5-10x faster)."""
    return 0.25 + 0.065 * max((len(x) for x in labels), default=4)


def _figure(width: float, height: float, left: float, right: float = 0.25, top: float = 0.45,
            bottom: float = 0.5, **adjust):
    Figure = figure_module()
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        **adjust)
    return fig


def _rows_axis(axes, labels: list[str]) -> None:
    """One row per retriever, top to bottom: labels on the first panel only (the same limits on all)."""
    for i, ax in enumerate(axes):
        ax.set_ylim(len(labels) - 0.5, -0.5)
        if i == 0:
            ax.set_yticks(range(len(labels)), labels)
        else:
            ax.set_yticks([])
        ax.tick_params(axis="y", length=0)


@drawn_once
def metric_bars(retrievers: list[str], metrics: list[tuple[str, str]], means: dict, ci: dict,
                reference: str | None) -> str | None:
    """Horizontal bars of each retriever's mean with its 95% bootstrap CI, one panel per metric."""
    metrics = [(m, lab) for m, lab in metrics
               if any(not math.isnan(means.get(r, {}).get(m, math.nan)) for r in retrievers)]
    if not metrics or not retrievers:
        return None
    labels = [_short(r) for r in retrievers]
    h = 0.85 + 0.26 * len(retrievers)
    fig = _figure(10, h, left=_label_width(labels), top=0.3, bottom=0.35, wspace=0.08)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]  # not sharey: shared axes re-measure every tick
    y = np.arange(len(retrievers))
    for ax, (m, lab) in zip(axes, metrics):
        vals = np.array([means.get(r, {}).get(m, math.nan) for r in retrievers], dtype=float)
        lo = np.array([ci.get((r, m), (np.nan, np.nan))[0] for r in retrievers])
        hi = np.array([ci.get((r, m), (np.nan, np.nan))[1] for r in retrievers])
        colors = [REF_COLOR if r == reference else BAR_COLOR for r in retrievers]
        ax.barh(y, np.nan_to_num(vals), color=colors, alpha=0.85, height=0.7)
        err = np.vstack([np.clip(vals - lo, 0, None), np.clip(hi - vals, 0, None)])
        ok = np.isfinite(err).all(axis=0)
        if ok.any():
            ax.errorbar(vals[ok], y[ok], xerr=err[:, ok], fmt="none", ecolor="black", elinewidth=1, capsize=2.5)
        for yi, v, h_ in zip(y, vals, hi) if len(retrievers) <= 20 else ():
            if np.isfinite(v):
                ax.text((h_ if np.isfinite(h_) else v) + 0.012, yi, f"{v:.3f}", va="center", fontsize=7.5)
        ax.set_xlim(0, 1.1)
        ax.set_title(f"{lab}: mean with 95% CI")
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
    _rows_axis(axes, labels)
    return png_base64(fig)


@drawn_once
def recall_curves(retrievers: list[str], ks: list[int], means: dict, reference: str | None) -> str | None:
    """Recall@k against k (log axis) per retriever."""
    rows = []
    for r in retrievers:
        vals = [means.get(r, {}).get(f"recall@{k}", math.nan) for k in ks]
        if sum(np.isfinite(vals)) >= 2:
            rows.append((r, vals))
    if not rows:
        return None
    import matplotlib  # lazy: startup
    legend_w = 0.8 + 0.068 * max(len(_short(r, 44)) for r, _ in rows) * (1 if len(rows) <= 16 else 2)
    fig = _figure(10, 4.2, left=0.6, right=legend_w, top=0.35, bottom=0.55)
    ax = fig.subplots()
    cmap = matplotlib.colormaps["tab10" if len(rows) <= 9 else "tab20"]
    reds = {3} if cmap.N == 10 else {6, 7}  # tab10 / tab20 reds are kept for the reference
    colors = [cmap(i) for i in range(cmap.N) if i not in reds]
    others = iter(range(len(rows)))
    for r, vals in rows:
        style = dict(color=REF_COLOR, lw=2.4, ls="--") if r == reference else \
            dict(color=colors[next(others) % len(colors)], lw=1.6)
        ax.plot(ks, vals, marker="o", ms=3.5, label=_short(r, 44), **style)
    ax.set_xscale("log")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("k (number of results kept)")
    ax.set_ylabel("recall@k")
    ax.set_title("Recall@k: share of relevant notes found in the top k")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, ncols=1 if len(rows) <= 16 else 2)
    return png_base64(fig)


@drawn_once
def heatmap(rows: list[str], cols: list[str], mat: np.ndarray, counts: list[int], title: str,
            cbar_label: str) -> str | None:
    """Retriever × bucket heatmap (0–1 scale) with the value in each cell and n per column."""
    if mat.size == 0 or not np.isfinite(mat).any():
        return None
    import matplotlib  # lazy: startup
    labels = [_short(r) for r in rows]
    left = _label_width(labels)
    w = min(12.0, left + 1.2 + 0.95 * len(cols))
    h = 1.1 + 0.28 * len(rows)
    fig = _figure(max(w, 6.5), h, left=left, right=1.0, top=0.35, bottom=0.5)
    ax = fig.subplots()
    masked = np.ma.masked_invalid(mat)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#eeeeee")
    im = ax.imshow(masked, aspect="auto", cmap=cmap, vmin=0, vmax=1)
    ax.set_xticks(range(len(cols)), [f"{c}\nn={n}" + ("\n⚠ n<10" if n < 10 else "") for c, n in zip(cols, counts)])
    for tick, n in zip(ax.get_xticklabels(), counts):
        if n < 10:  # a mean over a handful of queries: the caution is part of the label, in the warning colour
            tick.set_color(REF_COLOR)
    ax.set_yticks(range(len(rows)), labels)
    ax.tick_params(axis="x", labelsize=7.5, length=0)
    ax.tick_params(axis="y", length=0)
    if len(rows) <= 16:  # cell labels: readable and cheap up to ~16 rows (the table below has every value)
        for i in range(len(rows)):
            for j in range(len(cols)):
                v = mat[i, j]
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.55 else "black")
    ax.set_title(title)
    ax.spines[:].set_visible(False)
    pos = ax.get_position()
    cax = fig.add_axes((pos.x1 + 0.15 / fig.get_figwidth(), pos.y0, 0.12 / fig.get_figwidth(), pos.height))
    fig.colorbar(im, cax=cax, label=cbar_label)
    return png_base64(fig)


@drawn_once
def budget_histograms(retrievers: list[str], budgets: dict[str, list[dict]], limits: dict[str, dict]) -> str | None:
    """Distribution of injected chunks / tokens / characters per query as ridgelines.

    One panel per quantity, one row per retriever: the row's filled histogram (scaled to its tallest bin) shows
    how many queries got that much; the red tick marks the preset's own limit. Bins are shared per panel.
    """
    keys = [k for k in ("chunks", "tokens", "chars") if any(b.get(k) is not None for r in retrievers
                                                             for b in budgets.get(r, []))]
    rets = [r for r in retrievers if budgets.get(r)]
    if not keys or not rets:
        return None
    from matplotlib.collections import LineCollection, PolyCollection  # lazy: startup
    lim_key = {"chunks": "max_chunks", "tokens": "max_tokens", "chars": "max_chars"}
    names = {"chunks": "chunks", "tokens": "LLM tokens", "chars": "characters"}
    labels = [_short(r) for r in rets]
    h = 0.95 + (0.5 if len(rets) <= 8 else 0.3) * len(rets)
    fig = _figure(10, h, left=_label_width(labels), top=0.45, bottom=0.45, wspace=0.06)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    for ax, k in zip(axes, keys):
        data = {r: np.array([b[k] for b in budgets[r] if b.get(k) is not None], dtype=float) for r in rets}
        top = max((v.max() for v in data.values() if len(v)), default=1.0)
        lims = [limits.get(r, {}).get(lim_key[k]) for r in rets]
        top = max([top] + [x for x in lims if x])
        edges = np.arange(-0.5, top + 1.5, 1.0) if k == "chunks" and top <= 60 else \
            np.linspace(0, max(top, 1.0) * 1.0001, 31)
        polys, ticks = [], []
        for i, r in enumerate(rets):
            v = data[r]
            if len(v):
                cnt = np.histogram(v, bins=edges)[0].astype(float)
                if cnt.max() > 0:
                    top_y = i + 0.45 - 0.85 * cnt / cnt.max()
                    xs = np.repeat(edges, 2)[1:-1]
                    ys = np.repeat(top_y, 2)
                    polys.append(np.column_stack([np.r_[edges[0], xs, edges[-1]], np.r_[i + 0.45, ys, i + 0.45]]))
            if lims[i]:
                ticks.append([(lims[i], i + 0.45), (lims[i], i - 0.45)])
        # one collection per panel: a separate artist per retriever costs ~10 ms each to draw
        ax.add_collection(PolyCollection(polys, facecolors=BAR_COLOR, edgecolors="none", alpha=0.8))
        if ticks:
            ax.add_collection(LineCollection(ticks, colors=REF_COLOR, linewidths=1.6))
        ax.set_title(f"injected {names[k]} per query")
        ax.set_xlim(edges[0], edges[-1])
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
    _rows_axis(axes, labels)
    return png_base64(fig)


@drawn_once
def latency_ranges(retrievers: list[str], latency: dict[str, dict[str, np.ndarray]]) -> str | None:
    """Per-stage latency distributions (ms, log axis): one panel per stage, per retriever a line from the 5th to
    the 95th percentile, a thick bar for the 25th–75th and a dot at the median."""
    rets = [r for r in retrievers if r in latency]
    if not rets:
        return None
    stages: list[str] = []
    for r in rets:
        for st in latency[r]:
            if st not in stages and st != "total":
                stages.append(st)
    stages = (["total"] if any("total" in latency[r] for r in rets) else []) + stages
    stages = stages[:8]
    ncols = min(4, len(stages))
    nrows = math.ceil(len(stages) / ncols)
    labels = [_short(r, 30) for r in rets]
    row_h = 0.75 + 0.24 * len(rets)
    fig = _figure(11, 0.3 + nrows * row_h, left=_label_width(labels), top=0.35, bottom=0.5, wspace=0.08,
                  hspace=0.75 / row_h)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.ravel()[len(stages):]:
        ax.set_visible(False)
    from matplotlib.ticker import LogLocator  # lazy: startup
    for ax, st in zip(axes.ravel(), stages):
        ys, q = [], []
        for i, r in enumerate(rets):
            v = latency[r].get(st)
            if v is not None and len(v):
                ys.append(i)
                q.append(np.percentile(np.clip(v * 1000.0, 1e-3, None), [5, 25, 50, 75, 95]))
        if ys:
            qa = np.array(q)
            ax.hlines(ys, qa[:, 0], qa[:, 4], color="#8c9db5", lw=1.2)
            ax.hlines(ys, qa[:, 1], qa[:, 3], color=BAR_COLOR, lw=5)
            ax.scatter(qa[:, 2], ys, color="black", s=12, zorder=3)
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(numticks=6))
            ax.xaxis.set_minor_locator(LogLocator(subs=(), numticks=1))
        ax.set_title(st + (" (whole query)" if st == "total" else ""))
        ax.set_xlabel("ms (log scale)")
        ax.grid(axis="x", alpha=0.3)
    for row in axes:
        _rows_axis(row, labels)
    return png_base64(fig)


@drawn_once
def funnels(retrievers: list[str], diag: dict) -> str | None:
    """The recall funnel of each retriever, side by side: one small panel per retriever, one bar per step (the
    share of its relevant notes still present, see evalkit/engine/funnel.py), the biggest loss in red."""
    rows = [(r, diag[r]["funnel"]) for r in retrievers if r in diag and diag[r].get("funnel")]
    if not rows:
        return None
    ncols = min(4, len(rows))
    nrows = math.ceil(len(rows) / ncols)
    steps_max = max(len(f["steps"]) for _, f in rows)
    height = 0.6 + nrows * (0.5 + 0.17 * steps_max)
    fig = _figure(3.1 * ncols + 1.2, height, left=1.25, right=0.2, top=0.35, bottom=0.3, wspace=1.1, hspace=0.5)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, (r, f) in zip(axes, rows):
        labels = [s["step"] + (" (off)" if "(off)" in str(s.get("type", "")) else "") for s in f["steps"]]
        vals = [s["kept"] if s["kept"] is not None else math.nan for s in f["steps"]]
        drops = [0.0] + [vals[i - 1] - vals[i] for i in range(1, len(vals))]
        worst = int(np.nanargmax(drops)) if np.nanmax(drops) > 0 else -1
        colors = [REF_COLOR if i == worst else BAR_COLOR for i in range(len(vals))]
        ax.barh(range(len(vals)), vals, color=colors)
        ax.set_yticks(range(len(vals)), [_short(x, 18) for x in labels])
        ax.set_ylim(len(vals) - 0.5, -0.5)
        ax.set_xlim(0, 1)
        ax.set_title(_short(r, 34), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    for ax in axes[len(rows):]:
        ax.set_visible(False)
    return png_base64(fig)


@drawn_once
def threshold_curves(panels: list[tuple[str, dict]], model: str) -> str | None:
    """Per (retriever, threshold stage): the metric against the threshold, the as-shipped value marked."""
    panels = [(r, t) for r, t in panels if t.get("points")]
    if not panels:
        return None
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = _figure(3.6 * ncols + 0.6, 0.7 + 2.6 * nrows, left=0.6, right=0.2, top=0.5, bottom=0.5, wspace=0.35,
                  hspace=0.9)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, (r, t) in zip(axes, panels):
        pts = sorted(t["points"], key=lambda p: p[0])
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", ms=3, color=BAR_COLOR)
        ax.axvline(t["as_shipped"], color=REF_COLOR, ls="--", lw=1.2,
                   label=f"as shipped {t['as_shipped']:g} (q{100 * (t['as_shipped_quantile'] or 0):.0f})")
        ax.set_title(f"{_short(r, 30)}\n{_short(t['stage'], 34)}", fontsize=8.5)
        ax.set_xlabel(t.get("param") or "threshold")
        ax.set_ylabel(t.get("metric", ""))
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    # no figure title: the section's heading and note above the image name the model (its full id did not fit a
    # one-panel figure and ran over the panels' own titles)
    return png_base64(fig)


@drawn_once
def budget_curves(curves: dict[str, list[tuple[float, float]]], reference: str | None, metric: str) -> str | None:
    """Quality of the injected block against the mean injected tokens per query, one line per retriever (a
    point per token budget)."""
    rows = [(r, sorted(c)) for r, c in curves.items() if len(c) >= 2]
    if not rows:
        return None
    import matplotlib  # lazy: startup
    legend_w = 0.8 + 0.068 * max(len(_short(r, 44)) for r, _ in rows)
    fig = _figure(10, 4.2, left=0.6, right=legend_w, top=0.35, bottom=0.55)
    ax = fig.subplots()
    cmap = matplotlib.colormaps["tab10" if len(rows) <= 9 else "tab20"]
    for i, (r, c) in enumerate(rows):
        style = dict(color=REF_COLOR, lw=2.4, ls="--") if r == reference else dict(color=cmap(i % cmap.N), lw=1.6)
        ax.plot([x for x, _ in c], [y for _, y in c], marker="o", ms=3.5, label=_short(r, 44), **style)
    if any(x > 0 for _, c in rows for x, _ in c):  # a log axis needs a positive value (a retriever that injects
        ax.set_xscale("log")                        # nothing has only zeros: matplotlib would warn)
    ax.set_xlabel("mean injected tokens per query (cl100k)")
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1.02)
    ax.set_title(f"Quality at a token budget: {metric} of the injected block")
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return png_base64(fig)
