"""Section 1 — sweep throughput over cached candidates, and ranx ``optimize_fusion`` side by side.

Part A: for every seed preset family, a product grid of >= 1,000 configurations (decay half-lives, fusion weights,
MMR λ, thresholds, …; :data:`FAMILIES`, read from ``tune/perf/presets.toml``) is evaluated with
:class:`evalkit.engine.sweep.Sweep` over the shared, cached candidate set of the dataset (the registry's
``perf.sweep`` suite: the first whose vectors are cached), metrics included (nDCG@10, recall@10, MRR@10 from
:mod:`evalkit.measures.arrays`; no metric reads the injected block, so the sweep drops trailing budget stages, as
it does in `evalkit tune`). Reported: configs/s and query-pipeline evaluations/s (configs × queries / wall
seconds, the median of :data:`FAMILY_REPEATS` timings; target >= 500,000/s, issue 45 item 6), the same per CPU
second (robust to load), stage applications actually run vs from scratch (prefix sharing), and the best config's
nDCG@10 vs as shipped.

Part B: the weighted-sum fusion grid of ranx (``optimize_fusion(method="wsum")``: weights ``(w, 1 − w)`` on
ranx's own step grid) over the same judged queries and the same two candidate runs (the vector and BM25 arms of
the ``hybrid-cc`` baseline, depth 100 each), metric nDCG@10:

* ranx with its own ``min-max`` normalisation (as a user would call it);
* ranx on runs already normalised by evalkit's ``minmax`` (``norm=None``), i.e. the exact same normalisation —
  evalkit's ``minmax`` maps a list whose scores are all equal to 1 where ranx maps it to 0, the only difference;
* evalkit: :class:`evalkit.engine.sweep.Sweep` of ``hybrid-cc`` over ``fuse.alpha`` on the same grid.

Both ranx calls are warmed up first (numba compilation / cache load, timed apart). Best weights are compared
allowing for ties (ranx keeps the *last* best weight, evalkit the first): they agree when ranx's pick is among
evalkit's best-scoring weights.
"""
from __future__ import annotations

import itertools
import time
import warnings

import numpy as np

from evalkit.data.registry import DEFAULT, load_dataset, suite, whole_split
from evalkit.engine.context import make_context
from evalkit.engine.runner import arm_map, shared_candidates
from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.measures import catalogue
from evalkit.measures.lists import relevant_qrels
from evalkit.perf.common import (
    Section,
    Table,
    loadavg,
    perf_presets,
    progress,
    readiness,
    subset,
    test_split,
)
from retrievers.candidates.table import ArmHits, CandidateSet, view
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import load_preset
from retrievers.stages import warm_kernels
from retrievers.stages.fuse.arms import arm_normalised

METRICS = catalogue.names("perf")
TARGET_EVALS = 500_000  # issue 45 item 6: every family at least 500 k query evals per second
MIN_CONFIGS = 1000

# preset → {stage label: {param: values}}, in table order, from tune/perf/presets.toml ([[sweep]]); the product of
# every list is the grid (>= 1,000 each). A weight in PAIRED also sets its partner to 1 − w.
FAMILIES: dict[str, dict[str, dict[str, list]]] = perf_presets()["sweep"]
PAIRED = {"vector_weight": "text_weight", "vec_weight": "lex_weight"}


def grid(space: dict[str, dict[str, list]], limit: int | None = None) -> list:
    """Every combination as a SweepConfig (paired weights filled in); ``limit`` keeps an evenly spaced subset."""
    dims = [(stage, name, values) for stage, params in space.items() for name, values in params.items()]
    out = []
    for combo in itertools.product(*[d[2] for d in dims]):
        ov: dict[str, dict] = {}
        for (stage, name, _), v in zip(dims, combo):
            ov.setdefault(stage, {})[name] = v
            if name in PAIRED:
                ov[stage][PAIRED[name]] = round(1.0 - v, 6)
        out.append(SweepConfig(overrides=ov))
    if limit and limit < len(out):
        pick = np.linspace(0, len(out) - 1, num=limit).astype(int)
        out = [out[i] for i in pick]
    return out


