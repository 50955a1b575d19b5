"""The report's tables, built once from a DatasetSummary and rendered by both markdown.py and html.py."""
from __future__ import annotations

import math

import numpy as np

from evalkit.measures import catalogue, stats
from evalkit.report import answers as answer_report
from evalkit.report import plots
from evalkit.report.analysis import (
    BAR_METRICS,
    RECALL_KS,
    DatasetSummary,
    budget_limits,
    category_matrix,
    label,
    worst_stage,
)
from evalkit.report.findings import underpowered_text
from evalkit.report.format import (
    fmt,
    fmt_ci_holm,
    fmt_count,
    fmt_delta,
    fmt_ms,
    fmt_p_cell,
    fmt_pct,
    isnan,
)
from evalkit.report.tables import Cell, Table

#: a bucket with fewer scored queries than this carries a caution mark: its mean is a handful of queries
SMALL_N = 10
SMALL_MARK = " ⚠ few"
from evalkit.runfolder.view import RunData
from retrievers.index.shared import describe_representation
from retrievers.index.visibility import describe

WTL_HELP = "queries where the retriever wins / ties / loses against the reference"
CI_HOLM_HELP = ("interval of the mean per-query difference that the paired sign-flip test does not reject, at the "
                "level Holm decided this row at (1 − α·p/p_Holm): it excludes 0 exactly when the row is marked "
                "▲ / ▼; its level is in the cell's tooltip")


def shown(s: DatasetSummary, r: str) -> str:
    """A retriever's name in a table, with "(5 of 6 queries)" when it was scored on fewer queries than the others
    (a run file with --run-file-missing skip): every table then says over what its row is a mean."""
    n = s.scored_by.get(r, s.n_scored)
    return f"{r} ({n:,} of {s.n_scored:,} queries)" if n and n < s.n_scored else r


def _ncell(text: str, best: bool = False, mark: str = "", title: str | None = None) -> Cell:
    return Cell(text, best=best, mark=mark, num=True, title=title)


def leaderboard(s: DatasetSummary, with_injected: bool = True) -> Table:
    """Sorted by the primary metric; best per column in bold; marks vs the reference; Δ, CI, p, W/T/L."""
    metrics = list(s.quality)
    if with_injected and any("injected_ndcg@10" in v for v in s.means.values()):
        metrics.append("injected_ndcg@10")
    p = s.primary
    ref = s.reference
    header = ["#", "retriever"] + [label(m) for m in metrics]
    if ref:
        header += [f"Δ {label(p)} vs {ref}", "CI (Holm)", "p (Holm)", "W/T/L"]
    st = s.standing
    extra = _instead_columns(s)
    header += [h for h, _ in extra]
    t = Table(header, header_help=[None, None] + [catalogue.tip(m) for m in metrics] +
              ([None, CI_HOLM_HELP, "randomisation test, Holm-adjusted", WTL_HELP] if ref else []) +
              [tip for _, tip in extra])
    varies = {m: _varies([s.value(r, m) for r in s.retrievers]) for m in metrics}
    flagged = {w.get("retriever") for w in s.warnings if w.get("retriever")}
    for i, r in enumerate(s.retrievers, start=1):
        note = " ⚠" if r in flagged else ""
        cells: list = [_ncell(stats.rank_text(s.ranks.get(r)) if s.ranks else str(i)),
                       Cell(shown(s, r) + (" (reference)" if r == ref else "") + note, num=False,
                            title="; ".join(w["text"] for w in s.warnings if w.get("retriever") == r) or None)]
        for m in metrics:
            v = s.value(r, m)
            res = s.vs_ref.get((r, m))
            tip = None
            if res is not None:
                tip = f"{fmt_delta(res.delta)} vs {ref}, {stats.format_p(res.p_holm)} (Holm)"
            cells.append(_ncell(fmt(v), best=varies[m] and not isnan(v) and v >= s.best.get(m, math.inf) - 1e-12,
                              mark=res.mark() if res else "", title=tip))
        if ref:
            res = s.vs_ref.get((r, p))
            if r == ref or res is None:
                cells += [_ncell("–" if r != ref else "ref"), _ncell(""), _ncell(""), _ncell("")]
            else:
                cells += [_ncell(fmt_delta(res.delta)), _ncell(fmt_ci_holm(res.ci_holm_low, res.ci_holm_high)),
                          _ncell(fmt_p_cell(res.p_holm)),
                          _ncell(f"{res.wins}/{res.ties}/{res.losses}")]
        if extra:
            cells += _instead_cells(st, r)
        t.rows.append(cells)
        if r == ref:
            t.highlight_rows.add(i - 1)
    if any(not isnan(s.chance.get(m, math.nan)) for m in metrics):  # a random ranking, for scale
        t.add(_ncell(""), Cell("chance (random ranking)", num=False),
              *[_ncell(fmt(s.chance.get(m, math.nan))) for m in metrics],
              *([_ncell("")] * ((4 if ref else 0) + len(extra))))
    return t


