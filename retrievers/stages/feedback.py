"""Feedback: HookClaw's utility tracker (PIPELINES.md §C.4, ``src/utility-tracker.js``) as a signal.

:class:`UtilityTracker` reproduces the tracker exactly (Bayesian ``(citations + 1)/(retrievals + 2)``, neutral
0.5 below 3 retrievals, the 30 % significant-word citation rule with its tokenisation). In HookClaw nothing calls
``recordInjection``, so the loop is inert and the scores never reach the ranking; here
:func:`learn_utility` learns the scores from a logged query stream (``injected`` + ``response``, DESIGN.md §4)
and the stage ``score.utility`` feeds them into a ranking (the seed's "5th RRF signal", or a multiplicative
weight). Learn on one split of a log and evaluate on another: a utility learned from the evaluated queries'
own responses leaks their labels.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.text import JS_WS_CLASS, utf16_len, utf16_truncate

PRIOR_CITATIONS = 1
PRIOR = 2
MIN_RETRIEVALS = 3
CITATION_RATIO = 0.3
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
    then its ``response`` is checked for citations. ``corpus`` (a :class:`retrievers.corpus.Corpus`, or a mapping
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


_LEARNED: dict = {}


def _learned(events: list, corpus, key: str) -> dict[str, float]:
    """:func:`learn_utility` once per (log events, corpus, key) object triple: latency runs build a candidate set
    per query over the same corpus. The objects are kept with the value, so an id is never reused while cached."""
    ck = (id(events), id(corpus), key)
    hit = _LEARNED.get(ck)
    if hit is None or hit[0] is not events or hit[1] is not corpus:
        if len(_LEARNED) >= 8:
            _LEARNED.pop(next(iter(_LEARNED)))
        hit = _LEARNED[ck] = (events, corpus, learn_utility(events, corpus, key))
    return hit[2]


@register
class UtilityScore(Stage):
    """Feed HookClaw utility scores (§C.4) into the ranking (seed 004 §4.1: "Factor utility_score into RRF").

    Utilities come from ``ctx.options["utility"]`` (``{key: utility}``, e.g. :func:`learn_utility` on a training
    log) or, when ``log`` is set, are learned from that query-log file (JSONL, DESIGN.md §4) against the
    candidate corpus; unknown documents get the neutral 0.5. ``key``: ``"id"`` or ``"path"`` (HookClaw's key).

    * ``mode = "rrf"`` (default): the 5th RRF signal — rows ranked by utility desc (stable: ties keep the
      current order), ``score += weight/(k + rank)`` (weight 0.1, k 60; for lists already scored by RRF).
    * ``mode = "multiply"``: ``score ×= 1 + weight·(2u − 1)`` (neutral at u = 0.5; range [1 − w, 1 + w]).

    Then a stable sort by score desc. Extra column ``utility``.
    """

    name = "score.utility"
    kind = "score"
    mode: str = param("rrf", choices=("rrf", "multiply"))
    weight: float = param(0.1, ge=0.0)
    k: float = param(60.0, ge=0.0)
    key: str = param("id", choices=("id", "path"))
    log: str = param("", doc="query-log JSONL to learn from ('' = ctx.options['utility'])")
    query_log_param = "log"

    def _utilities(self, cs: CandidateSet, ctx: Context) -> dict[str, float]:
        opts = (ctx.options or {}) if ctx is not None else {}
        if self.log:
            events = opts.get("query_logs", {}).get(self.log)
            if events is None:
                raise ConfigError(f"stage {self.name!r}: query log {self.log!r} was not loaded (the harness loads "
                                  f"the logs a pipeline names; a library caller passes "
                                  f"ctx.options['query_logs'] = {{path: events}})")
            return _learned(events, cs.corpus, self.key)
        u = opts.get("utility")
        if u is None:
            raise ConfigError(f"stage {self.name!r} needs ctx.options['utility'] ({{key: utility}}) or a 'log' file")
        return u

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        util = self._utilities(cs, ctx)
        corpus = cs.corpus
        keys = corpus.ids if self.key == "id" else [p or utf16_truncate(t, 100)
                                                   for p, t in zip(corpus.paths, corpus.raw_texts)]
        sig = hash(frozenset(util.items()))
        per_col = cs.memo(("score.utility", self.key, sig), lambda: np.where(
            cs.valid, np.array([util.get(keys[d], 0.5) if d >= 0 else np.nan for d in cs.doc.ravel()],
                               dtype=np.float64).reshape(cs.doc.shape), np.nan))
        u = st.gather(per_col)
        valid = st.valid
        if self.mode == "rrf":
            key = np.where(valid, u, -np.inf)
            order = np.argsort(-key, axis=1, kind="stable")
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, np.arange(1, order.shape[1] + 1)[None, :].repeat(order.shape[0], 0),
                              axis=1)
            new = st.score + self.weight / (self.k + rank)
        else:
            new = st.score * (1.0 + self.weight * (2.0 * u - 1.0))
        out = State(st.col, np.where(valid, new, -np.inf), st.skipped, dict(st.extra, utility=u), st.info, st.trace)
        return out.sort()


__all__ = ["UtilityTracker", "learn_utility", "significant_words", "is_citation", "UtilityScore"]
