"""report.md: the run summary for a terminal or a pull request (findings first, then compact tables)."""
from __future__ import annotations

from evalkit.report import robustness, sections
from evalkit.report.analysis import DatasetSummary
from evalkit.report.answers import answers_line
from evalkit.report.findings import findings
from evalkit.report.overview import split_findings
from evalkit.report.section_registry import METRIC_HELP, SECTIONS, STATS_HELP, Section, note, title
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
    answers = answers_line(m)  # an answer run: its reader's and judges' model ids and prompt hashes
    if answers:
        parts.append(answers)
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
    found = [findings(s, run) for s in summaries]
    for s, said in zip(summaries, found):
        if len(summaries) > 1 and said:
            out += [f"**{s.name}**", ""]
        shown, rest = split_findings(said) if fold else (said, [])
        out += [f"- {f}" for f in shown]
        if rest:
            out += ["", f"<details><summary>{len(rest)} more finding(s)</summary>", ""]
            out += [f"- {f}" for f in rest]
            out += ["", "</details>"]
        if len(summaries) > 1 and said:
            out.append("")
    if not any(found):
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
        for sec in SECTIONS:
            if "md" in sec.formats:
                out += _section(run, s, sec)
    out += ["## How to read this report", ""]
    out += [f"- **{name}**: {text}" for name, text in METRIC_HELP]
    out += ["", STATS_HELP, "", "report.html in this folder has the same tables with plots (confidence intervals, "
            "recall@k curves, category heatmaps, budget histograms).", ""]
    return "\n".join(out)


def _section(run: RunData, s: DatasetSummary, sec: Section) -> list[str]:
    """One registry section in Markdown: heading, note, table, then its list (nothing without a table)."""
    if sec.composite:
        return robustness.markdown(run, s.name, title(sec, run, s))
    t = sec.table(run, s) if sec.table else None
    if t is None:
        return []
    out = [f"### {title(sec, run, s)}", ""]
    text = note(sec, run, s)
    if text is not None:
        out += [text, ""]
    out += [to_markdown(t), ""]
    if sec.items:
        out += [f"- `{name}`{sec.item_verb}: {why}" for name, why in sec.items(s)] + [""]
    return out
