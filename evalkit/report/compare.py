"""The text, Markdown, HTML, JSON and CSV forms of a comparison of saved runs (:mod:`evalkit.workflows.compare`).

Pure functions over the comparison result (``Comparison``: its ``runs``, ``rows`` of paired results, ``examples``,
``harms``, ``ranking``, ``notes`` and ``alpha``), which renders itself through them (``cmp.to_markdown()`` …); this
module never imports the workflow. Marks, p-value digits and the stated significance level are the comparison's own
``alpha``, never the default.

Usage: ``print(compare(["runs/a", "runs/b"]).to_text())``.
"""
from __future__ import annotations

import csv
import html as h
import io
import json
import math

import numpy as np

from evalkit.measures import stats
from evalkit.report.analysis import label
from evalkit.report.findings import cluster_wins_text
from evalkit.report.format import fmt, fmt_ci_holm, fmt_delta, fmt_p_cell, fmt_pct
from evalkit.report.html import CSS
from evalkit.report.plots import figure_module, png_base64
from evalkit.report.sections import CI_HOLM_HELP
from evalkit.report.tables import Cell, Table, to_html, to_markdown, to_text


def table(cmp) -> Table:
    t = Table(["dataset", "A", "B", "metric", "mean A", "mean B", "Δ (B−A)", "CI (Holm)", "p rand", "p t-test",
               "p Holm", "W/T/L", "d_z"],
              header_help=[None, None, None, None, None, None, None, CI_HOLM_HELP,
                           "paired randomisation test", "paired t-test", "randomisation p, Holm over the table",
                           "queries where B wins / ties / loses", "Cohen's d for paired samples"])
    alpha = cmp.alpha
    for r in cmp.rows:
        res = r.result
        t.rows.append([Cell(r.dataset, num=False), Cell(r.a.label, num=False), Cell(r.b.label, num=False),
                       Cell(label(r.metric), num=False), Cell(fmt(res.mean_a)), Cell(fmt(res.mean_b)),
                       Cell(fmt_delta(res.delta), mark=res.mark(alpha)),
                       Cell(fmt_ci_holm(res.ci_holm_low, res.ci_holm_high)),
                       Cell(fmt_p_cell(res.p_randomization, alpha)), Cell(fmt_p_cell(res.p_ttest, alpha)),
                       Cell(fmt_p_cell(res.p_holm, alpha)),
                       Cell(f"{res.wins}/{res.ties}/{res.losses}"), Cell(fmt(res.effect_size, 2))])
    return t


def ranking_table(cmp) -> Table | None:
    """Tie groups: every compared system of a dataset ranked on each metric, '#' a rank range ("1–3" = not
    significantly different from the best)."""
    if not cmp.ranking:
        return None
    instead = any(st.design == "mean" and st.cluster_wins for st in cmp.standings.values())
    t = Table(["dataset", "metric", "#", "system", "mean"] +
              (["best higher in (clusters)", "per question, not clustered: Δ vs best, p (Holm)"] if instead else []),
              header_help=[None, None, "rank range: 1 + systems significantly better … systems not significantly "
                                       "worse (paired randomisation, Holm over the pairs of this dataset and metric); "
                                       "the rank by the mean where no test can separate any pair",
                           None, None] +
              (["clusters in which the best by the mean scores higher (a count, not a test)",
                "paired randomisation over the individual questions, Holm over the comparisons with the best: it "
                "treats a cluster's questions as independent — what they suggest, not a test of the design"]
               if instead else []))
    for (ds, m), lst in cmp.ranking.items():
        st = cmp.standings.get((ds, m))
        for x, mean, rng in lst:
            row = [Cell(ds, num=False), Cell(label(m), num=False), Cell(stats.rank_text(rng)),
                   Cell(x.label, num=False), Cell(fmt(mean))]
            if instead:
                res = st.per_question.get(x.label) if st else None
                row += [Cell("best" if st and x.label == st.best and st.cluster_wins else
                             (st.wins_text(x.label) if st else "")),
                        Cell("" if res is None else f"{fmt_delta(res.delta)}, {fmt_p_cell(res.p_holm, cmp.alpha)}")]
            t.rows.append(row)
    return t


