"""JavaScript string semantics the seed systems rely on (library-wide: the corpus and the stages use them)."""
from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

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


# ---- JavaScript number rendering ----------------------------------------------------------------------------

def js_to_fixed(x: float, digits: int = 3) -> str:
    """``Number.prototype.toFixed``: the exact binary value rounded half away from zero (Python's ``%.3f``
    rounds the exact value half-even, which differs on exact ties such as 0.0625)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if abs(x) >= 1e21:
        return js_number(x)
    if x == 0:
        x = 0.0  # (-0).toFixed → "0.000" (but (-0.0004).toFixed(3) → "-0.000")
    q = Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:f}"


def js_number(x: float) -> str:
    """JavaScript ``Number::toString`` (as written by ``JSON.stringify``; non-finite → ``null``)."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 2 ** 53:  # exact integers print as such (larger ones use shortest digits)
        return str(int(x))
    r = repr(float(x))
    if "e" not in r:  # Python and JS agree outside exponent notation (shortest round-trip digits)
        return r
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(float(x)))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    k = len(digits)
    n = t.exponent + k
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    mant = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mant}e{'+' if e >= 0 else '-'}{abs(e)}"


__all__ = ["JS_WS", "JS_WS_CLASS", "js_trim", "utf16_len", "utf16_truncate", "js_to_fixed", "js_number"]


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