def _instead_columns(s: DatasetSummary) -> list[tuple[str, str]]:
    """The leaderboard's columns of what the data say when no clustered test can separate any pair
    (:attr:`evalkit.measures.stats.Standing.design` ``"mean"``): (header, tooltip)."""
    st = s.standing
    if not st or st.design != "mean":
        return []
    out = []
    if st.cluster_wins:
        out.append((f"{st.best} higher in ({st.unit}s)",
                    f"{st.unit}s in which the best by the mean, {st.best}, has the higher mean {label(s.primary)} "
                    f"than this retriever (a count, not a test)"))
    if st.per_question:
        out.append((f"per question, not clustered: Δ vs {st.best}, p (Holm)",
                    f"paired randomisation test over the individual questions, Holm over the {len(st.per_question)} "
                    f"comparisons with the best; it treats questions of one {st.unit} as independent, which they "
                    f"are not — what the questions suggest, not a test of this design"))
    return out


def _instead_cells(st, r: str) -> list[Cell]:
    out = []
    if st.cluster_wins:
        out.append(_ncell(st.wins_text(r) if r != st.best else "best"))
    if st.per_question:
        res = st.per_question.get(r)
        out.append(_ncell("" if res is None else f"{fmt_delta(res.delta)}, {fmt_p_cell(res.p_holm)}",
                          title=None if res is None else f"per question (not clustered): {res.wins}/{res.ties}/"
                                                         f"{res.losses} questions won / tied / lost against "
                                                         f"{st.best}"))
    return out


def fixed_table(s: DatasetSummary) -> Table | None:
    if not s.fixed:
        return None
    t = Table(["as shipped", "fixed", "metric", "shipped", "fixed value", "Δ", "CI (Holm)", "p (Holm)", "W/T/L"],
              header_help=[None, None, None, None, None, "fixed − shipped", CI_HOLM_HELP,
                           "randomisation test, Holm over all fixed pairs × metrics", "queries better / same / worse"])
    for fp in s.fixed:
        for m, res in fp.results.items():
            t.rows.append([Cell(fp.shipped, num=False), Cell(fp.fixed, num=False, title=fp.fixes or None),
                           Cell(label(m), num=False), _ncell(fmt(res.mean_a)), _ncell(fmt(res.mean_b)),
                           _ncell(fmt_delta(res.delta), mark=res.mark()),
                           _ncell(fmt_ci_holm(res.ci_holm_low, res.ci_holm_high)),
                           _ncell(fmt_p_cell(res.p_holm)),
                           _ncell(f"{res.wins}/{res.ties}/{res.losses}")])
    return t


def fixes_list(s: DatasetSummary) -> list[tuple[str, str]]:
    return [(fp.fixed, fp.fixes) for fp in s.fixed if fp.fixes]