def standing_notes(cmp) -> list[str]:
    """Per dataset, once: the note of a ranking whose clusters are too few for every pair to reach α
    (:func:`evalkit.measures.stats.standing`); per metric, the clusters the best wins against each."""
    out, said = [], set()
    for (ds, m), st in cmp.standings.items():
        if not st.note:
            continue
        if (ds, st.note) not in said:
            said.add((ds, st.note))
            out.append(f"⚠ {ds}: {st.note}")
        wins = cluster_wins_text(st)
        if wins:
            out.append(f"{ds}, {label(m)} per {st.unit}: {wins}")
    return out


def _ranked_by(cmp, ds: str, m: str) -> str:
    """The family the tie groups were decided over: "pairs", "best" (each vs the best) or "mean" (no test)."""
    st = cmp.standings.get((ds, m))
    return st.design if st else "pairs"


def _wins_json(cmp, ds: str, m: str, name: str) -> list[int] | None:
    """[clusters the best is higher in, tied, lower] against ``name``, or None (no clusters, or the best itself)."""
    st = cmp.standings.get((ds, m))
    return list(st.cluster_wins[name]) if st and name in st.cluster_wins else None


def _ranking_head(cmp) -> str:
    if any(st.design == "mean" for st in cmp.standings.values()):
        return ("# is a rank range (1–3 = not significantly different from the best), or the rank by the mean where "
                "no test can separate any pair (said above)")
    return "# is a rank range: 1–3 = not significantly different from the best"


def _clip(text: str | None, n: int = 140) -> str:
    if not text:
        return "–"
    t = " ".join(str(text).split())
    return t if len(t) <= n else t[: n - 1] + "…"


def _top_text(top) -> str:
    if top is None:
        return "–"
    doc, text, good = top
    flag = "" if good is None else (" ✓ relevant" if good else " ✗ not relevant")
    return f"[{doc}{flag}] {_clip(text, 120)}" if text else f"[{doc}{flag}]"


def method_text(alpha: float) -> str:
    """How the table was computed, at significance level ``alpha`` (the comparison's)."""
    return (f"Δ = B − A per query, paired by query id. p rand = paired randomisation test (sign flips; exact when "
            f"≤ {int(math.log2(stats.N_PERMUTATIONS))} queries differ, else {stats.N_PERMUTATIONS:,} random flips, "
            f"seed {stats.SEED}); p t-test = paired t-test; p Holm = randomisation p adjusted over every row of the "
            f"table; ▲ / ▼ = B significantly better / worse (p Holm < {alpha:g}); CI (Holm) = the interval of "
            f"mean Δ the same sign-flip test does not reject, at the level Holm decided the row at (1 − α·p/p_Holm): "
            f"it excludes 0 exactly when the row is marked ▲ / ▼ (unbounded: too few differing queries for that "
            f"level); W/T/L = queries B wins / ties / loses; d_z = mean(Δ) / sd(Δ).")


def harms_table(cmp) -> Table | None:
    """Harms of every compared system (run-level means; n/a where the dataset has no labels, ⚠ on a leak)."""
    if not cmp.harms:
        return None
    harms = list(cmp.harms[0][1])  # the run-level harm measures, in the catalogue's order
    t = Table(["dataset", "system"] + [label(m) for m in harms])
    for x, v in cmp.harms:
        t.rows.append([Cell(x.dataset, num=False), Cell(x.label, num=False)] + [
            Cell("n/a" if math.isnan(v[m]) else ("⚠ " if m == "secret_leak_rate" and v[m] > 0 else "")
                 + fmt_pct(v[m])) for m in harms])
    return t


def render_text(cmp) -> str:
    out = ["runs: " + ", ".join(f"{r.label} ({r.path})" for r in cmp.runs)]
    ht = harms_table(cmp)
    if ht:
        out += ["", "harms (what reached the prompt that must not):", to_text(ht)]
    if cmp.rows:
        out += ["", to_text(table(cmp)), "",
                f"▲ / ▼ = B significantly better / worse (Holm-adjusted p < {cmp.alpha:g}); CI (Holm) = interval "
                f"of mean Δ at the level Holm decided the row at: it excludes 0 exactly when the row is marked"]
    rt = ranking_table(cmp)
    if rt:
        out += ["", f"ranking with tie groups ({_ranking_head(cmp)}):"] + standing_notes(cmp) + [to_text(rt)]
    for key, exs in _group(cmp.examples).items():
        ds, a, b, m = key
        out += ["", f"{ds}: biggest per-query differences, {b} vs {a} ({label(m)})"]
        for e in exs:
            out.append(f"  {fmt_delta(e.delta)}  {e.query_id}: {_clip(e.query, 90)}")
            out.append(f"          A top: {_clip(_top_text(e.top_a), 110)}")
            out.append(f"          B top: {_clip(_top_text(e.top_b), 110)}")
    out += [f"note: {n}" for n in cmp.notes]
    return "\n".join(out)


