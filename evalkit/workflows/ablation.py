"""Stage-by-stage ablation: what each stage of a preset buys in quality and what it costs in milliseconds.

For a preset with stages ``s_1 … s_n`` the ablation evaluates the full pipeline and, per stage, one variant with
that stage turned off:

* **removed** — the stage is dropped from the list (the default);
* **enabled=false** — stages with an ``enabled`` switch (OpenClaw decay / MMR, HookClaw temporal window) are turned
  off the way the system itself turns them off; OpenClaw's decay stage, for instance, keeps the stable sort it
  performs even when decay is off, so dropping it would measure an unsorted merge rather than "decay off";
* **a parameter setting** for stages that declare one (``Stage.ablation_off``: the parameters that switch the
  stage off while it stays in the pipeline, for stages whose removal would not turn their effect off);
* **no budget** — ``budget.pack`` is replaced by the same packer without limits: every ranked row is injected
  and counted in the same format, so budget compliance shows what the packer enforced;
* **required** — not evaluated: the first fusion stage (it creates the candidate list; nothing is left to rank
  without it) and any stage whose removal makes a later stage fail (the error is recorded as the reason);
* **already off** — the stage is present but disabled in the preset (``enabled = false``): nothing to ablate.

Quality mode: every variant runs on the *same* candidate set (arms computed once, from the on-disk cache), so
differences come from the stages alone. Per variant: nDCG@10, recall@10, injected nDCG@10 (metrics on what the
budget packer injects), skip rate, budget compliance (against the budget the preset declares — ``[budget]``, else
the limits of its ``budget.pack`` stage — so the "no budget" variant is checked against the same limits), the
change vs the full pipeline, and how many queries' results changed. Significance: paired sign-flip randomisation
test per variant on per-query nDCG@10 and injected nDCG@10 (:func:`evalkit.measures.stats.randomization_test`), Holm-adjusted
over the whole family (every variant × both metrics, :func:`evalkit.measures.stats.holm`).

Latency mode (:func:`evalkit.engine.runner.run_latency`, no cache, one thread, a few queries): the full pipeline gives each
stage's own cost (p50 / p95 ms of that stage); every variant is timed end to end too, so the table also says what
removing the stage changes end to end. The run is interleaved (per query, every variant back to back, ``repeats``
rounds) so load drift hits all variants alike. The end-to-end delta is the median over queries of the paired
difference (variant − full) in the time after the arms, each query's least disturbed round: the arms and the query
embedding are identical in every variant and dominate the total, so differencing whole totals would mostly measure
machine noise. Latency numbers come from a shared machine: stage costs are robust, deltas of a few hundredths of a
millisecond are noise.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.data.groups import split_check
from evalkit.data.registry import DEFAULT as DEFAULT_DATASET
from evalkit.data.registry import load_dataset
from evalkit.engine.context import load_query_logs
from evalkit.engine.evaluate import Evaluation, evaluate_run
from evalkit.engine.experiment import select_queries
from evalkit.engine.runner import (
    RetrieverRun,
    arm_map,
    collect,
    percentiles,
    run_latency,
    shared_candidates,
)
from evalkit.measures import catalogue
from evalkit.measures.budget import BUDGET_KEYS, declared_budget
from evalkit.measures.stats import ALPHA, holm, randomization_test, win_tie_loss
from evalkit.report import ablation as render
from evalkit.runfolder.claim import claim_folder
from retrievers.candidates.table import view
from retrievers.embed.model import Embedder
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.pipeline import Pipeline, load_preset
from retrievers.stages import Context, Stage
from retrievers.types import Dataset

ABLATED, REQUIRED, ALREADY_OFF = "ablated", "required", "already off"
HOW_REMOVED, HOW_DISABLED, HOW_NO_BUDGET = "removed", "enabled=false", "no budget"
METRICS = catalogue.names("ablation")
TESTED = catalogue.names("ablation.tested")  # metrics with a paired significance test
FIXED_COSTS = ("embed_query", "view")  # latency keys that are not pipeline stages (plus every "arm:*")


# ---- variants --------------------------------------------------------------------------------------------------

@dataclass
class StageVariant:
    """One stage of the preset and the pipeline with that stage turned off (None when not ablated)."""

    position: int  # 1-based position in the preset
    label: str
    type: str
    kind: str
    status: str  # ablated | required | already off
    how: str = ""  # removed | enabled=false | no budget
    reason: str = ""
    pipeline: Pipeline | None = None


def _unique_labels(p: Pipeline) -> Pipeline:
    """Give stages with the same display name distinct labels (latency timings are keyed by label)."""
    seen: dict[str, int] = {}
    stages = []
    for s in p.stages:
        n = seen.get(s.display, 0)
        seen[s.display] = n + 1
        stages.append(dataclasses.replace(s, label=f"{s.display}#{n + 1}") if n else s)
    if all(a is b for a, b in zip(stages, p.stages)):
        return p
    return Pipeline(p.name, p.description, p.arms, stages, p.budget, p.meta)


def _off(s: Stage) -> tuple[Stage | None, str]:
    """The replacement for a stage turned off (None = removed) and how it was turned off."""
    prm = s.params()
    if s.ablation_off:
        return dataclasses.replace(s, **s.ablation_off), ", ".join(f"{k}={v}" for k, v in s.ablation_off.items())
    if "enabled" in prm:
        return dataclasses.replace(s, enabled=False), HOW_DISABLED
    if s.kind == "budget":
        return dataclasses.replace(s, **{k: None for k in BUDGET_KEYS if k in prm}), HOW_NO_BUDGET
    return None, HOW_REMOVED


def stage_variants(p: Pipeline) -> list[StageVariant]:
    """One entry per stage of ``p`` (in order): the variant pipeline, or why the stage is not ablated.

    Dynamic dependencies (a later stage failing without this one) are found when the variant runs; see
    :func:`ablate`. Variant names are ``"{preset}~no-{label}"``."""
    p = _unique_labels(p)
    budget = declared_budget(p)
    first_fusion = next((i for i, s in enumerate(p.stages) if s.kind == "fusion"), None)
    out = []
    for i, s in enumerate(p.stages):
        v = StageVariant(i + 1, s.display, s.name, s.kind, ABLATED)
        if i == first_fusion:
            v.status, v.reason = REQUIRED, "creates the candidate list (nothing to rank without it)"
        elif s.params().get("enabled") is False:
            v.status, v.reason = ALREADY_OFF, "enabled = false in the preset"
        else:
            repl, v.how = _off(s)
            stages = p.stages[:i] + ([repl] if repl is not None else []) + p.stages[i + 1:]
            v.pipeline = Pipeline(f"{p.name}~no-{s.display}", f"{p.name} with {s.display} off ({v.how})", p.arms,
                                  stages, budget, dict(p.meta))
        out.append(v)
    return out


# ---- results ---------------------------------------------------------------------------------------------------

@dataclass
class StageRow:
    """One row of the ablation table (one per stage of the preset)."""

    position: int
    label: str
    type: str
    kind: str
    status: str
    how: str
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)  # the variant's means (METRICS)
    delta: dict[str, float] = field(default_factory=dict)  # variant − full
    p: dict[str, float] = field(default_factory=dict)  # raw randomisation p per TESTED metric
    p_holm: dict[str, float] = field(default_factory=dict)  # Holm-adjusted over the family
    wtl: tuple[int, int, int] | None = None  # nDCG@10 wins / ties / losses of the variant vs full
    changed: int | None = None  # queries whose top-10 or injected list differs from the full pipeline
    stage_ms: dict[str, float] = field(default_factory=dict)  # this stage's cost in the full pipeline (p50/p95)
    e2e_ms: dict[str, float] = field(default_factory=dict)  # the variant's end-to-end cost (p50/p95)
    delta_e2e_p50_ms: float | None = None  # end-to-end change (ms): median paired Δ of the post-arm time

    @property
    def evaluated(self) -> bool:
        """The variant ran (the stage was turned off and scored)."""
        return self.status == ABLATED

    @property
    def required(self) -> bool:
        """Not evaluated: turning the stage off leaves nothing to rank, or makes a later stage fail (``reason``)."""
        return self.status == REQUIRED

    def significant(self, metric: str = "ndcg@10", alpha: float = ALPHA) -> bool:
        p = self.p_holm.get(metric)
        return p is not None and not math.isnan(p) and p < alpha


@dataclass
class AblationResult:
    preset: str
    preset_hash: str
    dataset: str
    split: str | None
    n_queries: int
    n_judged: int
    budget: dict
    full: dict[str, float]  # the full pipeline's means (METRICS)
    full_ms: dict[str, float]  # the full pipeline's end-to-end latency (p50/p95), query embedding excluded
    fixed_ms: dict[str, dict[str, float]]  # embed_query, arm:*, view (p50/p95): costs no stage ablation removes
    rows: list[StageRow]
    latency: dict = field(default_factory=dict)  # queries, threads, repeats, warmup, interleaved (empty = none)
    seconds: dict[str, float] = field(default_factory=dict)
    evaluations: dict[str, Evaluation] = field(default_factory=dict, repr=False)  # full + variants, per-query values
    runs: dict[str, RetrieverRun] = field(default_factory=dict, repr=False)  # full + variants: ranked / injected
    split_groups: dict = field(default_factory=dict)  # evalkit.data.groups.split_check of the ablated split

    # -- tabular views --------------------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        """Flat rows (the full pipeline first, then one per stage) — the CSV and DataFrame layout."""
        out = [{"position": 0, "stage": "(full)", "type": "", "kind": "", "status": "full", "how": "", "reason": "",
                **{m: self.full.get(m) for m in METRICS},
                **{f"delta_{m}": 0.0 for m in METRICS},
                **{f"p_{m}": None for m in TESTED}, **{f"p_holm_{m}": None for m in TESTED},
                "wins": None, "ties": None, "losses": None, "changed_queries": 0,
                "stage_p50_ms": None, "stage_p95_ms": None,
                "e2e_p50_ms": self.full_ms.get("p50_ms"), "e2e_p95_ms": self.full_ms.get("p95_ms"),
                "delta_e2e_p50_ms": 0.0 if self.full_ms else None}]
        for r in self.rows:
            w = r.wtl or (None, None, None)
            out.append({"position": r.position, "stage": r.label, "type": r.type, "kind": r.kind, "status": r.status,
                        "how": r.how, "reason": r.reason,
                        **{m: r.metrics.get(m) for m in METRICS},
                        **{f"delta_{m}": r.delta.get(m) for m in METRICS},
                        **{f"p_{m}": r.p.get(m) for m in TESTED}, **{f"p_holm_{m}": r.p_holm.get(m) for m in TESTED},
                        "wins": w[0], "ties": w[1], "losses": w[2], "changed_queries": r.changed,
                        "stage_p50_ms": r.stage_ms.get("p50_ms"), "stage_p95_ms": r.stage_ms.get("p95_ms"),
                        "e2e_p50_ms": r.e2e_ms.get("p50_ms"), "e2e_p95_ms": r.e2e_ms.get("p95_ms"),
                        "delta_e2e_p50_ms": r.delta_e2e_p50_ms})
        return out

    def frame(self):
        """The records as a pandas DataFrame (indexed by stage label)."""
        import pandas as pd  # lazy: startup
        return pd.DataFrame(self.records()).set_index("stage")

    # -- its forms, rendered by evalkit.report.ablation ---------------------------------------------------------
    def caption(self) -> str:
        """One line: the preset, dataset, queries, the budget checked against and how latency was measured."""
        return render.caption(self)

    def legend(self) -> str:
        """What each column means."""
        return render.legend(self)

    def to_csv(self) -> str:
        """The records with the dataset and preset, floats to 6 decimals."""
        return render.render_csv(self)

    def to_json(self) -> str:
        return render.render_json(self)

    def to_markdown(self) -> str:
        """The caption, the table (one row per stage) and its legend."""
        return render.render_markdown(self)

    def to_text(self) -> str:
        """The terminal table (without the stage type, to keep it narrow)."""
        return render.render_text(self)

    def write(self, out) -> Path:
        """``ablation.md``, ``ablation.csv`` and ``ablation.json`` in the folder ``out`` (a path or the command's
        early claim), written atomically; an existing ``out`` is replaced only when it is an earlier ablation
        output (evalkit/runfolder/claim.py)."""
        claim = claim_folder(out, "ablate")
        with claim.staging() as tmp:
            (tmp / "ablation.md").write_text(self.to_markdown(), encoding="utf-8")
            (tmp / "ablation.csv").write_text(self.to_csv(), encoding="utf-8")
            (tmp / "ablation.json").write_text(self.to_json() + "\n", encoding="utf-8")
        return claim.path


# ---- running ---------------------------------------------------------------------------------------------------

def _top(res, k: int = 10) -> tuple:
    return tuple(d for d, _ in res.ranked[:k]), tuple(res.injected), res.skipped


class _Shared:
    """What running a variant needs besides the variant: the shared candidate set and the stage context. Sent once
    per Dask worker (the context's embedder travels as the model to open again, see
    :class:`evalkit.engine.cluster.Portable`)."""

    def __init__(self, cs, ctx: Context):
        self.cs = cs
        self.ctx = ctx

    def __getstate__(self) -> dict:
        from evalkit.engine.cluster import Portable  # lazy: startup
        return {"cs": self.cs, "ctx": Portable(self.ctx)}

    def __setstate__(self, d: dict) -> None:
        self.cs = d["cs"]
        self.ctx = d["ctx"].context()


def _run_variant(shared: _Shared, p: Pipeline) -> RetrieverRun | BaseException:
    """Run ``p`` over the shared candidates (quality mode); an exception is returned, not raised, so a cluster
    worker reports which variant failed and why."""
    try:
        t0 = time.perf_counter()
        v = view(shared.cs, arm_map(p))
        st = p.run(v, shared.ctx)
        return RetrieverRun(p.name, p, collect(p, v, st, render_blocks=False), time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - returned to the caller, which decides
        return exc


def ablate(ds: Dataset, preset: Pipeline, index: SharedIndex, ctx: Context | None = None, latency_queries: int = 30,
           repeats: int = 3, n_permutations: int = 10_000, log=print, cluster=None) -> AblationResult:
    """Ablate every stage of ``preset`` on ``ds`` (already split). ``latency_queries = 0`` skips the latency run.
    ``cluster`` (a ``distributed.Client``): the variants' quality runs go to its workers, the candidate set sent
    once per worker; the latency run always stays on this machine (it times this machine)."""
    t_start = time.perf_counter()
    ctx = ctx or Context(embedder=index.embedder)
    if preset.query_logs():
        ctx = Context(ctx.embedder, ctx.trace, ctx.timings, dict(ctx.options, query_logs=load_query_logs([preset])))
    full = _unique_labels(preset)
    budget = declared_budget(full)
    full_run = Pipeline(full.name, full.description, full.arms, full.stages, budget, full.meta)
    variants = stage_variants(full)
    queries = ds.queries
    cs = shared_candidates(index, queries, [full_run])
    seconds = {"candidates": time.perf_counter() - t_start}

    shared = _Shared(cs, ctx)
    t0 = time.perf_counter()
    base = _run_variant(shared, full_run)
    if isinstance(base, BaseException):
        raise base
    base_ev = evaluate_run(ds, base)
    evals = {full_run.name: base_ev}
    runs: dict[int, RetrieverRun] = {}  # by stage position
    todo = [v for v in variants if v.status == ABLATED]
    if cluster is not None and todo:
        from evalkit.engine.cluster import map_shared  # lazy: startup
        got = map_shared(cluster, shared, _run_variant, [v.pipeline for v in todo], log=log, what="variants")
    else:
        got = [_run_variant(shared, v.pipeline) for v in _progress(todo, "ablation variants")]
    for v, res in zip(todo, got):
        if not isinstance(res, BaseException):
            runs[v.position] = res
        else:  # a later stage needs this one: the stage is required
            exc = res
            later = _culprit(exc, v.pipeline)
            v.status = REQUIRED
            v.reason = f"{later} fails without it ({type(exc).__name__}: {str(exc)[:80]})"
            v.pipeline = None
    seconds["quality"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    judged = sorted(base_ev.per_query.get("ndcg@10", {}))
    rows: list[StageRow] = []
    cols: dict[str, list[np.ndarray]] = {m: [] for m in TESTED}
    tested_rows: list[StageRow] = []
    for v in variants:
        r = StageRow(v.position, v.label, v.type, v.kind, v.status, v.how, v.reason)
        rows.append(r)
        if v.position not in runs:
            continue
        run_v = runs[v.position]
        ev = evaluate_run(ds, run_v)
        evals[run_v.name] = ev
        r.metrics = {m: ev.means.get(m, float("nan")) for m in METRICS}
        r.delta = {m: r.metrics[m] - base_ev.means.get(m, float("nan")) for m in METRICS}
        a = np.array([base_ev.per_query["ndcg@10"][q] for q in judged])
        b = np.array([ev.per_query["ndcg@10"][q] for q in judged])
        r.wtl = win_tie_loss(a, b)
        r.changed = sum(1 for q in base.results if _top(base.results[q]) != _top(run_v.results[q]))
        for m in TESTED:
            cols[m].append(np.array([ev.per_query[m][q] - base_ev.per_query[m][q] for q in judged]))
        tested_rows.append(r)
    if tested_rows and judged:
        raw = {m: np.atleast_1d(randomization_test(np.column_stack(cols[m]), n_permutations)) for m in TESTED}
        adj = holm(np.concatenate([raw[m] for m in TESTED]))
        n = len(tested_rows)
        for j, m in enumerate(TESTED):
            for i, r in enumerate(tested_rows):
                r.p[m] = float(raw[m][i])
                r.p_holm[m] = float(adj[j * n + i])
    seconds["evaluation"] = time.perf_counter() - t0

    full_ms: dict[str, float] = {}
    fixed: dict[str, dict[str, float]] = {}
    lat_info: dict = {}
    if latency_queries and latency_queries > 0:
        t0 = time.perf_counter()
        pipes = [full_run] + [v.pipeline for v in variants if v.status == ABLATED and v.pipeline is not None]
        lat, lat_info = _interleaved_latency(ds, pipes, index, ctx, latency_queries, repeats)
        stages = lat[full_run.name]
        full_ms = _pp(stages.get("total", []))
        full_part = _stage_part(stages, repeats)
        for k, vals in stages.items():
            if k in FIXED_COSTS or k.startswith("arm:"):
                fixed[k] = _pp(vals)
        by_name = {v.pipeline.name: v.position for v in variants if v.pipeline is not None}
        for r in rows:
            r.stage_ms = _pp(stages.get(r.label, []))
        for name, st in lat.items():
            pos = by_name.get(name)
            if pos is None:
                continue
            r = rows[pos - 1]
            r.e2e_ms = _pp(st.get("total", []))
            part = _stage_part(st, repeats)
            if part.size and part.shape == full_part.shape:
                r.delta_e2e_p50_ms = 1000.0 * float(np.median(part - full_part))
        seconds["latency"] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - t_start
    res = AblationResult(preset.name, preset.hash, ds.name, ds.info.get("split"), len(ds.queries), len(judged),
                         budget, {m: base_ev.means.get(m, float("nan")) for m in METRICS}, full_ms, fixed, rows,
                         lat_info, seconds, evals, {full_run.name: base, **{r.name: r for r in runs.values()}},
                         dict(ds.info.get("split_groups") or {}))
    log(f"  ablation of {preset.name} on {ds.name}: {len(tested_rows)} variants in {seconds['total']:.1f}s")
    return res


def _interleaved_latency(ds: Dataset, pipes: list[Pipeline], index: SharedIndex, ctx: Context, n: int,
                         repeats: int) -> tuple[dict[str, dict[str, list[float]]], dict]:
    """Latency mode over the first ``n`` queries, interleaved: for each round and each query, every pipeline runs
    back to back (:func:`evalkit.engine.runner.run_latency` on that one query), so machine-load drift hits all variants
    alike and per-query differences are paired. Timings per pipeline and key: ``repeats × n`` values in
    (round, query) order. One thread; the first ``min(5, n)`` queries warm every pipeline up, untimed."""
    qs = ds.queries[:n]
    warm = min(5, len(qs))
    run_latency(ds.head(warm), pipes, index, repeats=0, warmup=warm, threads=1, ctx=ctx)
    out: dict[str, dict[str, list[float]]] = {p.name: {} for p in pipes}
    for _, q in _progress([(r, q) for r in range(repeats) for q in qs], f"latency ({len(pipes)} pipelines)"):
        lat = run_latency(ds.subset([q.id]), pipes, index, repeats=1, warmup=0, threads=1, ctx=ctx)
        for name, st in lat.stages.items():
            for k, vals in st.items():
                out[name].setdefault(k, []).extend(vals)
    return out, {"queries": len(qs), "threads": 1, "repeats": repeats, "warmup": warm, "interleaved": True}


def _progress(items: list, desc: str):
    """A progress bar on an interactive terminal (quiet in CI, notebooks and pipes)."""
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm  # lazy: startup
    return tqdm(items, desc=desc, leave=False)


def _stage_part(timings: dict[str, list[float]], repeats: int) -> np.ndarray:
    """Per timed query: seconds spent after the arms (end to end minus embedding, arms and view), the minimum over
    the repeats (the least disturbed run). The arms are identical in every variant, so a variant's end-to-end
    change is its change in this part; taking it here keeps the arms' machine noise (the largest term) out."""
    tot = np.asarray(timings.get("total", []), dtype=np.float64)
    for k, v in timings.items():
        if k.startswith("arm:") or k == "view":
            tot = tot - np.asarray(v, dtype=np.float64)
    if tot.size == 0 or tot.size % repeats:
        return np.zeros(0)
    return tot.reshape(repeats, -1).min(axis=0)


