"""Answer measures that need no judge, the abstention test, and agreement between judges.

* **Normalisation** (SQuAD v1.1's official evaluation script, Rajpurkar et al. 2016): lower-case, drop punctuation,
  drop the articles *a an the*, collapse white space.
* ``answer_exact`` = [normalise(answer) == normalise(gold)];
* ``answer_f1`` = token F1 between the normalised answer and gold: ``2·P·R / (P + R)`` over the multiset of shared
  tokens (``P = shared / |answer tokens|``, ``R = shared / |gold tokens|``; 0 when nothing is shared);
* ``answer_in_context`` = [the normalised gold occurs in the normalised injected block, on token boundaries];
* :func:`declined` — the reader declined to answer: its normalised answer starts with one of :data:`DECLINE`
  (the reader prompt asks for exactly "I don't know" when the notes do not say);
* :func:`cohen_kappa` — Cohen (1960): ``κ = (p_o − p_e) / (1 − p_e)`` over two raters' binary verdicts, ``p_e`` from
  each rater's own marginals; 1 when both raters give one and the same label to every item (``p_e = 1``).

Usage::

    >>> answer_f1("The red car", "a red bus")
    0.5
    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0])
    0.5
"""
from __future__ import annotations

import re
import string
from collections import Counter

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
#: normalised openings that mean the reader declined (the reader prompt asks for "I don't know")
DECLINE = ("i dont know", "i do not know", "not mentioned", "no information", "unknown", "cannot answer",
           "cant answer", "cannot be determined", "notes do not", "not in notes", "not stated")


def normalize(s) -> str:
    s = "".join(ch for ch in str(s).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def answer_exact(answer: str, gold) -> float:
    return float(normalize(answer) == normalize(gold))


def answer_f1(answer: str, gold) -> float:
    a, g = normalize(answer).split(), normalize(gold).split()
    shared = sum((Counter(a) & Counter(g)).values())
    if not a or not g or shared == 0:
        return float(a == g)
    p, r = shared / len(a), shared / len(g)
    return 2 * p * r / (p + r)


def answer_in_context(gold, block: str) -> float:
    g = normalize(gold)
    return float(bool(g) and f" {g} " in f" {normalize(block)} ")


def declined(answer: str) -> bool:
    a = normalize(answer)
    return not a or a.startswith(DECLINE)


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's κ of two binary raters over the same items (NaN for no items)."""
    n = len(a)
    if n == 0 or n != len(b):
        return float("nan")
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return 1.0 if pe == 1 else (po - pe) / (1 - pe)