def _group(examples: list) -> dict[tuple, list]:
    g: dict[tuple, list] = {}
    for e in examples:
        g.setdefault((e.dataset, e.a, e.b, e.metric), []).append(e)
    return g


def _examples_table(exs: list) -> Table:
    t = Table(["Δ", "query", "A", "B", "A's top document", "B's top document"])
    for e in exs:
        t.rows.append([Cell(fmt_delta(e.delta)), Cell(f"{e.query_id}: {_clip(e.query, 100)}", num=False),
                       Cell(fmt(e.value_a)), Cell(fmt(e.value_b)), Cell(_top_text(e.top_a), num=False),
                       Cell(_top_text(e.top_b), num=False)])
    return t


def render_markdown(cmp) -> str:
    out = ["# evalkit compare", "", "Runs: " + ", ".join(f"`{r.label}` ({r.path})" for r in cmp.runs), ""]
    if cmp.baseline:
        out += [f"Baseline: `{cmp.baseline}`", ""]
    out += [method_text(cmp.alpha), ""]
    ht = harms_table(cmp)
    if ht:
        out += ["## Harms", "", to_markdown(ht), ""]
    if cmp.rows:
        out += [to_markdown(table(cmp)), ""]
    rt = ranking_table(cmp)
    if rt:
        out += ["## Ranking with tie groups", "", _ranking_head(cmp).replace("#", "`#`", 1) + ".", ""]
        out += [f"> {n}" if n.startswith("⚠") else f"- {n}" for n in standing_notes(cmp)]
        out += ["", to_markdown(rt), ""]
    for key, exs in _group(cmp.examples).items():
        ds, a, b, m = key
        out += [f"## {ds}: biggest per-query differences, {b} vs {a} ({label(m)})", "",
                to_markdown(_examples_table(exs)), ""]
    if cmp.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in cmp.notes] + [""]
    return "\n".join(out)


