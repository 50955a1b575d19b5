"""What a run report says, computed once from a RunData and rendered by markdown.py / html.py (the sections' titles
and notes: section_registry.py).

Per dataset: the leaderboard (sorted by nDCG@10), the reference retriever every other one is tested against
(``bm25``, else ``dense``, else the best; or the one asked for), paired randomisation tests vs the reference with
Holm over retrievers × headline metrics, bootstrap CIs of each mean, as-shipped vs fixed pairs (their own Holm
family), and "key findings" sentences built from those numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evalkit.measures import catalogue, stats
from evalkit.measures.chance import saturated
from evalkit.report.format import fmt, fmt_delta, fmt_pct, isnan
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
    findings: list[str] = field(default_factory=list)
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
    underpowered: str = ""  # why no comparison can be significant at this size ("" = it can)

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
    s.underpowered = underpowered_text(s, n_units if cmap and s.clusters and s.clusters[1] < n_scored else n_scored,
                                       max(1, sum(1 for k in vs_ref if k[1] in quality)))
    s.findings = findings(s, run)
    return s


def underpowered_text(s: DatasetSummary, units: int, comparisons: int) -> str:
    """"" when a paired test of ``units`` queries (clusters) can reach alpha after Holm over ``comparisons``
    (:func:`evalkit.measures.stats.can_reach`), else the sentence the leaderboard shows."""
    if not units or stats.can_reach(units, stats.ALPHA, comparisons):
        return ""
    what = f"{s.clusters[0]}s" if s.clusters and units < s.n_scored else "queries"
    floor = stats.smallest_p(units)
    holm = f" (×{comparisons} comparisons after Holm: {min(1.0, comparisons * floor):.3g})" if comparisons > 1 else ""
    return (f"underpowered: with {units} {what}, even all of them agreeing gives the paired test's smallest p "
            f"{floor:.3g}{holm}, not below α {stats.ALPHA}: no ▲ / ▼ against "
            f"{s.reference or 'the reference'} can show a difference here "
            f"(needs ≥ {stats.units_needed(stats.ALPHA, comparisons)} {what})")


def denominator(s: DatasetSummary) -> str:
    """What the headline numbers are means over: "nDCG@10 over 182 judged of 210 test queries; 28 no-memory
    queries (no relevant note) measured by abstention accuracy", plus any retriever scored on fewer queries."""
    info = s.info or {}
    total, split = info.get("queries"), info.get("split")
    of = f" of {total:,} {split + ' ' if split else ''}queries" if total else " queries"
    text = f"{label(s.primary)} and every ranking measure over {s.n_scored:,} judged{of}"
    n_abs = next((s.value(r, "abstention_queries") for r in s.retrievers
                  if not isnan(s.value(r, "abstention_queries"))), math.nan)
    if not isnan(n_abs) and n_abs:
        text += (f"; {int(n_abs):,} no-memory queries (no relevant note) measured by abstention accuracy, not by "
                 f"{label(s.primary)}")
    elif total and total > s.n_scored:
        text += f"; {total - s.n_scored:,} without a relevant note are not in these means"
    fewer = {r: n for r, n in s.scored_by.items() if n and n < s.n_scored}
    if fewer:
        text += "; " + ", ".join(f"{r} over {n:,} (the queries its run file answers)" for r, n in fewer.items())
    return text


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


# --- key findings ---------------------------------------------------------------------------------------------

def _vs(res: stats.PairedResult | None, ref: str) -> str:
    if res is None:
        return ""
    sig = "" if res.significant() else ", not significant"
    return f"{fmt_delta(res.delta)} vs {ref}, {stats.format_p(res.p_holm)}{sig}"


def harm_findings(s: DatasetSummary) -> list[str]:
    """Harms lead the key findings: every retriever that leaks a secret or injects stale facts, worst first,
    whatever its nDCG."""
    out = []
    leaks = sorted(((r, s.value(r, "secret_leak_rate")) for r in s.retrievers if s.value(r, "secret_leak_rate") > 0),
                   key=lambda x: (-x[1], x[0]))
    if leaks:
        out.append("SECRET LEAK — inject a chunk holding a secret: " +
                   ", ".join(f"{r} on {fmt_pct(v)} of queries" for r, v in leaks))
    clean = [r for r in s.retrievers if s.value(r, "secret_leak_rate") == 0]
    if leaks and clean:
        out.append(f"no secret injected by: {_names(clean, 8)}")
    stale = sorted(((r, s.value(r, "stale_rate")) for r in s.retrievers if s.value(r, "stale_rate") > 0),
                   key=lambda x: (-x[1], x[0]))
    if stale:
        out.append("stale facts injected (superseded statement in the prompt on knowledge-update queries): " +
                   ", ".join(f"{r} {fmt_pct(v, 0)} (ranked above the current one "
                             f"{fmt_pct(s.value(r, 'stale_above_current_rate'), 0)})" for r, v in stale[:5]) +
                   (f" (+{len(stale) - 5} more)" if len(stale) > 5 else ""))
    junk = sorted(((r, s.value(r, "junk_rate")) for r in s.retrievers if s.value(r, "junk_rate") > 0),
                  key=lambda x: (-x[1], x[0]))
    if junk:
        out.append("junk in the prompt (share of injected chunks): " +
                   ", ".join(f"{r} {fmt_pct(v)}" for r, v in junk[:5]) + (f" (+{len(junk) - 5} more)"
                                                                        if len(junk) > 5 else ""))
    return out