def breakdown_table(run: RunData, s: DatasetSummary, breakdown: str) -> Table | None:
    data = category_matrix(run, s, breakdown)
    if data is None:
        return None
    rows, cols, mat, counts = data
    t = Table(["retriever"] + [f"{c} (n={n}{SMALL_MARK if n < SMALL_N else ''})" for c, n in zip(cols, counts)])
    col_best = [np.nanmax(mat[:, j]) if np.isfinite(mat[:, j]).any() else math.nan for j in range(len(cols))]
    varies = [_varies(list(mat[:, j])) for j in range(len(cols))]
    for i, r in enumerate(rows):
        t.rows.append([Cell(shown(s, r), num=False)] + [
            _ncell(fmt(mat[i, j], 2), best=varies[j] and np.isfinite(mat[i, j]) and mat[i, j] >= col_best[j] - 1e-12)
            for j in range(len(cols))])
    if breakdown == "category":
        mdes = category_mde(run, s, cols)
        few = [not stats.can_reach(n) for n in counts]
        if any(not isnan(v) for v in mdes) or any(few):
            t.add(Cell(f"MDE (α {stats.ALPHA}, power 0.8)" + (f"; too few = under {stats.units_needed()} queries, "
                                                              "no difference can be significant" if any(few) else ""),
                       num=False),
                  *[_ncell("too few" if f else fmt(v, 2)) for v, f in zip(mdes, few)])
    return t


def category_mde(run: RunData, s: DatasetSummary, cats: list[str]) -> list[float]:
    """Per category: the minimum detectable difference in the primary metric at its query count — the median
    over retrievers of :func:`stats.mde` with the sd of their per-query differences to the reference (to the
    best retriever when there is no reference)."""
    ref = s.reference or (s.retrievers[0] if s.retrievers else None)
    if not ref or not run.has_per_query(s.name, s.primary):
        return [math.nan] * len(cats)
    qcat = run.categories(s.name)
    out = []
    for c in cats:
        vals = []
        for r in s.retrievers:
            if r == ref:
                continue
            qs, mat = run.matrix(s.name, s.primary, [ref, r])
            d = np.array([mat[i, 1] - mat[i, 0] for i, q in enumerate(qs) if (qcat.get(q) or "none") == c])
            if len(d) >= 2:
                vals.append(stats.mde(float(d.std(ddof=1)), len(d)))
        vals = [v for v in vals if not isnan(v)]
        out.append(float(np.median(vals)) if vals else math.nan)
    return out


GATE_COLUMNS = [(str(m), "pct" if m.family.unit == "share" else "num") for m in catalogue.measures("report.gates")]


def gates_table(s: DatasetSummary) -> Table | None:
    cols = [(m, kind) for m, kind in GATE_COLUMNS if any(not isnan(s.value(r, m)) for r in s.retrievers)]
    if not cols:
        return None
    n_abs = next((s.value(r, "abstention_queries") for r in s.retrievers
                  if not isnan(s.value(r, "abstention_queries"))), math.nan)
    header = ["retriever"]
    for m, _ in cols:
        h = label(m)
        if m == "correct_abstention" and not isnan(n_abs):
            h += f" (n={int(n_abs)})"
        header.append(h)
    t = Table(header)
    higher_better = {m for m, _ in cols if catalogue.parse(m).higher_is_better}
    best = {m: max((s.value(r, m) for r in s.retrievers if not isnan(s.value(r, m))), default=math.nan)
            for m, _ in cols}
    varies = {m: _varies([s.value(r, m) for r in s.retrievers]) for m, _ in cols}
    for r in s.retrievers:
        row = [Cell(shown(s, r), num=False)]
        for m, kind in cols:
            v = s.value(r, m)
            b = m in higher_better and varies[m] and not isnan(v) and v >= best[m] - 1e-12
            row.append(_ncell(fmt_pct(v) if kind == "pct" else fmt(v), best=b))
        t.rows.append(row)
    return t


HARM_COLUMNS = catalogue.names("harms")


