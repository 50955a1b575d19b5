"""The report's key findings: the sentences at the top of report.md / report.html, one list per dataset, built from
the numbers :mod:`evalkit.report.analysis` computed (that module holds no words). The sections' own titles and notes
are in :mod:`evalkit.report.section_registry`.

Example::

    >>> from evalkit.measures import stats
    >>> st = stats.Standing(ranks={"a": (1, 1), "b": (2, 2)}, unit="conversation",
    ...                     cluster_wins={"b": (9, 0, 1)})
    >>> cluster_wins_text(st)
    'the best by the mean, a, scores higher in 9/10 conversations against b'
"""
from __future__ import annotations

from evalkit.measures import stats
from evalkit.report.analysis import DatasetSummary, label, worst_stage
from evalkit.report.format import fmt, fmt_delta, fmt_pct, isnan
from evalkit.runfolder.view import RunData


def underpowered_text(s: DatasetSummary) -> str:
    """"" when a paired test of the summary's sample (``power_units`` queries or clusters) can reach alpha after
    Holm over its ``power_comparisons`` (:func:`evalkit.measures.stats.can_reach`), else the sentence the
    leaderboard and the key findings show."""
    units, comparisons = s.power_units, s.power_comparisons
    if not units or stats.can_reach(units, stats.ALPHA, comparisons):
        return ""
    what = f"{s.clusters[0]}s" if s.clusters and units < s.n_scored else "queries"
    floor = stats.smallest_p(units)
    holm = f" (×{comparisons} comparisons after Holm: {min(1.0, comparisons * floor):.3g})" if comparisons > 1 else ""
    return (f"underpowered: with {units} {what}, even all of them agreeing gives the paired test's smallest p "
            f"{floor:.3g}{holm}, not below α {stats.ALPHA}: no ▲ / ▼ against "
            f"{s.reference or 'the reference'} can show a difference here "
            f"(needs ≥ {stats.units_needed(stats.ALPHA, comparisons)} {what})")


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
    """The key findings of one dataset, in the order the report shows them: harms first (whatever the nDCG), the
    run's warnings and what the sample cannot show, the best retriever against the reference and the runner-up,
    who is better / worse / indistinguishable, where the worse ones lose their relevant notes, the fixed siblings,
    the hardest and easiest category, skip gates, abstention and budget compliance."""
    out: list[str] = harm_findings(s)
    out += [f"⚠ {w['text']}" for w in s.warnings]
    underpowered = underpowered_text(s)
    if underpowered:
        out.append(f"⚠ {s.name} is {underpowered}")
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