def worst_stage(funnel: dict) -> tuple[str, str, float] | None:
    """(stage, type, share of the candidates' relevant notes lost there) of a diagnostics.json funnel's largest
    drop (evalkit/engine/funnel.py ``Funnel.worst``, on the stored numbers)."""
    steps = [(x["step"], x["type"], x["kept"]) for x in funnel.get("steps", []) if x.get("kept") is not None]
    if len(steps) < 2 or steps[0][2] <= 0:
        return None
    drops = [(steps[i][0], steps[i][1], (steps[i - 1][2] - steps[i][2]) / steps[0][2]) for i in range(1, len(steps))]
    best = max(drops, key=lambda d: d[2])
    return best if best[2] > 0 else None


def stage_value(run: RunData, retriever: str, stage: str) -> str:
    """`` (0.35)`` — the threshold of a stage from the run's preset config, when it has one."""
    for st in (run.retriever_info(retriever).get("config") or {}).get("stages", []):
        if (st.get("label") or st.get("type")) == stage and isinstance(st.get("threshold"), (int, float)):
            return f" ({st['threshold']:g})"
    return ""


def funnel_findings(s: DatasetSummary, run: RunData) -> list[str]:
    """For every retriever significantly worse than the reference: the stage of its recall funnel that loses
    the most of its relevant candidates."""
    diag = run.diagnostics.get(s.name) or {}
    out = []
    for r in s.retrievers:
        res = s.vs_ref.get((r, s.primary))
        if res is None or res.mark() != "▼" or not diag.get(r, {}).get("funnel"):
            continue
        w = worst_stage(diag[r]["funnel"])
        if w:
            out.append(f"{r} loses {fmt_pct(w[2], 0)} of its relevant candidates at `{w[0]}`{stage_value(run, r, w[0])}"
                       f" ({w[1]}; recall funnel within its final cut-off of {diag[r]['funnel']['k']})")
    return out


