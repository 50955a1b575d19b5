"""What a run report computes, once, from a RunData: the numbers both renderers (markdown.py / html.py) draw. The
words are elsewhere: the sections' titles and notes in section_registry.py, the key findings' sentences in
findings.py.

Per dataset: the leaderboard (sorted by nDCG@10), the reference retriever every other one is tested against
(``bm25``, else ``dense``, else the best; or the one asked for), paired randomisation tests vs the reference with
Holm over retrievers × headline metrics, bootstrap CIs of each mean, as-shipped vs fixed pairs (their own Holm
family), tie groups, the minimum detectable difference and the sample the tests have.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evalkit.measures import catalogue, stats
from evalkit.measures.chance import saturated
from evalkit.report.format import isnan
from evalkit.runfolder.view import RunData

PRIMARY = catalogue.names("report.primary")[0]
QUALITY = catalogue.names("report.quality")
BAR_METRICS = catalogue.names("report.bars")
RECALL_KS = [m.k for m in catalogue.measures("report.recall_curve")]
BASELINE_PREFERENCE = ["bm25", "dense"]
FIXED_METRICS = catalogue.names("report.fixed")
# evalkit.engine.evaluate.AGE_BUCKETS order (kept here so reports do not import the runner)
AGE_ORDER = ["<1d", "1-7d", "7-30d", "30-90d", "90-365d", ">365d", "undated"]


def label(metric: str) -> str:
    return catalogue.label(metric)


@dataclass
class FixedPair:
    shipped: str
    fixed: str
    fixes: str
    results: dict[str, stats.PairedResult] = field(default_factory=dict)


@dataclass
class DatasetSummary:
    name: str
    retrievers: list[str]                      # sorted by the primary metric, best first
    means: dict[str, dict[str, float]]
    primary: str
    quality: list[str]                         # headline metrics present in this dataset
    reference: str | None
    reference_why: str
    vs_ref: dict[tuple[str, str], stats.PairedResult]
    mean_ci: dict[tuple[str, str], tuple[float, float]]
    best: dict[str, float]
    fixed: list[FixedPair]
    runner_up: tuple[str, stats.PairedResult] | None
    n_scored: int
    info: dict
    clusters: tuple[str, int] | None = None              # (what a cluster is, how many) when statistics resample them
    ranks: dict[str, tuple[int, int]] = field(default_factory=dict)  # tie groups on the primary metric
    standing: stats.Standing | None = None  # how the tie groups were decided (and, when no test can, what instead)
    saturated: list[str] = field(default_factory=list)  # headline metrics left out: cut-off >= the candidate pool
    chance: dict[str, float] = field(default_factory=dict)  # a random ranking's expected value per metric
    visible_median: float | None = None                  # median documents a query can retrieve
    mde: float = math.nan  # minimum detectable Δ of the primary metric vs the reference at this query count
    mde_units: int = 0     # queries, or clusters when the dataset declares them
    warnings: list[dict] = field(default_factory=list)  # the run's warnings about this dataset (manifest)
    scored_by: dict[str, int] = field(default_factory=dict)  # queries each retriever was scored on (primary metric)
    power_units: int = 0        # the paired tests' sample: queries, or clusters when fewer clusters than queries
    power_comparisons: int = 1  # the Holm family of the tests against the reference (retrievers × headline metrics)

    def value(self, ret: str, metric: str) -> float:
        return self.means.get(ret, {}).get(metric, math.nan)


def _primary(means: dict[str, dict[str, float]]) -> str:
    present = {m for v in means.values() for m in v}
    if PRIMARY in present:
        return PRIMARY
    for m in sorted(present):
        if "ndcg" in m:
            return m
    return sorted(present)[0] if present else PRIMARY


def _sort_key(v: float) -> float:
    return -math.inf if isnan(v) else v


def fixed_pairs(names: list[str], manifest_retrievers: dict) -> list[tuple[str, str, str]]:
    """(as shipped, fixed, what was fixed): ``X_fixed…`` pairs with ``X``; else a ``fixes`` field pairs a
    preset with the longest other preset name it starts with."""
    out = []
    seen = set()
    for f in names:
        info = manifest_retrievers.get(f) or {}
        base = None
        cands = [s for s in names if s != f and f.startswith(s + "_fixed")]
        if cands:
            base = max(cands, key=len)
        elif info.get("fixes"):
            cands = [s for s in names if s != f and f.startswith(s) and not (manifest_retrievers.get(s) or {})
                     .get("fixes")]
            base = max(cands, key=len) if cands else None
        if base and (base, f) not in seen:
            seen.add((base, f))
            fixes = info.get("fixes") or ""
            if isinstance(fixes, list):
                fixes = "; ".join(str(x) for x in fixes)
            out.append((base, f, str(fixes)))
    return out


def summarize(run: RunData, baseline: str | None = None) -> list[DatasetSummary]:
    out = []
    for ds in run.datasets():
        out.append(_summarize_dataset(run, ds, baseline))
    return out


def _summarize_dataset(run: RunData, ds: str, baseline: str | None) -> DatasetSummary:
    means = run.means[ds]
    primary = _primary(means)
    rets = sorted(means, key=lambda r: (-_sort_key(means[r].get(primary, math.nan)), r))
    dinfo = run.dataset_info(ds)
    sat = [m for m in QUALITY if saturated(m, dinfo.get("visible_median"))]
    quality = [m for m in QUALITY if any(m in v for v in means.values()) and m not in sat] or [primary]
    best = {}
    for m in {k for v in means.values() for k in v}:
        vals = [v.get(m, math.nan) for v in means.values()]
        vals = [x for x in vals if not isnan(x)]
        if vals:
            best[m] = max(vals)
    # reference
    if baseline and baseline in means:
        ref, why = baseline, "chosen baseline"
    else:
        ref = next((b for b in BASELINE_PREFERENCE if b in means), None)
        why = "baseline" if ref else ""
        if ref is None and rets:
            ref, why = rets[0], f"best by {label(primary)}"
    # significance vs the reference (one Holm family per dataset)
    vs_ref: dict[tuple[str, str], stats.PairedResult] = {}
    keys, pairs = [], []
    n_scored = 0
    for m in quality:
        if not ref or not run.has_per_query(ds, m):
            continue
        for r in rets:
            if r == ref:
                continue
            qs, mat = run.matrix(ds, m, [ref, r])  # each pair on the queries both were scored on
            if len(qs) >= 2:
                keys.append((r, m))
                pairs.append((mat[:, 0], mat[:, 1]))
    cl = run.clusters(ds)
    cmap = cl[1] if cl else None

    def groups_of(qs):
        return [cmap.get(q, q) for q in qs] if cmap else None

    gkeys = []
    for m in quality:
        if ref and run.has_per_query(ds, m):
            for r in rets:
                if r != ref:
                    qs, _ = run.matrix(ds, m, [ref, r])
                    if len(qs) >= 2:
                        gkeys.append(groups_of(qs))
    for k, res in zip(keys, stats.compare_pairs_adjusted(pairs, groups=gkeys if cmap else None)):
        vs_ref[k] = res
    # bootstrap CIs of each mean (for the bar plot), each retriever over its own scored queries; vectors of the
    # same length share one bootstrap matrix product
    by_len: dict[int, list[tuple[tuple[str, str], np.ndarray]]] = {}
    for m in BAR_METRICS + quality:
        for r in rets:
            vals = np.fromiter(run.per_query(ds, r, m).values(), dtype=np.float64)
            vals = vals[np.isfinite(vals)]
            n_scored = max(n_scored, len(vals))
            if m in BAR_METRICS and len(vals) >= 2:
                by_len.setdefault(len(vals), []).append(((r, m), vals))
    mean_ci: dict[tuple[str, str], tuple[float, float]] = {}
    if cmap:  # clustered: each mean resamples its own queries' clusters
        for group in by_len.values():
            for (r, m), _ in group:
                pq = {q: v for q, v in run.per_query(ds, r, m).items() if np.isfinite(v)}
                mean_ci[(r, m)] = stats.cluster_bootstrap_ci(np.fromiter(pq.values(), dtype=np.float64),
                                                             groups_of(list(pq)))
    else:
        for group in by_len.values():
            ci = stats.bootstrap_ci(np.column_stack([v for _, v in group]))
            for j, (key, _) in enumerate(group):
                mean_ci[key] = (float(ci[0, j]), float(ci[1, j]))
    # as shipped vs fixed (own Holm family)
    fixed = [FixedPair(s, f, why_fixed) for s, f, why_fixed in
             fixed_pairs(rets, run.manifest.get("retrievers") or {})]
    fkeys, fpairs = [], []
    for fp in fixed:
        for m in FIXED_METRICS:
            if run.has_per_query(ds, m):
                qs, mat = run.matrix(ds, m, [fp.shipped, fp.fixed])
                if len(qs) >= 2:
                    fkeys.append((fp, m))
                    fpairs.append((mat[:, 0], mat[:, 1]))
    for (fp, m), res in zip(fkeys, stats.compare_pairs_adjusted(fpairs)):
        fp.results[m] = res
    # best vs runner-up (a single, unadjusted test)
    runner_up = None
    if len(rets) >= 2 and run.has_per_query(ds, primary):
        qs, mat = run.matrix(ds, primary, [rets[1], rets[0]])
        if len(qs) >= 2:
            runner_up = (rets[1], stats.compare_pairs([(mat[:, 0], mat[:, 1])],
                                                      groups=[groups_of(qs)] if cmap else None)[0])
    s = DatasetSummary(ds, rets, means, primary, quality, ref, why, vs_ref, mean_ci, best, fixed, runner_up,
                       n_scored, run.dataset_info(ds))
    if cmap:
        s.clusters = (cl[0], len(set(cmap.values())))
    s.saturated = [m for m in sat if any(m in v for v in means.values())]
    s.chance = dict(dinfo.get("chance") or {})
    s.visible_median = dinfo.get("visible_median")
    s.standing = tie_standing(run, ds, rets, primary)
    s.ranks = s.standing.ranks if s.standing else {}
    # minimum detectable difference vs the reference: over queries, or over cluster means when clusters are declared
    # (n = the number of clusters then: dependent queries add less information)
    sds, n_units = [], n_scored
    for r in rets:
        if not ref or r == ref or not run.has_per_query(ds, primary):
            continue
        qs, mat = run.matrix(ds, primary, [ref, r])
        d = mat[:, 1] - mat[:, 0]
        if cmap and s.clusters and s.clusters[1] < len(qs):
            sums, sizes = stats.cluster_sums(d, groups_of(qs))
            d, n_units = sums[:, 0] / sizes, len(sizes)
        if len(d) >= 2:
            sds.append(float(np.std(d, ddof=1)))
    s.mde = stats.mde(float(np.median(sds)), n_units) if sds else math.nan
    s.mde_units = n_units
    s.warnings = [w for w in dinfo.get("warnings") or [] if isinstance(w, dict) and w.get("text")]
    s.scored_by = {r: sum(1 for v in run.per_query(ds, r, primary).values() if math.isfinite(v)) for r in rets}
    s.power_units = n_units if cmap and s.clusters and s.clusters[1] < n_scored else n_scored
    s.power_comparisons = max(1, sum(1 for k in vs_ref if k[1] in quality))
    return s


def tie_ranks(run: RunData, ds: str, rets: list[str], metric: str) -> dict[str, tuple[int, int]]:
    """Rank ranges on ``metric`` (:func:`tie_standing`)."""
    st = tie_standing(run, ds, rets, metric)
    return st.ranks if st else {}


def tie_standing(run: RunData, ds: str, rets: list[str], metric: str) -> stats.Standing | None:
    """Where ``rets`` (best mean first) stand on ``metric`` (:func:`evalkit.measures.stats.standing`): paired
    randomisation, clustered when the dataset declares clusters, Holm over every pair — or over the comparisons
    with the best when all pairs cannot reach α, or none (ranked by the mean) when even those cannot. None with
    fewer than 2 retrievers or no per-query values."""
    if len(rets) < 2 or not run.has_per_query(ds, metric):
        return None
    cl = run.clusters(ds)
    pairs = {}
    for i, a in enumerate(rets):
        for b in rets[i + 1:]:
            qs, mat = run.matrix(ds, metric, [a, b])
            pairs[(a, b)] = (mat[:, 0], mat[:, 1], [cl[1].get(q, q) for q in qs] if cl else None)
    return stats.standing(rets, pairs, unit=cl[0] if cl else "cluster")


def worst_stage(funnel: dict) -> tuple[str, str, float] | None:
    """(stage, type, share of the candidates' relevant notes lost there) of a diagnostics.json funnel's largest
    drop (evalkit/engine/funnel.py ``Funnel.worst``, on the stored numbers)."""
    steps = [(x["step"], x["type"], x["kept"]) for x in funnel.get("steps", []) if x.get("kept") is not None]
    if len(steps) < 2 or steps[0][2] <= 0:
        return None
    drops = [(steps[i][0], steps[i][1], (steps[i - 1][2] - steps[i][2]) / steps[0][2]) for i in range(1, len(steps))]
    best = max(drops, key=lambda d: d[2])
    return best if best[2] > 0 else None


def category_matrix(run: RunData, s: DatasetSummary, breakdown: str, metric: str | None = None):
    """(rows = retrievers, columns = buckets, values (R, B), counts per bucket) or None."""
    metric = metric or s.primary
    data = run.breakdown.get((s.name, breakdown), {})
    buckets: dict[str, int] = {}
    for r in s.retrievers:
        for b, (_, n) in data.get(r, {}).get(metric, {}).items():
            buckets[b] = max(buckets.get(b, 0), n)
    if len(buckets) < 2:  # one bucket (e.g. BEIR: every query "none", every note undated) says nothing
        return None
    order = AGE_ORDER if breakdown == "evidence_age" else []
    cols = [b for b in order if b in buckets] + sorted(b for b in buckets if b not in order)
    mat = np.array([[data.get(r, {}).get(metric, {}).get(b, (math.nan, 0))[0] for b in cols] for r in s.retrievers],
                   dtype=np.float64)
    return s.retrievers, cols, mat, [buckets[b] for b in cols]


def budget_limits(run: RunData, retriever: str) -> dict:
    cfg = run.retriever_info(retriever).get("config") or {}
    b = cfg.get("budget") or {}
    return {k: v for k, v in b.items() if isinstance(v, (int, float))}
