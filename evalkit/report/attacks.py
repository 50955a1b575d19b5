"""The console summaries of planting attacks and fitting a guard (``evalkit poison``, ``evalkit train-guard``):
rendering only — the workflows compute the record (:mod:`evalkit.workflows.poison`,
:mod:`evalkit.workflows.train_guard`) and their result objects' ``to_text`` calls these.

>>> print(planting_text({"planted": 2, "mode": "isolated", "templates": "design", "seed": 1,
...                      "targets": {"instruction": ["q1", "q2"]}, "store_rate": {"min": 0.01, "median": 0.02,
...                      "max": 0.03}}, "out", {"documents": 9, "queries": 2, "qrels_rows": 2}))
planted 2 notes (isolated stores, design templates, seed 1) for 2 target queries: instruction 2
planted share of a target's store: min 1.00% / median 2.00% / max 3.00%
wrote out (9 documents, 2 queries, 2 qrels rows: the planted notes are in none)
"""
from __future__ import annotations


def planting_text(record: dict, out, counts: dict) -> str:
    """What ``evalkit poison`` planted and wrote, in three lines (counts per attack family, the planted share of a
    target's store, the folder)."""
    r = record
    per = ", ".join(f"{a} {len(q)}" for a, q in r["targets"].items())
    rate = r["store_rate"] or {}
    lines = [f"planted {r['planted']} notes ({r['mode']} stores, {r['templates']} templates, seed {r['seed']}) "
             f"for {sum(len(q) for q in r['targets'].values())} target queries: {per}",
             f"planted share of a target's store: min {rate.get('min', 0):.2%} / median {rate.get('median', 0):.2%}"
             f" / max {rate.get('max', 0):.2%}" + (f"; trigger phrase {r['trigger']!r}" if r.get("trigger") else ""),
             f"wrote {out} ({counts['documents']} documents, {counts['queries']} queries, "
             f"{counts['qrels_rows']} qrels rows: the planted notes are in none)"]
    return "\n".join(lines)


def guard_fit_text(spec: dict, out) -> str:
    """What ``evalkit train-guard`` fitted (training notes and sentences, the threshold and its quantile, the
    training recall and false-positive rate) and where it wrote it."""
    t = spec["trained_on"]
    return "\n".join([
        f"trained guard.classifier on {t['positive_notes']} planted payload notes (+{t['own_positive']} of the "
        f"defender's own) against {t['negative_notes']} unplanted notes (+{t['own_negative']}): "
        f"{t['sentences']} sentences, {', '.join(d['name'] for d in t['datasets'])} split {t['split']}",
        f"threshold {spec['threshold']:.4f} (the training negatives' {t['quantile']:.1%} quantile); "
        f"training recall {t['training_recall']:.2%} of planted notes, {t['training_false_positive']:.2%} of "
        f"unplanted notes above it",
        f"wrote {out}"])
