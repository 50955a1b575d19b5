"""The text of a tuning run (:mod:`evalkit.tune.run`): the console summary, ``report.md``, the leaderboard in
Markdown, the estimate / denominator / split / official-measures sentences, and the provenance lines a tuned
preset's header carries (:mod:`evalkit.tune.output` writes the files; the plots: :mod:`evalkit.report.tune_plots`).
Pure functions of the tune's summary dict (``summary.json``) and its space, numbers through
:mod:`evalkit.report.format`.

>>> flat_str({"decay.half_life_days": 30.0, "vec.depth": 24}), flat_str({})
('decay.half_life_days=30, vec.depth=24', '(as shipped)')
>>> times(1), times(2)
('opened 1 time', 'opened 2 times')
"""
from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

from evalkit.measures import catalogue
from evalkit.report.format import fmt_short, fmt_value


def flat_str(flat: dict) -> str:
    """A config as text: ``name=value`` pairs (values by :func:`~evalkit.report.format.fmt_short`)."""
    if not flat:
        return "(as shipped)"
    return ", ".join(f"{k}={fmt_short(v)}" for k, v in flat.items())


def times(n: int) -> str:
    """'opened 1 time' / 'opened 2 times'."""
    return f"opened {n} time" + ("" if n == 1 else "s")


def leaderboard_markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0].keys())
    mcols = [c for c in cols if c.startswith(("train_", "heldout_"))]
    per = 2 if any(c.startswith("heldout_") for c in mcols) else 1
    keep = ["rank", "config", "params"] + mcols[:3 * per] + ["constraints", "note"]
    buf = io.StringIO()
    buf.write("| " + " | ".join(keep) + " |\n|" + "|".join("---" for _ in keep) + "|\n")
    for r in rows:
        buf.write("| " + " | ".join(fmt_value(r.get(c)) if isinstance(r.get(c), float) else str(r.get(c, "")).replace(
            "|", "\\|") for c in keep) + " |\n")
    return buf.getvalue()


def metric_line(vals: dict) -> str:
    """``m1 0.1234, m2 0.5678``: the finite values of ``vals``, names sorted."""
    return ", ".join(f"{m} {v:.4f}" for m, v in sorted(vals.items()) if isinstance(v, float) and math.isfinite(v))


def estimate_text(s: dict, digits: int = 6) -> str:
    """The objective's estimate in words: held-out split, time split, or cross-validation (out-of-fold mean, the
    fold spread), then the lockbox when it was opened."""
    obj = s["objective"]
    parts = []
    if s.get("cv"):
        cv = s["cv"]
        parts.append(f"cross-validated {cv['heldout_mean']:.{digits}f} (out-of-fold mean, {cv['fold_rule']}; fold "
                     f"means {cv['fold_min']:.4f}–{cv['fold_max']:.4f}, {cv['fold_mean']:.4f} ± {cv['fold_sd']:.4f} "
                     f"sd)")
    elif s["best"].get("heldout"):
        label = "time-split held-out" if s["protocol"]["mode"] == "time" else "held-out"
        parts.append(f"{label} {s['best']['heldout'][obj]:.{digits}f}")
    lock = s.get("lockbox")
    if lock:
        parts.append(f"lockbox {lock['split']!r} {lock['best'][obj]:.{digits}f} ({times(lock['opened'])})")
    return "; ".join(parts)


def denominator_text(s: dict) -> str:
    """What the headline figure is an average over ("nDCG@10 over 184 judged of 212 lockbox queries; 28 without a
    relevant document measured by abstention_accuracy")."""
    obj = s["objective"]
    lock = s.get("lockbox")
    if lock:
        n, j, where = lock["queries"], lock["judged"], f"lockbox {lock['split']!r}"
    elif s["queries"].get("heldout"):
        n, j, where = s["queries"]["heldout"], s["queries"]["heldout_judged"], f"held-out {s['heldout']!r}"
    else:
        n, j, where = s["queries"]["tuning"], s["queries"]["tuning_judged"], "cross-validated tuning"
    out = f"{obj} over {j:,} judged of {n:,} {where} queries"
    if n > j:
        measured = any(r["metric"] == "abstention_accuracy" for r in (s.get("official") or {}).get("rows", []))
        out += (f"; {n - j:,} without a relevant document measured by abstention_accuracy" if measured else
                f"; {n - j:,} without a relevant document are not scored by {obj}")
    outside = s["queries"].get("outside_splits") or 0
    if outside:
        out += f"; {outside:,} queries of the dataset are in no split (never tuned on or scored)"
    return out


