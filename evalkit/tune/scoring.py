"""Scoring a tune's chosen configs beyond the sweep of the tuning queries: on the held-out split with the baselines,
out of fold (cross-validation), on the lockbox (once, counted in the journal) and in a real latency run."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import evalkit.engine.runner as runner
from evalkit.engine.experiment import require_judged
from evalkit.engine.sweep import Sweep, SweepConfig
from evalkit.measures import catalogue
from evalkit.measures.arrays import parse_metric
from evalkit.tune.lockbox import JOURNAL_NAME, LockboxJournal, lockbox_key, space_sha
from evalkit.report.tune import flat_str, times
from evalkit.tune.search import Trial
from evalkit.tune.space_model import LATENCY, Space
from retrievers.candidates.search import build_candidates

DEFAULT_METRICS = catalogue.names("tune.default")


def latency_check(space: Space, ds, index, trials: list[Trial], log) -> dict[str, dict]:
    """{trial key: {metric: value}} from a real latency run, or {} when the runner has none."""
    fn = getattr(runner, "run_latency", None)
    pct = getattr(runner, "percentiles", None)
    if fn is None or pct is None:
        return {}
    pipes = []
    for i, t in enumerate(trials):
        p = t.config.pipeline(space.pipeline)
        pipes.append(dataclasses.replace(p, name=f"{p.name}#lat{i}"))
    log(f"  latency run: {len(pipes)} configs x {min(space.latency_queries, len(ds.queries))} queries "
        f"(x{space.latency_repeats})")
    res = fn(ds, pipes, index, repeats=space.latency_repeats, warmup=3, threads=1, limit=space.latency_queries)
    out = {}
    for t, p in zip(trials, pipes):
        rec = res.stages.get(p.name, {})
        q = pct(rec.get("total", []))
        out[t.key] = {m: q.get(k, float("nan")) for m, k in LATENCY.items()}
    return out


def out_of_fold(space, cs, pool, ctx, labels, ev, fold, fold_best, best_i, shipped_i, official, judged) -> dict:
    """Out-of-fold means of every ranking metric of the report (each query scored by its fold's config), by one
    small sweep over the folds' configs; run-level rates (leaks, abstention) are the config chosen on all tuning
    queries, measured on them (in-sample: they are not per query)."""
    ranking = [m for m in dict.fromkeys([space.objective] + official + DEFAULT_METRICS + space.metrics)
               if not parse_metric(m).run_level]
    uniq = list(dict.fromkeys(fold_best))
    res = Sweep(space.pipeline, cs, pool.qrels, ranking, ctx=ctx, keep=ranking, labels=labels).run(
        [ev.trials[i].config for i in uniq])
    if res.query_ids != judged:
        raise RuntimeError("out-of-fold scoring: the judged queries changed order")
    out = {}
    for m in ranking:
        v = np.zeros(len(judged))
        for f, i in enumerate(fold_best):
            te = fold == f
            v[te] = res.per_query[m][uniq.index(i)][te]
        out[m] = float(v.mean())
    return out


def open_lockbox(space, env, hm, labels, trials, baselines, log, journal_path, best, obj_name) -> dict:
    """Score the chosen config, the as-shipped preset and the baselines on the lockbox, once; record the opening."""
    proto, ds = env.proto, env.ds
    lds = ds.subset(proto.lockbox_ids)
    require_judged(lds, proto.lockbox)
    lcs = build_candidates(env.index, lds.queries, env.specs)
    sw = Sweep(space.pipeline, lcs, lds.qrels, hm, ctx=env.ctx, keep=[obj_name], labels=labels)
    res = sw.run([t.config for t in trials], workers=1)
    out = {"split": proto.lockbox, "queries": len(lds.queries), "judged": len(res.query_ids),
           "best": {m: float(res.means[m][0]) for m in hm}, "shipped": {m: float(res.means[m][1]) for m in hm},
           "baselines": {}, "pq": {"best": res.per_query[obj_name][0], "shipped": res.per_query[obj_name][1]},
           "query_ids": res.query_ids}
    for b in baselines:
        r = Sweep(b, lcs, lds.qrels, hm, ctx=env.ctx, keep=[obj_name], labels=labels).run([SweepConfig()])
        out["baselines"][b.name] = {m: float(r.means[m][0]) for m in hm}
        out["pq"][b.name] = r.per_query[obj_name][0]
    path = Path(journal_path) if journal_path else Path(space.path).parent / JOURNAL_NAME
    jr = LockboxJournal(path)
    k = lockbox_key(space.path, space.raw, ds.name, ds.content_hash(), proto.lockbox)
    n = jr.record(k, {"space": Path(space.path).as_posix(), "space_sha256": space_sha(space.raw),
                      "dataset": ds.name, "dataset_hash": ds.content_hash(), "lockbox": proto.lockbox,
                      "queries": len(lds.queries), "config": flat_str(best.flat), "objective": obj_name,
                      "value": out["best"][obj_name]})
    out.update({"opened": n, "journal": str(path), "key": k})
    log(f"  lockbox {proto.lockbox!r} ({len(lds.queries)} queries) {times(n)} for this space "
        f"(journal {path})" + ("" if n == 1 else " — every opening after the first is one more validation look"))
    return out


def score_heldout_and_baselines(space: Space, env, configs: list[SweepConfig], ids: list[int], metrics: list[str],
                                labels) -> tuple[dict[int, tuple[dict, np.ndarray]], list[str], dict[str, dict]]:
    """The held-out split's scores of ``configs`` (the leaderboard, the best config and the as-shipped preset;
    ``ids`` their trial indices) and every baseline's on the tuning queries and the held-out split. A handful of
    configs, so ``metrics`` include what the model actually sees (the injected block), which compares systems whose
    ranked lists have different lengths fairly. Returns ``({trial: (means, objective per query)}, held-out query
    ids, {baseline: {"train", "train_pq", "heldout", "heldout_pq"}})``."""
    held: dict[int, tuple[dict, np.ndarray]] = {}
    base_res: dict[str, dict] = {}
    held_ids: list[str] = []
    obj, hds = space.objective, env.heldout_ds
    if hds is not None:
        hcs = build_candidates(env.index, hds.queries, env.specs)
        hres = Sweep(space.pipeline, hcs, hds.qrels, metrics, ctx=env.ctx, keep=[obj], labels=labels).run(
            configs, workers=1)
        for j, i in enumerate(ids):
            held[i] = ({m: float(hres.means[m][j]) for m in metrics}, hres.per_query[obj][j])
        held_ids = hres.query_ids
    for b in env.baselines:
        rec = {}
        r = Sweep(b, env.cs, env.pool.qrels, metrics, ctx=env.ctx, keep=[obj], labels=labels).run([SweepConfig()])
        rec["train"] = {m: float(r.means[m][0]) for m in metrics}
        rec["train_pq"] = r.per_query[obj][0]
        if hds is not None:
            r = Sweep(b, hcs, hds.qrels, metrics, ctx=env.ctx, keep=[obj], labels=labels).run([SweepConfig()])
            rec["heldout"] = {m: float(r.means[m][0]) for m in metrics}
            rec["heldout_pq"] = r.per_query[obj][0]
        base_res[b.name] = rec
    return held, held_ids, base_res

