"""report.html: one self-contained page (inline CSS, plots as base64 PNG, no scripts, no external assets)."""
from __future__ import annotations

import html
import json
import re

from evalkit.report import overview, robustness, sections
from evalkit.report.analysis import DatasetSummary
from evalkit.report.findings import findings
from evalkit.report.format import fmt_pct
from evalkit.report.markdown import command_line, run_line
from evalkit.report.section_registry import METRIC_HELP, SECTIONS, STATS_HELP, Section, html_shown, note, title
from evalkit.report.tables import Table, to_html
from evalkit.runfolder.view import RunData

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg2:#f6f8fa; --best:#dafbe1; --ref:#fff8c5;
        --up:#1a7f37; --down:#cf222e; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg); margin: 0;
       background: #fff; }
main { max-width: 1320px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 21px; margin: 40px 0 4px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 28px 0 6px; }
p.meta, p.facts, p.note, caption { color: var(--muted); }
p.note { margin: 4px 0 10px; max-width: 95ch; }
p.warn { margin: 6px 0 10px; padding: 6px 10px; max-width: 95ch; background: #fdecea; border-left: 4px solid #d62728; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bg2); padding: 1px 4px;
       border-radius: 4px; }
nav { background: var(--bg2); border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; margin: 14px 0; }
nav a { margin-right: 14px; }
.findings { border-left: 4px solid #0969da; background: #f0f6ff; padding: 10px 18px; margin: 16px 0;
            border-radius: 0 6px 6px 0; }
.findings h2 { border: 0; margin: 4px 0; font-size: 18px; }
.findings li { margin: 3px 0; }
details { margin: 12px 0; }
summary { cursor: pointer; font-weight: 600; }
dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.glossary dt { font-weight: 600; } dl.glossary dd { margin: 0; color: var(--muted); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 14px; font-size: 13px; }
caption { caption-side: top; text-align: left; padding: 2px 0 6px; font-size: 12.5px; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; }
th { background: var(--bg2); font-weight: 600; border-bottom: 2px solid var(--line); white-space: normal;
     vertical-align: bottom; max-width: 11em; }