def harms_table(s: DatasetSummary) -> Table | None:
    """Harms per retriever (evalkit.measures.harms): n/a where the dataset declares no labels; a secret leak
    above 0 is marked ⚠. None when no harm applies to this dataset."""
    cols = [m for m in HARM_COLUMNS if any(not isnan(s.value(r, m)) for r in s.retrievers)]
    if not cols:
        return None
    t = Table(["retriever"] + [label(m) for m in HARM_COLUMNS])
    for r in s.retrievers:
        row = [Cell(shown(s, r), num=False)]
        for m in HARM_COLUMNS:
            v = s.value(r, m)
            warn = m == "secret_leak_rate" and not isnan(v) and v > 0
            row.append(_ncell("n/a" if isnan(v) else ("⚠ " if warn else "") + fmt_pct(v)))
        t.rows.append(row)
    return t


def funnel_table(run: RunData, s: DatasetSummary) -> Table | None:
    """Recall funnel per retriever (diagnostics.json): one row per retriever, its steps in order as
    ``step kept%``, the biggest loss in bold."""
    diag = run.diagnostics.get(s.name) or {}
    rows = [(r, diag[r]["funnel"]) for r in s.retrievers if diag.get(r, {}).get("funnel")]
    if not rows:
        return None
    t = Table(["retriever", "K", "candidates", "stages (share of relevant notes kept)", "injected", "biggest loss"])
    for r, f in rows:
        steps = f["steps"]
        w = worst_stage(f)
        mid = " → ".join(f"{step_name(x)} {fmt_pct(x['kept'], 0)}" for x in steps[1:-1])
        t.add(Cell(shown(s, r), num=False), _ncell(str(f["k"])), _ncell(fmt_pct(steps[0]["kept"])),
              Cell(mid, num=False), _ncell(fmt_pct(steps[-1]["kept"])),
              Cell(f"{w[0]} −{fmt_pct(w[2], 0)}" if w else "–", num=False, worst=bool(w)))
    return t


def step_name(step: dict) -> str:
    """A funnel step's label, `` (off)`` appended when the stage is disabled in the preset (its type says so)."""
    return step["step"] + (" (off)" if "(off)" in str(step.get("type", "")) else "")


def threshold_table(run: RunData, s: DatasetSummary) -> Table | None:
    diag = run.diagnostics.get(s.name) or {}
    model = run.manifest.get("embedding_model") or "?"
    t = Table(["retriever", "stage", "as shipped", "quantile of local scores", "metric", "as shipped value",
               "best in range", "at threshold", "embedding model"])
    for r in s.retrievers:
        for th in diag.get(r, {}).get("thresholds", []):
            pts = [p for p in th["points"] if p[2] is not None]
            if not pts:
                continue
            shipped = next((p[2] for p in pts if p[1] is None), math.nan)
            best = max(pts, key=lambda p: p[2])
            t.add(Cell(shown(s, r), num=False), Cell(_threshold_label(th), num=False), _ncell(f"{th['as_shipped']:g}"),
                  _ncell(fmt_pct(th["as_shipped_quantile"], 0)), Cell(th["metric"], num=False), _ncell(fmt(shipped)),
                  _ncell(fmt(best[2])), _ncell(f"{best[0]:.3f}"), Cell(model, num=False))
    return t if t.rows else None


def _threshold_label(th: dict) -> str:
    """'min_score', or 'rerank (min_p)' when the swept parameter is not called threshold."""
    param = th.get("param") or "threshold"
    return th["stage"] if param == "threshold" else f"{th['stage']} ({param})"