def choose_dataset(name: str | None, embedder, section: Section) -> tuple[str, str]:
    """(dataset, split): the first dataset of the registry's ``perf.sweep`` suite whose vectors are cached, on its
    whole-dataset split (e.g. every question of a dataset without a held-out split, else the test split), else
    the registry's default dataset (all queries; small enough to embed on the spot, e.g. on a fresh CI cache)."""
    if name:
        return name, whole_split(name)
    for cand in suite("perf.sweep"):
        r = readiness(cand, embedder)
        if r.ready:
            return cand, whole_split(cand)
        section.note(f"{cand} not used: {r.why}")
    section.note(f"using {DEFAULT} (all queries) instead")
    return DEFAULT, "all"


def slice_candidates(cs, n: int):
    """The first ``n`` queries of a candidate set (quick mode: the cached full set, sliced, no recomputation)."""
    if n >= cs.Q:
        return cs
    arms = {k: ArmHits(a.score[:n], a.rank[:n]) for k, a in cs.arms.items()}
    return CandidateSet(cs.corpus, cs.queries[:n], cs.doc[:n], arms,
                        qemb=lambda: None if cs.qemb is None else cs.qemb[:n], meta=dict(cs.meta))


def run(section: Section, dataset: str | None, limit: int | None, quick: bool, ranx_step: float = 0.01) -> dict:
    """``limit``: evenly spaced configs per family (None = every grid point, >= 1,000 each)."""

    embedder = Embedder(progress=False)
    name, split = choose_dataset(dataset, embedder, section)
    ds = load_dataset(name)
    ds = ds.split(split) if split in ds.splits else test_split(ds)
    if quick and name == DEFAULT:
        ds = subset(ds, 120)  # not the cached full query list: compute arms for the queries used only
    pipes = {n: load_preset(n) for n in list(FAMILIES) + ["hybrid-cc"]}
    progress(f"sweep: candidates for {name} ({len(ds.queries)} queries; cached after the first run)")
    index = SharedIndex(ds, embedder=embedder)
    t0 = time.perf_counter()
    cs_full = shared_candidates(index, ds.queries, list(pipes.values()))
    cand_s = time.perf_counter() - t0
    nq = 120 if quick else cs_full.Q
    cs = slice_candidates(cs_full, nq)
    qrels = {q.id: ds.qrels[q.id] for q in cs.queries if q.id in ds.qrels}
    ctx = make_context(pipes.values(), embedder)
    kernels_s = warm_kernels()  # numba import + compile / cache load, once per process: not a sweep cost
    t = section.table(Table(f"{name} ({cs.Q} queries, {len(qrels)} judged; shared candidates ready in "
                            f"{cand_s:.1f}s, on-disk cache), metrics {', '.join(METRICS)}, 1 process",
                            ["preset family", "configs", "seconds", "configs/s", "query evals/s", f">= {TARGET_EVALS:,}",
                             "evals/CPU s", "stage runs", "from scratch", "nDCG@10 shipped", "nDCG@10 best",
                             "load"]))
    out: dict = {"dataset": name, "queries": cs.Q, "families": {}}
    for fam, space in FAMILIES.items():
        p = pipes[fam]
        cfgs = grid(space, limit=limit)
        if limit is None and len(cfgs) < MIN_CONFIGS:
            section.note(f"{fam}: grid has {len(cfgs)} configs (< {MIN_CONFIGS})")
        progress(f"sweep: {fam}, {len(cfgs)} configs x {cs.Q} queries")
        res = median_sweep(lambda: Sweep(p, cs, qrels, METRICS, ctx=ctx), cfgs, FAMILY_REPEATS, fam)
        shipped = Sweep(p, cs, qrels, METRICS, ctx=ctx).run([SweepConfig()]).means["ndcg@10"][0]
        evals = len(cfgs) * cs.Q
        best = int(res.order("ndcg@10")[0])
        t.add(fam, len(cfgs), res.seconds, res.configs_per_second, res.query_evals_per_second,
              res.query_evals_per_second >= TARGET_EVALS, evals / max(res.cpu_seconds, 1e-9), res.stage_calls,
              res.naive_stage_calls, float(shipped), float(res.means["ndcg@10"][best]), loadavg().split()[0])
        out["families"][fam] = {"configs": len(cfgs), "seconds": res.seconds, "evals_per_s": res.query_evals_per_second,
                                "evals_per_cpu_s": evals / max(res.cpu_seconds, 1e-9),
                                "best": cfgs[best].overrides, "best_ndcg10": float(res.means["ndcg@10"][best]),
                                "stage_seconds": res.stage_seconds}
    t.notes.append(f"stage kernels (numba) compiled or loaded from the on-disk cache in {kernels_s:.1f}s before "
                   "timing (once per process)")
    t.notes.append(f"seconds: the median of {FAMILY_REPEATS} runs of each family's grid (one ~0.5-1 s timing moved "
                   "by up to 25% between identical runs on a 2-core VM)")
    t.notes.append("query evals/s = configs x queries / wall seconds (stages + metrics, candidates shared); "
                   "evals/CPU s divides by process CPU time instead (barely moves with machine load); "
                   "stage runs = stage applications actually executed, from scratch = configs x stages")
    if limit is not None or quick:
        t.notes.append(f"{limit} evenly spaced configs of each grid" + (f", first {nq} queries" if quick else "") +
                       " (the full run uses every grid point, >= 1,000 per family, and every query)")
    out["ranx"] = _ranx_vs_evalkit(section, cs, qrels, pipes["hybrid-cc"], ctx, step=ranx_step)
    return out