def official_text(s: dict) -> str:
    """Every official measure of the dataset on the headline set, and where another compared preset beats the
    tuned config on it."""
    off = s.get("official") or {}
    cells = []
    for r in off.get("rows", []):
        c = f"{r['metric']} {r['value']:.4f}"
        if r["beaten_by"]:
            b = r["best_other"]
            c += (f" (loses to {len(r['beaten_by'])} compared preset{'s' if len(r['beaten_by']) > 1 else ''}; best "
                  f"{b['name']} {b['value']:.4f})")
        cells.append(c)
    return f"({off.get('where', '')}): " + "; ".join(cells) if cells else ""


def split_text(s: dict) -> str:
    """The split's rule, group counts, the largest group's share, groups on both sides and held-out queries whose
    evidence set equals a tuning query's."""
    pr = s["protocol"]
    ss = pr["split_summary"]
    sides = "; ".join(f"{name} {v['queries']} queries in {v['groups']} groups (largest {v['largest_group']}: "
                      f"{v['largest_group_queries']} queries, {100 * v['largest_group_share']:.1f}%)"
                      for name, v in ss["sides"].items())
    out = (f"rule {pr['rule']} (a group = {pr['group_is']}), {pr['mode']}; {sides}; groups on both sides "
           f"{ss['straddling']}")
    if ss.get("same_evidence"):
        out += "; held-out queries whose evidence set equals a tuning query's: " + ", ".join(
            f"{k} {v}" for k, v in ss["same_evidence"].items())
    fc = pr.get("fold_check")
    if fc:
        out += (f"; {fc['folds']} folds: groups in two folds {fc['groups_across_folds']}, held-out queries whose "
                f"evidence set equals another fold's query's: {fc['same_evidence']}")
    if pr.get("resplit"):
        out += "; RE-SPLIT with --resplit"
    return out


def interval_text(r: dict) -> str:
    """A row's Holm-adjusted interval ``[lo, hi]`` ("unbounded" where too few queries differ to reject any shift)."""
    lo, hi = r.get("ci_holm_low", float("nan")), r.get("ci_holm_high", float("nan"))
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return "unbounded"
    return f"[{lo:+.4f}, {hi:+.4f}]"


def provenance_lines(space, summary: dict) -> list[str]:
    """Comment lines: where this preset came from (space file and its hash, data, split rule and counts, seed,
    search), what its figures are averages over, every official measure of the dataset, the estimate (held-out,
    cross-validated or lockbox) and the significance against each compared preset, clustered as the dataset
    declares."""
    raw = json.dumps(space.raw, sort_keys=True, default=str).encode()
    sw = summary["sweep"]
    pr = summary["protocol"]
    held = summary["heldout"] or (f"none: {summary['cv']['fold_rule']}" if summary.get("cv") else "none")
    out = [f"# provenance: space {space.path} (sha256 {hashlib.sha256(raw).hexdigest()[:16]} of its parsed table), "
           f"dataset {summary['dataset']} (content {summary['dataset_hash']}), tuned on split {summary['split']!r}, "
           f"held out {held!r}, seed {summary['seed']}, {summary['method']} search, {sw['configs']} configs"]
    out.append(f"# split: {split_text(summary)}")
    for n in pr.get("notes") or []:
        out.append(f"# split note: {n}")
    if summary.get("index"):
        out.append(f"# index: {summary['index']}")
    out.append(f"# denominator: {denominator_text(summary)}")
    off = official_text(summary)
    if off:
        out.append(f"# official measures {off}")
    if summary.get("cv"):
        out.append("# cross-validated (out-of-fold): " + metric_line(summary["cv"]["out_of_fold"]))
    held_vals = summary["best"].get("heldout")
    if held_vals:
        out.append(("# time-split held-out: " if pr["mode"] == "time" else "# held-out: ")
                   + metric_line(held_vals)[:900])
    lock = summary.get("lockbox")
    if lock:
        out.append(f"# lockbox {lock['split']!r} ({lock['queries']} queries, {times(lock['opened'])} for this space; "
                   f"journal {Path(lock['journal']).name}): " + metric_line(lock["best"])[:900])
    opt = summary.get("optimism")
    if opt:
        out.append(f"# optimism of a by-query split: {opt['folds']}-fold cross-validation by query "
                   f"{opt['by_query']:.4f} vs by group {opt['by_group']:.4f} (gap {opt['gap']:+.4f})")
    sig, how = (lock["significance"], lock["significance_method"]) if lock else (
        summary.get("significance", []), summary.get("significance_method", ""))
    if sig:
        clusters = sig[0].get("clusters", 0)
        out.append(f"# significance ({'lockbox' if lock else 'estimate'}): " + (
            f"clustered, {clusters} clusters" if clusters else "per query") + f"; Holm over {len(sig)} comparisons; "
            f"each interval at its row's Holm-adjusted level (excludes 0 exactly when p_holm < 0.05)")
    for r in sig:
        out.append(f"# vs {r.get('versus')}: delta {r.get('delta', float('nan')):+.4f}, CI (Holm) "
                   f"{interval_text(r)}, p_holm {r.get('p_holm', float('nan')):.4g}")
    return out


