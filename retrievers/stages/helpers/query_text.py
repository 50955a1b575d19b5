"""Query processing for HookClaw, the Phase-3 policy and conversation-aware search.

Pure functions (unit-testable, no candidate set needed):

* :func:`extract_entities` — HookClaw's regex entity extractor (``src/query-enricher.js``, PIPELINES.md §C.2),
  quirks included: the regexes are JavaScript regexes *without* the ``u`` flag, so ``\\w``, ``\\b`` and ``\\d``
  are ASCII-only while ``\\s`` is JavaScript's Unicode whitespace; apostrophes act as quotes
  (``I don't know what's wrong`` → ``t know what``); PascalCase needs a leading capital; only ``@scope/name``
  packages count; error codes need a digit.
* :func:`parse_temporal` — HookClaw's temporal parser → ``(start, end)`` epoch seconds resolved against ``now``
  (the query's ``as_of``; never the wall clock). First rule that matches wins: ``yesterday``, ``today``,
  ``(last|this|past) week``, ``(last|past) N days?``, ``(last|past) N hours?``, ``N days? ago``.
* :func:`v8_iso_date` / :func:`path_date` — the first ``\\d{4}-\\d{2}-\\d{2}`` of a path parsed the way V8 parses
  ``YYYY-MM-DDT00:00:00Z`` (day 01–31 accepted in every month and rolled over: ``2026-02-30`` → 2026-03-02;
  month 00/≥13 or day 00/≥32 invalid) — shared by HookClaw's decay, recency rank and temporal window.
* :func:`hookclaw_fts_tokens` — HookClaw v2.1's FTS query terms (§C.3, Appendix B).
* :func:`phase3_expansions` — the Phase-3 lightweight expansions (§D1.5, [A15], [A16]).
* :func:`context_terms` — entities/keywords of the recent conversation (seed 004 §1.2).

Query transforms registered with :func:`retrievers.candidates.arms.query_transform` (each returned string is one variant
arm ``name#i``): ``hookclaw_fts``, ``phase3_expansions``, ``context_synthesis``.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np

from retrievers.candidates.arms import query_transform
from retrievers.candidates.table import CandidateSet
from retrievers.stages.helpers.keywords import STOP_EN
from retrievers.text import JS_WS_CLASS, js_trim
from retrievers.types import Query


DAY = 86400.0

HOUR = 3600.0

#: JS ``Date`` range: ±8.64e15 ms
_JS_DATE_LIMIT_S = 8.64e12

_ISO_DAY = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of the proleptic Gregorian date (any year, incl. 0 and negatives)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def v8_iso_date(y: int, m: int, d: int) -> float | None:
    """``new Date("YYYY-MM-DDT00:00:00Z")`` in V8 → epoch seconds, or None when V8 yields an invalid date.

    V8 accepts day 01–31 in every month and rolls over (2026-02-30 → 2026-03-02); month 00/≥13 and day 00/≥32
    are invalid. Years 0000–9999 are taken literally (no 1900 mapping for ISO strings).
    """
    if not (1 <= m <= 12) or not (1 <= d <= 31):
        return None
    return (_days_from_civil(y, m, 1) + d - 1) * DAY


@lru_cache(maxsize=1 << 16)
def path_date(path: str) -> float | None:
    """HookClaw ``parseDateFromPath``: the *first* ``\\d{4}-\\d{2}-\\d{2}`` anywhere in ``path`` (ASCII digits),
    00:00 UTC with V8 semantics; no match or an invalid first match → None (later matches are not tried)."""
    if not path:
        return None
    m = _ISO_DAY.search(path)
    if not m:
        return None
    return v8_iso_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def path_dates(cs: CandidateSet) -> np.ndarray:
    """(Q, C) HookClaw path date of every candidate (epoch seconds; NaN = undated / invalid / padding)."""
    def build():
        corpus = cs.corpus
        full = corpus.cached(("hookclaw.path_date",), lambda: np.array(
            [np.nan if (t := path_date(p)) is None else t for p in corpus.paths], dtype=np.float64))
        out = full[np.where(cs.valid, cs.doc, 0)]
        return np.where(cs.valid, out, np.nan)
    return cs.memo(("hookclaw.path_dates",), build)


_S = f"[{JS_WS_CLASS}]"  # JS \s (Unicode whitespace even without the u flag)

_FILE_PATH = re.compile(rf"(?:^|[{JS_WS_CLASS}(])([.\/]?[\w\-./]+\.\w{{1,6}})\b", re.ASCII)

_ERROR_CODE = re.compile(r"\b([A-Z][A-Z_]*\d+[A-Z0-9]*)\b", re.ASCII)

_PASCAL = re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+){1,})\b", re.ASCII)

_PACKAGE = re.compile(r"@[\w\-]+\/[\w\-]+", re.ASCII)

_QUOTED = re.compile(r"[\"']([^\"']{2,50})[\"']")

_LEADING_DIGIT = re.compile(r"^[0-9]")


@lru_cache(maxsize=1 << 15)
def _entities(text: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for m in _FILE_PATH.finditer(text):
        p = m.group(1)
        if not _LEADING_DIGIT.match(p) and len(p) > 3:  # JS length; these are ASCII-only matches
            seen.setdefault(p, None)
    for m in _ERROR_CODE.finditer(text):
        seen.setdefault(m.group(1), None)
    for m in _PASCAL.finditer(text):
        seen.setdefault(m.group(1), None)
    for m in _PACKAGE.finditer(text):
        seen.setdefault(m.group(0), None)
    for m in _QUOTED.finditer(text):
        seen.setdefault(m.group(1), None)
    return tuple(seen)


def extract_entities(text: str) -> list[str]:
    """HookClaw ``extractEntities`` (§C.2): a set in insertion order — file paths (capture of
    ``(?:^|[\\s(])([.\\/]?[\\w\\-./]+\\.\\w{1,6})\\b`` kept if it does not start with a digit and is longer than 3),
    error codes ``\\b([A-Z][A-Z_]*\\d+[A-Z0-9]*)\\b``, PascalCase ``\\b([A-Z][a-z]+(?:[A-Z][a-z]+){1,})\\b``,
    scoped packages ``@[\\w\\-]+\\/[\\w\\-]+``, quoted ``["']([^"']{2,50})["']``.

    >>> extract_entities("Why does NETSDK1005 appear when I run dotnet build in src/Api/Api.csproj?")
    ['src/Api/Api.csproj', 'NETSDK1005']
    """
    if not text:
        return []
    return list(_entities(text))


_YESTERDAY = re.compile(r"\byesterday\b", re.ASCII)

_TODAY = re.compile(r"\btoday\b", re.ASCII)

_WEEK = re.compile(rf"\b(last|this|past){_S}+week\b", re.ASCII)

_LAST_DAYS = re.compile(rf"\b(?:last|past){_S}+([0-9]+){_S}+days?\b", re.ASCII)

_LAST_HOURS = re.compile(rf"\b(?:last|past){_S}+([0-9]+){_S}+hours?\b", re.ASCII)

_DAYS_AGO = re.compile(rf"\b([0-9]+){_S}+days?{_S}+ago\b", re.ASCII)


def _day_start(t: float) -> float:
    return math.floor(t / DAY) * DAY if math.isfinite(t) else math.nan


def _valid_js_time(t: float) -> float:
    return t if abs(t) <= _JS_DATE_LIMIT_S else math.nan


def _count(s: str) -> float:
    """``parseInt`` of a digit run as a float (huge values become inf → an invalid JS Date → NaN bound)."""
    return float(s) if len(s) < 300 else math.inf


def parse_temporal(text: str, now: float) -> tuple[float, float] | None:
    """HookClaw ``parseTemporalExpression`` (§C.2) → ``(start, end)`` epoch seconds (UTC), or None.

    ``now`` is the query's as-of time (NaN → None: no notion of now). Rules, first match wins, on the
    lower-cased text: ``yesterday`` → [yesterday 00:00, 23:59:59.999]; ``today`` → [today 00:00, 23:59:59.999];
    ``(last|this|past) week`` → [now − 7 d at 00:00, now]; ``(last|past) N days?`` → [now − N d at 00:00, now];
    ``(last|past) N hours?`` → [now − N h, now]; ``N days? ago`` → that whole day. Out-of-range JS dates → NaN
    bounds (a NaN bound filters nothing, as JS comparisons with an invalid Date are false).
    """
    if not text or now is None or math.isnan(now):
        return None
    low = text.lower()
    if _YESTERDAY.search(low):
        s = _day_start(now - DAY)
        return s, s + DAY - 0.001
    if _TODAY.search(low):
        s = _day_start(now)
        return s, s + DAY - 0.001
    if _WEEK.search(low):
        return _day_start(now - 7 * DAY), now
    m = _LAST_DAYS.search(low)
    if m:
        return _valid_js_time(_day_start(now - _count(m.group(1)) * DAY)), now
    m = _LAST_HOURS.search(low)
    if m:
        return _valid_js_time(now - _count(m.group(1)) * HOUR), now
    m = _DAYS_AGO.search(low)
    if m:
        s = _valid_js_time(_day_start(now - _count(m.group(1)) * DAY))
        return s, s + DAY - 0.001
    return None


def query_entities(cs: CandidateSet) -> list[list[str]]:
    """HookClaw entities of every query (on the JS-trimmed prompt, as the hook does); memoised."""
    return cs.memo(("hookclaw.entities",), lambda: [extract_entities(js_trim(q.text)) for q in cs.queries])


def temporal_windows(cs: CandidateSet) -> np.ndarray:
    """(Q, 2) HookClaw temporal window per query resolved against its ``as_of`` (NaN rows = no window)."""
    def build():
        out = np.full((cs.Q, 2), np.nan)
        for i, q in enumerate(cs.queries):
            w = parse_temporal(js_trim(q.text), float(cs.as_of[i]))
            if w is not None:
                out[i] = w
        return out
    return cs.memo(("hookclaw.temporal",), build)


#: HookClaw v2.1 ``fts-search.js`` stop words (Appendix B, 107 words)
HOOKCLAW_STOP = frozenset("""a an the is are was were be been being have has had do does did will would shall
should may might must can could i me my we our you your he she it they them their its this that these those of in
to for with on at from by about as into through during before after above below and but or nor not so if then than
when where how what which who whom why all each every both few more most other some such no only same just also very
up out over any here there remember tell know think use using used""".split())
assert len(HOOKCLAW_STOP) == 107

_FTS_TOKEN = re.compile(r"[a-z0-9_.-]+")


def hookclaw_fts_tokens(text: str) -> list[str]:
    """HookClaw v2.1 ``tokenizeQuery``: ``[a-z0-9_.-]+`` runs of the lower-cased query, dropping tokens shorter
    than 2 and the 107 stop words (duplicates kept, order kept). ``How does the deploy pipeline work and where are
    backups?`` → ``[deploy, pipeline, work, backups]``."""
    return [t for t in _FTS_TOKEN.findall((text or "").lower()) if len(t) >= 2 and t not in HOOKCLAW_STOP]


@query_transform("hookclaw_fts")
def hookclaw_fts(q: Query) -> list[str]:
    """HookClaw v2.1 FTS query (§C.3) on the trimmed prompt: the tokens joined by spaces (the lexical arm ORs
    them, ``match = "any"``); no tokens → [] (no FTS search)."""
    toks = hookclaw_fts_tokens(js_trim(q.text))
    return [" ".join(toks)] if toks else []


_PUNCT_OR_SYMBOL = re.compile(r"[^\w\s]|_", re.UNICODE)

_SPACES = re.compile(r"\s+")

_WORD = re.compile(r"\w+")

_DIGITS = re.compile(r"\d+")

_MONTHS = ("january|february|march|april|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")

_DAYNUM = r"\d{1,2}(?:st|nd|rd|th)?"

_DATE_PATTERNS = [
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    # month-name dates: "March 3, 2025", "3 March 2025", "March 2025", "March" ("May" only with a day or year,
    # since the bare word is a modal verb)
    re.compile(rf"\b(?:{_DAYNUM}\s+(?:of\s+)?)?(?:{_MONTHS})\.?(?:\s+{_DAYNUM}\b)?(?:,?\s+(?:19|20)\d\d\b)?\b",
               re.IGNORECASE),
    re.compile(rf"\b(?:{_DAYNUM}\s+(?:of\s+)?may(?:,?\s+(?:19|20)\d\d)?|may\s+{_DAYNUM}(?:,?\s+(?:19|20)\d\d)?"
               rf"|may,?\s+(?:19|20)\d\d)\b", re.IGNORECASE),
    re.compile(r"\b(?:19|20)\d\d\b"),
]


def _norm_punct(text: str) -> str:
    """Lower-case, punctuation/symbols replaced by a space, whitespace collapsed (assumption: 'strip' replaces
    by a space so ``openclaw.json`` stays two searchable words instead of ``openclawjson``)."""
    return _SPACES.sub(" ", _PUNCT_OR_SYMBOL.sub(" ", text.lower())).strip()


def _toggle_plural(tok: str) -> str:
    """[A16] naive singular/plural toggle: strip a trailing ``s`` if present, else add one."""
    return tok[:-1] if tok.endswith("s") and len(tok) > 1 else tok + "s"


def strip_dates(text: str) -> str:
    """The query with ``YYYY-MM-DD``, month-name dates and 4-digit years (19xx/20xx) removed."""
    out = text
    for p in _DATE_PATTERNS:
        out = p.sub(" ", out)
    return _SPACES.sub(" ", out).strip()


@lru_cache(maxsize=1 << 15)
def _expansions(text: str, max_expansions: int) -> tuple[str, ...]:
    base = _norm_punct(text)
    cands: list[str] = [base]
    toks = _WORD.findall(base)
    content = [t for t in toks if t not in STOP_EN and not _DIGITS.fullmatch(t)]
    # the two longest distinct non-stop-word tokens; equal lengths keep first occurrence
    order: dict[str, int] = {}
    for i, t in enumerate(content):
        order.setdefault(t, i)
    longest = sorted(order, key=lambda t: (-len(t), order[t]))[:2]
    for t in longest:
        cands.append(" ".join(_toggle_plural(w) if w == t else w for w in toks))
    dateless = strip_dates(text)
    if dateless != _SPACES.sub(" ", text).strip() and dateless:
        cands.append(dateless)
    out: list[str] = []
    seen = {text.strip(), js_trim(text)}
    for c in cands:
        if c and c not in seen:
            seen.add(c)
            out.append(c)
    return tuple(out[:max_expansions])


def phase3_expansions(text: str, max_expansions: int = 4) -> list[str]:
    """Phase-3 lightweight expansions (§D1.5), generated in this order and truncated to 4 [A15]:

    1. lower-case + punctuation stripped (punctuation and symbols → space, whitespace collapsed);
    2.–3. the normalised query with a singular/plural toggle [A16] of each of the two longest non-stop-word tokens
       (OpenClaw's English stop words; pure digits excluded; equal lengths → first occurrence);
    4. the original query with any ``YYYY``, ``YYYY-MM-DD`` or month-name date removed (only if one was present).

    Expansions equal to the query or to an earlier expansion are dropped (a duplicate pass cannot change the
    merged max). ``how did we configure the home network?`` → ``["how did we configure the home network",
    "how did we configures the home network", "how did we configure the home networks"]``.
    """
    return list(_expansions(text, max_expansions))


@query_transform("phase3_expansions")
def phase3_expansions_transform(q: Query) -> list[str]:
    """Phase-3 expansion passes (§D1.5): one variant arm ``name#i`` per expansion (the main pass is the raw
    arm); [] when the query yields none."""
    text = js_trim(q.text)
    return phase3_expansions(text) if text else []


_KEYWORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,}")

CONTEXT_WINDOW = 10

CONTEXT_MIN_COUNT = 2

CONTEXT_MAX_TERMS = 8


def context_terms(prompt: str, context: list[str], window: int = CONTEXT_WINDOW, min_count: int = CONTEXT_MIN_COUNT,
                  max_terms: int = CONTEXT_MAX_TERMS) -> list[str]:
    """Terms from the last ``window`` context messages to append to ``prompt`` (seed 004 §1.2):
    HookClaw entities of each message (newest message first, extraction order within a message), then keywords
    (``[A-Za-z][A-Za-z0-9_-]{2,}``, not a HookClaw or OpenClaw stop word) occurring ``>= min_count`` times across
    the window (count desc, then newest first-seen). Terms already in the prompt (case-insensitive substring)
    and duplicates (case-insensitive) are dropped; at most ``max_terms``."""
    msgs = [m for m in (context or [])[-window:] if m]
    if not msgs:
        return []
    low_prompt = prompt.lower()
    picked: list[str] = []
    seen: set[str] = set()

    def add(term: str) -> None:
        k = term.lower()
        if k in seen or k in low_prompt or len(picked) >= max_terms:
            return
        seen.add(k)
        picked.append(term)

    for m in reversed(msgs):
        for e in extract_entities(m):
            add(e)
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    pos = 0
    for m in reversed(msgs):
        for tok in _KEYWORD.findall(m):
            k = tok.lower()
            if k in HOOKCLAW_STOP or k in STOP_EN:
                continue
            counts[k] = counts.get(k, 0) + 1
            first.setdefault(k, pos)
            pos += 1
    for k in sorted((k for k, c in counts.items() if c >= min_count), key=lambda k: (-counts[k], first[k])):
        add(k)
    return picked


@query_transform("context_synthesis")
def context_synthesis(q: Query) -> list[str]:
    """Seed 004 §1.2 conversation-aware query synthesis: ``"{prompt} {terms…}"`` with :func:`context_terms` of
    the query's ``context`` (last 10 messages, keywords seen ≥ 2 times, ≤ 8 terms); the prompt unchanged when
    there is no context or nothing to add; [] for an empty prompt."""
    text = js_trim(q.text)
    if not text:
        return []
    terms = context_terms(text, q.context)
    return [f"{text} {' '.join(terms)}" if terms else text]


__all__ = ["CONTEXT_MAX_TERMS", "CONTEXT_MIN_COUNT", "CONTEXT_WINDOW", "DAY", "HOOKCLAW_STOP", "HOUR",
           "context_synthesis", "context_terms", "extract_entities", "hookclaw_fts", "hookclaw_fts_tokens",
           "parse_temporal", "path_date", "path_dates", "phase3_expansions", "phase3_expansions_transform",
           "query_entities", "strip_dates", "temporal_windows", "v8_iso_date"]