# ---- Part B: ranx optimize_fusion vs evalkit ------------------------------------------------------------------

#: timings of evalkit's fusion grid whose median is reported
EVALKIT_REPEATS = 5
#: timings of each preset family's grid whose median is reported
FAMILY_REPEATS = 3


def median_sweep(make_sweep, cfgs: list, repeats: int, what: str):
    """The median-time result of ``repeats`` fresh sweeps of ``cfgs`` (``make_sweep()`` builds one), each warmed
    on the shipped config first (views, gains and memoised features live on the candidate set, outside the
    timing). A single sub-second timing is at the mercy of one scheduler hiccup; the repeats must also agree to the
    bit (the same run is the same numbers), else this raises."""
    runs = []
    for _ in range(repeats):
        sw = make_sweep()
        sw.run([SweepConfig()])
        runs.append(sw.run(cfgs))
    res = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
    for r in runs:
        if any(not np.array_equal(r.means[m], res.means[m], equal_nan=True) for m in res.means):
            raise AssertionError(f"the repeated sweeps of {what} disagree")  # never: the same run, the same numbers
    return res


def _runs_for_ranx(v, qids: list[str], normalised: bool):
    """Two ranx Runs (vector, BM25) from the hybrid-cc view of the candidates; raw or evalkit-minmax scores."""
    ids = v.corpus.ids
    runs = []
    for arm in ("vec", "bm25"):
        h = v.arm(arm)
        if normalised:
            present, score = arm_normalised(v, arm, None, "identity", "minmax")
        else:
            present, score = h.rank > 0, h.score
        d: dict[str, dict[str, float]] = {}
        for qi, q in enumerate(v.queries):
            if q.id not in qids:
                continue
            cols = np.flatnonzero(present[qi])
            d[q.id] = {ids[v.doc[qi, c]]: float(score[qi, c]) for c in cols} or {"__no_hit__": 0.0}
        runs.append(d)
    return runs


