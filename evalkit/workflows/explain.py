"""Stage-level replay: score a candidate set with a preset and explain every candidate's path through it."""
from __future__ import annotations

import numpy as np

from retrievers.candidates.table import CandidateSet
from retrievers.pipeline import Pipeline, injected_mask
from retrievers.stages import Context
from retrievers.types import format_time


def score_candidates(p: Pipeline, cs: CandidateSet) -> dict:
    """Ranked JSON with, per query, the list after every stage (id, score, rank) and where each candidate left."""
    st = p.run(cs, Context(trace=True))
    ids = cs.corpus.ids
    inj = injected_mask(st)
    queries = []
    for qi, q in enumerate(cs.queries):
        trace = []
        alive: set[str] | None = None
        for name, col, score, skipped, _extra in st.trace:
            rows = [{"id": ids[cs.doc[qi, c]], "score": _f(s), "rank": r + 1}
                    for r, (c, s) in enumerate((c, s) for c, s in zip(col[qi], score[qi]) if c >= 0)]
            now = {r["id"] for r in rows}
            entry = {"stage": name, "rows": rows}
            if alive is not None:
                dropped = sorted(alive - now)
                if dropped:
                    entry["dropped"] = dropped
            if skipped[qi]:
                entry["skipped"] = True
            alive = now
            trace.append(entry)
        ranked = [{"id": ids[cs.doc[qi, c]], "score": _f(s), "rank": r + 1, "arms": _arms(cs, qi, c)}
                  for r, (c, s) in enumerate((c, s) for c, s in zip(st.col[qi], st.score[qi]) if c >= 0)]
        injected = [ids[cs.doc[qi, c]] for c, m in zip(st.col[qi], inj[qi]) if c >= 0 and m]
        out = {"query": q.text, "as_of": format_time(q.as_of), "skipped": bool(st.skipped[qi]),
               "ranked": ranked, "injected": injected, "trace": trace}
        blocks = st.info.get("blocks")
        if blocks is not None:
            out["injected_block"] = blocks[qi]
        budget = st.info.get("budget")
        if budget:
            out["budget"] = {k: int(v[qi]) for k, v in budget.items()}
        queries.append(out)
    return {"preset": p.name, "preset_hash": p.hash, "queries": queries}


def _arms(cs: CandidateSet, qi: int, c: int) -> dict:
    """The raw arm evidence behind a row: each arm's raw score and rank (absent arms omitted)."""
    out = {}
    for name, h in cs.arms.items():
        if h.rank[qi, c] > 0:
            out[name] = {"score": _f(h.score[qi, c]), "rank": int(h.rank[qi, c])}
    return out


def _f(v) -> float | None:
    v = float(v)
    return None if np.isnan(v) or np.isinf(v) else round(v, 6)
