"""Injection budgets: what a preset declares, and the share of queries whose injected block stays within limits.

A budget / policy is a dict of limits keyed as a preset's ``[budget]`` table: ``max_chunks``, ``max_tokens``,
``max_chars`` (the whole injected block) and, for policies, ``max_snippet_chars`` (the longest single snippet).
The two engines check the quantities they record:

* the list engine (:func:`compliance`, used by ``evaluate_run`` and the replay) reads each query's budget record
  (``chunks``, ``tokens``, ``chars``, ``max_snippet_chars``) — every limit present is checked when the record has
  the quantity;
* the array engine (:func:`compliance_arrays`, the sweep's Scorer) has per-query ``chunks`` / ``tokens`` /
  ``chars`` arrays only, so a policy's ``max_snippet_chars`` is not checked there (the fast path's
  ``<policy>_compliance`` is chunks / tokens / chars compliance; kept as it always was).

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


def compliance(budgets: list[dict], limits: dict, packer_tokens: bool = False) -> float:
    """Share of queries whose budget record respects every limit present in ``limits`` (NaN without queries).

    ``packer_tokens``: check ``max_tokens`` against the packer's own token count (``budget_tokens``, the quantity
    the preset's packer limits) when the record has it, else ``tokens``."""
    if not budgets:
        return float("nan")
    checks = [(_RECORD[k], limits.get(k)) for k in ("max_chunks", "max_tokens", "max_chars", "max_snippet_chars")]
    ok = 0
    for b in budgets:
        good = True
        for key, lim in checks:
            if key == "tokens" and packer_tokens:
                val = b.get("budget_tokens", b.get("tokens"))
            else:
                val = b.get(key)
            if lim is not None and val is not None and val > lim:
                good = False
        ok += good
    return ok / len(budgets)


def compliance_arrays(b: dict[str, np.ndarray], limits: dict, n: int) -> float:
    """:func:`compliance` over per-query arrays (``chunks`` / ``tokens`` / ``chars``) of ``n`` queries."""
    ok = np.ones(n, dtype=bool)
    for key, limit in (("chunks", limits.get("max_chunks")), ("tokens", limits.get("max_tokens")),
                       ("chars", limits.get("max_chars"))):
        if limit is not None and key in b:
            ok &= b[key] <= limit
    return float(ok.mean())


__all__ = ["BUDGET_KEYS", "has_limits", "declared_budget", "compliance", "compliance_arrays"]