def budget_curve_table(run: RunData, s: DatasetSummary) -> Table | None:
    diag = run.diagnostics.get(s.name) or {}
    rows = [(r, diag[r]["budget_curve"]) for r in s.retrievers if diag.get(r, {}).get("budget_curve")]
    if not rows:
        return None
    budgets = [row["budget"] for row in rows[0][1]]
    t = Table(["retriever"] + [f"≤{b:,} tok" for b in budgets] + ["relevant token share @≤1,200",
                                                                 "mean tokens if packed to ≤1,200"])
    for r, curve in rows:
        at = next((c for c in curve if c["budget"] == 1200), curve[-1])
        t.add(Cell(shown(s, r), num=False), *[_ncell(fmt(c["ndcg@10"])) for c in curve],
              _ncell(fmt_pct(at["relevant_token_share"])),
              _ncell(f"{at['mean_tokens']:.0f}" if at["mean_tokens"] is not None else "–"))
    return t


def budget_table(run: RunData, s: DatasetSummary) -> Table | None:
    keys = [k for k in ("chunks", "tokens", "chars") if any(not isnan(s.value(r, f"injected_{k}_mean"))
                                                            for r in s.retrievers)]
    if not keys:
        return None
    unit = {"chunks": "chunks", "tokens": "tokens", "chars": "characters"}
    header = ["retriever"]
    for k in keys:
        header += [f"{unit[k]}: mean", "max"]
    header += ["preset limits"]
    t = Table(header)
    for r in s.retrievers:
        row = [Cell(shown(s, r), num=False)]
        for k in keys:
            mean, mx = s.value(r, f"injected_{k}_mean"), s.value(r, f"injected_{k}_max")
            row += [_ncell(fmt_count(mean)), _ncell("–" if isnan(mx) else f"{mx:,.0f}")]
        lim = budget_limits(run, r)
        row.append(Cell(", ".join(f"{k.removeprefix('max_')} ≤ {v:,}" for k, v in sorted(lim.items())) or "none",
                        num=False))
        t.rows.append(row)
    return t


def latency_table(s: DatasetSummary, latency: dict[str, dict[str, np.ndarray]]) -> Table | None:
    rets = [r for r in s.retrievers if r in latency] + sorted(r for r in latency if r not in s.retrievers)
    if not rets:
        return None
    t = Table(["retriever", "stage", "calls", "p50 ms", "p95 ms", "p99 ms", "mean ms"])
    for r in rets:
        stages = list(latency[r])
        stages = (["total"] if "total" in stages else []) + [x for x in stages if x != "total"]
        for st in stages:
            v = latency[r][st] * 1000.0
            p50, p95, p99 = np.percentile(v, [50, 95, 99])
            t.rows.append([Cell(shown(s, r), num=False), Cell(st, num=False), _ncell(f"{len(v):,}"),
                           _ncell(fmt_ms(p50)), _ncell(fmt_ms(p95)), _ncell(fmt_ms(p99)),
                           _ncell(fmt_ms(float(v.mean())))])
    return t


def _varies(values) -> bool:
    """A 'best' mark only means something when the column is not constant."""
    vals = [v for v in values if not isnan(v) and math.isfinite(v)]
    return len(vals) > 1 and max(vals) - min(vals) > 1e-12


def facts(s: DatasetSummary) -> str:
    """One line: queries, documents, split, hash."""
    info = s.info or {}
    parts = []
    q = info.get("queries")
    if q is not None:
        parts.append(f"{q:,} queries ({s.n_scored:,} scored, i.e. with a relevant note"
                     + (f"; {int(_abst(s))} no-memory" if not isnan(_abst(s)) else "") + ")")
    elif s.n_scored:
        parts.append(f"{s.n_scored:,} scored queries")
    if info.get("documents") is not None:
        unit = info.get("unit") or "doc"
        parts.append(f"{info['documents']:,} documents (unit: {unit})")
    if info.get("split"):
        parts.append(f"split {info['split']}")
    if info.get("hash"):
        parts.append(f"dataset hash {info['hash']}")
    idx = info.get("index") or {}
    if idx.get("backend"):
        h = idx.get("hnsw") or {}
        parts.append(f"vector search {idx['backend']}" + (f" (HNSW ef_search {h['ef_search']})" if h.get("ef_search")
                                                          and idx["backend"] != "exact" else ""))
    if idx.get("representation"):
        parts.append(describe_representation(idx))
    if info.get("as_of_visibility"):
        parts.append(describe(info["as_of_visibility"], why=True))
    if s.clusters and s.clusters[1] >= s.n_scored:
        parts.append(f"one query per {s.clusters[0]} ({s.clusters[1]:,} {s.clusters[0]}s): statistics resample "
                     f"queries, which here is the same as resampling {s.clusters[0]}s")
    elif s.clusters:
        parts.append(f"statistics resample {s.clusters[1]:,} {s.clusters[0]}s (cluster bootstrap and cluster "
                     f"sign-flip test: queries of one {s.clusters[0]} are not independent)")
    else:
        parts.append("statistics resample queries (no clusters declared)")
    return " · ".join(parts)