def console_summary(space, s: dict, dsname: str) -> str:
    obj = s["objective"]
    sw = s["sweep"]
    L = []
    L.append(f"evalkit tune {s['name']}: {s['preset']} on {dsname} — {s['method']} search, {sw['configs']} configs in "
             f"{sw['seconds']:.2f}s ({sw['configs_per_second']:.0f} configs/s, "
             f"{sw['query_evals_per_second']:.0f} query-pipeline evals/s, "
             + (f"Dask cluster of {sw['cluster_workers']} worker(s)" if sw.get("cluster_workers") else
                f"{sw['workers']} worker(s)")
             + (f", {sw['resumed_from_journal']} read back from the journal" if sw.get("resumed_from_journal") else "")
             + (f", sampler {sw['sampler_ms_per_config']:.2f} ms/config" if sw.get("sampler_ms_per_config") else "")
             + ")")
    q = s["queries"]
    L.append(f"  split: {split_text(s)}")
    for n in s["protocol"].get("notes") or []:
        L.append(f"  split note: {n}")
    if s["heldout"]:
        L.append(f"  tuned on {s['split']} ({q['tuning_judged']} judged queries), reported on {s['heldout']} "
                 f"({q['heldout_judged']} judged)")
    else:
        L.append(f"  {s['cv']['fold_rule']} over {s['split']} ({q['tuning_judged']} judged queries)")
    sh, b = s["shipped"], s["best"]
    if s["heldout"]:
        L.append(f"  {obj}: as shipped {fmt_value(sh['train'][obj])} tuning / {fmt_value(sh['heldout'][obj])} held-out; "
                 f"best {fmt_value(b['train'][obj])} tuning / {fmt_value(b['heldout'][obj])} held-out "
                 f"(train-heldout gap {s['gap']:+.4f})")
    else:
        cv = s["cv"]
        L.append(f"  {obj}: as shipped {fmt_value(sh['train'][obj])}; best (chosen on all tuning queries) "
                 f"{fmt_value(b['train'][obj])}; cross-validated {fmt_value(cv['heldout_mean'])} out-of-fold (fold means "
                 f"{cv['fold_min']:.4f}–{cv['fold_max']:.4f}, {cv['fold_mean']:.4f} ± {cv['fold_sd']:.4f} sd; mean "
                 f"fold gap {s['gap']:+.4f})")
    lock = s.get("lockbox")
    if lock:
        L.append(f"  lockbox {lock['split']!r}: {obj} {fmt_value(lock['best'][obj])} (as shipped "
                 f"{fmt_value(lock['shipped'][obj])}) — lockbox {times(lock['opened'])} for this space")
    L.append(f"  denominator: {denominator_text(s)}")
    off = official_text(s)
    if off:
        L.append(f"  official measures {off}")
    if s.get("optimism"):
        o = s["optimism"]
        L.append(f"  optimism of a by-query split: {o['folds']}-fold CV by query {o['by_query']:.4f} vs by group "
                 f"{o['by_group']:.4f} (gap {o['gap']:+.4f})")
    L.append(f"  best: {flat_str(b['config'])}" + ("" if b["feasible"] else "  [violates constraints]"))
    if b["constraints"]:
        L.append("  constraints: " + "; ".join(f"{k}: {v}" for k, v in b["constraints"].items()))
    if s.get("latency_note"):
        L.append(f"  latency: {s['latency_note']}")
    sig = lock["significance"] if lock else s["significance"]
    if sig:
        cl = sig[0].get("clusters", 0)
        L.append(f"  significance on the {'lockbox' if lock else 'estimate'}"
                 + (f", clustered ({cl} clusters)" if cl else ", per query") + ":")
    for r in sig:
        L.append(f"  vs {r['versus']} ({fmt_value(r['mean_a'])}): delta {r['delta']:+.4f}, CI (Holm) {interval_text(r)}, "
                 f"p = {r['p_randomization']:.4g} (randomisation), {r['p_ttest']:.4g} (t-test), "
                 f"Holm {r['p_holm']:.4g}; W/T/L {r['wins']}/{r['ties']}/{r['losses']}")
    L.append(f"  best preset: {s.get('best_preset', '')}")
    return "\n".join(L)


