"""The measured reference table of the README (`evalkit reference`), generated from run folders, never typed.

Checks the harness against published numbers (spec/REFERENCE_NUMBERS.md): SciFact BM25 (bm25s Lucene k1=1.2,
b=0.75: nDCG@10 0.679) and all-MiniLM-L6-v2 (MTEB: 0.645), LoCoMo turn-level recall beside the paper's DRAGON
figures (R@10 66.2, R@50 82.7), LongMemEval-S session-level recall_any@5 / nDCG@10.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

from evalkit.engine.output import read_run

BEGIN, END = "<!-- reference:begin -->", "<!-- reference:end -->"
PUBLISHED = {("scifact", "bm25", "ndcg@10"): "0.679 (bm25s, REFERENCE_NUMBERS.md)",
             ("scifact", "dense", "ndcg@10"): "0.645 (MTEB all-MiniLM-L6-v2)",
             ("scifact", "bm25", "recall@100"): "0.913 (bm25s check run)",
             ("scifact", "dense", "recall@100"): "0.925 (MTEB)"}
LOCOMO_CATS = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]
DRAGON = {"recall@10": {"single-hop": 77.7, "multi-hop": 46.6, "temporal": 77.3, "open-domain": 40.8,
                        "adversarial": 54.7, "overall": 66.2},
          "recall@50": {"single-hop": 91.1, "multi-hop": 73.0, "temporal": 89.6, "open-domain": 61.7,
                        "adversarial": 72.5, "overall": 82.7}}


def _rows(folders: list[Path]) -> tuple[dict, dict]:
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


def render(folders: list[Path]) -> str:
    means, cats = _rows(folders)
    out: list[str] = []
    f = lambda v: "–" if v is None else f"{v:.4f}"  # noqa: E731
    if any(k[0] == "scifact" for k in means):
        out += ["**SciFact (BEIR, test split, 300 queries)**", "",
                "| retriever | nDCG@10 | recall@100 | published |", "|---|---:|---:|---|"]
        for ret in ("bm25", "dense", "hybrid-rrf"):
            pub = "; ".join(v for (d, r, m), v in PUBLISHED.items() if d == "scifact" and r == ret)
            out.append(f"| {ret} | {f(means.get(('scifact', ret, 'ndcg@10')))} | "
                       f"{f(means.get(('scifact', ret, 'recall@100')))} | {pub or '–'} |")
        out.append("")
    if any(k[0] == "locomo" for k in means):
        out += ["**LoCoMo, turn level (1,982 QA items with evidence; evidence recall, %)**", "",
                "| retriever | k | " + " | ".join(LOCOMO_CATS) + " | overall |",
                "|---|---:|" + "---:|" * (len(LOCOMO_CATS) + 1)]
        for ret in ("bm25", "dense", "hybrid-rrf"):
            for m in ("recall@10", "recall@50"):
                if ("locomo", ret, m) not in means:
                    continue
                cells = [cats.get(("locomo", ret, c, m)) for c in LOCOMO_CATS]
                out.append(f"| {ret} | {m.split('@')[1]} | " + " | ".join(
                    "–" if c is None else f"{100 * c[0]:.1f}" for c in cells) +
                    f" | {100 * means[('locomo', ret, m)]:.1f} |")
        for m in ("recall@10", "recall@50"):
            out.append(f"| DRAGON (paper) | {m.split('@')[1]} | " + " | ".join(f"{DRAGON[m][c]:.1f}" for c in
                                                                           LOCOMO_CATS) + f" | {DRAGON[m]['overall']:.1f} |")
        out.append("")
    if any(k[0] == "longmemeval-s" for k in means):
        out += ["**LongMemEval-S, session level (468 questions, abstention excluded)**", "",
                "| retriever | recall_any@5 | recall_all@5 | nDCG@10 |", "|---|---:|---:|---:|"]
        for ret in ("bm25", "dense", "hybrid-rrf"):
            out.append(f"| {ret} | {f(means.get(('longmemeval-s', ret, 'recall_any@5')))} | "
                       f"{f(means.get(('longmemeval-s', ret, 'recall_all@5')))} | "
                       f"{f(means.get(('longmemeval-s', ret, 'ndcg@10')))} |")
        out.append("")
        types = sorted({k[2] for k in cats if k[0] == "longmemeval-s" and k[3] == "recall_any@5"})
        if types:
            n = {t: next(v[1] for k, v in cats.items() if k[0] == "longmemeval-s" and k[2] == t) for t in types}
            out += ["recall_any@5 by question type (the vector arm reads the user side of each session only):", "",
                    "| retriever | " + " | ".join(f"{t} (n={n[t]})" for t in types) + " |",
                    "|---|" + "---:|" * len(types)]
            for ret in ("bm25", "dense", "hybrid-rrf"):
                cells = [cats.get(("longmemeval-s", ret, t, "recall_any@5")) for t in types]
                out.append(f"| {ret} | " + " | ".join("–" if c is None else f"{c[0]:.3f}" for c in cells) + " |")
            out.append("")
    return "\n".join(out)


def write_readme(readme: Path, text: str, command: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the block between ``begin`` and ``end`` (appended when absent) with ``text``."""
    src = readme.read_text(encoding="utf-8")
    block = f"{begin}\n_Generated by `{command}`._\n\n{text}\n{end}"
    if begin in src and end in src:
        src = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, src, flags=re.S)
    else:
        src += "\n" + block + "\n"
    readme.write_text(src, encoding="utf-8")
