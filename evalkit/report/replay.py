"""The text and Markdown forms of a query-log replay (:mod:`evalkit.workflows.replay`).

Pure functions over the replay result (``ReplayResult``: the replay set, per-retriever means, production's own
means, pairwise overlap), which renders itself through them (``result.to_text()``, ``result.to_markdown()``); this
module never imports the workflow.
"""
from __future__ import annotations

import re

from evalkit.measures import catalogue
from evalkit.measures.overlap import RBO_P
from evalkit.report.format import fmt, sort_value
from retrievers.index.visibility import describe
from retrievers.stages.helpers.feedback import CITATION_RULE


def skipped_summary(log) -> str:
    """``reason: count`` of a log's skipped lines, most frequent first."""
    s = log.summary()["skipped_by_reason"]
    return ", ".join(f"{r}: {n}" for r, n in sorted(s.items(), key=lambda kv: (-kv[1], kv[0])))


def table_rows(result) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the retriever table: the catalogue's replay columns, best pseudo-nDCG first."""
    k = result.k
    cols = [(str(m), m.short, m.family.digits) for m in catalogue.measures("replay.table", k)]
    header = ["retriever"] + [h for _, h, _ in cols]
    rows = []
    order = sorted(result.runs, key=lambda n: (-sort_value(result.means[n].get(f"pseudo_ndcg@{k}")), n))
    for name in order:
        m = result.means[name]
        rows.append([name] + [fmt(m.get(c), digits, missing="-") for c, _, digits in cols])
    return header, rows


def render_text(result) -> str:
    """The terminal form: the replay label, the visibility protocol, one row per retriever, production's line."""
    header, rows = table_rows(result)
    w = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    out = [result.replay.label]
    if result.visibility:
        out.append(describe(result.visibility))
    out.append("  ".join(h.ljust(w[0]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(header)))
    for r in rows:
        out.append("  ".join(c.ljust(w[0]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)))
    out.append(_production_line(result.production, result))
    return "\n".join(out)


def _production_line(p: dict, result) -> str:
    pcs = sorted(int(k.removeprefix("latency_ms_p")) for k in p if re.fullmatch(r"latency_ms_p\d+", k))
    lat = ", ".join(f"p{pc} {p[f'latency_ms_p{pc}']:.0f} ms" for pc in pcs)
    skip = f"skip rate {fmt(p['skip_rate'], missing='-')}, " if "skip_rate" in p else ""
    leak = fmt(p.get("secret_leak_rate"), missing="-")
    return (f"production (from the log): {skip}injection rate {fmt(p.get('injection_rate'), missing='-')}, "
            f"{fmt(p.get('injected_chunks_mean'), 2, missing='-')} chunks/event, secret leak {leak}, "
            f"junk {fmt(p.get('junk_rate'), missing='-')}; latency {lat or 'not logged'} "
            f"({int(p.get('latency_events', 0))} events); {int(p.get('cited_events', 0))} events with a cited note "
            f"(threshold {result.replay.threshold})")


def render_markdown(result) -> str:
    """replay.md of the run folder: the log, the retriever table and its notes, production, pairwise overlap."""
    rs = result.replay
    k = result.k
    p = result.production
    header, rows = table_rows(result)
    lines = [f"# Query-log replay: {rs.label}", "",
             f"Log `{rs.log.path}`: {len(rs.log.events)} events replayed, {len(rs.log.skipped)} bad line(s) "
             f"skipped{' (' + skipped_summary(rs.log) + ')' if rs.log.skipped else ''}; "
             f"{int(p['unknown_injected_ids'])} injected id(s) not in the corpus ignored. "
             "Skipped lines are listed in `replay_skipped.json`.", "",
             "Each event ran with its own `as_of` (= `ts`) and its logged follow-up `context`, every retriever over "
             "the same shared candidates (quality mode).", ""]
    if result.visibility:
        line = describe(result.visibility, why=True)
        lines += [f"{line[:1].upper()}{line[1:]}.", ""]
    lines += ["## Retrievers", "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "* skip / injection rate: share of events; budget ok: within the preset's own `[budget]`; "
              + "; ".join(f"{pol.short}: {pol.note}" for pol in catalogue.POLICIES) +
              ". A preset without a budget packer injects its whole ranked list (tokens = sum of the chunks' cl100k "
              "tokens).",
              f"* pseudo-nDCG@{k} / pseudo-R@{k}: against citation pseudo-labels over the "
              f"{int(p.get('cited_events', 0))} events whose response cites >= 1 production-injected note "
              f"({CITATION_RULE}, PIPELINES.md §C.4, threshold {rs.threshold}). **Biased toward production**: only "
              "notes production injected can be cited, so a retriever that finds a better note the agent never saw "
              "gets no credit, and one that mimics production is rewarded.",
              f"* prod Jaccard / recall / precision: agreement of the injected set with production's over the "
              f"{int(p.get('injected_logged_events', 0))} events that log `injected` (Jaccard and recall where "
              "production injected >= 1 note; precision where the retriever did too).", "",
              "## Production (from the log)", "",
              _production_line(p, result) + ".",
              "The replay's own wall time is not a latency measurement and is not reported.", ""]
    names = list(result.runs)
    if len(names) > 1:
        for metric, title in ((f"jaccard@{k}", f"Jaccard@{k} of the ranked lists"),
                              ("rbo", f"Rank-biased overlap (RBO_ext, p = {RBO_P}) of the ranked lists")):
            lines += [f"## {title}", "", "Mean over events where at least one of the two lists is non-empty.", "",
                      "| | " + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---:|" * len(names)]
            for a in names:
                cells = []
                for b in names:
                    if a == b:
                        cells.append("1")
                    else:
                        v = result.overlap.get((a, b)) or result.overlap.get((b, a))
                        cells.append(fmt(v[metric], missing="-"))
                lines.append(f"| `{a}` | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines) + "\n"