def report_markdown(space, s: dict, board: list[dict], text: str) -> str:
    parts = [f"# evalkit tune: {s['name']}", "", f"Space `{s['space']}` — preset `{s['preset']}` (hash {s['preset_hash']}),"
             f" dataset `{s['dataset']}` (hash {s['dataset_hash']}).", "", "```", text, "```", "",
             "## Split", "", f"{split_text(s)}.", ""]
    parts += [f"* {n}" for n in s["protocol"].get("notes") or []]
    parts += ["", "Every query's group, and the ids of every split and fold, are in `splits.json`.", ""]
    parts += ["## Leaderboard", "", leaderboard_markdown(board), "", "## Significance", "",
              s["significance_method"], ""]
    obj = s["objective"]
    part = "heldout" if s["heldout"] else "train"
    if s["heldout"] or s["baselines"]:
        cols = [obj] + catalogue.names("tune.injected")
        parts += [f"## Best vs as shipped and baselines ({'held-out' if s['heldout'] else 'tuning'} queries)", "",
                  "| system | " + " | ".join(cols) + " | tuned − system | CI (Holm) | p (randomisation) | p (Holm) |",
                  "|---" * (len(cols) + 5) + "|"]
        sig = {r["versus"]: r for r in s["significance"]}
        rows = [("tuned best", (s["best"].get(part) or {}), None),
                (f"{s['preset']} (as shipped)", (s["shipped"].get(part) or {}), sig.get(f"{s['preset']} (as shipped)"))]
        rows += [(n, r.get(part) or {}, sig.get(n)) for n, r in s["baselines"].items()]
        for name, vals, r in rows:
            cells = [fmt_value(vals.get(c)) for c in cols]
            extra = ([f"{r['delta']:+.4f}", interval_text(r), f"{r['p_randomization']:.3g}",
                      f"{r['p_holm']:.3g}"] if r else ["", "", "", ""])
            parts.append(f"| {name} | " + " | ".join(cells + extra) + " |")
        if s.get("cv"):
            parts.append("")
            parts.append("(cross-validation: the tuned row is the chosen-on-all config; the tests compare the "
                         "cross-validated procedure's per-query scores with each system on all tuning queries)")
        parts.append("")
    lock = s.get("lockbox")
    if lock:
        parts += [f"## Lockbox {lock['split']!r} ({lock['queries']} queries, {times(lock['opened'])} for this space)",
                  "", lock["significance_method"], "",
                  f"| system | {obj} | tuned − system | CI (Holm) | p (Holm) |", "|---|---|---|---|---|"]
        sig = {r["versus"]: r for r in lock["significance"]}
        vals = [("tuned best", lock["best"])] + [(f"{s['preset']} (as shipped)", lock["shipped"])] + list(
            lock["baselines"].items())
        for name, v in vals:
            r = sig.get(name)
            parts.append(f"| {name} | {fmt_value(v.get(obj))} | " + (
                f"{r['delta']:+.4f} | {interval_text(r)} | {r['p_holm']:.3g} |" if r else " | | |"))
        parts.append("")
    if s.get("official"):
        parts += ["## Official measures", "", f"On the {s['official']['where']}: {official_text(s)}", "",
                  f"Denominator: {denominator_text(s)}.", ""]
    if s.get("optimism"):
        o = s["optimism"]
        parts += ["## Optimism of a by-query split", "",
                  f"{o['note']}: by query {o['by_query']:.4f}, by group {o['by_group']:.4f} (gap {o['gap']:+.4f}).",
                  ""]
    if s.get("cv"):
        parts += [f"## Folds ({s['cv']['fold_rule']})", "",
                  "| fold | queries | best | train | held-out | as shipped (held-out) |",
                  "|---|---|---|---|---|---|"]
        for r in s["cv"]["rows"]:
            parts.append(f"| {r['fold']} | {r['queries']} | {r['best']} | {fmt_value(r['train'])} | {fmt_value(r['heldout'])} | "
                         f"{fmt_value(r['shipped_heldout'])} |")
        parts.append("")
    if s.get("plots"):
        parts += ["## Plots", ""] + [f"![{p}]({p})" for p in s["plots"]]
    return "\n".join(parts) + "\n"


__all__ = ["console_summary", "denominator_text", "estimate_text", "flat_str", "interval_text", "leaderboard_markdown",
           "metric_line", "official_text", "provenance_lines", "report_markdown", "split_text", "times"]
