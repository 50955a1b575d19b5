"""The text and Markdown forms of a live system's agreement with its preset (:mod:`evalkit.workflows.agree`).

Pure functions over the ``Agreement`` result, which renders itself through them (``ag.to_text()``); this module
never imports the workflow.
"""
from __future__ import annotations


def render_text(ag) -> str:
    """The terminal table: one row per preset configuration, then the causes of every disagreement."""
    lines = [f"{ag.system} (live) vs {ag.preset} on {ag.dataset}: {len(ag.queries)} queries, top {ag.k}, "
             f"as-of visibility {ag.protocol}", "",
             f"{'preset configuration':<58} {'identical':>9} {'same set':>8} {'top-1':>6} {'|Δscore|':>9} "
             f"{'nDCG@10 live':>12} {'preset':>7} {'|Δ|':>6}"]
    for r in ag.rows():
        lines.append(f"{r['config']:<58} {r['identical']:>9} {r['same_set']:>8} {r['same_top1']:>6} "
                     f"{r['mean_abs_dscore']:>9.5f} {r['ndcg@10_live']:>12.4f} {r['ndcg@10_preset']:>7.4f} "
                     f"{r['ndcg@10_mean_abs_diff']:>6.4f}")
    lines += ["", f"why the {len(ag.causes)} queries that differ under the preset as prescribed differ "
                  f"(the smallest set of matching settings that makes the lists identical):"]
    for cause, qs in ag.cause_table():
        lines.append(f"  {cause:<56} {len(qs):>3}: {', '.join(sorted(qs))}")
    return "\n".join(lines)


def render_markdown(ag) -> str:
    """agreement.md: the table with recall, the settings per factor, and every disagreement explained."""
    rows = ag.rows()
    out = [f"# {ag.system} (live) vs preset `{ag.preset}` — {ag.dataset}", "",
           f"{len(ag.queries)} queries, top {ag.k}, as-of visibility `{ag.protocol}`. Settings per factor: "
           + "; ".join(f"`{f}`: {v['prescribed']} → {v['matching']}" for f, v in ag.settings.items()) + ".",
           "", "| preset configuration | identical lists | same set | same top-1 | mean \\|Δscore\\| | "
               "nDCG@10 live | nDCG@10 preset | mean \\|ΔnDCG@10\\| | R@10 live | R@10 preset |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['config']} | {r['identical']}/{r['queries']} | {r['same_set']} | {r['same_top1']} | "
                   f"{r['mean_abs_dscore']:.5f} | {r['ndcg@10_live']:.4f} | {r['ndcg@10_preset']:.4f} | "
                   f"{r['ndcg@10_mean_abs_diff']:.4f} | {r['recall@10_live']:.4f} | {r['recall@10_preset']:.4f} |")
    out += ["", "## Every disagreement of the preset as prescribed, explained", "",
            "| cause (smallest set of matching settings that makes the list identical) | queries | ids |",
            "|---|---:|---|"]
    for cause, qs in ag.cause_table():
        out.append(f"| {cause} | {len(qs)} | {', '.join(sorted(qs))} |")
    return "\n".join(out) + "\n"
