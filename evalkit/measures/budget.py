"""Injection budgets: what a preset declares, and the share of queries whose injected block stays within limits.

A budget / policy is a dict of limits keyed as a preset's ``[budget]`` table: ``max_chunks``, ``max_tokens``,
``max_chars`` (the whole injected block) and, for policies, ``max_snippet_chars`` (the longest single snippet).
The two engines check the quantities they record:

* the list engine (:func:`compliance`, used by ``evaluate_run`` and the replay) reads each query's budget record
  (``chunks``, ``tokens``, ``chars``, ``max_snippet_chars``) — every limit present is checked when the record has
  the quantity;
* the array engine (:func:`compliance_arrays`, the sweep's Scorer) reads the same quantities as per-query arrays
  (the packer's ``st.info["budget"]``, or ``chunks`` / ``chars`` counted on the injected block when the pipeline
  has no packer) and applies the same rule, so both engines give the same share on the same run.

A pipeline without a packer records no ``tokens`` and no ``max_snippet_chars``: those limits are not checked for
it, on either engine (nothing measured them).

No declared limit = nothing can exceed it: compliance 1.0 (NaN without queries).
"""
from __future__ import annotations

import numpy as np

BUDGET_KEYS = ("max_chunks", "max_tokens", "max_chars")
# limit key -> the per-query budget record key it bounds
_RECORD = {"max_chunks": "chunks", "max_tokens": "tokens", "max_chars": "chars",
           "max_snippet_chars": "max_snippet_chars"}


def has_limits(budget: dict | None) -> bool:
    return any((budget or {}).get(k) is not None for k in BUDGET_KEYS)


def declared_budget(p) -> dict:
    """The injection budget a preset declares: its ``[budget]`` table, completed by its packer's limits
    (a ``budget.pack`` stage's ``max_chunks`` / ``max_tokens`` / ``max_chars`` the table does not set)."""
    out = dict(p.budget or {})
    for s in p.stages:
        if s.name == "budget.pack":
            for k in BUDGET_KEYS:
                v = getattr(s, k, None)
                if v is not None and k not in out:
                    out[k] = v
    return out


def _limit_checks(limits: dict, packer_tokens: bool) -> list[tuple[tuple[str, ...], int]]:
    """(record keys to read, first present wins; limit) for every limit present in ``limits``."""
    out = []
    for k in ("max_chunks", "max_tokens", "max_chars", "max_snippet_chars"):
        lim = limits.get(k)
        if lim is None:
            continue
        key = _RECORD[k]
        out.append((("budget_tokens", "tokens") if key == "tokens" and packer_tokens else (key,), lim))
    return out


def compliance(budgets: list[dict], limits: dict, packer_tokens: bool = False) -> float:
    """Share of queries whose budget record respects every limit present in ``limits`` (NaN without queries).

    ``packer_tokens``: check ``max_tokens`` against the packer's own token count (``budget_tokens``, the quantity
    the preset's packer limits) when the record has it, else ``tokens``. A quantity the record lacks is not
    checked."""
    if not budgets:
        return float("nan")
    checks = _limit_checks(limits, packer_tokens)
    ok = 0
    for b in budgets:
        good = True
        for keys, lim in checks:
            val = next((b[k] for k in keys if b.get(k) is not None), None)
            if val is not None and val > lim:
                good = False
        ok += good
    return ok / len(budgets)


def compliance_arrays(b: dict[str, np.ndarray], limits: dict, n: int, packer_tokens: bool = False) -> float:
    """:func:`compliance` over per-query arrays (``chunks`` / ``tokens`` / ``budget_tokens`` / ``chars`` /
    ``max_snippet_chars``) of ``n`` queries: the same rule, the same share."""
    ok = np.ones(n, dtype=bool)
    for keys, lim in _limit_checks(limits, packer_tokens):
        key = next((k for k in keys if k in b), None)
        if key is not None:
            ok &= np.asarray(b[key]) <= lim
    return float(ok.mean())


__all__ = ["BUDGET_KEYS", "has_limits", "declared_budget", "compliance", "compliance_arrays"]