def _ranx_vs_evalkit(section: Section, cs, qrels: dict, p, ctx, step: float) -> dict:
    from ranx import Qrels, Run, optimize_fusion  # lazy: startup
    from ranx.fusion_optimization.optimize_weights import (  # lazy: startup
        get_possible_weights,
        get_trial_configs,
    )

    progress("sweep: ranx optimize_fusion vs evalkit weighted-sum sweep")
    rq = relevant_qrels(qrels)
    qids = set(rq)
    v = view(cs, arm_map(p))
    trials = get_trial_configs(get_possible_weights(step), 2)
    alphas = [float(w[0]) for w in trials]
    qr = Qrels.from_dict(rq)
    # ranx's min-max kernel casts uint64 -> int64 when numba first compiles it (harmless); keep the table clean
    warnings.filterwarnings("ignore", message="unsafe cast from uint64 to int64")
    t0 = time.perf_counter()
    optimize_fusion(Qrels.from_dict({"q": {"d": 1}}), [Run.from_dict({"q": {"d": 1.0, "e": 0.5}}),
                                                      Run.from_dict({"q": {"d": 0.2}})],
                    norm="min-max", method="wsum", metric="ndcg@10", step=0.5, show_progress=False)
    warm_s = time.perf_counter() - t0
    rows, picks = [], {}
    for label, normalised, norm in (("ranx optimize_fusion, norm=min-max", False, "min-max"),
                                    ("ranx optimize_fusion on evalkit-minmax runs", True, None)):
        runs = [Run.from_dict(r) for r in _runs_for_ranx(v, qids, normalised)]
        t0 = time.perf_counter()
        best, report = optimize_fusion(qr, runs, norm=norm, method="wsum", metric="ndcg@10", step=step,
                                       show_progress=False, return_optimization_report=True)
        secs = time.perf_counter() - t0
        scores = np.array([report.results[i] for i in range(len(report.configs))], dtype=np.float64) \
            if isinstance(report.results, list) else None
        picks[label] = (float(best["weights"][0]), scores)
        rows.append((label, secs))
    cfgs = [SweepConfig(overrides={"fuse": {"alpha": a}}) for a in alphas]
    # a grid takes ~0.1 s: the figure is the median of EVALKIT_REPEATS fresh sweeps
    res = median_sweep(lambda: Sweep(p, cs, qrels, ["ndcg@10"], ctx=ctx), cfgs, EVALKIT_REPEATS, "the fusion grid")
    ek = res.means["ndcg@10"]
    ek_best = float(np.nanmax(ek))
    tied = [a for a, s in zip(alphas, ek) if abs(s - ek_best) <= 1e-12]
    t = section.table(Table(f"weighted-sum fusion grid: {len(alphas)} weights (ranx step {step}), "
                            f"{len(rq)} judged queries, hybrid-cc arms (vector 100 + BM25 100), nDCG@10",
                            ["method", "seconds", "configs/s", "best w_vector", "best nDCG@10", "same best w",
                             "max |dnDCG| vs evalkit", "load"]))
    for (label, secs), (_, (w, scores)) in zip(rows, picks.items()):
        diff = float(np.nanmax(np.abs(scores - ek))) if scores is not None and len(scores) == len(ek) else None
        t.add(label, secs, len(alphas) / secs, w, float(np.nanmax(scores)) if scores is not None else None,
              w in tied, diff, loadavg().split()[0])
    t.add("evalkit Sweep (hybrid-cc fuse.alpha)", res.seconds, len(alphas) / res.seconds, tied[-1], ek_best, True,
          0.0, loadavg().split()[0])
    ranx_best = min(s for _, s in rows)
    t.notes.append(f"evalkit seconds: the median of {EVALKIT_REPEATS} runs of the grid (each ~0.1 s); "
                   "ranx's: one run each")
    t.notes.append(f"ranx numba warm-up {warm_s:.1f}s (not in the table); evalkit {res.seconds:.2f}s vs fastest "
                   f"ranx {ranx_best:.2f}s: {'evalkit at least as fast' if res.seconds <= ranx_best else 'evalkit SLOWER'} "
                   f"({ranx_best / res.seconds:.1f}x); best weights tied in evalkit: {len(tied)}")
    return {"weights": len(alphas), "ranx_seconds": dict(rows), "evalkit_seconds": res.seconds,
            "evalkit_best": tied, "ranx_best": {k: w for k, (w, _) in picks.items()}}
