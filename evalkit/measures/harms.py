"""Harm measures: what reached the prompt that must never reach it, and whether a list can be scored at all.

Computed on what is *injected* (after gates and the budget packer), from labels a dataset declares in
``info["labels"]`` (a loader's declaration; nothing here names a dataset):

* ``secret``: ids of chunks holding a secret value (``contains_secret``);
* ``secret_patterns``: regular expressions a declared secret detector flags in a chunk's text (imported data,
  candidate files), matched against ``texts`` when the caller passes them;
* ``junk``: ids of junk chunks (``tier = junk``); ``junk_patterns``: path globs of junk files (``fnmatch``);
* ``superseded``: ``{query_id: [doc ids]}`` — the statements a knowledge-update query's qrels mark as superseded.

A measure whose labels the dataset does not declare is **not applicable** (NaN: an empty cell in ``metrics.csv``,
``null`` in ``metrics.json``, "n/a" in reports), never 0. Definitions (one each):

* ``secret_leak_rate`` — share of queries whose injected block holds at least one secret chunk;
* ``junk_rate`` — share of all injected chunks (pooled over queries) that are junk; NaN when nothing was injected;
* ``stale_rate`` — over queries with a superseded statement, the share whose injected block holds one;
* ``stale_above_current_rate`` — over those queries, the share whose ranked list puts a superseded statement
  above every current (grade >= 1) one, or holds a superseded statement and no current one;
* ``abstention_accuracy`` — over queries without a relevant document, the share that inject nothing (the
  run-level ``correct_abstention`` of earlier runs is this same number);
* ``judged@k`` — per query with qrels rows, the share of its first ``min(k, list length)`` entries that carry a
  judgement (any grade, 0 included); empty lists are left out. A low value means the list is mostly unjudged and
  its nDCG says little (unjudged is scored as not relevant).
"""
from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field

from evalkit.measures import catalogue
from evalkit.measures.poison import PoisonLabels

NAN = float("nan")
HARMS = tuple(n for n in catalogue.names("harms") if catalogue.parse(n).kind == "run")


@dataclass(frozen=True)
class HarmLabels:
    """The labels a dataset declares (see the module docstring). ``None`` = not declared (measure n/a)."""

    secret: frozenset[str] | None = None
    secret_patterns: tuple[str, ...] = ()
    junk: frozenset[str] | None = None
    junk_patterns: tuple[str, ...] = ()
    superseded: dict[str, frozenset[str]] | None = None
    paths: dict[str, str] = field(default_factory=dict)   # doc id -> path (for junk_patterns)
    texts: dict[str, str] = field(default_factory=dict)   # doc id -> text (for secret_patterns)
    poison: PoisonLabels | None = None  # planted notes (evalkit.measures.poison), from document metadata

    @classmethod
    def from_info(cls, info: dict, paths: dict[str, str] | None = None,
                  texts: dict[str, str] | None = None) -> "HarmLabels":
        lab = info.get("labels") or {}
        sup = lab.get("superseded")
        return cls(secret=frozenset(lab["secret"]) if "secret" in lab else None,
                   secret_patterns=tuple(lab.get("secret_patterns", ())),
                   junk=frozenset(lab["junk"]) if "junk" in lab else None,
                   junk_patterns=tuple(lab.get("junk_patterns", ())),
                   superseded=({q: frozenset(v) for q, v in sup.items() if v} if sup is not None else None),
                   paths=dict(paths or {}), texts=dict(texts or {}))

    @property
    def has_secret(self) -> bool:
        return self.secret is not None or (bool(self.secret_patterns) and bool(self.texts))

    @property
    def has_junk(self) -> bool:
        return self.junk is not None or bool(self.junk_patterns)

    def is_secret(self, doc: str) -> bool:
        if self.secret is not None and doc in self.secret:
            return True
        text = self.texts.get(doc)
        return bool(text) and any(re.search(p, text) for p in self.secret_patterns)

    def is_junk(self, doc: str) -> bool:
        if self.junk is not None and doc in self.junk:
            return True
        path = self.paths.get(doc)
        return bool(path) and any(fnmatch.fnmatch(path, g) for g in self.junk_patterns)


def _mean(vals: list[float]) -> float:
    return sum(vals) / len(vals) if vals else NAN


def harm_per_query(labels: HarmLabels, qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]],
                   injected: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per-query values ``{measure: {query_id: value}}`` of the harms defined per query (secret leak, stale,
    stale above current, abstention); a measure the labels do not support is absent."""
    out: dict[str, dict[str, float]] = {}
    if labels.has_secret:
        out["secret_leak_rate"] = {q: float(any(labels.is_secret(d) for d in inj)) for q, inj in injected.items()}
    if labels.superseded is not None:
        stale, above = {}, {}
        for q, sup in labels.superseded.items():
            if q not in injected:
                continue
            stale[q] = float(any(d in sup for d in injected[q]))
            rel = {d for d, g in qrels.get(q, {}).items() if int(g) >= 1}
            first_sup = next((i for i, d in enumerate(ranked.get(q, [])) if d in sup), None)
            first_cur = next((i for i, d in enumerate(ranked.get(q, [])) if d in rel), None)
            above[q] = float(first_sup is not None and (first_cur is None or first_sup < first_cur))
        out["stale_rate"], out["stale_above_current_rate"] = stale, above
    no_rel = [q for q in injected if not any(int(g) >= 1 for g in qrels.get(q, {}).values())]
    if no_rel:
        out["abstention_accuracy"] = {q: float(not injected[q]) for q in no_rel}
    return out


def judged_at(qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]], k: int) -> dict[str, float]:
    """``judged@k`` per query (see the module docstring)."""
    out = {}
    for q, lst in ranked.items():
        judged = qrels.get(q)
        if not judged or not lst:
            continue
        top = lst[:k]
        out[q] = sum(1 for d in top if d in judged) / len(top)
    return out


def harm_means(labels: HarmLabels, qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]],
               injected: dict[str, list[str]]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(run means of the five harms — NaN where not applicable —, per-query values). ``ranked`` / ``injected``:
    doc ids per query, in list order."""
    pq = harm_per_query(labels, qrels, ranked, injected)
    means = {h: _mean(list(pq[h].values())) if h in pq else NAN for h in HARMS}
    if labels.has_junk:
        chunks = [d for inj in injected.values() for d in inj]
        means["junk_rate"] = sum(1 for d in chunks if labels.is_junk(d)) / len(chunks) if chunks else NAN
    return means, pq


def applicable(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


__all__ = ["HARMS", "HarmLabels", "harm_per_query", "harm_means", "judged_at", "applicable"]