def render_html(cmp) -> str:

    body = ["<h1>evalkit compare</h1>",
            '<p class="meta">Runs: ' + ", ".join(f"<code>{h.escape(r.label)}</code> ({h.escape(str(r.path))})"
                                                 for r in cmp.runs) + "</p>"]
    if cmp.baseline:
        body.append(f'<p class="meta">Baseline: <code>{h.escape(cmp.baseline)}</code></p>')
    body.append(f'<p class="note">{h.escape(method_text(cmp.alpha))}</p>')
    ht = harms_table(cmp)
    if ht:
        body.append(f'<h3>Harms</h3><div class="scroll">{to_html(ht)}</div>')
    if cmp.rows:
        body.append(f'<div class="scroll">{to_html(table(cmp))}</div>')
        img = _forest(cmp)
        if img:
            body.append("<h3>Differences with Holm-adjusted intervals</h3>"
                        f'<img alt="differences" src="data:image/png;base64,{img}">')
    rt = ranking_table(cmp)
    if rt:
        body.append(f"<h3>Ranking with tie groups</h3><p class=\"note\">{h.escape(_ranking_head(cmp))}.</p>"
                    + "".join(f"<p class=\"note\">{h.escape(n)}</p>" for n in standing_notes(cmp))
                    + f"<div class=\"scroll\">{to_html(rt)}</div>")
    for key, exs in _group(cmp.examples).items():
        ds, a, b, m = key
        body.append(f"<h3>{h.escape(ds)}: biggest per-query differences, {h.escape(b)} vs {h.escape(a)} "
                    f"({h.escape(label(m))})</h3>")
        t = _examples_table(exs)
        body.append(f'<div class="scroll">{to_html(t)}</div>')
    if cmp.notes:
        body.append("<h3>Notes</h3><ul>" + "".join(f"<li>{h.escape(n)}</li>" for n in cmp.notes) + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>evalkit compare</title>"
            f"<style>{CSS} td {{ white-space: normal; max-width: 34em; }}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


def _forest(cmp) -> str | None:
    if not cmp.rows or len(cmp.rows) > 80:
        return None
    Figure = figure_module()
    rows = cmp.rows
    fig = Figure(figsize=(9, 0.8 + 0.3 * len(rows)), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(rows))
    d = np.array([r.result.delta for r in rows])
    lo = np.array([r.result.ci_holm_low for r in rows])
    hi = np.array([r.result.ci_holm_high for r in rows])
    lo, hi = np.where(np.isfinite(lo), lo, d), np.where(np.isfinite(hi), hi, d)  # unbounded: no bar (said in text)
    marks = [r.result.mark(cmp.alpha) for r in rows]
    colors = ["#1a7f37" if m == "▲" else "#cf222e" if m == "▼" else "#59636e" for m in marks]
    # a constant difference has a CI equal to the mean up to rounding: clip so the error bars are never negative
    ax.errorbar(d, y, xerr=np.clip(np.vstack([d - lo, hi - d]), 0, None), fmt="none", ecolor="#888", capsize=2)
    ax.scatter(d, y, c=colors, zorder=3, s=18)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, [f"{r.b.label} vs {r.a.label} · {label(r.metric)}"[:70] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("Δ = B − A (mean per-query difference, interval at the Holm-adjusted level)")
    ax.grid(axis="x", alpha=0.3)
    return png_base64(fig)


def render_dict(cmp) -> dict:
    return {
        "runs": [{"label": r.label, "path": str(r.path)} for r in cmp.runs],
        "baseline": cmp.baseline, "metrics": cmp.metrics,
        "method": {"test": "paired randomisation (sign flip)", "permutations": stats.N_PERMUTATIONS,
                   "bootstrap_resamples": stats.N_BOOTSTRAP, "seed": stats.SEED, "correction": "holm",
                   "alpha": cmp.alpha,
                   "intervals": "ci_holm_*: the sign-flip test inverted at level 1 - alpha * p / p_holm (excludes 0 "
                                "exactly when p_holm < alpha; null = unbounded); ci_low / ci_high: unadjusted 95% "
                                "percentile bootstrap"},
        "rows": [{"dataset": r.dataset, "a": r.a.label, "b": r.b.label, "a_run": r.a.run, "b_run": r.b.run,
                  "a_retriever": r.a.retriever, "b_retriever": r.b.retriever, "metric": r.metric,
                  "mark": r.result.mark(cmp.alpha), "only_a": r.only_a, "only_b": r.only_b,
                  **{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                     for k, v in r.result.to_dict().items()}} for r in cmp.rows],
        "examples": [{"dataset": e.dataset, "a": e.a, "b": e.b, "metric": e.metric, "query_id": e.query_id,
                      "query": e.query, "value_a": e.value_a, "value_b": e.value_b, "delta": e.delta,
                      "top_a": list(e.top_a) if e.top_a else None, "top_b": list(e.top_b) if e.top_b else None}
                     for e in cmp.examples],
        "harms": [{"dataset": x.dataset, "system": x.label,
                   **{m: (None if math.isnan(v) else v) for m, v in hv.items()}} for x, hv in cmp.harms],
        "ranking": [{"dataset": ds, "metric": m, "system": x.label, "mean": mean, "rank_best": rng[0],
                     "rank_worst": rng[1], "ranked_by": _ranked_by(cmp, ds, m),
                     "best_higher_in_clusters": _wins_json(cmp, ds, m, x.label)}
                    for (ds, m), lst in cmp.ranking.items() for x, mean, rng in lst],
        "ranking_notes": standing_notes(cmp),
        "notes": cmp.notes}


CSV_FIELDS = ["dataset", "a", "b", "metric", "n", "mean_a", "mean_b", "delta", "ci_low", "ci_high",
              "p_randomization", "p_ttest", "p_holm", "mark", "wins", "ties", "losses", "effect_size",
              "ci_holm_low", "ci_holm_high", "ci_holm_level"]


def render_csv(cmp) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in render_dict(cmp)["rows"]:
        w.writerow(["" if r.get(k) is None else (f"{r[k]:.6f}" if isinstance(r[k], float) else r[k])
                    for k in CSV_FIELDS])
    return buf.getvalue()


def render_json(cmp) -> str:
    """compare.json: :func:`render_dict` as indented JSON."""
    return json.dumps(render_dict(cmp), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
