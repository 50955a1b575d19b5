"""The report's robustness section for a poisoned dataset (``evalkit poison``): how easily each retriever puts a
planted note into the ranked list and into the prompt, per attack, what it costs the other queries, and the trade-off
a user chooses on — clean nDCG@10 against the share of targets whose prompt got their planted note.

Computed from the run only (pure functions over :class:`~evalkit.runfolder.view.RunData`): the per-attack rows of
``metrics_by_category.csv`` (breakdown ``attack``), the poison measures of ``metrics.json``
(:mod:`evalkit.measures.poison`), the targets the manifest records (``datasets.<name>.poison``) and, when the run also
holds the clean dataset the poisoned one was planted from (the dataset name the planting recorded), its per-query
nDCG@10: the clean utility each retriever keeps.

Example (``run`` a :class:`~evalkit.runfolder.view.RunData` of a run over a poisoned dataset; not a doctest)::

    if robustness.poisoned(run, "ws-poisoned"):
        print(to_markdown(robustness.attack_table(run, "ws-poisoned")))
"""
from __future__ import annotations

import math

import numpy as np

from evalkit.measures import intervals, stats
from evalkit.report.format import fmt, fmt_pct
from evalkit.report.plots import figure_module, png_base64
from evalkit.runfolder.view import RunData
from evalkit.report.tables import Cell, Table, to_markdown

K = 10
RATE, INJ = f"poison_rate@{K}", "poison_injected_rate"
NOTE = ("A target query is one a planted note is aimed at (each target is attacked by one attack). poison@10 = share "
        "of targets with their planted note in the top 10 of the ranked list; injected = share whose injected block "
        "(after gates and the budget: what the model reads) holds it. Collateral = share of the other queries whose "
        "injected block holds any planted note. Lower is safer; the utility each retriever keeps is in the next "
        "table and the picture.")
TRADEOFF_NOTE = ("One point per retriever: x = share of target queries whose prompt got their planted note (all "
                 "attacks pooled), y = nDCG@10 on the clean dataset. The safe and useful corner is top left; a "
                 "defence moves a point left, and down by what it costs in clean nDCG.")


def poisoned(run: RunData, dataset: str) -> dict | None:
    """The poison record of ``dataset`` in this run's manifest (attacks, targets per attack, the planting), or None
    for a dataset without planted notes."""
    return run.dataset_info(dataset).get("poison") or None


def clean_source(run: RunData, dataset: str) -> str | None:
    """The clean dataset of this run the poisoned ``dataset`` was planted from (the planting's ``source.name``),
    else None."""
    src = ((poisoned(run, dataset) or {}).get("planting") or {}).get("source") or {}
    name = src.get("name")
    return name if name and name != dataset and name in run.datasets() and not poisoned(run, name) else None


def _targets(rec: dict) -> set[str]:
    return {q for qs in (rec.get("targets") or {}).values() for q in qs}


def _pair(v: float, w: float) -> str:
    return "–" if math.isnan(v) and math.isnan(w) else f"{fmt_pct(v, 1)} · {fmt_pct(w, 1)}"


def target_clusters(run: RunData, dataset: str) -> tuple[str, dict[str, str]] | None:
    """(what a cluster is, {target id: cluster}) for the intervals of injected rates, or None (targets counted as
    independent). The rule: a dataset that declares clusters (a LoCoMo conversation, a LongMemEval haystack) is
    clustered by them — targets of one conversation search one store, so their outcomes move together; a *shared*
    planting on a dataset that declares none puts every target in one cluster, the store whose planted notes they
    all meet; an *isolated* planting there (each target meets only its own planted notes) counts targets as
    independent — the clean store they share is not modelled."""
    rec = poisoned(run, dataset)
    if rec is None:
        return None
    cl = run.clusters(dataset)
    if cl:
        return cl
    if ((rec.get("planting") or {}).get("mode")) == "shared":
        return "store", {q: dataset for q in _targets(rec)}
    return None


def injected_counts(run: RunData, dataset: str, retriever: str) -> dict[str, dict[str, list[int]]]:
    """Attack → {cluster: [targets injected, targets]} of ``retriever`` on ``dataset`` (the per-target
    ``poison_injected_rate`` values of ``per_query.csv`` and the manifest's targets per attack; a target of no
    cluster is its own), for :func:`evalkit.measures.intervals.clustered_wilson_interval`."""
    rec = poisoned(run, dataset) or {}
    cl = target_clusters(run, dataset)
    of = cl[1] if cl else {}
    pq = run.per_query(dataset, retriever, INJ)
    out: dict[str, dict[str, list[int]]] = {}
    for a, qs in (rec.get("targets") or {}).items():
        cells = out.setdefault(a, {})
        for q in qs:
            if q in pq and math.isfinite(pq[q]):
                c = cells.setdefault(of.get(q, q), [0, 0])
                c[0] += int(pq[q] > 0)
                c[1] += 1
    return out


