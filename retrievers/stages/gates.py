"""Gates: decide per query whether to retrieve at all. A gate marks ``st.skipped`` (the pipeline then empties
the query's list); decisions depend only on the query text, so they are memoised on the candidate set and per
text (a sweep and every preset sharing the queries pay once).

Stages: ``gate.empty_query`` (OpenClaw: an empty / whitespace query returns nothing), ``gate.lancedb_skip``
(memory-lancedb-pro ``shouldSkipRetrieval``, the auto-recall gate).
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import Context, Stage, register
from retrievers.text import JS_WS_CLASS as W
from retrievers.text import js_trim, utf16_len

_I = re.IGNORECASE | re.ASCII  # JS regexes without the u flag: ASCII \b, ASCII-only case folding

_CRON = re.compile(rf"^\[cron:[^\]]+\][{W}]*", _I)
_HEADER = re.compile(r"^Conversation info \(untrusted metadata\):", _I)
_BLANK_LINE = re.compile(rf"\n[{W}]*\n")

FORCE_RETRIEVE = tuple(re.compile(p, _I) for p in (
    r"\b(remember|recall|forgot|memory|memories)\b",
    r"\b(last time|before|previously|earlier|yesterday|ago)\b",
    r"\b(my (name|email|phone|address|birthday|preference))\b",
    r"\b(what did (i|we)|did i (tell|say|mention))\b",
    r"(你记得|之前|上次|以前|还记得|提到过|说过)",
))
SKIP = tuple(re.compile(p, _I) for p in (
    rf"^(hi|hello|hey|good[{W}]*(morning|afternoon|evening|night)|greetings|yo|sup|howdy|what'?s up)\b",
    r"^/",
    r"^(run|build|test|ls|cd|git|npm|pip|docker|curl|cat|grep|find|make|sudo)\b",
    rf"^(yes|no|yep|nope|ok|okay|sure|fine|thanks|thank you|thx|ty|got it|understood|cool|nice|great|good|perfect"
    rf"|awesome|👍|👎|✅|❌)[{W}]*[.!]?\Z",
    rf"^(go ahead|continue|proceed|do it|start|begin|next|实施|开始|继续|好的|可以|行)[{W}]*[.!]?\Z",
    r"^HEARTBEAT",
    r"^\[System",
))
_CJK = re.compile(r"[\u4e00-\u9fff\u3040-\u309f\u30a0-\u30ff\uac00-\ud7af]")


@lru_cache(maxsize=1)
def _emoji_only():
    """``/^[\\p{Emoji}\\s]+$/u``: Python's ``re`` has no ``\\p{Emoji}``; the ``regex`` package implements the
    Unicode ``Emoji`` binary property (digits, ``#``, ``*`` have it too, so ``12345678`` matches)."""
    import regex  # noqa: PLC0415  (installed with transformers; to be listed in pyproject)  (lazy: startup)
    return regex.compile(rf"^[\p{{Emoji}}{W}]+\Z")


def normalize_lancedb_query(query: str) -> str:
    """lancedb-pro ``normalizeQuery``: trim; strip a leading ``[cron:…]`` tag; if the text starts with
    ``Conversation info (untrusted metadata):`` drop it and keep the part between the first and the second blank
    line (``\\n\\s*\\n``) when there is one; trim. Patterns are case-insensitive; trim/``\\s`` are JS's."""
    s = _CRON.sub("", js_trim(query), count=1)
    m = _HEADER.match(s)
    if m:
        rest = s[m.end():]
        parts = _BLANK_LINE.split(rest)
        s = parts[1] if len(parts) > 1 else rest
    return js_trim(s)


@lru_cache(maxsize=65536)
def lancedb_should_skip(query: str) -> bool:
    """memory-lancedb-pro @6a50220 ``shouldSkipRetrieval`` (§B.8). True = do not retrieve.

    Order: normalise → any force-retrieve pattern ⇒ retrieve → length < 5 (UTF-16) ⇒ skip → any skip pattern
    (greetings, ``/`` commands, shell verbs, affirmations, continuations, emoji-only, ``HEARTBEAT``,
    ``[System``) ⇒ skip → shorter than 6 (CJK present) / 15 UTF-16 units without ``?``/``？`` ⇒ skip → retrieve.
    """
    s = normalize_lancedb_query(query)
    if any(p.search(s) for p in FORCE_RETRIEVE):
        return False
    n = utf16_len(s)
    if n < 5:
        return True
    if any(p.search(s) for p in SKIP) or _emoji_only().match(s):
        return True
    min_len = 6 if _CJK.search(s) else 15
    if n < min_len and "?" not in s and "？" not in s:
        return True
    return False


def _gate(st: State, cs: CandidateSet, key: str, fn) -> State:
    mask = cs.memo(("gate", key), lambda: np.array([bool(fn(q.text)) for q in cs.queries], dtype=bool))
    return st.skip(mask)


@register
class LanceDBSkip(Stage):
    """memory-lancedb-pro auto-recall gate (``shouldSkipRetrieval``): greetings, commands, affirmations,
    emoji-only and short non-questions are not retrieved for, unless a memory/temporal/personal-field pattern
    forces retrieval (see :func:`lancedb_should_skip`). Memoised per query text. Used by ``lancedb_pro_6a50220``
    (auto-recall only; the ``memory_recall`` tool does not gate).
    """

    name = "gate.lancedb_skip"
    kind = "gate"

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return _gate(st, cs, "lancedb_skip", lancedb_should_skip)


@register
class EmptyQuery(Stage):
    """Skip queries whose JS-trimmed text is empty (OpenClaw ``search``: empty query → [] without searching)."""

    name = "gate.empty_query"
    kind = "gate"

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return _gate(st, cs, "empty_query", lambda t: not js_trim(t))


__all__ = ["LanceDBSkip", "EmptyQuery", "lancedb_should_skip", "normalize_lancedb_query", "FORCE_RETRIEVE", "SKIP"]
