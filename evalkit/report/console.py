"""The quick headline table `evalkit run` prints on the terminal, and its plain-Markdown form (the report.md
written when the full report fails to build)."""
from __future__ import annotations

from evalkit.measures import catalogue, stats
from evalkit.measures.stats import rank_text
from evalkit.report.analysis import tie_standing
from evalkit.report.findings import cluster_wins_text
from evalkit.report.format import fmt, sort_value
from evalkit.runfolder.view import RunData
from retrievers.index.shared import describe_representation
from retrievers.index.visibility import describe

COLUMNS = catalogue.names("console")


def headline_rows(metric_rows: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    by: dict[str, dict[str, dict]] = {}
    for r in metric_rows:
        by.setdefault(r["dataset"], {}).setdefault(r["retriever"], {})[r["metric"]] = r["value"]
    return {ds: ranked(rets) for ds, rets in by.items()}


def ranked(rets: dict[str, dict]) -> list[tuple[str, dict]]:
    """A dataset's retrievers (name → measure → value), best nDCG@10 first."""
    return sorted(rets.items(), key=lambda kv: -sort_value(kv[1].get("ndcg@10")))


def scored_counts(per_query: list[dict], metric: str = COLUMNS[0]) -> dict[str, dict[str, int]]:
    """dataset → retriever → how many queries ``metric`` was scored on (the headline's denominator)."""
    out: dict[str, dict[str, int]] = {}
    for r in per_query:
        if r["metric"] == metric:
            d = out.setdefault(r["dataset"], {})
            d[r["retriever"]] = d.get(r["retriever"], 0) + 1
    return out


def denominator_line(info: dict, counts: dict[str, int], abstention: float | None = None) -> str:
    """"ranking measures over 182 judged of 210 test queries; 28 no-memory queries: abstention accuracy", and any
    retriever scored on fewer queries (a run file with --run-file-missing skip)."""
    judged = max(counts.values(), default=0)
    total, split = info.get("queries"), info.get("split")
    text = f"ranking measures over {judged:,} judged" + (f" of {total:,} {split + ' ' if split else ''}queries"
                                                          if total else " queries")
    if abstention:
        text += f"; {int(abstention):,} no-memory queries (no relevant note): measured by abstention accuracy"
    fewer = {r: n for r, n in counts.items() if n < judged}
    if fewer:
        text += "; " + ", ".join(f"{r} over {n:,} (its run file's answered queries)" for r, n in fewer.items())
    return text


def print_table(writer) -> None:
    rows = headline_rows(writer.metrics)
    notes = {ds: standing_lines(writer, ds, [n for n, _ in r]) for ds, r in rows.items()}
    print(headline_text(writer.manifest.get("datasets") or {}, rows, scored_counts(writer.per_query), notes))


def headline_text(datasets: dict, rows_by_ds: dict[str, list[tuple[str, dict]]],
                  counts: dict[str, dict[str, int]], notes: dict[str, list[str]] | None = None) -> str:
    """The headline table of every dataset (the manifest's ``datasets`` records, :func:`ranked` rows per dataset,
    :func:`scored_counts`): the dataset, its as-of visibility and representation lines, the denominator line, any
    ``notes`` of the dataset (:func:`standing_lines`), then one row per retriever over the console measures."""
    out = []
    for ds, rows in rows_by_ds.items():
        out.append(f"\n{ds}")
        seen = (datasets.get(ds) or {}).get("as_of_visibility")
        if seen:
            out.append(describe(seen))
        idx = (datasets.get(ds) or {}).get("index")
        if idx and idx.get("representation"):
            out.append(describe_representation(idx))
        abst = next((m.get("abstention_queries") for _, m in rows if m.get("abstention_queries")), None)
        out.append(denominator_line(datasets.get(ds) or {}, counts.get(ds, {}), abst))
        out += (notes or {}).get(ds, [])
        w = max([len(n) for n, _ in rows] + [9])
        out.append(f"{'retriever':<{w}}  " + "  ".join(f"{c:>17}" for c in COLUMNS))
        for name, m in rows:
            out.append(f"{name:<{w}}  " + "  ".join(f"{fmt(m.get(c), 4, '-'):>17}" for c in COLUMNS))
    return "\n".join(out)


def standing_lines(writer, ds: str, names: list[str], metric: str = COLUMNS[0]) -> list[str]:
    """When the clusters (or queries) of ``ds`` are too few for a paired test of every pair of ``names`` to reach
    α after Holm (:func:`evalkit.measures.stats.standing`): the note, once, and how many clusters the best wins
    against each; [] otherwise (decided from the counts alone, before any test is run)."""
    info = (writer.manifest.get("datasets") or {}).get(ds) or {}
    scored = {r["query_id"] for r in writer.per_query if r["dataset"] == ds and r["metric"] == metric}
    of = (info.get("clusters") or {}).get("of") or {}
    clusters = {of.get(q, q) for q in scored}
    units = len(clusters) if of and 2 <= len(clusters) < len(scored) else len(scored)
    k = len(names)
    if k < 2 or not units or stats.can_reach(units, stats.ALPHA, k * (k - 1) // 2):
        return []
    st = tie_standing(RunData.from_writer(writer), ds, names, metric)
    if st is None or not st.note:
        return []
    wins = cluster_wins_text(st, limit=3)
    return [f"⚠ {st.note}"] + ([f"  per {st.unit}: {wins}"] if wins else [])


def plain_markdown(rows: list[tuple[str, dict]]) -> str:
    lines = [f"| retriever | {' | '.join(COLUMNS)} |", "|---|" + "---:|" * len(COLUMNS)]
    for name, m in rows:
        lines.append(f"| {name} | {' | '.join(fmt(m.get(c), 4, '-') for c in COLUMNS)} |")
    return "\n".join(lines)


# ---- `evalkit bench` on the terminal -----------------------------------------------------------------------------

def bench_leaderboard(ds: str, rows: list[tuple[str, dict]], st, ranks: dict[str, tuple[int, int]]) -> list[str]:
    """A dataset's top 10 by nDCG@10 as the bench prints them: ``#`` a rank range (``st``, the dataset's
    :class:`evalkit.measures.stats.Standing`, decided it; by the mean when no test can separate any pair, with
    the clusters the best wins against each)."""
    by_mean = st is not None and st.design == "mean"
    out = [f"\n== {ds}: top retrievers by nDCG@10 (# = " + ("rank by the mean: no test can separate any pair"
                                                            if by_mean else "rank range; 1–3 = not significantly "
                                                            "different from the best") + ") =="]
    if st and st.note:
        out.append(f"  ⚠ {st.note}")
        wins = cluster_wins_text(st, limit=3)
        if wins:
            out.append(f"  per {st.unit}: {wins}")
    out.append(f"{'#':>5}  {'retriever':<48} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} {'MRR@10':>7} {'skip':>6} "
               f"{'budget':>7}")
    for ret, m in rows[:10]:
        out.append(f"{rank_text(ranks[ret]):>5}  {ret:<48} {fmt(m.get('ndcg@10'), missing='-'):>8} "
                   f"{fmt(m.get('recall@10'), missing='-'):>7} {fmt(m.get('recall@100'), missing='-'):>7} "
                   f"{fmt(m.get('mrr@10'), missing='-'):>7} {fmt(m.get('skip_rate'), missing='-'):>6} "
                   f"{fmt(m.get('budget_compliance'), missing='-'):>7}")
    return out


def mean_rank_lines(ranks: dict[str, list[tuple[int, int]]]) -> list[str]:
    """Across datasets: each retriever's mean best and worst rank, the 15 best by their average."""
    out = ["\n== overall: mean rank range by nDCG@10 across datasets (best–worst) =="]
    for ret, rk in sorted(ranks.items(), key=lambda kv: sum(a + b for a, b in kv[1]) / len(kv[1]))[:15]:
        lo, hi = (sum(x[j] for x in rk) / len(rk) for j in (0, 1))
        out.append(f"  {lo:5.1f}–{hi:<5.1f} {ret}")
    return out


def phase_table(seconds: dict[str, float], own_rss: int, child_rss: int) -> str:
    """The bench's closing table: each phase's wall seconds and share of the total, then the peak memory (bytes of
    this process and of its largest child).

    >>> print(phase_table({"set-up": 1.0, "runs": 3.0}, 2**31, 0))
    where the time went (wall seconds since the bench started):
      set-up             1.0 s  25.0 %
      runs               3.0 s  75.0 %
      total              4.0 s
    peak memory (RSS): 2.00 GiB this process
    """
    total = sum(seconds.values()) or 1e-9
    lines = ["where the time went (wall seconds since the bench started):"]
    for name, sec in seconds.items():
        lines.append(f"  {name:<13} {sec:8.1f} s {100 * sec / total:5.1f} %")
    lines.append(f"  {'total':<13} {total:8.1f} s")
    lines.append(f"peak memory (RSS): {own_rss / 2**30:.2f} GiB this process"
                 + (f", {child_rss / 2**30:.2f} GiB its largest child process" if child_rss else ""))
    return "\n".join(lines)
