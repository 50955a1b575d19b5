"""report.md: the run summary for a terminal or a pull request (findings first, then compact tables)."""
from __future__ import annotations

from evalkit.report import robustness, sections
from evalkit.report.analysis import (
    BUDGET_CURVE_NOTE,
    FUNNEL_NOTE,
    HARMS_NOTE,
    METRIC_HELP,
    STATS_HELP,
    THRESHOLD_NOTE,
    DatasetSummary,
    gates_note,
    label,
)
from evalkit.report.overview import split_findings
from evalkit.report.tables import to_markdown
from evalkit.runfolder.view import RunData


def run_line(run: RunData) -> str:
    m = run.manifest
    parts = []
    if m.get("evalkit_version"):
        parts.append(f"evalkit {m['evalkit_version']}")
    if m.get("embedding_model") and m.get("vectors_used", True):  # a BM25-only run made no embeddings
        parts.append(f"embeddings {m['embedding_model']}")
    if (m.get("llm_tokenizer") or {}).get("name"):
        parts.append(f"token counts {m['llm_tokenizer']['name']}")
    mach = m.get("machine") or {}
    if mach.get("cpus"):
        parts.append(f"{mach['cpus']} CPUs" + (f" ({mach['cpu']})" if mach.get("cpu") else ""))
    return " · ".join(parts)


def command_line(run: RunData) -> str | None:
    cmd = run.manifest.get("command")
    if not isinstance(cmd, list) or not cmd:
        return None
    if len(cmd) == 1:  # not a command line: the Python call that made the run (evalkit.api records it)
        return str(cmd[0])
    args = [str(a) for a in cmd[1:]]
    return "evalkit " + " ".join(args)


def render(run: RunData, summaries: list[DatasetSummary], title: str) -> str:
    out = [f"# evalkit run report: {title}", ""]
    line = run_line(run)
    if line:
        out += [line, ""]
    cmd = command_line(run)
    if cmd:
        out += [f"Command: `{cmd}`", ""]
    out += ["## Key findings", ""]
    fold = len(summaries) > 1 or any(k.startswith("bench") for k in run.manifest)
    for s in summaries:
        if len(summaries) > 1 and s.findings:
            out += [f"**{s.name}**", ""]
        shown, rest = split_findings(s.findings) if fold else (s.findings, [])
        out += [f"- {f}" for f in shown]
        if rest:
            out += ["", f"<details><summary>{len(rest)} more finding(s)</summary>", ""]
            out += [f"- {f}" for f in rest]
            out += ["", "</details>"]
        if len(summaries) > 1 and s.findings:
            out.append("")
    if not any(s.findings for s in summaries):
        out.append("- (no metrics in this run)")
    out.append("")
    for s in summaries:
        out += [f"## {s.name}", "", sections.facts(s), ""]
        for kind, text in sections.headline_notes(s):
            out += [f"**{text}**" if kind == "denominator" else f"> ⚠ {text}", ""]
        out += ["### Leaderboard", "", sections.legend(s), "", to_markdown(sections.leaderboard(s)), ""]
        flagged = [w for w in s.warnings if w.get("retriever")]
        if flagged:
            out += ["⚠ beside a retriever: " + "; ".join(w["text"] for w in flagged), ""]
        ht = sections.harms_table(s)
        if ht:
            out += ["### Harms: what reached the prompt that must not", "", HARMS_NOTE, "", to_markdown(ht), ""]
        out += robustness.markdown(run, s.name)
        ft = sections.fixed_table(s)
        if ft:
            out += ["### As shipped vs fixed", "",
                    "Each fixed preset against the preset it repairs, query by query (Δ = fixed − shipped; "
                    "Holm over all pairs × metrics).", "", to_markdown(ft), ""]
            for name, why in sections.fixes_list(s):
                out.append(f"- `{name}` fixes: {why}")
            out.append("")
        bt = sections.breakdown_table(run, s, "category")
        if bt:
            out += [f"### {label(s.primary)} by query category", "",
                    "Mean per category (n = scored queries); bold = best in column. No-memory queries have no "
                    "relevant note and appear under abstention below.", "", to_markdown(bt), ""]
        at = sections.breakdown_table(run, s, "evidence_age")
        if at:
            out += [f"### {label(s.primary)} by evidence age", "",
                    "Age of the newest relevant note at the query's own \"now\" (undated = evergreen notes).", "",
                    to_markdown(at), ""]
        for head, note, tb in (("Quality at a token budget", BUDGET_CURVE_NOTE, sections.budget_curve_table(run, s)),
                               ("Where each retriever loses its relevant notes", FUNNEL_NOTE,
                                sections.funnel_table(run, s)),
                               ("Threshold sensitivity", THRESHOLD_NOTE.format(
                                   model=run.manifest.get("embedding_model") or "?"), sections.threshold_table(run, s))):
            if tb:
                out += [f"### {head}", "", note, "", to_markdown(tb), ""]
        gt = sections.gates_table(s)
        if gt:
            out += ["### Gates, abstention and budget", "", gates_note(), "", to_markdown(gt), ""]
        bud = sections.budget_table(run, s)
        if bud:
            out += ["### What gets injected (per query)", "", to_markdown(bud), ""]
        if run.latency and s.name in run.latency:
            lt = sections.latency_table(s, run.latency[s.name])
            if lt:
                out += ["### Latency per stage", "", to_markdown(lt), ""]
    out += ["## How to read this report", ""]
    out += [f"- **{name}**: {text}" for name, text in METRIC_HELP]
    out += ["", STATS_HELP, "", "report.html in this folder has the same tables with plots (confidence intervals, "
            "recall@k curves, category heatmaps, budget histograms).", ""]
    return "\n".join(out)