def _abst(s: DatasetSummary) -> float:
    return next((s.value(r, "abstention_queries") for r in s.retrievers
                 if not isnan(s.value(r, "abstention_queries"))), math.nan)


def denominator(s: DatasetSummary) -> str:
    """What the headline numbers are means over: "nDCG@10 over 182 judged of 210 test queries; 28 no-memory
    queries (no relevant note) measured by abstention accuracy", plus any retriever scored on fewer queries."""
    info = s.info or {}
    total, split = info.get("queries"), info.get("split")
    of = f" of {total:,} {split + ' ' if split else ''}queries" if total else " queries"
    text = f"{label(s.primary)} and every ranking measure over {s.n_scored:,} judged{of}"
    n_abs = next((s.value(r, "abstention_queries") for r in s.retrievers
                  if not isnan(s.value(r, "abstention_queries"))), math.nan)
    if not isnan(n_abs) and n_abs:
        text += (f"; {int(n_abs):,} no-memory queries (no relevant note) measured by abstention accuracy, not by "
                 f"{label(s.primary)}")
    elif total and total > s.n_scored:
        text += f"; {total - s.n_scored:,} without a relevant note are not in these means"
    fewer = {r: n for r, n in s.scored_by.items() if n and n < s.n_scored}
    if fewer:
        text += "; " + ", ".join(f"{r} over {n:,} (the queries its run file answers)" for r, n in fewer.items())
    return text


def headline_notes(s: DatasetSummary) -> list[tuple[str, str]]:
    """What the reader must know before the leaderboard, as (kind, text): ``("denominator", …)`` — what the
    headline numbers are means over; ``("warn", …)`` — the dataset is underpowered, and every warning the run
    recorded about the dataset itself (qrels rows dropped). Warnings about one retriever (a run file's unknown ids,
    a degenerate stage) are shown beside it in the leaderboard instead (⚠ and the list under the table)."""
    out = [("denominator", "Headline denominator: " + denominator(s) + ".")]
    underpowered = underpowered_text(s)
    if underpowered:
        out.append(("warn", f"{s.name} is {underpowered}."))
    if s.standing and s.standing.note:
        out.append(("warn", f"{s.standing.note}."))
    out += [("warn", w["text"]) for w in s.warnings if not w.get("retriever")]
    return out


def legend(s: DatasetSummary) -> str:
    ref = s.reference
    if not ref:
        return f"Sorted by {label(s.primary)}. Bold = best in column."
    why = {"baseline": "the baseline", "chosen baseline": "the chosen baseline"}.get(s.reference_why,
                                                                                  s.reference_why)
    return (f"Sorted by {label(s.primary)}; bold = best in column. ▲ / ▼ = significantly better / worse than "
            f"{ref} ({why}) on that metric (paired randomisation test, Holm-adjusted p < {stats.ALPHA} over all "
            f"retrievers × metrics). Δ, CI, p and W/T/L compare each retriever's {label(s.primary)} with {ref} "
            f"query by query. {rank_legend(s)}"
            + (f". Minimum detectable Δ {label(s.primary)} at these {_mde_units(s)}: "
               f"{stats.mde_text(s.mde, s.mde_units, unit=_unit_word(s))}"
               + (f" (α {stats.ALPHA}, power 0.8, median sd of the paired differences; for a difference spread over "
                  f"the {_unit_word(s)}: one carried by fewer than {stats.units_needed()} differing {_unit_word(s)} "
                  f"cannot reach α however large: W/T/L says how many differ)"
                  if stats.can_reach(s.mde_units) else "") if s.mde_units and (not isnan(s.mde)
                                                                              or not stats.can_reach(s.mde_units))
               else "")
            + (f"; tests and intervals resample {s.clusters[0]}s." if s.clusters and s.clusters[1] < s.n_scored
               else ".") + _saturation_note(s))


