"""JavaScript string semantics the seed systems rely on (library-wide: the corpus and the stages use them)."""
from __future__ import annotations

import math

# ---- JavaScript string semantics -----------------------------------------------------------------------------

#: JS whitespace (trim and regex ``\s``): WhiteSpace + LineTerminator of ECMAScript 2015+.
JS_WS = ("\t\n\x0b\x0c\r \xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
         + "\u2028\u2029\u202f\u205f\u3000\ufeff")
#: the same set as a regex character-class body (for Python ``re`` / ``regex`` patterns)
JS_WS_CLASS = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(s: str) -> str:
    """JavaScript ``s.trim()``: removes U+FEFF, NBSP, U+3000, U+2028…, but *not* U+001C–U+001F or U+0085."""
    return s.strip(JS_WS)


def utf16_len(s: str) -> int:
    """JavaScript ``s.length`` (astral characters count 2; a lone surrogate 1), at C speed."""
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


def utf16_truncate(s: str, max_units: float) -> str:
    """The longest prefix of ``s`` of at most ``max_units`` UTF-16 code units that does not split a surrogate
    pair (OpenClaw ``truncateUtf16Safe``: ``limit = max(0, floor(max_units))``, cut there, drop a dangling high
    surrogate). Raw values as the original takes them: a limit <= 0 (or below 1) gives ``""``, 2.9 cuts at 2.
    Callers that use 0 to mean "no limit" must say so themselves."""
    if max_units != max_units or max_units < 1:  # NaN: Math.max(0, NaN) is NaN and length <= NaN is false
        return s[:0]
    if max_units == math.inf:
        return s
    max_units = math.floor(max_units)
    if len(s) <= max_units // 2:
        return s
    if utf16_len(s) == len(s):  # no astral character: one unit per character
        return s[:max_units]
    units = 0
    for i, ch in enumerate(s):
        w = 2 if ord(ch) > 0xFFFF else 1
        if units + w > max_units:
            return s[:i]
        units += w
    return s


__all__ = ["JS_WS", "JS_WS_CLASS", "js_trim", "utf16_len", "utf16_truncate"]


# ---- counts in words -----------------------------------------------------------------------------------------

def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 query"``, ``"2 queries"``, ``"1,204 documents"``: a count with its noun in the right number (``many``:
    an irregular plural; else ``-y`` → ``-ies`` after a consonant, ``-s`` otherwise).

    >>> plural(1, "query"), plural(2, "query"), plural(1, "new text"), plural(12_000, "retriever")
    ('1 query', '2 queries', '1 new text', '12,000 retrievers')
    """
    if n == 1:
        return f"{n:,} {word}"
    if many is None:
        many = word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"
    return f"{n:,} {many}"
