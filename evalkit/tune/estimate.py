"""The estimate of a tuned config and its statistics, from the configs a search evaluated
(:class:`evalkit.tune.search.Evaluator`): each fold's choice in cross-validation by group, the optimism a by-query
split adds, and the significance of the tuned config vs as shipped and each baseline, with the note that says how it
was tested. No sweep runs here: :mod:`evalkit.tune.run` runs them and calls these."""
from __future__ import annotations

import numpy as np

from evalkit.data.groups import declared, group_folds
from evalkit.measures.stats import compare_pairs_adjusted
from evalkit.report.tune import flat_str
from evalkit.tune.protocol import DEFAULT_FOLDS, declared_clusters
from evalkit.tune.search import Evaluator, fold_of


def cross_validate(ev: Evaluator, fold: np.ndarray, folds: list, shipped_i: int, feas, sign: float):
    """Per fold, the feasible config with the best objective on the other folds (among the configs that fold's
    search evaluated, plus as shipped): (out-of-fold per-query objective, fold rows, train−held gaps, each fold's
    config index)."""
    cv = np.zeros(len(fold))
    gaps, rows, chosen = [], [], []
    for f, idx in folds:
        tr, te = fold != f, fold == f
        cand = sorted(set(idx) | {shipped_i})
        scored = sorted(cand, key=lambda i: (not feas[i], -sign * ev.objective(i, tr), i))
        bf = scored[0]
        chosen.append(bf)
        cv[te] = ev.per_query[bf][te]
        gaps.append(ev.objective(bf, tr) - ev.objective(bf, te))
        rows.append({"fold": f, "queries": int(te.sum()), "best": flat_str(ev.trials[bf].flat),
                     "train": ev.objective(bf, tr), "heldout": ev.objective(bf, te),
                     "shipped_heldout": ev.objective(shipped_i, te)})
    return cv, rows, gaps, chosen


def significance(pairs, versus, maximize: bool, clusters: list[str] | None) -> list[dict]:
    """compare_pairs_adjusted over (as shipped / baseline, tuned) pairs: Holm over the list, each interval at the
    level Holm decided its row at (so it excludes 0 exactly when p_holm < alpha); clustered when the dataset
    declares clusters (the same rule and code path as ``evalkit compare``)."""
    if not pairs:
        return []
    if not maximize:
        pairs = [(b, a) for a, b in pairs]  # positive delta = better
    res = compare_pairs_adjusted(pairs, groups=[clusters] * len(pairs) if clusters is not None else None)
    out = []
    for lab, r in zip(versus, res):
        d = r.to_dict()
        d["versus"] = lab
        out.append(d)
    return out


def stats_note(ds, ids: list[str], obj_name: str, where: str, maximize: bool) -> str:
    cl = declared_clusters(ds, ids)
    n_cl = len(set(cl)) if cl is not None else 0
    what = (declared(ds, "clusters") or {}).get("what", "cluster")
    if cl is not None and 2 <= n_cl < len(ids):
        how = (f"clustered by {what} ({n_cl} {what}s, declared by the dataset): whole {what}s flip sign and are "
               f"resampled together (the same code path as evalkit compare)")
    elif cl is not None:
        how = f"per query (the dataset's clusters are one query each: one {what} per question)"
    else:
        how = "per query (the dataset declares no clusters)"
    return ("evalkit.measures.stats.compare_pairs_adjusted: paired sign-flip randomisation (p_randomization, "
            "Holm-adjusted over the comparisons in p_holm), paired t-test (p_ttest), and the interval of the mean "
            "difference at the level Holm decided each row at (ci_holm_low / ci_holm_high: the sign-flip test "
            "inverted, so it excludes 0 exactly when p_holm < 0.05; the unadjusted 95% bootstrap interval stays in "
            f"summary.json as ci_low / ci_high), {how}; "
            f"per-query {obj_name} on the {where}"
            + ("; delta = shipped − tuned (minimised objective)" if not maximize else ""))


def optimism(ev: Evaluator, judged: list[str], proto, shipped_i: int, feas, sign: float, seed: int) -> dict | None:
    """The same selection estimated two ways over the tuning queries: k-fold cross-validation **by query** (folds
    ignore groups: the split a by-question protocol makes) and **by group**, each fold choosing among every config
    the search evaluated. ``gap`` = by-query − by-group: the optimism a by-query split adds."""
    group_fold = group_folds(judged, proto.grouping.of, proto.folds or DEFAULT_FOLDS)
    k = int(group_fold.max()) + 1
    if k < 2:
        return None
    query_fold = fold_of(judged, k, seed)
    every = list(range(len(ev.trials)))
    est = {}
    for name, fold in (("by_query", query_fold), ("by_group", group_fold)):
        cv, _, _, _ = cross_validate(ev, fold, [(f, every) for f in range(k)], shipped_i, feas, sign)
        est[name] = float(cv.mean())
    return {**est, "gap": est["by_query"] - est["by_group"], "folds": k,
            "note": f"{k}-fold cross-validation over the {len(judged)} judged tuning queries, by query vs by group "
                    f"({proto.grouping.rule}); each fold selects among all {len(ev.trials)} evaluated configs"}