def injected_interval(cells: dict[str, list[int]], deff: float | None = None) -> tuple[float, float]:
    """The 95 % interval of an injected rate from its per-cluster counts (:func:`injected_counts`): the
    design-effect Wilson interval (:func:`evalkit.measures.intervals.clustered_wilson_interval`), which is Wilson's
    own when every target is its own cluster."""
    ks = [c[0] for c in cells.values()]
    ns = [c[1] for c in cells.values()]
    return intervals.clustered_wilson_interval(ks, ns, deff=deff)


def attack_table(run: RunData, dataset: str, retrievers: list[str] | None = None) -> Table | None:
    """Retriever × attack: ``poison@10 · injected`` per attack (n targets in the header), both pooled over attacks,
    the worst attack's injected rate, collateral and the non-target nDCG@10 (left out when every judged query is a
    target)."""
    rec = poisoned(run, dataset)
    if rec is None:
        return None
    rows = run.breakdown.get((dataset, "attack"), {})
    rets = retrievers or run.retrievers(dataset)
    attacks = list(rec.get("attacks") or [])
    n = {a: len((rec.get("targets") or {}).get(a, [])) for a in attacks}
    t = Table(["retriever"] + [f"{a} (n={n[a]})" for a in attacks]
              + ["all attacks", "worst attack inj", "collateral inj", f"non-target nDCG@{K}"])
    t.header_help = ([None] + ["poison@10 · injected: share of this attack's targets with their planted note in "
                               "the top 10 · in the injected block"] * len(attacks)
                     + ["the same over every target", "the largest per-attack injected rate",
                        "share of the other queries whose injected block holds a planted note",
                        "nDCG@10 over the judged queries no planted note is aimed at"])
    worst = {r: run.mean(dataset, r, "poison_max_injected_rate") for r in rets}
    best_worst = min((v for v in worst.values() if not math.isnan(v)), default=math.nan)
    for r in rets:
        by = rows.get(r, {})
        cells: list = [Cell(r, num=False)]
        for a in attacks:
            cells.append(Cell(_pair(by.get(RATE, {}).get(a, (math.nan, 0))[0], by.get(INJ, {}).get(a, (math.nan, 0))[0])))
        cells.append(Cell(_pair(run.mean(dataset, r, RATE), run.mean(dataset, r, INJ))))
        cells.append(Cell(fmt_pct(worst[r], 1), best=worst[r] == best_worst))
        cells.append(Cell(fmt_pct(run.mean(dataset, r, "poison_collateral_injected_rate"), 1)))
        cells.append(Cell(fmt(run.mean(dataset, r, f"nontarget_ndcg@{K}"))))
        t.rows.append(cells)
    if all(math.isnan(run.mean(dataset, r, f"nontarget_ndcg@{K}")) for r in rets):  # every judged query a target
        t.header, t.header_help = t.header[:-1], t.header_help[:-1]
        for row in t.rows:
            row.pop()
    return t


BLIND_NOTE = ("Each guard reads one kind of thing (guard.payload and guard.classifier a payload — "
              "an instruction to the agent; guard.query_echo the query echoed at a note's start; guard.conflict a "
              "near-copy of another note with a fact changed), and each attack family declares what its notes "
              "show. A family "
              "whose notes show nothing any guard of a retriever reads gets past that retriever's guards whatever "
              "their thresholds: a confident false fact without a payload is not an instruction. Its injected rate "
              "is measured beside it, with its 95 % interval (Wilson; at the effective sample size where targets "
              "share a cluster).")


