"""The pictures a multi-dataset (bench) report opens with, as inline SVG (no scripts, hover = SVG ``<title>``):

* :func:`heatmap_svg` — retrievers × datasets, each cell the retriever's nDCG@10 and its tie-group rank on that
  dataset (:func:`evalkit.report.analysis.tie_standing`: "1–3" = not significantly different from the best; bold =
  tied with the best, never one the best beats in every cluster; the rank by the mean where no test can separate
  any pair); the colour
  is the value relative to the column's best, so datasets of different difficulty read alike;
* :func:`harm_svg` — quality against harm, one point per retriever: nDCG@10 (up) against each harm rate the run
  measured (secret leak, junk, poison; right = worse);
* :func:`fix_arrows_svg` — as shipped → fixed: per as-shipped preset, an arrow from its nDCG@10 to each fixed
  sibling's (the pairs come from preset metadata, :func:`evalkit.report.analysis.fixed_pairs`), coloured by the
  paired test (Holm over the pairs).

Long preset names become :func:`display_names` (versions and commit ids dropped, clipped) with the full name on
hover. Pure functions of the summaries: nothing here names a preset, a system or a dataset.

Usage::

    from evalkit.report.overview import display_names
    display_names(["openclaw_core_2026_2_26_fixed_bm25_score"])
    # {'openclaw_core_2026_2_26_fixed_bm25_score': 'openclaw core · fixed bm25 score'}
"""
from __future__ import annotations

import html
import math
import re

from evalkit.measures import catalogue
from evalkit.measures.stats import rank_text
from evalkit.report.analysis import DatasetSummary, label
from evalkit.report.format import fmt, fmt_delta, fmt_pct, isnan

SHORT = 30  # display names are clipped to this many characters
FINDINGS_SHOWN = 10  # finding lines shown per dataset; the rest are folded
_HEX = re.compile(r"[0-9a-f]{6,}")
_VERSION = re.compile(r"v\d+")
FONT = 'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif"'


def _short(name: str) -> str:
    toks = name.split("_")
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if _VERSION.fullmatch(t):  # v2_0 → v2.0
            parts = [t]
            while i + 1 < len(toks) and toks[i + 1].isdigit():
                i += 1
                parts.append(toks[i])
            out.append(".".join(parts))
        elif t.isdigit() or (_HEX.fullmatch(t) and any(c.isdigit() for c in t)):
            pass  # dates, versions, commit ids: on hover
        elif t == "fixed" and out:
            out.append("· fixed")
        else:
            out.append(t)
        i += 1
    text = " ".join(out) or name
    return text if len(text) <= SHORT else text[:SHORT - 1].rstrip() + "…"


def display_names(names: list[str]) -> dict[str, str]:
    """Short display names (version numbers and commit ids dropped, ``_`` → space, clipped at :data:`SHORT`);
    a name whose short form collides with another's keeps its full name."""
    short = {n: _short(n) for n in names}
    seen: dict[str, int] = {}
    for s in short.values():
        seen[s] = seen.get(s, 0) + 1
    return {n: (s if seen[s] == 1 else n) for n, s in short.items()}


def harm_measures(summaries: list[DatasetSummary]) -> list[str]:
    """The harm rates measured in the run: the catalogue's replay harms, plus any poison rate (poison_rate@k)."""
    present = {m for s in summaries for v in s.means.values() for m in v}
    base = [m for m in catalogue.names("replay.harms") if m in present]
    return base + sorted(m for m in present if m.startswith("poison_rate"))


def _e(text) -> str:
    return html.escape(str(text))


def _svg(w: int, h: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'{FONT} font-size="12"><title>{_e(title)}</title>' + "".join(body) + "</svg>")


def _blue(x: float) -> str:
    """White → deep blue for x in [0, 1]."""
    x = min(1.0, max(0.0, x))
    lo, hi = (247, 251, 255), (8, 81, 156)
    r, g, b = (round(a + (c - a) * x) for a, c in zip(lo, hi))
    return f"rgb({r},{g},{b})"