th[title] { text-decoration: underline dotted; cursor: help; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { font-weight: 700; background: var(--best); }
td.worst { font-weight: 700; background: #ffebe9; }
tr.ref td { background: var(--ref); }
tr.ref td.best { background: var(--best); }
tbody tr:hover td { background: #eef2f6; }
span.up { color: var(--up); font-weight: 700; } span.down { color: var(--down); font-weight: 700; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0 4px; }
ul.fixes li { color: var(--muted); }
abbr[title] { text-decoration: underline dotted; cursor: help; }
.overview svg { display: block; margin: 6px 0 10px; }
footer { margin-top: 48px; color: var(--muted); font-size: 12px; }
"""


def _p(text: str, cls: str = "note") -> str:
    return f'<p class="{cls}">{html.escape(text)}</p>'


def _img(b64: str | None, alt: str) -> str:
    if not b64:
        return ""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _table(t: Table | None, caption: str = "") -> str:
    if t is None:
        return ""
    if caption:
        t.caption = html.escape(caption)
    return f'<div class="scroll">{to_html(t)}</div>'


def _anchor(name: str) -> str:
    return "ds-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def render(run: RunData, summaries: list[DatasetSummary], title: str) -> str:
    body = [f"<h1>evalkit run report: {html.escape(title)}</h1>"]
    line = run_line(run)
    if line:
        body.append(_p(line, "meta"))
    cmd = command_line(run)
    if cmd:
        body.append(f'<p class="meta">Command: <code>{html.escape(cmd)}</code></p>')
    if len(summaries) > 1:
        body.append("<nav>Datasets: " + "".join(f'<a href="#{_anchor(s.name)}">{html.escape(s.name)}</a>'
                                                for s in summaries) + "</nav>")
    names = overview.display_names(sorted({r for s in summaries for r in s.retrievers}))
    pictures = len(summaries) > 1 or any(k.startswith("bench") for k in run.manifest)
    if pictures:
        body.append(_overview(summaries, names))
    body.append('<section class="findings"><h2>Key findings</h2><ul>')
    for s in summaries:
        said = findings(s, run)
        shown, rest = overview.split_findings(said) if pictures else (said, [])
        items = [f"<li>{_named(f, names) if pictures else html.escape(f)}</li>" for f in shown]
        if rest:
            items.append(f"<li><details><summary>{len(rest)} more finding(s)</summary><ul>"
                         + "".join(f"<li>{_named(f, names)}</li>" for f in rest) + "</ul></details></li>")
        if len(summaries) > 1 and items:  # one group per dataset
            body.append(f'<li><a href="#{_anchor(s.name)}"><b>{html.escape(s.name)}</b></a><ul>'
                        + "".join(items) + "</ul></li>")
        else:
            body += items
    body.append("</ul></section>")
    body.append("<details><summary>How to read this report (metrics and tests in one line each)</summary>"
                '<dl class="glossary">' + "".join(f"<dt>{html.escape(n)}</dt><dd>{html.escape(t)}</dd>"
                                                  for n, t in METRIC_HELP) + "</dl>" + _p(STATS_HELP) + "</details>")
    for s in summaries:
        body.append(_dataset(run, s))
    body.append(_footer(run))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>evalkit report: {html.escape(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


def _named(text: str, names: dict[str, str]) -> str:
    """A finding line, escaped, each preset name in it shown short with the full name on hover."""
    out = html.escape(text)
    long_first = sorted((n for n in names if names[n] != n), key=len, reverse=True)
    if not long_first:
        return out
    pat = re.compile(r"(?<![\w-])(" + "|".join(re.escape(html.escape(n)) for n in long_first) + r")(?![\w-])")
    full = {html.escape(n): n for n in long_first}
    return pat.sub(lambda m: f'<abbr title="{html.escape(full[m.group(1)])}">{html.escape(names[full[m.group(1)]])}'
                             f"</abbr>", out)


def _overview(summaries: list[DatasetSummary], names: dict[str, str]) -> str:
    """The pictures a bench report opens with (:mod:`evalkit.report.overview`)."""
    out = ['<section class="overview"><h2>At a glance</h2>',
           _p("Hover a name, a cell, a point or an arrow for the full preset name and its numbers. Short names drop "
              "version numbers and commit ids.")]
    out += ["<h3>Every retriever on every dataset</h3>",
            _p("Cell: nDCG@10 · its tie-group rank on that dataset (paired randomisation tests of every pair, Holm; "
               "“1–3” = not significantly different from ranks 1 to 3; bold = tied with the best, never a retriever "
               "the best beats in every cluster). Where a dataset has too few clusters for all pairs, each retriever "
               "is tested against the best instead; where not even that can reach α, # is the rank by the mean and "
               "the dataset's section says so. Colour: the value relative to the dataset's best. Rows: best mean "
               "rank first."),
            f'<div class="scroll">{overview.heatmap_svg(summaries, names)}</div>']
    harm = overview.harm_svg(summaries, names)
    if harm:
        out += ["<h3>Quality against harm</h3>",
                _p("One point per retriever: nDCG@10 (up = better) against the share of queries whose injected block "
                   "holds a secret, the share of injected chunks that are junk, and the poisoned-memory rate where "
                   "the run measured it (right = worse). Red = some harm, green = none. Up and to the left is what "
                   "you want."), f'<div class="scroll">{harm}</div>']
    arrows = overview.fix_arrows_svg(summaries, names)
    if arrows:
        out += ["<h3>As shipped → fixed</h3>",
                _p("Per seed system (bold): its nDCG@10 as shipped (dot) and each fixed sibling's (arrow head). Green "
                   "/ red = significantly better / worse (paired test, Holm over all pairs × metrics); grey = not "
                   "significant. The pairs come from the presets' own metadata (extends / fixes)."),
                f'<div class="scroll">{arrows}</div>']
    out.append("</section>")
    return "".join(out)


def _dataset(run: RunData, s: DatasetSummary) -> str:
    out = [f'<section id="{_anchor(s.name)}"><h2>{html.escape(s.name)}</h2>', _p(sections.facts(s), "facts")]
    for kind, text in sections.headline_notes(s):
        out.append(f"<p><b>{html.escape(text)}</b></p>" if kind == "denominator"
                   else f'<p class="warn">⚠ {html.escape(text)}</p>')
    ht = sections.harms_table(s)
    if ht:  # harms lead: shown above the leaderboard too when any retriever leaks a secret
        if any(s.value(r, "secret_leak_rate") > 0 for r in s.retrievers):
            out += ['<p class="warn"><b>Secret leak:</b> ' + html.escape(", ".join(
                f"{r} ({fmt_pct(s.value(r, 'secret_leak_rate'))} of queries)" for r in s.retrievers
                if s.value(r, "secret_leak_rate") > 0)) + " inject a chunk holding a secret.</p>"]
    out += ["<h3>Leaderboard</h3>", _p(sections.legend(s)), _table(sections.leaderboard(s))]
    flagged = [w for w in s.warnings if w.get("retriever")]
    if flagged:
        out.append('<ul class="fixes">' + "".join(f"<li>⚠ {html.escape(w['text'])}</li>" for w in flagged) + "</ul>")
    for sec in SECTIONS:
        if "html" in sec.formats:
            out += _section(run, s, sec)
    out.append("</section>")
    return "".join(out)


def _section(run: RunData, s: DatasetSummary, sec: Section) -> list[str]:
    """One registry section in HTML: heading, note, then plot and table in the section's layout, then its list."""
    if sec.composite:
        return _robustness(run, s, title(sec, run, s, "html"))
    t = sec.table(run, s) if sec.table else None
    img = sec.plot(run, s) if sec.plot else None
    if not html_shown(sec, run, s, t, img):
        return []
    out = [f"<h3>{html.escape(title(sec, run, s, 'html'))}</h3>"]
    text = note(sec, run, s, "html")
    if text is not None:
        out.append(_p(text))
    pic = _img(img, f"{s.name}: {sec.plot_alt}")
    if sec.html_layout == "table-plot":
        out += [_table(t), pic]
    elif sec.html_layout == "plot-details":
        out += [pic, f"<details><summary>as a table</summary>{_table(t)}</details>"]
    else:
        out += [pic, _table(t)]
    items = sec.items(s) if sec.items else []
    if items:
        out.append('<ul class="fixes">' + "".join(f"<li><code>{html.escape(n)}</code>: {html.escape(w)}</li>"
                                                 for n, w in items) + "</ul>")
    return out


def _robustness(run: RunData, s: DatasetSummary, heading: str) -> list[str]:
    """Planted notes that reach the prompt (evalkit.report.robustness): the attack table, what the guards cannot
    catch by construction, clean vs poisoned utility and the trade-off picture."""
    at = robustness.attack_table(run, s.name)
    if at is None:
        return []
    out = [f"<h3>{html.escape(heading)}</h3>",
           _p(robustness.planting_line(robustness.poisoned(run, s.name) or {})), _p(robustness.NOTE), _table(at)]
    bt = robustness.blind_spots(run, s.name)
    if bt is not None:
        out += ["<h4>What the guards cannot catch by construction</h4>", _p(robustness.BLIND_NOTE), _table(bt)]
    ut = robustness.utility_table(run, s.name)
    if ut is not None:
        out += [_p("Clean vs poisoned nDCG@10 on the queries no planted note is aimed at (Δ = poisoned − clean; "
                   "▲ / ▼ significant after Holm)."), _table(ut)]
    img = robustness.tradeoff_plot(run, s.name)
    if img:
        out += ["<h4>The trade-off: clean utility against poisoning</h4>", _p(robustness.TRADEOFF_NOTE),
                _img(img, f"{s.name}: clean nDCG@10 against poison injected rate, one point per retriever")]
    return out


def _footer(run: RunData) -> str:
    m = run.manifest
    rets = m.get("retrievers") or {}
    t = Table(["retriever", "hash", "system", "description"])
    for name in sorted(rets):
        info = rets[name] or {}
        t.add(name, info.get("hash", ""), info.get("system", ""), info.get("description", ""))
    details = {k: m.get(k) for k in ("evalkit_version", "embedding_model", "index_settings", "lexical",
                                     "llm_tokenizer", "seeds", "packages", "machine") if m.get(k) is not None}
    return ("<footer><h3>Run details</h3><details><summary>Presets in this run</summary>"
            f'<div class="scroll">{to_html(t)}</div></details>'
            "<details><summary>Manifest (versions, index settings, seeds, machine)</summary><pre>"
            + html.escape(json.dumps(details, indent=1, sort_keys=True, default=str)) + "</pre></details>"
            + _p("Generated by evalkit from this run folder's files (manifest.json, metrics.json, per_query.csv, "
                 "metrics_by_category.csv, results/). Rebuild with: evalkit report RUN_DIR.", "meta")
            + "</footer>")
