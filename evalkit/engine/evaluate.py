"""Turn retriever runs into metric rows: quality (overall, per category, per evidence-age bucket), gates and
abstention, injection budget, "what the model actually sees" (metrics on the injected list only)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from evalkit.engine.runner import RetrieverRun
from evalkit.measures import catalogue
from evalkit.measures.budget import compliance, declared_budget
from evalkit.measures.harms import HarmLabels, harm_means
from evalkit.measures.lists import DEFAULT_METRICS, evaluate, relevant_qrels
from evalkit.measures.poison import PoisonLabels, poison_values
from retrievers.tokens import count_tokens
from retrievers.types import Dataset

DAY = 86400.0
AGE_BUCKETS = [(0, 1, "<1d"), (1, 7, "1-7d"), (7, 30, "7-30d"), (30, 90, "30-90d"), (90, 365, "90-365d"),
               (365, math.inf, ">365d")]
INJECTED_METRICS = catalogue.measures("injected")
JUDGED = [n for n in catalogue.names("harms") if catalogue.parse(n).kind == "ranking"]


def age_bucket(days: float | None) -> str:
    if days is None or (isinstance(days, float) and math.isnan(days)):
        return "undated"
    for lo, hi, name in AGE_BUCKETS:
        if lo <= days < hi:
            return name
    return "<1d"  # future-dated evidence: age clamps to 0


@dataclass
class Evaluation:
    dataset: str
    retriever: str
    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    breakdown: list[dict] = field(default_factory=list)  # rows: breakdown, bucket, metric, value, n


def evidence_age(ds: Dataset) -> dict[str, float | None]:
    """Per query: age in days of its most recent relevant document at the query's as_of (None if undated)."""
    idx = ds.doc_index
    out: dict[str, float | None] = {}
    rq = relevant_qrels(ds.qrels)
    for q in ds.queries:
        rel = rq.get(q.id)
        if not rel or q.as_of is None:
            out[q.id] = None
            continue
        ages = [max(0.0, (q.as_of - ds.documents[idx[d]].timestamp) / DAY) for d in rel
                if d in idx and ds.documents[idx[d]].timestamp is not None]
        out[q.id] = min(ages) if ages else None
    return out


def evaluate_run(ds: Dataset, run: RetrieverRun, metrics: list[str] | None = None,
                 ungated: RetrieverRun | None = None) -> Evaluation:
    metrics = list(metrics or DEFAULT_METRICS)
    # measures the dataset declares for itself (e.g. LongMemEval's recall_any@k / recall_all@k)
    metrics += [m for m in ds.info.get("extra_measures", ()) if m not in metrics]
    metrics += [m for m in JUDGED if m not in metrics]
    ranked = {q: r.ranked for q, r in run.results.items()}
    pq = evaluate(ds.qrels, ranked, metrics)
    injected = {q: [(d, 0.0) for d in r.injected] for q, r in run.results.items()}
    pq_inj = evaluate(ds.qrels, injected, [str(m.base) for m in INJECTED_METRICS])
    for m in INJECTED_METRICS:
        pq[str(m)] = pq_inj[str(m.base)]
    means = {m: (float(np.mean(list(v.values()))) if v else float("nan")) for m, v in pq.items()}
    rows: list[dict] = []
    cats = {q.id: (q.category or "none") for q in ds.queries}
    ages = evidence_age(ds)
    for name, key in (("category", cats), ("evidence_age", {q: age_bucket(a) for q, a in ages.items()})):
        buckets: dict[str, list[str]] = {}
        for q in next(iter(pq.values()), {}):
            buckets.setdefault(key.get(q, "none"), []).append(q)
        for b, qs in sorted(buckets.items()):
            for m, v in pq.items():
                vals = [v[q] for q in qs if q in v]
                if vals:
                    rows.append({"breakdown": name, "bucket": b, "metric": m, "value": float(np.mean(vals)),
                                 "n": len(vals)})
    # gates, abstention, injection and budget
    rq = relevant_qrels(ds.qrels)
    res = run.results
    n = len(res) or 1
    skipped = [q for q, r in res.items() if r.skipped]
    means["skip_rate"] = len(skipped) / n
    means["injection_rate"] = sum(1 for r in res.values() if r.injected) / n
    labels = dataset_labels(ds)
    harm, harm_pq = harm_means(labels, ds.qrels, {q: [d for d, _ in r.ranked] for q, r in res.items()},
                               {q: list(r.injected) for q, r in res.items()})
    means.update(harm)
    pq.update(harm_pq)
    if labels.poison is not None:  # planted notes (evalkit.measures.poison): read from the run's ids and metadata
        nd = {"ndcg@10": pq["ndcg@10"] if "ndcg@10" in pq else evaluate(ds.qrels, ranked, ["ndcg@10"])["ndcg@10"]}
        p_means, p_pq, p_rows = poison_values(labels.poison, {q: [d for d, _ in r.ranked] for q, r in res.items()},
                                              {q: list(r.injected) for q, r in res.items()}, nd)
        means.update(p_means)
        pq.update(p_pq)
        rows += p_rows
    no_rel = [q for q in res if q not in rq]
    if no_rel:
        means["correct_abstention"] = harm["abstention_accuracy"]  # one definition (evalkit.measures.harms)
        means["abstention_queries"] = float(len(no_rel))
        _bucket_rates(rows, cats, no_rel, res)
    wrong = [q for q in skipped if q in rq]
    means["wrongly_skipped"] = len(wrong) / max(1, len(rq))
    if ungated is not None and rq:
        ung = evaluate(ds.qrels, {q: r.ranked for q, r in ungated.results.items()}, ["recall@10"])["recall@10"]
        means["recall@10_lost_to_gate"] = sum(ung.get(q, 0.0) for q in wrong) / len(rq)
    b = [r.budget for r in res.values()]
    for k in ("chunks", "tokens", "chars"):
        vals = [x.get(k) for x in b if x.get(k) is not None]
        if vals:
            means[f"injected_{k}_mean"] = float(np.mean(vals))
            means[f"injected_{k}_max"] = float(np.max(vals))
    budget = declared_budget(run.pipeline)
    # the preset's own budget is checked on the quantity its packer limits; the common policies on the whole block
    means["budget_compliance"] = compliance(b, budget, packer_tokens=True)
    for pol in catalogue.POLICIES:
        means[pol.measure] = compliance(b, pol.limit_dict)
    means.update(age_metrics(run))
    return Evaluation(ds.name, run.name, means, pq, rows)