def findings(s: DatasetSummary, run: RunData) -> list[str]:
    out: list[str] = harm_findings(s)
    out += [f"⚠ {w['text']}" for w in s.warnings]
    if s.underpowered:
        out.append(f"⚠ {s.name} is {s.underpowered}")
    if s.standing and s.standing.note:
        out.append(f"⚠ {s.name}: {s.standing.note}")
        wins = cluster_wins_text(s.standing)
        if wins:
            out.append(f"{s.name}, {label(s.primary)} per {s.standing.unit}: {wins}")
    if not s.retrievers:
        return out
    p = s.primary
    top = s.retrievers[0]
    text = (f"best on {s.name}: {top} ({label(p)} {fmt(s.value(top, p))} over "
            f"{s.scored_by.get(top, s.n_scored):,} judged queries")
    if s.reference and top != s.reference:
        text += f", {_vs(s.vs_ref.get((top, p)), s.reference)}"
    text += ")"
    if s.runner_up and s.runner_up[0] != s.reference:
        ru, res = s.runner_up
        if res.significant():
            text += f"; ahead of the runner-up {ru} by {fmt(res.delta)} ({stats.format_p(res.p_randomization)})"
        else:
            text += (f"; the runner-up {ru} ({fmt(s.value(ru, p))}) is not significantly different "
                     f"({stats.format_p(res.p_randomization)})")
    out.append(text)
    if s.reference and s.vs_ref:
        better = [r for r in s.retrievers if (r, p) in s.vs_ref and s.vs_ref[(r, p)].mark() == "▲"]
        worse = [r for r in s.retrievers if (r, p) in s.vs_ref and s.vs_ref[(r, p)].mark() == "▼"]
        tied = [r for r in s.retrievers if (r, p) in s.vs_ref and r not in better and r not in worse]
        parts = []
        if better:
            parts.append(f"{len(better)} significantly better ({_names(better)})")
        if worse:
            parts.append(f"{len(worse)} significantly worse ({_names(worse)})")
        if tied:
            parts.append(f"{len(tied)} not distinguishable ({_names(tied)})")
        if parts:
            out.append(f"vs {s.reference} on {label(p)}: " + "; ".join(parts))
    out += funnel_findings(s, run)
    # fixes: one line each only when the change is significant; the rest collapse into two lines
    quiet, inert = [], []
    for fp in s.fixed:
        res = fp.results.get(p)
        if res is None:
            continue
        if res.wins == 0 and res.losses == 0:
            inert.append((fp, res))
        elif res.significant():
            verdict = "helps" if res.delta > 0 else "hurts"
            out.append(f"fix {fp.fixed} vs as shipped {fp.shipped}: {label(p)} {fmt(res.mean_a)} → "
                       f"{fmt(res.mean_b)} ({fmt_delta(res.delta)}, {stats.format_p(res.p_holm)}; "
                       f"{res.wins} queries better, {res.losses} worse): {verdict}")
        else:
            quiet.append((fp, res))
    if quiet:
        out.append("fixes with no significant change in " + label(p) + ": " +
                   "; ".join(f"{fp.fixed} ({fmt_delta(res.delta)}, {stats.format_p(res.p_holm)}, "
                             f"{res.wins} better / {res.losses} worse)" for fp, res in quiet))
    if inert:
        n = max(res.n for _, res in inert)
        out.append(f"fixes that change nothing (identical {label(p)} on every one of the {n} scored queries): " +
                   ", ".join(fp.fixed for fp, _ in inert))
    cats = run.breakdown.get((s.name, "category"), {}).get(top, {}).get(p, {})
    cats = {c: v for c, v in cats.items() if not isnan(v[0])}
    if len(cats) >= 2:
        lo = min(cats, key=lambda c: cats[c][0])
        hi = max(cats, key=lambda c: cats[c][0])
        out.append(f"{top} by category: hardest {lo} ({label(p)} {fmt(cats[lo][0])}, n={cats[lo][1]}), "
                   f"easiest {hi} ({fmt(cats[hi][0])}, n={cats[hi][1]})")
    gated = [r for r in s.retrievers if s.value(r, "skip_rate") > 0]
    lines: dict[str, list[str]] = {}  # presets with the same skip figures share one line
    for r in gated:
        ws = s.value(r, "wrongly_skipped")
        lost = s.value(r, "recall@10_lost_to_gate")
        extra = f"; R@10 lost to the gate {fmt(lost)}" if not isnan(lost) else ""
        wrong = f", wrongly on {fmt_pct(ws)} of answerable ones" if not isnan(ws) else ""
        lines.setdefault(f"{fmt_pct(s.value(r, 'skip_rate'))} of queries{wrong}{extra}", []).append(r)
    for tail, names in list(lines.items())[:4]:
        who = names[0] + " skips" if len(names) == 1 else f"{_names(names)} each skip"
        out.append(f"{who} {tail}")
    abst = [(r, s.value(r, "correct_abstention")) for r in s.retrievers if not isnan(s.value(r, "correct_abstention"))]
    if abst:
        n = int(s.value(abst[0][0], "abstention_queries")) if not isnan(s.value(abst[0][0], "abstention_queries")) \
            else None
        best_r, best_v = max(abst, key=lambda x: x[1])
        worst_r, worst_v = min(abst, key=lambda x: x[1])
        nn = f" (n={n})" if n else ""
        if best_v == worst_v:
            out.append(f"no-memory queries{nn}: every retriever abstains on {fmt_pct(best_v)}")
        else:
            out.append(f"no-memory queries{nn}: {best_r} correctly injects nothing on {fmt_pct(best_v)}, "
                       f"{worst_r} on {fmt_pct(worst_v)}")
    over = [(r, 1 - s.value(r, "budget_compliance")) for r in s.retrievers
            if not isnan(s.value(r, "budget_compliance")) and s.value(r, "budget_compliance") < 1]
    if over:
        over.sort(key=lambda x: -x[1])
        out.append("over their own injection budget: " +
                   ", ".join(f"{r} on {fmt_pct(v, 0)} of queries" for r, v in over[:4]) +
                   (f" (+{len(over) - 4} more)" if len(over) > 4 else ""))
    return out


def cluster_wins_text(st: stats.Standing, limit: int = 6) -> str:
    """"the best, hybrid-cc, scores higher in 10/10 conversations against bm25, dense; 9/10 against …" — what the
    clusters say when the tests cannot (:attr:`evalkit.measures.stats.Standing.cluster_wins`)."""
    if not st.cluster_wins:
        return ""
    by: dict[str, list[str]] = {}
    for r in st.ranks:
        if r in st.cluster_wins:
            by.setdefault(st.wins_text(r), []).append(r)
    order = sorted(by, key=lambda t: -st.cluster_wins[by[t][0]][0])
    return (f"the best by the mean, {st.best}, scores higher in " +
            "; ".join(f"{t} {st.unit}s against {_names(by[t], limit)}" for t in order))


def _names(names: list[str], limit: int = 4) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", +{len(names) - limit} more"


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