def _pp(vals: list[float]) -> dict[str, float]:
    p = percentiles(vals)
    return {"p50_ms": p["p50_ms"], "p95_ms": p["p95_ms"]} if p else {}


def _culprit(exc: BaseException, p: Pipeline) -> str:
    """The stage of ``p`` in whose ``apply`` the exception was raised (innermost matching frame), else 'a later stage'."""
    names = {}
    for s in p.stages:
        names.setdefault(type(s), s.display)
    tb = exc.__traceback__
    found = None
    while tb is not None:
        slf = tb.tb_frame.f_locals.get("self")
        if slf is not None and type(slf) in names and tb.tb_frame.f_code.co_name == "apply":
            found = names[type(slf)]
        tb = tb.tb_next
    return f"stage {found}" if found else "a later stage"


def prepare(dataset: str | Dataset = DEFAULT_DATASET, split: str | None = None, limit: int | None = None,
            settings=None, embedder=None) -> tuple[Dataset, SharedIndex, Context]:
    """The dataset restricted to ``split`` (default ``test`` when present, else ``all``) and to its first ``limit``
    queries, its shared index and a quality-mode context — what :func:`ablate` needs (reuse them across presets)."""

    full = load_dataset(dataset) if isinstance(dataset, str) else dataset
    ds = select_queries(full, split, limit)
    # the split's groups (evalkit.data.groups): a stage kept or dropped on this ablation is a choice; it is
    # independent of the dataset's other queries only if no group is on both sides
    ds.info["split_groups"] = check = split_check(full, full.split(ds.info.get("split")))
    if check["shared_groups"]:
        print(f"evalkit: ablate: split {ds.info.get('split') or 'all'!r} shares {check['shared_groups']} groups "
              f"({check['rule']}) with the dataset's other queries (e.g. {', '.join(check['shared_examples'])}): "
              f"a choice made on this ablation is not independent of them", file=sys.stderr)
    embedder = embedder or Embedder()
    index = SharedIndex(ds, embedder=embedder, settings=settings or IndexSettings())
    return ds, index, Context(embedder=embedder, options={"render_blocks": False})


def run_ablation(preset: str | Pipeline, dataset: str | Dataset = DEFAULT_DATASET, split: str | None = None,
                 latency_queries: int = 30, limit: int | None = None, settings=None, embedder=None,
                 repeats: int = 3, log=print, cluster=None) -> AblationResult:
    """Load the preset, the dataset and its shared index (:func:`prepare`), then :func:`ablate`."""

    p = load_preset(preset) if isinstance(preset, str) else preset
    ds, index, ctx = prepare(dataset, split, limit, settings, embedder)
    return ablate(ds, p, index, ctx, latency_queries=latency_queries, repeats=repeats, log=log, cluster=cluster)


__all__ = ["StageVariant", "StageRow", "AblationResult", "stage_variants", "declared_budget", "ablate", "prepare",
           "run_ablation"]