def rank_legend(s: DatasetSummary) -> str:
    """What the leaderboard's # means, by the family its tie groups were decided over
    (:attr:`evalkit.measures.stats.Standing.design`)."""
    st = s.standing
    head = f"# = rank range on {label(s.primary)}: retrievers not significantly different share a range"
    if st is None or st.design == "pairs":
        return head + " (\"1–3\" = tied with the best; every pair tested, Holm over all pairs)"
    if st.design == "best":
        return head + (f" (each tested against the best by the mean, {st.best}, Holm over those {st.comparisons}: "
                       f"\"1–3\" = not distinguishable from it, \"2–{len(st.ranks)}\" = significantly worse than it, "
                       f"its place among the rest not tested)")
    return (f"# = rank by the mean {label(s.primary)}: no test of this design can separate any pair (see the note "
            f"above the table), so no rank range is claimed")


def _unit_word(s: DatasetSummary) -> str:
    return f"{s.clusters[0]}s" if s.clusters and s.mde_units < s.n_scored else "queries"


def _mde_units(s: DatasetSummary) -> str:
    if s.clusters and s.mde_units < s.n_scored:
        return f"{s.mde_units:,} {s.clusters[0]}s (means of their {s.n_scored:,} queries)"
    return f"{s.n_scored:,} queries"


def _saturation_note(s: DatasetSummary) -> str:
    if not s.saturated:
        return ""
    return (f" Saturated, left out of the table and the findings: {', '.join(label(m) for m in s.saturated)} (cut-off "
            f"at or above the {s.visible_median:g} documents a query can retrieve, median): any system that returns "
            f"its whole pool scores the maximum.")


# -- the plots report.html draws beside a section's table (base64 PNG, or None when there is nothing to draw) -----
def bars_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Means of the headline measures with their 95% bootstrap intervals."""
    return plots.metric_bars(s.retrievers, [(m, label(m)) for m in BAR_METRICS], s.means, s.mean_ci, s.reference)


def recall_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Recall@k as k grows, one line per retriever."""
    return plots.recall_curves(s.retrievers, RECALL_KS, s.means, s.reference)


def breakdown_plot(run: RunData, s: DatasetSummary, breakdown: str, head: str) -> str | None:
    """The primary measure per retriever × category (or evidence age) as a heatmap."""
    data = category_matrix(run, s, breakdown)
    if data is None:
        return None
    rows, cols, mat, counts = data
    return plots.heatmap(rows, cols, mat, counts, f"{label(s.primary)} {head}", label(s.primary))


def budget_curve_plot(run: RunData, s: DatasetSummary) -> str | None:
    """nDCG@10 of each packed list against the mean tokens it injects (diagnostics.json)."""
    diag = run.diagnostics.get(s.name) or {}
    if not diag:
        return None
    curves = {r: [(c["mean_tokens"], c["ndcg@10"]) for c in diag[r].get("budget_curve", [])
                  if c["mean_tokens"] is not None and c["ndcg@10"] is not None] for r in s.retrievers if r in diag}
    return plots.budget_curves(curves, s.reference, "nDCG@10")


