"""The text, Markdown, CSV and JSON forms of a stage-by-stage ablation (:mod:`evalkit.workflows.ablation`).

Pure functions over the ablation result (``AblationResult``: the preset, the full pipeline's means and latency, one
``StageRow`` per stage), which renders itself through them (``res.to_markdown()`` …); this module never imports the
workflow.

Usage: ``print(run_ablation("openclaw_core_2026_2_26_decay_mmr").to_text())``.
"""
from __future__ import annotations

import csv
import io
import json

import numpy as np

from evalkit.measures.stats import ALPHA
from evalkit.report.format import fmt, fmt_p3, fmt_signed, fmt_value


def render_csv(res) -> str:
    """The records with the dataset and preset in front; floats to 6 decimals, a missing value empty."""
    recs = res.records()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    keys = list(recs[0])
    w.writerow(["dataset", "preset"] + keys)
    for r in recs:
        w.writerow([res.dataset, res.preset] + [fmt_value(r[k], 6, missing="") for k in keys])
    return buf.getvalue()


def render_json(res) -> str:
    return json.dumps({"preset": res.preset, "preset_hash": res.preset_hash, "dataset": res.dataset,
                       "split": res.split, "split_groups": res.split_groups, "queries": res.n_queries, "judged": res.n_judged,
                       "budget": res.budget, "latency": res.latency, "fixed_ms": res.fixed_ms,
                       "rows": res.records()}, indent=1, sort_keys=True, default=_json_default)


def table(res) -> tuple[list[str], list[list[str]], list[bool]]:
    """(header, rows, which columns are numeric) of the ablation table: the full pipeline, then one row per stage."""
    head = ["#", "stage", "type", "off", "nDCG@10", "Δ nDCG@10", "p (Holm)", "W/T/L", "Δ R@10", "Δ inj nDCG@10",
            "p inj (Holm)", "skip", "budget ok", "changed", "stage p50 ms", "stage p95 ms", "e2e p50 ms",
            "Δ e2e p50 ms"]
    num = [True, False, False, False] + [True] * (len(head) - 4)
    f = res.full
    rows = [["", "(full)", res.preset, "", fmt(f.get("ndcg@10"), missing="-"), "", "", "", "", "", "",
             fmt(f.get("skip_rate"), missing="-"), fmt(f.get("budget_compliance"), missing="-"), "", "", "",
             fmt(res.full_ms.get("p50_ms"), 2, missing=""), ""]]
    for r in res.rows:
        stage_ms = [fmt(r.stage_ms.get("p50_ms"), 2, missing=""), fmt(r.stage_ms.get("p95_ms"), 2, missing="")]
        if not r.evaluated:
            off = f"required: {r.reason}" if r.required else r.status
            rows.append([str(r.position), r.label, r.type, off] + [""] * 10 + stage_ms + ["", ""])
            continue
        mark = ("▼" if r.delta["ndcg@10"] < 0 else "▲") if r.significant("ndcg@10") else ""
        mark_i = ("▼" if r.delta["injected_ndcg@10"] < 0 else "▲") if r.significant("injected_ndcg@10") else ""
        w = r.wtl or (0, 0, 0)
        d_ndcg = fmt_signed(r.delta.get("ndcg@10"), missing="-", zero="0")
        d_recall = fmt_signed(r.delta.get("recall@10"), missing="-", zero="0")
        d_injected = fmt_signed(r.delta.get("injected_ndcg@10"), missing="-", zero="0")
        rows.append([str(r.position), r.label, r.type, r.how, fmt(r.metrics.get("ndcg@10"), missing="-"),
                     d_ndcg + (" " + mark if mark else ""), fmt_p3(r.p_holm.get("ndcg@10")),
                     f"{w[0]}/{w[1]}/{w[2]}", d_recall, d_injected + (" " + mark_i if mark_i else ""),
                     fmt_p3(r.p_holm.get("injected_ndcg@10")), fmt(r.metrics.get("skip_rate"), missing="-"),
                     fmt(r.metrics.get("budget_compliance"), missing="-"), str(r.changed), *stage_ms,
                     fmt(r.e2e_ms.get("p50_ms"), 2, missing=""), fmt_signed(r.delta_e2e_p50_ms, 2, missing="")])
    return head, rows, num


def caption(res) -> str:
    lat = (f"latency: {res.latency['queries']} queries × {res.latency['repeats']} repeat(s), "
           f"{res.latency['threads']} thread, interleaved, warm-up {res.latency['warmup']}, query embedding excluded"
           if res.latency else "latency: not measured")
    budget = ", ".join(f"{k} {v}" for k, v in res.budget.items()) or "none declared"
    sg = res.split_groups
    groups = (f"split groups ({sg['rule']}): {sg['groups']}, {sg['shared_groups']} shared with the dataset's "
              f"other {sg['other_queries']} queries; " if sg else "")
    return (f"Ablation of {res.preset} ({res.preset_hash}) on {res.dataset}"
            f"{' / ' + res.split if res.split else ''}: {res.n_queries} queries ({res.n_judged} judged); "
            f"{groups}budget checked against: {budget}; {lat}.")


def legend(res) -> str:
    return ("Δ = variant − full (negative Δ nDCG: the stage helps). p: paired sign-flip randomisation test on "
            "per-query values, Holm-adjusted over all variants × {nDCG@10, injected nDCG@10}; ▼/▲ = significant "
            f"at α = {ALPHA}. W/T/L: queries where the variant wins / ties / loses on nDCG@10. changed: queries "
            "whose top 10 or injected list differ. stage p50/p95: that stage's own cost in the full pipeline; "
            "e2e p50: the variant's end-to-end p50 (query embedding excluded). Δ e2e p50: what turning the stage off "
            "changes end to end: median over queries of the paired difference in post-arm time (arms are "
            "identical in every variant, so their machine noise is left out; each query's fastest round).")


def render_markdown(res) -> str:
    head, rows, num = table(res)
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    lines = [f"### {res.preset} on {res.dataset}", "", caption(res), "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---:" if n else "---" for n in num) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    if res.fixed_ms:
        lines += ["", "Costs outside the stages (not ablated): " + ", ".join(
            f"{k} p50 {v['p50_ms']:.2f} ms" for k, v in res.fixed_ms.items()) + "."]
    lines += ["", legend(res), ""]
    return "\n".join(lines)


def render_text(res) -> str:
    head, rows, num = table(res)
    keep = [i for i in range(len(head)) if i != 2]  # the stage type is in the Markdown/CSV; keep the terminal narrow
    head = [head[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    num = [num[i] for i in keep]
    widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    widths = [min(w, 44) for w in widths]
    cut = lambda s, w: s if len(s) <= w else s[:w - 1] + "…"  # noqa: E731
    line = lambda cells: "  ".join(cut(c, w).rjust(w) if n else cut(c, w).ljust(w)  # noqa: E731
                                  for c, w, n in zip(cells, widths, num))
    out = [caption(res), line(head), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    if res.fixed_ms:
        out.append("outside the stages: " + ", ".join(f"{k} {v['p50_ms']:.2f} ms" for k, v in
                                                      res.fixed_ms.items()))
    return "\n".join(out)


def _json_default(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return str(v)
