"""Mapping a live system's hits back to dataset ids (see :mod:`evalkit.engine.live`, "Mapping hits to dataset
ids" and "Injected text"): :class:`HitMapper` (echoed id → exact text → normalised text, within the query's group)
and :func:`map_answer` (the ranked list, the injected ids and block of one answer)."""
from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass

from evalkit.engine.trec_runs import place_foreign_ids
from retrievers.systems.protocol import Answer
from retrievers.types import Dataset, Query


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the last resort of :class:`HitMapper`."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class HitMapper:
    """Dataset id of a hit: echoed id → exact text → normalised text, among the documents of the query's group."""

    def __init__(self, ds: Dataset):
        self.ds = ds
        self.idx = ds.doc_index
        self._exact: dict[str, dict[str, str]] = {}
        self._norm: dict[str, dict[str, str]] = {}
        for d in ds.documents:
            g = d.group or ""
            self._exact.setdefault(g, {}).setdefault(d.text, d.id)
            self._norm.setdefault(g, {}).setdefault(normalise(d.text), d.id)

    def doc_id(self, hit, group: str | None) -> tuple[str | None, str]:
        """(dataset id or None, how it was found: id | text | normalised | unmapped)."""
        if hit.id is not None and hit.id in self.idx:
            return hit.id, "id"
        if hit.text:
            g = group or ""
            d = self._exact.get(g, {}).get(hit.text)
            if d is not None:
                return d, "text"
            d = self._norm.get(g, {}).get(normalise(hit.text))
            if d is not None:
                return d, "normalised"
        return None, "unmapped"


@dataclass
class Mapped:
    ranked: list[tuple[str, float]]
    injected: list[str]
    block: str
    counts: dict[str, int]


def map_answer(mapper: HitMapper, q: Query, ans: Answer) -> Mapped:
    """The ranked list, the injected ids and the injected block of one answer (see the module docstring). Hits are
    first named by dataset id where :class:`HitMapper` finds one; the list then goes through the run files' rule
    (:func:`evalkit.engine.trec_runs.place_foreign_ids`): an id the corpus lacks keeps its rank as a non-relevant hit.
    A second hit naming a document already listed is renamed so that it, too, is a foreign id in its slot."""
    counts = {"unmapped": 0, "duplicate": 0, "future": 0, "id": 0, "text": 0, "normalised": 0}
    named: list[tuple[str, float]] = []
    seen: set[str] = set()
    n = len(ans.hits)
    for i, h in enumerate(ans.hits):
        did, how = mapper.doc_id(h, q.group)
        counts[how] += how != "unmapped"
        if did is None:
            did = f"~unmapped:{h.id}" if h.id is not None else \
                f"~unmapped:text:{hashlib.sha1((h.text or '').encode()).hexdigest()[:10]}"
        elif did in seen:
            counts["duplicate"] += 1
            did = f"~duplicate:{did}:{i + 1}"
        else:
            doc = mapper.ds.documents[mapper.idx[did]]
            if q.as_of is not None and doc.created is not None and doc.created > q.as_of:
                counts["future"] += 1
        seen.add(did)
        named.append((did, float(h.score) if h.score is not None else float(n - i)))  # no score: list order ranks
    ranked, foreign = place_foreign_ids(named, mapper.idx)
    counts["unmapped"] = foreign - counts["duplicate"]
    per_hit = any(h.injected is not None for h in ans.hits)
    injected: list[str] = []
    texts: list[str] = []
    for (did, _), h in zip(ranked, ans.hits):
        if per_hit:
            if h.injected:
                injected.append(did)
                texts.append(h.injected)
        else:
            injected.append(did)
            texts.append(h.text if h.text is not None else
                         (mapper.ds.documents[mapper.idx[did]].text if did in mapper.idx else ""))
    block = ans.injected if ans.injected is not None else "\n\n".join(texts)
    return Mapped(ranked, injected, block, counts)



__all__ = ["HitMapper", "Mapped", "map_answer", "normalise"]