def funnel_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Each retriever's recall funnel over its steps (diagnostics.json)."""
    diag = run.diagnostics.get(s.name) or {}
    return plots.funnels(s.retrievers, diag) if diag else None


def threshold_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Each score floor re-run at quantiles of the scores that reach it (diagnostics.json)."""
    diag = run.diagnostics.get(s.name) or {}
    if not diag:
        return None
    panels = [(r, t) for r in s.retrievers for t in diag.get(r, {}).get("thresholds", [])]
    return plots.threshold_curves(panels, run.manifest.get("embedding_model") or "?")


def injected_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Per retriever, a histogram over queries of the chunks / tokens / characters injected, with its limit."""
    budgets = {r: run.budgets(s.name, r) for r in s.retrievers}
    return plots.budget_histograms(s.retrievers, budgets, {r: budget_limits(run, r) for r in s.retrievers})


def latency_section_table(run: RunData, s: DatasetSummary) -> Table | None:
    """:func:`latency_table` of the run's latency measurements of this dataset (None without any)."""
    if not (run.latency and s.name in run.latency):
        return None
    return latency_table(s, run.latency[s.name])


def latency_plot(run: RunData, s: DatasetSummary) -> str | None:
    """Wall time per query and stage (median, quartiles, 5th-95th percentile) on a log axis."""
    if not (run.latency and s.name in run.latency):
        return None
    lat = run.latency[s.name]
    return plots.latency_ranges(s.retrievers + sorted(r for r in lat if r not in s.retrievers), lat)


# ---- answers (an answer run: `evalkit answer`) ------------------------------------------------------------------

def answers_table(run: RunData, s: DatasetSummary) -> Table | None:
    """One row per answered retriever: the run-level answer measures (accuracy … cost), then the attribution funnel
    (how many questions are correct, reader misses, retrieval misses, judge disputes, faults); None for a run
    without answers. The per-question table is in answers-<dataset>.md."""
    rets = [r for r in run.retrievers(s.name) if not isnan(run.mean(s.name, r, "answer_correct"))]
    if not rets:
        return None
    keys = [k for k in catalogue.names("answer.table") if any(not isnan(run.mean(s.name, r, k)) for r in rets)]
    funnel = [k for k in answer_report.FUNNEL if any(run.mean(s.name, r, _funnel_key(k)) > 0 for r in rets)]
    t = Table(["retriever"] + [catalogue.label(k) for k in keys] + funnel,
              header_help=[None] + [catalogue.tip(k) for k in keys] + [None] * len(funnel))
    best = {k: max(run.mean(s.name, r, k) for r in rets) for k in ("answer_correct",)}
    for r in rets:
        cells = []
        for k in keys:
            v = run.mean(s.name, r, k)
            text = (fmt_count(v) if k.startswith("answer_tokens") else _whole(v) if k == "judge_flips" else
                    f"{v:.6f}".rstrip("0").rstrip(".") if k == "answer_cost" and not isnan(v) else fmt(v))
            cells.append(_ncell(text, best=k in best and len(rets) > 1 and v == best[k]))
        cells += [_ncell(_whole(run.mean(s.name, r, _funnel_key(k)))) for k in funnel]
        t.add(Cell(r, num=False), *cells)
    return t


def _whole(v: float) -> str:
    """A count of questions: a whole number ("–" when absent)."""
    return "–" if isnan(v) else f"{v:.0f}"


def _funnel_key(k: str) -> str:
    return "answers_" + k.replace(" ", "_")


def answers_plot(run: RunData, s: DatasetSummary) -> str | None:
    """The attribution funnel (one bar per answered retriever) from the run's funnel counts."""
    rets = [r for r in run.retrievers(s.name) if not isnan(run.mean(s.name, r, "answer_correct"))]
    if not rets:
        return None
    counts = {r: {k: int(run.mean(s.name, r, _funnel_key(k)) or 0) for k in answer_report.FUNNEL} for r in rets}
    return plots.png_base64(answer_report.funnel_figure(counts, s.name))
