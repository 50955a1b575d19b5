"""Feedback: HookClaw's utility tracker (PIPELINES.md §C.4, ``src/utility-tracker.js``) as a signal.

:class:`UtilityTracker` reproduces the tracker exactly (Bayesian ``(citations + 1)/(retrievals + 2)``, neutral 0.5
below 3 retrievals, the 30 % significant-word citation rule with its tokenisation). In HookClaw nothing calls
``recordInjection``, so the loop is inert and the scores never reach the ranking; here :func:`learn_utility` learns
the scores from a logged query stream (``injected`` + ``response``, DESIGN.md §4) and the stage ``score.utility``
(:mod:`retrievers.stages.score.adjust`) feeds them into a ranking (the seed's "5th RRF signal", or a multiplicative
weight). Learn on one split of a log and evaluate on another: a utility learned from the evaluated queries' own
responses leaks their labels.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from retrievers.text import JS_WS_CLASS, utf16_len, utf16_truncate


PRIOR_CITATIONS = 1
PRIOR = 2
MIN_RETRIEVALS = 3
CITATION_RATIO = 0.3
#: where the citation rule of :func:`is_citation` comes from: short (help text) and with its source (reports)
CITATION_RULE = "HookClaw's rule"
CITATION_RULE_SOURCE = "HookClaw utility-tracker rule (PIPELINES.md §C.4)"
NEUTRAL = 0.5
#: ``split(/[\s\/\-_.,:;!?()]+/)`` with JavaScript's ``\s``
_SPLIT = re.compile(rf"[{JS_WS_CLASS}/\-_.,:;!?()]+")


def significant_words(text: str) -> list[str]:
    """HookClaw citation words: lower-cased, split on ``[\\s\\/\\-_.,:;!?()]+``, words longer than 3 characters
    (UTF-16 length), duplicates kept. "Fixed DatePicker validation bug in RouteOps; root cause was timezone
    handling" → fixed, datepicker, validation, routeops, root, cause, timezone, handling."""
    return [w for w in _SPLIT.split(text.lower()) if utf16_len(w) > 3]


def is_citation(memory_text: str, response: str, ratio: float = CITATION_RATIO) -> bool:
    """True when at least ``ratio`` of the memory's significant words occur as substrings of the lower-cased
    response (no words → ratio 0 → not cited)."""
    words = significant_words(memory_text)
    if not words:
        return False
    low = response.lower()
    return sum(1 for w in words if w in low) / len(words) >= ratio


class UtilityTracker:
    """HookClaw ``UtilityTracker`` without persistence: per key ``{retrievals, citations}``; per session the
    pending injected memories."""

    def __init__(self, min_retrievals: int = MIN_RETRIEVALS, ratio: float = CITATION_RATIO):
        self.min_retrievals = min_retrievals
        self.ratio = ratio
        self.scores: dict[str, dict[str, int]] = {}
        self.pending: dict[str, list[tuple[str, str]]] = {}

    def record_injection(self, session: str, memories: Iterable[tuple[str, str]]) -> None:
        """``memories`` = (key, text) pairs; empty keys are dropped; replaces the session's pending list;
        retrievals += 1 per memory."""
        entries = [(k, t or "") for k, t in memories if k]
        if not entries:
            return
        self.pending[session] = entries
        for k, _ in entries:
            e = self.scores.setdefault(k, {"retrievals": 0, "citations": 0})
            e["retrievals"] += 1

    def record_response(self, session: str, response: str | None) -> None:
        """Citation check of every pending memory of the session (its text, or its key when the text is
        empty); the pending list is cleared either way."""
        entries = self.pending.pop(session, None)
        if not entries or not response:
            return
        for key, text in entries:
            if is_citation(text or key, response, self.ratio) and key in self.scores:
                self.scores[key]["citations"] += 1

    def utility(self, key: str) -> float:
        e = self.scores.get(key)
        if e is None or e["retrievals"] < self.min_retrievals:
            return NEUTRAL
        return (e["citations"] + PRIOR_CITATIONS) / (e["retrievals"] + PRIOR)

    def utilities(self) -> dict[str, float]:
        return {k: self.utility(k) for k in self.scores}


def _field(ev: Any, name: str):
    if isinstance(ev, Mapping):
        return ev.get(name)
    v = getattr(ev, name, None)
    if v is None and hasattr(ev, "metadata"):  # a replay Query: the log fields live in metadata
        v = ev.metadata.get(name)
    return v


def learn_utility(events: Iterable[Any], corpus, key: str = "id", min_retrievals: int = MIN_RETRIEVALS,
                  ratio: float = CITATION_RATIO) -> dict[str, float]:
    """Utility per document learned from a logged query stream (dicts, ``LogEvent`` or replay ``Query`` objects),
    in log order: each event's ``injected`` documents are recorded for its ``session`` (default ``"default"``),
    then its ``response`` is checked for citations. ``corpus`` (a :class:`retrievers.index.corpus.Corpus`, or a mapping
    doc id → text) provides the memory texts; ids it does not know are ignored. ``key = "id"`` keys by document
    id; ``"path"`` by HookClaw's key (path, else the first 100 characters of the text).
    Returns ``{key: utility}`` for every key seen (0.5 below ``min_retrievals``)."""
    if isinstance(corpus, Mapping):
        texts = dict(corpus)
        paths = {}
    else:
        texts = dict(zip(corpus.ids, corpus.raw_texts))
        paths = dict(zip(corpus.ids, corpus.paths))
    tr = UtilityTracker(min_retrievals, ratio)
    for ev in events:
        session = _field(ev, "session") or "default"
        injected = _field(ev, "injected") or []
        if isinstance(injected, str):
            injected = [injected]
        mems = []
        for doc_id in injected:
            if doc_id not in texts:
                continue
            text = texts[doc_id]
            k = doc_id if key == "id" else (paths.get(doc_id) or utf16_truncate(text, 100))
            mems.append((k, text))
        if mems:
            tr.record_injection(session, mems)
        resp = _field(ev, "response")
        if resp:
            tr.record_response(session, resp)
    return tr.utilities()


__all__ = ["CITATION_RATIO", "MIN_RETRIEVALS", "NEUTRAL", "PRIOR", "PRIOR_CITATIONS", "UtilityTracker",
           "is_citation", "learn_utility", "significant_words"]