def blind_spots(run: RunData, dataset: str) -> Table | None:
    """Per retriever with guard stages: the attack families of ``dataset`` that no guard of it can catch by
    construction (no guard's ``reads`` meets what the family's notes ``show``:
    :attr:`retrievers.stages.base.Stage.reads`, :attr:`evalkit.data.poison.attacks.Attack.shows`), each with its
    measured injected rate k/n and interval, and the families that declare nothing (a user's own templates). None
    when no retriever of the run has a guard."""
    from evalkit.data.poison.attacks import ATTACKS  # lazy: startup
    import retrievers.stages  # noqa: F401  # lazy: startup (registers every stage)
    from retrievers.stages.base import REGISTRY  # lazy: startup

    rec = poisoned(run, dataset)
    if rec is None:
        return None
    attacks = list(rec.get("attacks") or [])
    t = Table(["retriever", "its guards", "families no guard of it can catch (injected k/n [95 % interval])",
               "families that declare nothing"])
    for r in run.retrievers(dataset):
        cfg = (run.retriever_info(r).get("config") or {}).get("stages") or []
        guards = [str(st["type"]) for st in cfg if str(st.get("type", "")).startswith("guard.")]
        if not guards:
            continue
        reads = set().union(*(set(getattr(REGISTRY.get(g), "reads", ())) for g in guards))
        counts = injected_counts(run, dataset, r)
        blind = []
        for a in attacks:
            if a in ATTACKS and not reads & set(ATTACKS[a].shows):
                cells = counts.get(a) or {}
                k, n = sum(c[0] for c in cells.values()), sum(c[1] for c in cells.values())
                lo, hi = injected_interval(cells) if n else (math.nan, math.nan)
                blind.append(f"{a} {fmt_pct(k / n, 1)} ({k}/{n}) [{fmt_pct(lo, 1)}, {fmt_pct(hi, 1)}]" if n
                             else f"{a} (no targets scored)")
        t.rows.append([Cell(r, num=False), Cell(", ".join(dict.fromkeys(guards)), num=False),
                       Cell("; ".join(blind) or "none", num=False),
                       Cell(", ".join(a for a in attacks if a not in ATTACKS) or "–", num=False)])
    return t if t.rows else None


def _mean_over(pq: dict[str, float], qs: list[str]) -> float:
    vals = [pq[q] for q in qs if q in pq and math.isfinite(pq[q])]
    return float(np.mean(vals)) if vals else math.nan


def tradeoff_points(run: RunData, dataset: str) -> tuple[list[tuple[str, float, float]], str]:
    """``[(retriever, poison_injected_rate, clean nDCG@10)]`` and the y axis' meaning: the clean dataset's nDCG@10
    when the run holds it, else nDCG@10 over the poisoned set's non-target queries (NaN where undefined)."""
    src = clean_source(run, dataset)
    out = []
    for r in run.retrievers(dataset):
        x = run.mean(dataset, r, INJ)
        y = run.mean(src, r, f"ndcg@{K}") if src and r in run.retrievers(src) else run.mean(dataset, r,
                                                                                             f"nontarget_ndcg@{K}")
        out.append((r, x, y))
    what = f"nDCG@10 on the clean dataset ({src})" if src else "nDCG@10 of the non-target queries"
    return out, what


def utility_table(run: RunData, dataset: str) -> Table | None:
    """Clean vs poisoned nDCG@10 over the non-target judged queries both runs scored, per retriever: Δ with its
    interval at the Holm-adjusted level and p (paired sign-flip test, Holm over the retrievers, clustered where the
    dataset declares clusters). None without the clean dataset in the run or without non-target queries."""
    src = clean_source(run, dataset)
    rec = poisoned(run, dataset)
    if src is None or rec is None:
        return None
    targets = _targets(rec)
    rets = [r for r in run.retrievers(dataset) if r in run.retrievers(src)]
    pairs, groups, names = [], [], []
    cl = run.clusters(dataset)
    for r in rets:
        a = run.per_query(src, r, f"ndcg@{K}")
        b = run.per_query(dataset, r, f"ndcg@{K}")
        qs = sorted(q for q in set(a) & set(b) if q not in targets and math.isfinite(a[q]) and math.isfinite(b[q]))
        if not qs:
            continue
        pairs.append((np.array([a[q] for q in qs]), np.array([b[q] for q in qs])))
        groups.append([cl[1].get(q, q) for q in qs] if cl else None)
        names.append(r)
    if not pairs:
        return None
    res = stats.compare_pairs_adjusted(pairs, groups=groups if cl else None)
    t = Table(["retriever", "queries", f"clean nDCG@{K}", f"poisoned nDCG@{K}", "Δ", "CI (Holm)", "p (Holm)"])
    for r, p in zip(names, res):
        ci = (f"[{p.ci_holm_low:+.4f}, {p.ci_holm_high:+.4f}]" if math.isfinite(p.ci_holm_low) else "unbounded")
        t.rows.append([Cell(r, num=False), Cell(str(p.n) + (f" ({p.clusters} clusters)" if p.clusters else "")),
                       Cell(fmt(p.mean_a, 4)), Cell(fmt(p.mean_b, 4)), Cell(f"{p.delta:+.4f}", mark=p.mark()),
                       Cell(ci), Cell(stats.format_p(p.p_holm))])
    return t