def order_retrievers(summaries: list[DatasetSummary]) -> list[str]:
    """Every retriever of the run, best mean tie-group rank across datasets first (then by the mean rank of its
    means, then by name: retrievers sharing a range keep their order by the mean)."""
    ranks: dict[str, list[float]] = {}
    places: dict[str, list[int]] = {}
    for s in summaries:
        for i, r in enumerate(s.retrievers, start=1):
            lo, hi = s.ranks.get(r, (i, i))
            ranks.setdefault(r, []).append((lo + hi) / 2)
            places.setdefault(r, []).append(i)
    return sorted(ranks, key=lambda r: (sum(ranks[r]) / len(ranks[r]), sum(places[r]) / len(places[r]), r))


def heatmap_svg(summaries: list[DatasetSummary], names: dict[str, str]) -> str:
    rets = order_retrievers(summaries)
    metric = summaries[0].primary if summaries else "ndcg@10"
    lw, cw, ch, top = 230, 128, 22, 58
    w, h = lw + cw * len(summaries) + 10, top + ch * len(rets) + 8
    body = [f'<text x="{lw}" y="16" font-weight="600">{_e(label(metric))} · tie-group rank</text>']
    for j, s in enumerate(summaries):
        x = lw + j * cw + cw / 2
        body.append(f'<text x="{x:.0f}" y="{top - 10}" text-anchor="middle" font-weight="600">{_e(s.name)}'
                    f'<title>{_e(s.name)}: {s.n_scored:,} judged queries</title></text>')
    for i, r in enumerate(rets):
        y = top + i * ch
        body.append(f'<text x="{lw - 8}" y="{y + 15}" text-anchor="end">{_e(names.get(r, r))}<title>{_e(r)}'
                    f'</title></text>')
        for j, s in enumerate(summaries):
            x = lw + j * cw
            v = s.value(r, s.primary)
            best = s.best.get(s.primary, math.nan)
            if isnan(v):
                body.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="#eee"><title>{_e(r)} '
                            f'on {_e(s.name)}: not run</title></rect>')
                continue
            rel = v / best if best and best > 0 else 0.0
            rng = s.ranks.get(r)
            fill = _blue(rel ** 2)
            ink = "#fff" if rel ** 2 > 0.55 else "#1f2328"
            tied = s.standing.tied_with_best(r) if s.standing else bool(rng and rng[0] == 1)
            bold = ' font-weight="700"' if tied else ""
            wins = s.standing.wins_text(r) if s.standing else ""
            tip = (f"{r} on {s.name}: {label(s.primary)} {fmt(v)}, rank {rank_text(rng)} of {len(s.retrievers)}"
                   + (" by the mean (no test can separate any pair)" if s.standing and s.standing.design == "mean"
                      else "") + (" (tied with the best)" if tied and rng[0] != rng[1] else "")
                   + (f"; the best is higher in {wins} {s.standing.unit}s" if wins else ""))
            body.append(f'<g><title>{_e(tip)}</title><rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                        f'fill="{fill}"/><text x="{x + cw / 2 - 1:.0f}" y="{y + 15}" text-anchor="middle" '
                        f'fill="{ink}"{bold}>{fmt(v)} · #{_e(rank_text(rng))}</text></g>')
    return _svg(w, h, body, f"{label(metric)} heatmap: retrievers × datasets")


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """Round tick values from ``lo`` to ``hi`` (steps of 1, 2, 2.5 or 5 × a power of ten; about ``n`` of them)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    k = math.ceil(lo / step - 1e-9)
    out = []
    while k * step <= hi + 1e-9:
        out.append(round(k * step, 10))
        k += 1
    return out


def harm_svg(summaries: list[DatasetSummary], names: dict[str, str]) -> str | None:
    harms = harm_measures(summaries)
    panels = [(s, m) for s in summaries for m in harms
              if any(not isnan(s.value(r, m)) for r in s.retrievers)]
    if not panels:
        return None
    pw, ph, ml, mb, mt = 300, 230, 44, 34, 26
    per_row = 4
    rows = math.ceil(len(panels) / per_row)
    w, h = pw * min(per_row, len(panels)) + 10, ph * rows + 10
    body = []
    for k, (s, m) in enumerate(panels):
        ox, oy = (k % per_row) * pw, (k // per_row) * ph
        x0, x1, y0, y1 = ox + ml, ox + pw - 14, oy + ph - mb, oy + mt
        pts = [(r, s.value(r, m), s.value(r, s.primary)) for r in s.retrievers]
        pts = [p for p in pts if not isnan(p[1]) and not isnan(p[2])]
        xmax = max([p[1] for p in pts] + [0.01])
        ymax = max([p[2] for p in pts] + [0.01])
        xmax, ymax = math.ceil(xmax * 20) / 20, math.ceil(ymax * 10) / 10

        def sx(v, x0=x0, x1=x1, xmax=xmax):
            return x0 + (x1 - x0) * v / xmax

        def sy(v, y0=y0, y1=y1, ymax=ymax):
            return y0 - (y0 - y1) * v / ymax
        body.append(f'<text x="{ox + ml}" y="{oy + 15}" font-weight="600">{_e(s.name)}: {_e(label(s.primary))} '
                    f'vs {_e(catalogue.label(m))}</text>')
        body.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="#fafbfc" stroke="#d1d9e0"/>')
        for t in _ticks(0, xmax):
            body.append(f'<text x="{sx(t):.0f}" y="{y0 + 14}" text-anchor="middle" font-size="10" fill="#59636e">'
                        f'{fmt_pct(t, 0)}</text>')
        for t in _ticks(0, ymax):
            body.append(f'<text x="{x0 - 4}" y="{sy(t) + 3:.0f}" text-anchor="end" font-size="10" fill="#59636e">'
                        f'{t:.2f}</text>')
        body.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{y0 + 28}" text-anchor="middle" font-size="10" '
                    f'fill="#59636e">{_e(catalogue.label(m))} → worse</text>')
        # the best few by quality and the worst few by harm carry a label; every point has its name on hover
        labelled = {p[0] for p in sorted(pts, key=lambda p: -p[2])[:2]} | \
                   {p[0] for p in sorted(pts, key=lambda p: -p[1])[:2] if p[1] > 0}
        for r, hv, q in sorted(pts, key=lambda p: p[0]):
            colour = "#cf222e" if hv > 0 else "#1a7f37"
            body.append(f'<circle cx="{sx(hv):.1f}" cy="{sy(q):.1f}" r="4" fill="{colour}" fill-opacity="0.75">'
                        f'<title>{_e(r)}: {_e(label(s.primary))} {fmt(q)}, {_e(catalogue.label(m))} '
                        f'{fmt_pct(hv)}</title></circle>')
            if r in labelled:
                anchor = "end" if sx(hv) > (x0 + x1) / 2 else "start"
                dx = -6 if anchor == "end" else 6
                body.append(f'<text x="{sx(hv) + dx:.0f}" y="{sy(q) - 5:.0f}" text-anchor="{anchor}" '
                            f'font-size="10">{_e(names.get(r, r))}<title>{_e(r)}</title></text>')
    return _svg(w, h, body, "quality against harm, one point per retriever")


def fix_arrows_svg(summaries: list[DatasetSummary], names: dict[str, str]) -> str | None:
    """As shipped → fixed, per dataset: each fixed sibling one row under its as-shipped preset."""
    blocks = [(s, s.fixed) for s in summaries if s.fixed]
    if not blocks:
        return None
    lw, pw, rh = 200, 420, 18
    ncol = min(len(blocks), 2)
    heights = []
    for s, fixed in blocks:
        heights.append(34 + rh * (len(fixed) + len({fp.shipped for fp in fixed})) + 26)
    rows = math.ceil(len(blocks) / ncol)
    row_h = [max(heights[r * ncol:(r + 1) * ncol]) for r in range(rows)]
    w = (lw + pw) * ncol + 10
    h = sum(row_h) + 10
    body = []
    for k, (s, fixed) in enumerate(blocks):
        ox = (k % ncol) * (lw + pw)
        oy = sum(row_h[:k // ncol])
        p = s.primary
        vals = [s.value(fp.shipped, p) for fp in fixed] + [s.value(fp.fixed, p) for fp in fixed]
        vmax = max([v for v in vals if not isnan(v)] + [0.01])
        vmax = math.ceil(vmax * 10) / 10
        x0, x1 = ox + lw, ox + lw + pw - 24

        def sx(v, x0=x0, x1=x1, vmax=vmax):
            return x0 + (x1 - x0) * v / vmax
        body.append(f'<text x="{ox + 8}" y="{oy + 16}" font-weight="600">{_e(s.name)}: {_e(label(p))}, as shipped '
                    f'● → fixed ▶</text>')
        y = oy + 34
        axis_top = y - 6
        for shipped in dict.fromkeys(fp.shipped for fp in fixed):
            v0 = s.value(shipped, p)
            body.append(f'<text x="{ox + 8}" y="{y + 4}" font-weight="600">{_e(names.get(shipped, shipped))}'
                        f'<title>{_e(shipped)} (as shipped): {fmt(v0)}</title></text>')
            y += rh
            for fp in (f for f in fixed if f.shipped == shipped):
                v1 = s.value(fp.fixed, p)
                res = fp.results.get(p)
                sig = res is not None and res.significant()
                colour = ("#1a7f37" if res.delta > 0 else "#cf222e") if sig else "#8c959f"
                tip = (f"{fp.fixed} vs as shipped {shipped}: {fmt(v0)} → {fmt(v1)}"
                       + (f" ({fmt_delta(res.delta)}, p(Holm) {res.p_holm:.3g}, {res.wins} better / {res.losses} "
                          f"worse)" if res is not None else "")
                       + (f" — fixes: {fp.fixes}" if fp.fixes else ""))
                body.append(f'<g><title>{_e(tip)}</title><text x="{ox + 20}" y="{y + 4}" fill="#59636e">'
                            f'{_e(_sibling(fp.fixed, shipped, names))}</text>')
                if not isnan(v0):
                    body.append(f'<circle cx="{sx(v0):.1f}" cy="{y}" r="3.5" fill="#59636e"/>')
                if not isnan(v0) and not isnan(v1) and abs(sx(v1) - sx(v0)) >= 1:
                    d = 1 if v1 > v0 else -1
                    tip_x = sx(v1)
                    body.append(f'<line x1="{sx(v0):.1f}" y1="{y}" x2="{tip_x - 6 * d:.1f}" y2="{y}" '
                                f'stroke="{colour}" stroke-width="2.5"/>'
                                f'<path d="M{tip_x:.1f},{y} L{tip_x - 7 * d:.1f},{y - 4.5} L{tip_x - 7 * d:.1f},'
                                f'{y + 4.5} Z" fill="{colour}"/>')
                body.append("</g>")
                y += rh
        for t in _ticks(0, vmax):
            body.append(f'<line x1="{sx(t):.1f}" y1="{axis_top}" x2="{sx(t):.1f}" y2="{y - 8}" stroke="#d1d9e0" '
                        f'stroke-dasharray="2,3"/><text x="{sx(t):.1f}" y="{y + 4}" text-anchor="middle" '
                        f'font-size="10" fill="#59636e">{t:.2f}</text>')
    return _svg(w, h, body, "as shipped → fixed, per seed system")


def _sibling(fixed: str, shipped: str, names: dict[str, str]) -> str:
    """A fixed sibling's name under its as-shipped preset's heading: only what it adds to that name."""
    if fixed.startswith(shipped + "_") and len(fixed) > len(shipped) + 1:
        rest = fixed[len(shipped) + 1:].replace("_", " ")
        return rest if len(rest) <= SHORT else rest[:SHORT - 1].rstrip() + "…"
    return names.get(fixed, fixed)


def split_findings(findings: list[str], shown: int = FINDINGS_SHOWN) -> tuple[list[str], list[str]]:
    """(the first ``shown`` finding lines, the rest): harms and the headline come first in the list already."""
    return findings[:shown], findings[shown:]