def fill_tokens(run: RetrieverRun, texts: dict[str, str]) -> None:
    """A run whose budget records have no ``tokens`` (a preset without a budget packer, a run file) gets the BPE
    tokens of its injected chunks (cl100k_base, no formatting), so every retriever has a token column."""
    for r in run.results.values():
        if "tokens" not in r.budget:
            r.budget = dict(r.budget, tokens=sum(count_tokens(texts[d]) for d in r.injected if d in texts))


def secret_guard(p) -> str | None:
    """The stage by which pipeline ``p`` declares a secret guard (a ``filter.secret_guard`` stage, or any stage
    with a true ``exclude_secret`` / ``exclude_secrets`` parameter), else None. The gate holds
    ``secret_leak_rate`` at 0 for such a pipeline."""
    for s in p.stages:
        params = s.params()
        if s.name == "filter.secret_guard" or params.get("exclude_secret") is True \
                or params.get("exclude_secrets") is True:
            return s.display
    return None


def dataset_labels(ds: Dataset) -> HarmLabels:
    """The harm labels ``ds`` declares (``info["labels"]``), with paths / texts when its patterns need them."""
    lab = ds.info.get("labels") or {}
    paths = {d.id: d.path for d in ds.documents if d.path} if lab.get("junk_patterns") else None
    texts = {d.id: d.text for d in ds.documents} if lab.get("secret_patterns") else None
    return replace(HarmLabels.from_info(ds.info, paths, texts), poison=PoisonLabels.from_documents(ds.documents))


def age_metrics(run: RetrieverRun) -> dict[str, float]:
    """Negative ages met by the pipeline's time stages (decay, recency, age penalty): a candidate dated after its
    query's ``as_of`` — hidden under the ``strict`` as-of visibility protocol, visible under ``all`` (or when a
    document's date lies after its creation, e.g. a file mtime). From the per-query counts the stages record
    (:func:`retrievers.stages.decay.record_ages`; the largest over the pipeline's time stages):

    * ``negative_age_candidates`` — candidates scored with a negative age, summed over queries;
    * ``negative_age_share`` — their share of the dated candidates the time stages scored (NaN if none);
    * ``negative_age_queries`` — share of queries with at least one.

    Empty for a pipeline without a time stage."""
    neg, n = run.info.get("negative_age"), run.info.get("age_scored")
    if neg is None or n is None:
        return {}
    total = int(np.sum(neg))
    return {"negative_age_candidates": float(total),
            "negative_age_share": total / int(np.sum(n)) if np.sum(n) else float("nan"),
            "negative_age_queries": float(np.mean(np.asarray(neg) > 0)) if len(neg) else float("nan")}


def _bucket_rates(rows, cats, qs, res):
    by: dict[str, list[str]] = {}
    for q in qs:
        by.setdefault(cats.get(q, "none"), []).append(q)
    for c, lst in sorted(by.items()):
        rows.append({"breakdown": "category", "bucket": c, "metric": "correct_abstention",
                     "value": sum(1 for q in lst if not res[q].injected) / len(lst), "n": len(lst)})
