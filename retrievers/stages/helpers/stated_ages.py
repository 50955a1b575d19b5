"""The ages a question states, for time-aware scoring (``decay.stated_age``).

:func:`stated_ages` reads English relative time expressions ("10 days ago", "last week", "a couple of days ago")
as spans in days before the question's own ``as_of``; :func:`query_stated_ages` does it once per candidate set.
Not a seed system's rule, so unlike HookClaw's :func:`retrievers.stages.helpers.query_text.parse_temporal` (whose
quirks are kept) it is free to read what a question means. Pure functions; never the wall clock.
"""
from __future__ import annotations

import re

from retrievers.candidates.table import CandidateSet

#: days per unit of a stated age: a month is the mean Gregorian month (365.2425 / 12 days), a year 365.2425 days
AGE_UNITS = {"day": 1.0, "week": 7.0, "fortnight": 14.0, "month": 365.2425 / 12, "year": 365.2425}

_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a couple": 2, "couple of": 2,
           "couple": 2, "a few": 3, "few": 3, "several": 3}

_N = r"([0-9]{1,4}|a couple of|a couple|couple of|couple|a few|few|several|an|a|one|two|three|four|five|six|seven|" \
     r"eight|nine|ten|eleven|twelve)"

_U = r"(day|weekend|week|fortnight|month|year)s?"

#: ASCII only (``re.ASCII``: no Unicode case folding, so ``ſix`` or ``fıve`` never reach the word tables); a match
#: never starts inside a number or a word, nor after ``.``, ``,`` or ``-`` (``1,000 days ago`` and ``2-3 days ago``
#: state no age rather than 0 or 3 days)
_STATED = re.compile(
    rf"(?<![\w.,-])(?:(?P<ago>{_N}\s+{_U}\s+ago)|(?P<within>(?:last|past)\s+{_N}\s+{_U})|"
    rf"(?P<span>(?:last|past)\s+(?:week(?:end)?|fortnight|month|year))|"
    rf"(?P<before>(?:the\s+)?day\s+before\s+yesterday)|(?P<yesterday>yesterday)|(?P<today>today|this\s+morning))\b",
    re.IGNORECASE | re.ASCII)


def stated_ages(text: str) -> tuple[tuple[float, float], ...]:
    """The ages (in days before the question's own "now") that a question names, as ``(lo, hi)`` spans in order
    of appearance, duplicates dropped. English relative expressions only (no calendar dates or weekday names, which
    need a calendar rather than an age):

    * ``N <unit>s ago`` → ``(N·u, N·u)``, a point: ``10 days ago`` → (10, 10), ``a week ago`` → (7, 7),
      ``two months ago`` → (60.87, 60.87);
    * ``last|past N <unit>s`` → ``(0, N·u)``: ``past 3 days`` → (0, 3);
    * ``last|past week|weekend|fortnight|month|year`` → ``(0, u)`` (a weekend counts as a week): the recent
      stretch the question means, not a calendar period. ``this weekend`` / ``this week`` state no age: they often
      point ahead ("what should I cook this weekend?");
    * ``(the) day before yesterday`` → (2, 2), ``yesterday`` → (1, 1), ``today|this morning`` → (0, 0)
      (``tonight`` usually points ahead).

    Not read: hours (``an hour ago``), ranges and decimals (``2-3 days ago``, ``1.5 weeks ago``, ``1,000 days ago``:
    no span rather than a wrong one), numbers above twelve in words, ``last night``, weekday names.

    ``N`` is a whole number (1–4 digits) or a word: ``a``/``an``/``one`` … ``twelve``, ``(a) couple (of)`` = 2, ``(a)
    few`` = ``several`` = 3. Units (:data:`AGE_UNITS`): day 1, week (and weekend) 7, fortnight 14, month 30.436875,
    year 365.2425 days.
    """
    out: list[tuple[float, float]] = []
    for m in _STATED.finditer(text or ""):
        kind = m.lastgroup
        if kind in ("ago", "within"):
            words = m.group(kind).lower().split()
            unit_word = words[-2 if kind == "ago" else -1].rstrip("s")
            unit = AGE_UNITS["week" if unit_word == "weekend" else unit_word]
            n_text = " ".join(words[:-2] if kind == "ago" else words[1:-1])
            n = float(n_text) if n_text.isdigit() else float(_COUNTS[n_text])
            span = (n * unit, n * unit) if kind == "ago" else (0.0, n * unit)
        elif kind == "span":
            word = m.group(kind).lower().split()[-1]
            span = (0.0, AGE_UNITS["week" if word == "weekend" else word])
        else:
            span = {"before": (2.0, 2.0), "yesterday": (1.0, 1.0), "today": (0.0, 0.0)}[kind]
        if span not in out:
            out.append(span)
    return tuple(out)


def query_stated_ages(cs: CandidateSet) -> list[tuple[tuple[float, float], ...]]:
    """:func:`stated_ages` of every query of ``cs`` (memoised on the candidate set)."""
    return cs.memo(("stated_ages",), lambda: [stated_ages(q.text) for q in cs.queries])


__all__ = ["AGE_UNITS", "query_stated_ages", "stated_ages"]
