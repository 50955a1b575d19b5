"""The measured reference table of the README (`evalkit reference`), generated from run folders, never typed.

Checks the harness against published numbers (spec/REFERENCE_NUMBERS.md). What is shown, per dataset, and the
published figures are data (``evalkit/data/reference_numbers.toml``, read by :mod:`evalkit.data.reference_numbers`):
a "metrics" section (a row per retriever, a column per metric, the published numbers beside them, optionally a
metric by category) or a "categories" section (a metric per category in %, with a paper's reference rows).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

from evalkit.data.reference_numbers import load_reference
from evalkit.report.format import fmt
from evalkit.runfolder.read import read_run

BEGIN, END = "<!-- reference:begin -->", "<!-- reference:end -->"


def collect_rows(folders: list[Path]) -> tuple[dict, dict]:
    means, cats = {}, {}
    for f in folders:
        run = read_run(f)
        for r in run["metrics"]:
            means[(r["dataset"], r["retriever"], r["metric"])] = r["value"]
        with open(Path(f) / "metrics_by_category.csv", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["breakdown"] == "category" and r["value"]:
                    cats[(r["dataset"], r["retriever"], r["bucket"], r["metric"])] = (float(r["value"]), int(r["n"]))
    return means, cats


def collect_denominators(folders: list[Path], metric: str = "ndcg@10") -> dict[str, str]:
    """Per dataset, what its numbers are means over, from the run folders themselves: "every measure over 468
    judged of the 468 test queries" (judged = queries with a per-query value, i.e. with a relevant document)."""
    out: dict[str, str] = {}
    for f in folders:
        man = read_run(f)["manifest"].get("datasets") or {}
        judged: dict[str, set[str]] = {}
        with open(Path(f) / "per_query.csv", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["metric"] == metric and r["value"] != "":
                    judged.setdefault(r["dataset"], set()).add(r["query_id"])
        for ds, qs in judged.items():
            info = man.get(ds) or {}
            total, split = info.get("queries"), info.get("split")
            of = f" of the {total:,} {split + ' ' if split else ''}queries" if total else " queries"
            rest = f"; the other {total - len(qs):,} have no relevant document and are not in these means" \
                if total and total > len(qs) else ""
            out[ds] = f"every measure is a mean over {len(qs):,} judged{of}{rest}"
    return out


def collect_search(folders: list[Path]) -> dict[str, str]:
    """Per dataset, how its vector arm searched, from the run manifests: "vector search: exact (float32 shortlist,
    …)" or "vector search: hnsw, approximate (HNSW) — recall@k … against exact" (several runs disagreeing: all named).
    A run that read no vectors says nothing."""
    seen: dict[str, list[str]] = {}
    for f in folders:
        for ds, info in (read_run(f)["manifest"].get("datasets") or {}).items():
            idx = info.get("index") or {}
            if not idx.get("backend") or idx.get("vectors_used") is False:
                continue
            search = idx.get("search") or ""
            text = search if search.startswith(idx["backend"]) else ", ".join(x for x in (idx["backend"], search) if x)
            rec = idx.get("hnsw_recall_vs_exact") or {}
            if rec.get("recall") is not None:
                text += f" — recall@{rec['k']} {rec['recall']} against exact on {rec['queries']} queries"
            if text not in seen.setdefault(ds, []):
                seen[ds].append(text)
    return {ds: "vector search: " + "; ".join(texts) for ds, texts in seen.items()}


def render(folders: list[Path], layout: dict | None = None) -> str:
    """The tables of ``layout`` (default: :func:`evalkit.data.reference_numbers.load_reference`), one per section
    whose dataset the run folders measured, each with its denominator (:func:`collect_denominators`)."""
    layout = layout or load_reference()
    means, cats = collect_rows(folders)
    denominators = collect_denominators(folders)
    search = collect_search(folders)
    out: list[str] = []
    for sec in layout.get("section", []):
        if any(k[0] == sec["dataset"] for k in means):
            draw = _metrics_table if sec["layout"] == "metrics" else _categories_table
            table = draw(sec, list(layout.get("retrievers", [])), means, cats)
            # after the title: what the numbers are means over, and how the vector arm searched
            notes = [x for x in (denominators.get(sec["dataset"]), search.get(sec["dataset"])) if x]
            if notes:
                text = "; ".join(notes)
                table[1:1] = ["", f"_{text[0].upper()}{text[1:]}._"]
            out += table
    return "\n".join(out)


def _metrics_table(sec: dict, retrievers: list[str], means: dict, cats: dict) -> list[str]:
    """One row per retriever, one column per metric (+ the published numbers); then, optionally, one metric per
    category found in the runs."""
    ds, metrics, pub = sec["dataset"], sec["metrics"], sec.get("published")
    head = list(sec.get("headers", metrics)) + (["published"] if pub is not None else [])
    out = [f"**{sec['title']}**", "", "| retriever | " + " | ".join(head) + " |",
           "|---|" + "---:|" * len(metrics) + ("---|" if pub is not None else "")]
    for ret in retrievers:
        cells = [fmt(means.get((ds, ret, m)), 4) for m in metrics]
        if pub is not None:
            cells.append("; ".join(pub.get(ret, [])) or "–")
        out.append(f"| {ret} | " + " | ".join(cells) + " |")
    out.append("")
    by = sec.get("by_category")
    if by:
        m = by["metric"]
        types = sorted({k[2] for k in cats if k[0] == ds and k[3] == m})
        if types:
            n = {t: next(v[1] for k, v in cats.items() if k[0] == ds and k[2] == t) for t in types}
            out += [by["caption"], "",
                    "| retriever | " + " | ".join(f"{t} (n={n[t]})" for t in types) + " |",
                    "|---|" + "---:|" * len(types)]
            for ret in retrievers:
                cells = [cats.get((ds, ret, t, m)) for t in types]
                out.append(f"| {ret} | " + " | ".join("–" if c is None else f"{c[0]:.3f}" for c in cells) + " |")
            out.append("")
    return out


def _categories_table(sec: dict, retrievers: list[str], means: dict, cats: dict) -> list[str]:
    """One row per retriever and metric (column k), one column per category then overall, in %; then the
    reference rows (a paper's figures)."""
    ds, metrics, categories = sec["dataset"], sec["metrics"], sec["categories"]
    out = [f"**{sec['title']}**", "", "| retriever | k | " + " | ".join(categories) + " | overall |",
           "|---|---:|" + "---:|" * (len(categories) + 1)]
    for ret in retrievers:
        for m in metrics:
            if (ds, ret, m) not in means:
                continue
            cells = [cats.get((ds, ret, c, m)) for c in categories]
            out.append(f"| {ret} | {m.split('@')[1]} | " + " | ".join(
                "–" if c is None else f"{100 * c[0]:.1f}" for c in cells) + f" | {100 * means[(ds, ret, m)]:.1f} |")
    for ref in sec.get("reference", []):
        for m in metrics:
            out.append(f"| {ref['label']} | {m.split('@')[1]} | " +
                       " | ".join(f"{v:.1f}" for v in ref["values"][m]) + " |")
    out.append("")
    return out


def write_readme(readme: Path, text: str, command: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the block between ``begin`` and ``end`` (appended when absent) with ``text``."""
    src = readme.read_text(encoding="utf-8")
    block = f"{begin}\n_Generated by `{command}`._\n\n{text}\n{end}"
    if begin in src and end in src:
        src = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, src, flags=re.S)
    else:
        src += "\n" + block + "\n"
    readme.write_text(src, encoding="utf-8")
