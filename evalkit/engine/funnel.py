"""Where a retriever loses its relevant notes: a recall funnel over its own stages, and the sensitivity of each
threshold stage.

Read-only: the funnel reads the per-stage trace the pipeline records when ``Context.trace`` is on
(:meth:`retrievers.pipeline.Pipeline.run`); it never changes a result.

**Funnel.** Per answerable query (at least one grade >= 1 note), the share of its relevant notes still present,
averaged over queries, at each step:

* ``candidates`` — anywhere in the arms' candidates (every arm to its own depth);
* one step per stage, in pipeline order — among the first ``K`` rows of the stage's output *by its running
  score* (``K`` = the preset's final cut-off: the longest final list of the run), nothing for a skipped query;
  a gate that runs before any row exists keeps the candidates of the queries it does not skip;
* ``injected`` — in the block the budget packer injects (all final rows when the pipeline has no packer).

A step can go up (a reranker can lift a note back into the top ``K``). The stage that loses the most is the one
with the largest drop from the step before it, as a share of the relevant notes among the candidates.

**Threshold sensitivity.** For every stage that declares a parameter compared with a score (``Stage.compares``:
a filter's score floor ``threshold``, a gate's ``threshold`` on the per-query score it names, a reranker's
``min_p``): the primary metric of the final
list with the threshold set to quantiles of the scores it is compared with (5 %, 15 %, …, 95 %) and at the
as-shipped value, whose quantile among those scores is reported too (how far it sits from where the local
embedding model puts the scores).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalkit.measures.lists import evaluate, relevant_qrels

QUANTILES = tuple(round(0.05 + 0.1 * i, 2) for i in range(10))
SENSITIVITY_METRIC = "ndcg@10"


@dataclass
class Funnel:
    steps: list[tuple[str, str, float]]          # (step label, stage type, mean share of relevant notes kept)
    k: int                                       # the final cut-off used for the stage steps
    n: int                                       # answerable queries
    thresholds: list[dict] = field(default_factory=list)  # one per threshold stage (see threshold_sensitivity)

    def worst(self) -> tuple[str, str, float] | None:
        """(stage label, stage type, share of the candidates' relevant notes lost there) of the largest drop."""
        if len(self.steps) < 2 or self.steps[0][2] <= 0:
            return None
        base = self.steps[0][2]
        drops = [(self.steps[i][0], self.steps[i][1], (self.steps[i - 1][2] - self.steps[i][2]) / base)
                 for i in range(1, len(self.steps))]
        best = max(drops, key=lambda d: d[2])
        return best if best[2] > 0 else None


def _share(rel: list[set], present: list[set]) -> float:
    vals = [len(r & p) / len(r) for r, p in zip(rel, present) if r]
    return float(np.mean(vals)) if vals else float("nan")


def _top_by_score(col: np.ndarray, score: np.ndarray, k: int) -> np.ndarray:
    """Per query the columns of the ``k`` best rows by score (valid rows only): a list of arrays."""
    out = []
    for c, s in zip(col, score):
        ok = c >= 0
        c, s = c[ok], s[ok]
        order = np.argsort(-np.nan_to_num(s, nan=-np.inf), kind="stable")[:k]
        out.append(c[order])
    return out


def recall_funnel(cs, stages, trace: list, injected: np.ndarray, final_col: np.ndarray,
                  qrels: dict[str, dict[str, int]]) -> Funnel:
    """The funnel of one pipeline run over candidate set ``cs`` (see the module docstring). ``stages``: the
    pipeline's stages (for their types), ``trace``: ``State.trace`` of the run, ``injected``: its injected mask,
    ``final_col``: its final ``State.col``."""
    rq = relevant_qrels(qrels)
    ids = cs.corpus.ids
    rel = [set(rq.get(q.id, {})) for q in cs.queries]
    n = sum(1 for r in rel if r)

    def docs(qi: int, cols) -> set:
        return {ids[cs.doc[qi, c]] for c in cols if c >= 0 and cs.doc[qi, c] >= 0}

    k = int(max(((final_col >= 0).sum(axis=1).max() if final_col.size else 0), 1))
    cands = [docs(qi, range(cs.C)) for qi in range(cs.Q)]
    steps = [("candidates", "arms", _share(rel, cands))]
    types = {s.display: s.name + (" (off)" if is_off(s) else "") for s in stages}
    rows_seen = False
    for label, col, score, skipped, _extra in trace:
        rows_seen = rows_seen or col.shape[1] > 0
        if not rows_seen:  # no rows yet (a gate before fusion): the candidates, minus the queries it skipped
            present = [set() if skipped[qi] else cands[qi] for qi in range(cs.Q)]
        else:
            top = _top_by_score(col, score, k)
            present = [set() if skipped[qi] else docs(qi, top[qi]) for qi in range(cs.Q)]
        steps.append((label, types.get(label, ""), _share(rel, present)))
    inj = [docs(qi, final_col[qi][injected[qi]]) for qi in range(cs.Q)]
    steps.append(("injected", "budget packer", _share(rel, inj)))
    return Funnel(steps, k, n)


def threshold_params(stage) -> str | None:
    """The numeric parameter a stage compares with a score, or None: the first parameter the stage declares in
    ``compares`` (:class:`retrievers.stages.base.Compared`: a filter's floor over rows, a gate's threshold on a
    per-query score it records, a reranker's floor over its own output) whose value is a number (a floor set to
    None is off)."""
    prm = stage.params()
    for name in getattr(stage, "compares", {}) or {}:
        v = prm.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return name
    return None


def threshold_stages(stages) -> list:
    """Stages with a numeric threshold parameter (:func:`threshold_params`)."""
    return [s for s in stages if threshold_params(s)]


def _compared_scores(pipeline, s, param: str, cs, ctx, trace: list) -> np.ndarray | None:
    """The scores ``param`` of stage ``s`` is compared with, as they reach it (its ``compares`` declaration): the
    rows entering it (from the trace), a per-query score it records in ``st.info``, or its own output scores with
    its floor off."""
    source = s.compares[param].score
    labels = [t[0] for t in trace]
    if source == "rows":
        i = labels.index(s.display) if s.display in labels else -1
        if i <= 0:
            return None
        col, score = trace[i - 1][1], trace[i - 1][2]
        return score[(col >= 0) & np.isfinite(score)]
    if source.startswith("info:"):
        st = pipeline.run(cs, _untraced(ctx))
        vals = np.asarray(st.info.get(source.removeprefix("info:"), []), dtype=np.float64)
        return vals[np.isfinite(vals)]
    off = pipeline.with_params({s.display: {param: None}})
    st = off.run(cs, type(ctx)(ctx.embedder, True, None, dict(ctx.options)))
    row = next((t for t in st.trace if t[0] == s.display), None)
    if row is None:
        return None
    col, score = row[1], row[2]
    return score[(col >= 0) & np.isfinite(score)]


def _untraced(ctx):
    return type(ctx)(ctx.embedder, False, None, dict(ctx.options))


def threshold_sensitivity(pipeline, cs, ctx, trace: list, qrels: dict[str, dict[str, int]],
                          metric: str = SENSITIVITY_METRIC) -> list[dict]:
    """Per threshold stage: ``{"stage", "type", "param", "as_shipped", "as_shipped_quantile", "points":
    [(threshold, quantile or None, metric value)]}``, the quantiles taken over the scores the threshold is
    compared with (:func:`_compared_scores`)."""
    out = []
    for s in threshold_stages(pipeline.stages):
        param = threshold_params(s)
        vals = _compared_scores(pipeline, s, param, cs, ctx, trace)
        if vals is None or vals.size == 0:
            continue
        shipped = float(s.params()[param])
        grid = [(float(np.quantile(vals, q)), q) for q in QUANTILES] + [(shipped, None)]
        points = []
        for thr, q in sorted(grid, key=lambda x: x[0]):
            p = pipeline.with_params({s.display: {param: thr}})
            st = p.run(cs, _untraced(ctx))
            ranked = {qq.id: [(cs.corpus.ids[cs.doc[qi, c]], 0.0) for c in st.col[qi] if c >= 0]
                      for qi, qq in enumerate(cs.queries)}
            pq = evaluate(qrels, ranked, [metric])[metric]
            points.append((thr, q, float(np.mean(list(pq.values()))) if pq else float("nan")))
        out.append({"stage": s.display, "type": s.name, "param": param, "as_shipped": shipped,
                    "as_shipped_quantile": float(np.mean(vals <= shipped)), "metric": metric, "points": points})
    return out


__all__ = ["Funnel", "recall_funnel", "threshold_params", "threshold_stages", "threshold_sensitivity", "QUANTILES"]


def is_off(stage) -> bool:
    """A stage disabled in its preset: ``enabled = false``, or every parameter its ``ablation_off`` declares at the
    value that switches it off."""
    prm = stage.params()
    if prm.get("enabled") is False:
        return True
    off = getattr(stage, "ablation_off", None)
    return bool(off) and all(prm.get(k) == v for k, v in off.items())