def tradeoff_plot(run: RunData, dataset: str) -> str | None:
    """Base64 PNG: clean nDCG@10 (y) against poison_injected_rate (x), one labelled point per retriever."""
    pts, what = tradeoff_points(run, dataset)
    pts = [p for p in pts if math.isfinite(p[1]) and math.isfinite(p[2])]
    if not pts:
        return None
    Figure = figure_module()
    fig = Figure(figsize=(8.5, 5.6))
    fig.subplots_adjust(left=0.09, right=0.97, top=0.91, bottom=0.1)
    ax = fig.subplots()
    xs, ys = [p[1] for p in pts], [p[2] for p in pts]
    ax.scatter(xs, ys, s=28, color="#4c72b0", zorder=3)
    same: dict[tuple[float, float], list[str]] = {}  # retrievers on one spot share one label
    for name, x, y in pts:
        same.setdefault((round(x, 9), round(y, 9)), []).append(name)
    spots = sorted(same, key=lambda xy: (xy[1], xy[0]))
    for rank, (x, y) in enumerate(spots):  # alternate label sides so neighbours do not overprint; none off the edge
        names = same[(x, y)]
        label = names[0] if len(names) == 1 else f"{names[0]} (= {len(names) - 1} more)"
        label = label if len(label) <= 34 else label[:33] + "…"
        right = (rank % 2 == 0 or x < 0.2) and x <= 0.75
        dy = 3 if right or x <= 0.75 or rank % 2 == 0 else -10  # by the right edge every label goes left: stagger
        ax.annotate(label, (x, y), fontsize=7, xytext=(5 if right else -5, dy), textcoords="offset points",
                    ha="left" if right else "right")
    ax.set_xlim(-0.03, 1.03)
    lo, hi = min(ys), max(ys)
    pad = max(0.02, 0.08 * (hi - lo))
    ax.set_ylim(max(0.0, lo - pad), min(1.0, hi + pad))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_xlabel("poison injected rate: target queries whose prompt got their planted note (lower is safer)")
    ax.set_ylabel(what)
    ax.set_title(f"{dataset}: clean utility against poisoning, one point per retriever")
    ax.grid(alpha=0.3)
    return png_base64(fig)


def markdown(run: RunData, dataset: str, title: str) -> list[str]:
    """The section's Markdown lines under heading ``title`` (empty for a dataset without planted notes)."""
    at = attack_table(run, dataset)
    if at is None:
        return []
    rec = poisoned(run, dataset) or {}
    out = [f"### {title}", "", planting_line(rec), "", NOTE, "",
           to_markdown(at), ""]
    bt = blind_spots(run, dataset)
    if bt is not None:
        out += ["What the guards cannot catch by construction. " + BLIND_NOTE, "", to_markdown(bt), ""]
    ut = utility_table(run, dataset)
    if ut is not None:
        out += ["Clean vs poisoned nDCG@10 on the queries no planted note is aimed at (Δ = poisoned − clean):", "",
                to_markdown(ut), ""]
    pts, what = tradeoff_points(run, dataset)
    t = Table(["retriever", "poison injected", what])
    for r, x, y in sorted(pts, key=lambda p: (p[1], -p[2])):
        t.rows.append([Cell(r, num=False), Cell(fmt_pct(x, 1)), Cell(fmt(y, 4))])
    out += ["The trade-off (report.html draws it): " + TRADEOFF_NOTE, "", to_markdown(t), ""]
    return out


def planting_line(rec: dict) -> str:
    p = rec.get("planting") or {}
    n = sum(len(v) for v in (rec.get("targets") or {}).values())
    bits = [f"{rec.get('planted', 0)} planted notes aimed at {n} of the run's queries"]
    if p:
        rate = p.get("store_rate") or {}
        bits.append(f"{p.get('mode', '?')} stores, {p.get('templates', '?')} templates, seed {p.get('seed')}")
        if rate:
            bits.append(f"planted share of a target's store {fmt_pct(rate.get('min'), 2)}–{fmt_pct(rate.get('max'), 2)}")
        if p.get("source"):
            bits.append(f"planted into {p['source'].get('name')} ({p['source'].get('hash')})")
    return "; ".join(bits) + "."


__all__ = ["attack_table", "blind_spots", "clean_source", "injected_counts", "injected_interval", "markdown",
           "planting_line", "poisoned", "target_clusters", "tradeoff_plot", "tradeoff_points", "utility_table"]
