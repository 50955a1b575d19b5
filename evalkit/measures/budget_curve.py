"""Quality at a token budget: what each retriever buys for the tokens it puts in the prompt.

For every budget ``B`` of :data:`BUDGETS` (LLM tokens, ``cl100k_base`` via the project's offline tokenizer,
:func:`retrievers.tokens.count_tokens`), a retriever's final ranked list is packed in rank order, whole
chunks, stopping at the first chunk that would exceed ``B`` (a chunk's tokens = its text's tokens; no block
template). Of that packed list:

* ``ndcg@10`` / ``recall`` (all relevant notes, no cut-off) over the answerable queries;
* ``relevant_token_share`` — share of the packed tokens that come from relevant (grade >= 1) chunks, pooled;
* ``mean_tokens`` — mean packed tokens per query (all queries; a skipped query packs 0).

The same budget applies to every retriever (the preset's own packer is not used here: its output is the
``injected_*`` measures); a list shorter than the budget simply stops early, so a retriever that keeps 3 notes
flattens out.
"""
from __future__ import annotations

import numpy as np

from evalkit.measures.lists import evaluate, relevant_qrels
from retrievers.tokens import count_tokens

BUDGETS = (200, 400, 800, 1200, 2000, 4000)
CURVE_METRIC = "ndcg@10"


def pack(ranked: list[str], tokens: dict[str, int], budget: int) -> list[str]:
    out, used = [], 0
    for d in ranked:
        t = tokens[d]
        if used + t > budget:
            break
        out.append(d)
        used += t
    return out


def budget_curve(qrels: dict[str, dict[str, int]], ranked: dict[str, list[str]], texts: dict[str, str],
                 budgets=BUDGETS) -> list[dict]:
    """One row per budget: ``{"budget", "ndcg@10", "recall", "relevant_token_share", "mean_tokens"}``."""
    tokens = {d: count_tokens(texts.get(d, "")) for lst in ranked.values() for d in lst}
    rq = relevant_qrels(qrels)
    rows = []
    for b in budgets:
        packed = {q: pack(lst, tokens, b) for q, lst in ranked.items()}
        pq = evaluate(qrels, {q: [(d, 0.0) for d in lst] for q, lst in packed.items()}, [CURVE_METRIC])
        rec = [len(set(packed.get(q, [])) & set(rel)) / len(rel) for q, rel in rq.items()]
        used = [sum(tokens[d] for d in lst) for lst in packed.values()]
        rel_tok = sum(tokens[d] for q, lst in packed.items() for d in lst if d in rq.get(q, {}))
        vals = list(pq[CURVE_METRIC].values())
        rows.append({"budget": b, CURVE_METRIC: float(np.mean(vals)) if vals else float("nan"),
                     "recall": float(np.mean(rec)) if rec else float("nan"),
                     "relevant_token_share": rel_tok / sum(used) if sum(used) else float("nan"),
                     "mean_tokens": float(np.mean(used)) if used else float("nan")})
    return rows


__all__ = ["BUDGETS", "CURVE_METRIC", "budget_curve", "pack"]
