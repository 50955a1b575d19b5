"""As-of visibility: which documents of its group a query may search, given when each entered the store.

Under the ``strict`` protocol (:meth:`retrievers.types.Dataset.as_of_visibility`) a query asked at ``as_of``
sees the documents of its group created at or before ``as_of`` plus every undated one (``created`` NaN: an
evergreen file), less the revised versions retired by then (below). Sort a group's dated documents by creation time: the visible set is the undated documents plus
the first ``cut`` of that order, ``cut`` = how many were created at or before ``as_of`` (ties are never split). So
``cut`` names the set — the *visibility key* — and queries sharing a key share everything: one Chroma call, one
bm25s mask, one candidate-cache entry. Key ``None`` = the whole group (the ``all`` protocol, no ``as_of``, or
nothing created after it): exactly what a search without the rule returns, so such queries cost nothing extra.

Both arms apply the rule inside the search, so depth stays exact — the k best *visible* documents, not the k best
filtered afterwards: the vector arm hands Chroma the visible record ids (``ids=``) or restricts the numpy rows
(``exact``) before MaxP; the lexical arm masks bm25s scores before taking its top k. Every stage after the arms
therefore only ever sees visible candidates. (BM25's collection statistics — idf, average length — stay those of
the whole group: the mask removes documents from the result, not from the index.)

Scoped notes. A document whose ``metadata["visible_to"]`` lists query ids (:data:`VISIBLE_TO`) is visible to those
queries only, under either protocol (and, under ``strict``, only from its creation on): a note kept in one
session's private memory, or the per-target store of a poisoning experiment, where every attacked question meets
only its own planted notes. In a group holding such notes the key is a pair ``(cut, who)``: ``who`` is the query id
when some note of the group is addressed to it, else None (every scoped note hidden), so queries that see the same
documents still share one key. A group without scoped notes keeps the plain ``cut`` key, and its cache entries.

Revisions. A document may be ``retired`` (:class:`retrievers.types.Document`): a version of a note the memory
rewrote in place, out of the store from the time the next version replaced it. In a group with such versions, sort
every creation and retirement time of the group into one list of *events*: ``cut`` = how many events are at or
before ``as_of`` (the creations and retirements are both monotone in ``as_of``, so the count still names the visible
set), and a document is visible when it was created at or before the last of those events and not retired at or
before it — so a query after every event still sees less than its whole group (no ``None`` key). Without an ``as_of``
(the ``all`` protocol) there is no time rule: every version is visible. A group without retired documents has events
= its creation times: the plain ``cut`` above, unchanged (and its cache entries with it).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from retrievers.types import Document, Query, Visibility

VISIBLE_TO = "visible_to"  # document metadata: the query ids a scoped note is visible to (absent = every query)


def audience(doc: Document) -> frozenset[str] | None:
    """The query ids a scoped document is visible to (its ``metadata["visible_to"]``), None for an ordinary one."""
    v = doc.metadata.get(VISIBLE_TO)
    if v is None:
        return None
    return frozenset([v] if isinstance(v, str) else (str(x) for x in v))


class VisibleSet:
    """The documents of one group visible under one key. ``positions`` (bool over the group's documents: bm25s rows;
    None = every one) is known at once; ``docs`` (corpus indices, ascending), ``units`` (the vector units of those
    documents, ascending) and ``cols`` (their positions among the group's units; None = every one) are computed on
    first use, so a lexical search never builds the vector units nor an index array per key (8 bytes a document: at
    a million notes and 200 keys, 1.6 GB)."""

    def __init__(self, group_docs: np.ndarray, positions: np.ndarray | None, units_of):
        self._group_docs = group_docs
        self.positions = positions
        self._docs: np.ndarray | None = None
        self._units_of = units_of  # () -> (units, cols)
        self._units: tuple | None = None
        self.ids: list[str] | None = None  # Chroma record ids of ``units`` (built on first use)

    @property
    def docs(self) -> np.ndarray:
        if self._docs is None:
            self._docs = self._group_docs if self.positions is None else self._group_docs[self.positions]
        return self._docs

    @property
    def units(self) -> np.ndarray:
        if self._units is None:
            self._units = self._units_of()
        return self._units[0]

    @property
    def cols(self) -> np.ndarray | None:
        if self._units is None:
            self._units = self._units_of()
        return self._units[1]

    def record_ids(self) -> list[str]:
        if self.ids is None:
            self.ids = [str(u) for u in self.units]
        return self.ids


class VisibleSets:
    """Visibility keys and visible sets of one index (see the module docstring)."""

    def __init__(self, created: np.ndarray, group_docs: dict[str, np.ndarray], units,
                 scoped: dict[int, frozenset[str]] | None = None, retired: np.ndarray | None = None):
        """``units()`` → (unit_doc, group_units) of the index: called only when a visible set's units are needed
        (a vector search), so a lexical-only run never builds them. ``scoped``: corpus index → the query ids a
        scoped note is visible to. ``retired``: per document, when a later version replaced it (NaN = never)."""
        self.created = created
        self.retired = np.full(len(created), np.nan) if retired is None else retired
        self.scoped = dict(scoped or {})  # corpus index -> query ids it is visible to (scoped notes only)
        self._scoped_in: dict[str, tuple[np.ndarray, frozenset[str]]] = {}  # group -> (scoped docs, addressed ids)
        self.group_docs = group_docs
        self._units = units
        self._events: dict[str, np.ndarray] = {}  # group -> its creation and retirement times, sorted
        self._revised: set[str] = set()  # groups holding retired versions
        for g, docs in group_docs.items():
            c, r = created[docs], self.retired[docs]
            self._events[g] = np.sort(np.concatenate([c[np.isfinite(c)], r[np.isfinite(r)]]), kind="stable")
            if np.isfinite(r).any():
                self._revised.add(g)
            mine = [int(d) for d in docs if int(d) in self.scoped]
            if mine:
                self._scoped_in[g] = (np.array(mine, dtype=np.int64),
                                      frozenset().union(*(self.scoped[d] for d in mine)))
        self._sets: dict[tuple[str, object], VisibleSet] = {}
        h = hashlib.sha256(np.isnan(created).tobytes())
        h.update(np.nan_to_num(created, nan=0.0).tobytes())
        if self.scoped:
            h.update(repr(sorted((d, sorted(a)) for d, a in self.scoped.items())).encode())
        if np.isfinite(self.retired).any():
            h.update(b"retired" + np.nan_to_num(self.retired, nan=0.0).tobytes())
        self.digest = h.hexdigest()[:16]  # names the creation (and retirement) times in cache keys

    def key(self, group: str, as_of: float | None, who: str | None = None):
        """How many of ``group``'s events (creation times, and retirement times where it holds revisions) are at or
        before ``as_of``; None when there is no ``as_of``, or when that is all of them and no version was retired:
        the whole group is visible. In a group with scoped notes, the pair ``(that, who)`` — ``who`` (a query id) kept
        only when a note of the group is addressed to it."""
        g = group or ""
        events = self._events.get(g)
        if events is None or as_of is None or not math.isfinite(as_of):
            cut = None
        else:
            cut = int(np.searchsorted(events, as_of, side="right"))
            cut = None if cut == len(events) and g not in self._revised else cut
        scoped = self._scoped_in.get(g)
        if scoped is None:
            return cut
        return (cut, who if who is not None and who in scoped[1] else None)

    def _seen(self, g: str, cut: int | None) -> np.ndarray:
        """Bool over ``g``'s documents: visible once the first ``cut`` events happened (None = every document)."""
        docs = self.group_docs[g]
        if cut is None:
            return np.ones(len(docs), dtype=bool)
        t = self._events[g][cut - 1] if cut > 0 else -np.inf
        c, r = self.created[docs], self.retired[docs]
        return (np.isnan(c) | (c <= t)) & ~(r <= t)  # NaN compares False: undated in, never retired in

    def keys(self, queries: list[Query], protocol: str) -> list:
        """Per query: its visibility key under ``protocol`` (no time cut under ``all``; scoped notes either way)."""
        strict = protocol == "strict"
        return [self.key(q.group or "", q.as_of if strict else None, q.id) for q in queries]

    def get(self, group: str, key) -> VisibleSet:
        g = group or ""
        vs = self._sets.get((g, key))
        if vs is None:
            docs = self.group_docs[g]
            cut, who = key if g in self._scoped_in else (key, None)
            seen = self._seen(g, cut)
            scoped = self._scoped_in.get(g)
            if scoped is not None:  # scoped notes: visible only to the queries they are addressed to
                hide = [d for d in scoped[0].tolist() if who is None or who not in self.scoped[d]]
                seen[np.searchsorted(docs, np.array(hide, dtype=np.int64))] = False
            if seen.all():
                vs = VisibleSet(docs, None, lambda: (self._units()[1][g], None))
            else:
                def units_of(docs=docs, seen=seen):
                    unit_doc, group_units = self._units()
                    units = group_units[g]
                    ok = np.zeros(len(self.created), dtype=bool)
                    ok[docs[seen]] = True
                    cols = np.flatnonzero(ok[unit_doc[units]])
                    return units[cols], cols
                vs = VisibleSet(docs, seen, units_of)
            self._sets[(g, key)] = vs
        return vs

    def order(self, group: str) -> np.ndarray:
        """``group``'s documents (corpus indices) in *visibility order*: the undated ones first (corpus order), then
        the dated ones by creation time (ties in corpus order). Under a key :meth:`prefix` answers, the visible
        documents are the first ``prefix`` of this order: an exact search reads them as a slice."""
        docs = self.group_docs[group or ""]
        c = self.created[docs]
        undated = np.isnan(c)
        return np.concatenate([docs[undated], docs[~undated][np.argsort(c[~undated], kind="stable")]])

    def prefix(self, group: str, key) -> int | None:
        """How many documents of :meth:`order` are visible under ``key``, or None when the visible set is not a
        prefix of it (a group with scoped notes or retired versions: use :meth:`get`). O(1): under a plain ``cut``
        the visible documents are the undated ones and the ``cut`` dated ones created first (ties are never split,
        and a group without revisions has one event per dated document)."""
        g = group or ""
        if g in self._scoped_in or g in self._revised:
            return None
        n = len(self.group_docs[g])
        return n if key is None else n - len(self._events[g]) + int(key)

    def clear(self) -> None:
        """Forget the visible sets built so far (they are rebuilt on use): a cost probe charges each run its own."""
        self._sets.clear()

    def counts(self, group: str, as_of: float | None, who: str | None = None) -> tuple[int, int, int]:
        """(documents in the group, undated ones, ones created after ``as_of``) for one query (``who``: its id;
        scoped notes addressed to other queries are not counted as in its group, nor versions retired at or before
        ``as_of``)."""
        g = group or ""
        if g not in self.group_docs:
            return 0, 0, 0
        docs = self.group_docs[g]
        mine = np.ones(len(docs), dtype=bool)
        scoped = self._scoped_in.get(g)
        if scoped is not None:
            hide = [d for d in scoped[0].tolist() if who is None or who not in self.scoped[d]]
            mine[np.searchsorted(docs, np.array(hide, dtype=np.int64))] = False
        timed = as_of is not None and math.isfinite(as_of)
        if timed:
            mine &= ~(self.retired[docs] <= as_of)  # NaN compares False
        c = self.created[docs][mine]
        after = int((c > as_of).sum()) if timed else 0  # NaN compares False
        return int(mine.sum()), int(np.isnan(c).sum()), after

    def visible_count(self, group: str, as_of: float | None, who: str | None, protocol: str) -> int:
        """How many documents a query at ``as_of`` searches under ``protocol`` (``strict`` / ``all``)."""
        total, _, after = self.counts(group, as_of if protocol == "strict" else None, who)
        return total - after

    def summary(self, queries: list[Query], vis: Visibility) -> dict:
        """What the run's manifest, header and report say about visibility: the protocol, where it came from, and
        per query how many documents it could see (min / median / max), how many of them are undated, and how many
        documents of its group were created after its ``as_of`` (hidden under ``strict``, visible under ``all``)."""
        rows = np.array([self.counts(q.group or "", q.as_of, q.id) for q in queries], dtype=np.int64).reshape(-1, 3)
        undated, after = rows[:, 1], rows[:, 2]
        visible = np.array([self.visible_count(q.group or "", q.as_of, q.id, vis.protocol) for q in queries],
                           dtype=np.int64)
        return {**vis.record(), "queries": len(queries),
                "queries_with_as_of": sum(1 for q in queries if q.as_of is not None),
                "visible_documents": _spread(visible), "undated_documents": _spread(undated),
                "created_after_as_of": dict(_spread(after), mean=round(float(after.mean()), 2) if len(after) else 0.0,
                                            queries=int((after > 0).sum()))}


def _spread(a: np.ndarray) -> dict:
    if not len(a):
        return {"min": 0, "median": 0, "max": 0}
    return {"min": int(a.min()), "median": float(np.median(a)), "max": int(a.max())}


def describe(s: dict, why: bool = False) -> str:
    """One line for a run's header (``why``: and the protocol's reason, for reports) from
    :meth:`VisibleSets.summary` (as in the manifest)."""
    v, u, a = s["visible_documents"], s["undated_documents"], s["created_after_as_of"]
    undated = f"{u['min']}" if u["min"] == u["max"] else f"{u['min']}–{u['max']}"
    later = "hidden" if s["protocol"] == "strict" else "visible, with negative ages"
    reason = f": {s['why']}" if why else ""
    return (f"as-of visibility {s['protocol']} ({s['source']}{reason}) — documents visible per query min {v['min']} "
            f"/ median {v['median']:g} / max {v['max']} ({undated} undated, always visible); on average "
            f"{a['mean']:g} per query created after its as_of, {later}")


__all__ = ["VISIBLE_TO", "VisibleSet", "VisibleSets", "audience", "describe"]
