"""Evaluate many configs of one preset over one shared candidate set, fast.

A config is a set of stage-parameter overrides (``{stage label or type: {param: value}}``, applied with
:meth:`Pipeline.with_params`) plus optional arm depths (``{arm name: {"depth": n}}``). Only post-candidate work
changes between configs, so everything candidate-shaped is shared:

* the candidate set, and every ``cs.memo`` entry (token sets, pairwise similarities, gate decisions …);
* the per-pipeline :func:`retrievers.candidates.table.view` — one per distinct arm map (views are memoised on the
  shared set), so configs that change arm depths read the deepest shared candidates through a shallower view;
* the gain matrix of the metrics (:mod:`evalkit.measures.arrays`), one per view;
* **stage prefixes**: configs are evaluated in lexicographic order of their per-stage parameter keys, and the
  State after stage *i* is kept on a stack, so two configs that agree on the first *i* stages (same view, same
  parameters) run those stages once. A half-life × λ grid over ``fusion → decay → MMR → filter`` runs the fusion
  once, the decay once per half-life and only the MMR and filters per config.

Other savings: trailing ``budget`` stages are dropped when no requested metric reads the injected block
(the packer never removes or reorders rows, so ranking metrics are unchanged), and when they do run, injected
blocks are never rendered (``ctx.options["render_blocks"] = False``), and time stages do not count negative ages
(``count_ages = False``: no sweep metric reads them). ``workers > 1`` forks worker processes
after a warm-up config has filled the shared memo; each takes a contiguous slice of the sorted configs so
prefix sharing survives the split.

Equivalence: for every config, the metrics equal ``Pipeline.run`` + :func:`evalkit.measures.lists.evaluate` on the same
candidates (``tests/unit/evalkit/tune/test_tune.py``). The loop below repeats :meth:`Pipeline.run`'s per-stage step
(apply, then empty the lists of skipped queries); a stage receives a shallow copy of the shared prefix State (fresh
``extra`` and ``info`` dicts), so stages that write ``st.info`` never leak into sibling configs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from evalkit.engine.runner import arm_map
from evalkit.measures.arrays import Judgments, Scorer, parse_metrics
from evalkit.measures.harms import HarmLabels
from evalkit.measures.budget import has_limits
from retrievers.candidates.arms import ArmSpec
from retrievers.candidates.table import CandidateSet, State, view
from retrievers.errors import ConfigError
from retrievers.pipeline import Pipeline
from retrievers.stages import Context, Stage, build_stage


@dataclass
class SweepConfig:
    """Stage overrides ``{label or type: {param: value}}``, arm overrides ``{arm name: {"depth": n}}`` and the
    structural part: ``replace`` ``{stage label or type: stage dict | list | None}`` swaps a stage for another (its
    label kept), for a sequence (a list of stage dicts and ``"keep"`` = the slot's own stage: how a stage is
    inserted before or after it) or drops it (None), ``extra_arms`` adds arms (``[[arms]]``-style dicts) the
    candidate set holds."""

    overrides: dict[str, dict] = field(default_factory=dict)
    arms: dict[str, dict] = field(default_factory=dict)
    replace: dict[str, dict | None] = field(default_factory=dict)
    extra_arms: list[dict] = field(default_factory=list)

    def key(self) -> str:
        d: dict[str, Any] = {"stages": self.overrides, "arms": self.arms}
        if self.replace:
            d["replace"] = self.replace
        if self.extra_arms:
            d["extra_arms"] = self.extra_arms
        return json.dumps(d, sort_keys=True, default=str)

    def check(self, base: Pipeline) -> None:
        """Raise ConfigError on an override of a stage or arm ``base`` does not have (``with_params`` would
        silently ignore it)."""
        if self.overrides:
            known = {s.display for s in base.stages} | {s.name for s in base.stages}
            unknown = sorted(set(self.overrides) - known)
            if unknown:
                raise ConfigError(f"override for unknown stage(s) {', '.join(unknown)} "
                                  f"(stages: {', '.join(dict.fromkeys(s.display for s in base.stages))})")
        if self.arms:
            unknown = sorted(set(self.arms) - {a.name for a in base.arms})
            if unknown:
                raise ConfigError(f"unknown arm(s) {', '.join(unknown)} (arms: {', '.join(a.name for a in base.arms)})")

    def pipeline(self, base: Pipeline) -> Pipeline:
        """The config's pipeline (unknown stages / arms and invalid values raise ConfigError)."""
        if self.replace or self.extra_arms:
            base = _structural(base, self.replace, self.extra_arms)
        self.check(base)
        p = base.with_params(self.overrides) if self.overrides else base
        if self.arms:
            arms = [dataclasses.replace(a, **self.arms.get(a.name, {})) for a in p.arms]
            p = Pipeline(p.name, p.description, arms, p.stages, p.budget, p.meta)
        return p


def _structural(base: Pipeline, replace: dict, extra_arms: list[dict]) -> Pipeline:
    """``base`` with stages swapped or dropped and arms added."""
    known = {s.display for s in base.stages} | {s.name for s in base.stages}
    unknown = sorted(set(replace) - known)
    if unknown:
        raise ConfigError(f"replacement for unknown stage(s) {', '.join(unknown)}")
    stages = []
    for s in base.stages:
        key = s.display if s.display in replace else (s.name if s.name in replace else None)
        if key is None:
            stages.append(s)
        elif isinstance(replace[key], list):
            stages.extend(sequence_stages(s, replace[key]))
        elif replace[key] is not None:
            stages.append(build_stage(dict({"label": s.display}, **replace[key])))
    have = {a.name for a in base.arms}
    arms = list(base.arms) + [ArmSpec.from_dict(dict(a)) for a in extra_arms if a["name"] not in have]
    return Pipeline(base.name, base.description, arms, stages, base.budget, base.meta)


def sequence_stages(slot: Stage, seq: list) -> list[Stage]:
    """The stages a sequence option puts in ``slot``'s place: ``"keep"`` is the slot's own stage; a stage dict is
    built as given, except that in a sequence without ``"keep"`` the first dict takes the slot's label (it
    replaces the slot; the others are inserted after it)."""
    out, labelled = [], "keep" in seq
    for item in seq:
        if item == "keep":
            out.append(slot)
        else:
            cfg = dict(item) if labelled else dict({"label": slot.display}, **item)
            labelled = True
            out.append(build_stage(cfg))
    return out


@dataclass
class SweepResult:
    configs: list[SweepConfig]
    metrics: list[str]
    means: dict[str, np.ndarray]  # metric -> (N,)
    per_query: dict[str, np.ndarray]  # metric -> (N, judged queries), for the metrics asked to keep
    query_ids: list[str]  # judged queries, the columns of per_query
    seconds: float
    cpu_seconds: float
    queries: int  # queries in the batch (judged or not): every one runs through every config
    stage_calls: int  # stage applications actually run
    naive_stage_calls: int  # what running every config from scratch would have cost
    stage_seconds: dict[str, float] = field(default_factory=dict)
    workers: int = 1
    shared_outputs: int = 0  # stage runs skipped because an identical input State had been seen
    resumed: int = 0  # configs read back from the journal instead of computed

    def __len__(self) -> int:
        return len(self.configs)

    @property
    def configs_per_second(self) -> float:
        return len(self.configs) / self.seconds if self.seconds > 0 else float("inf")

    @property
    def query_evals_per_second(self) -> float:
        return len(self.configs) * self.queries / self.seconds if self.seconds > 0 else float("inf")

    def order(self, metric: str, maximize: bool = True) -> np.ndarray:
        """Config indices, best first (ties: the earlier config)."""
        v = self.means[metric]
        v = np.where(np.isnan(v), -np.inf if maximize else np.inf, v)
        return np.argsort(-v if maximize else v, kind="stable")

    def row(self, i: int) -> dict[str, float]:
        return {m: float(self.means[m][i]) for m in self.means}


class _Stack:
    """States after each stage of the last evaluated config, keyed by their stage-key prefix."""

    def __init__(self):
        self.keys: list = []
        self.states: list[State] = []
        self.fps: list = []  # fingerprint of each state (None = not computed yet)

    def common(self, keys: list) -> int:
        n = 0
        for a, b in zip(self.keys, keys):
            if a != b:
                break
            n += 1
        return n

    def cut(self, n: int) -> None:
        del self.keys[n:]
        del self.states[n:]
        del self.fps[n:]

    def push(self, key, st: State) -> None:
        self.keys.append(key)
        self.states.append(st)
        self.fps.append(None)


def fingerprint(st: State) -> bytes | None:
    """Content hash of a State (rows, scores, skip flags, extra columns, info); None if info cannot be hashed."""
    h = hashlib.blake2b(digest_size=16)
    for a in (st.col, st.score, st.skipped):
        h.update(repr((a.dtype.str, a.shape)).encode())
        h.update(np.ascontiguousarray(a).view(np.uint8))
    try:
        for k in sorted(st.extra):
            a = st.extra[k]
            h.update(k.encode() + repr((a.dtype.str, a.shape)).encode())
            h.update(np.ascontiguousarray(a).view(np.uint8))
        for k in sorted(st.info, key=str):
            v = st.info[k]
            h.update(repr(k).encode())
            if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
                h.update(repr((v.dtype.str, v.shape)).encode())
                h.update(np.ascontiguousarray(v).view(np.uint8))
            else:
                h.update(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # noqa: BLE001 - unhashable info: this state is simply not shared
        return None
    return h.digest()


class _OutputMemo:
    """Stage outputs keyed by (view, stage key, input fingerprint), least recently used dropped past a byte cap.

    Exact: a stage is a function of its parameters, its input State and the (fixed) candidate set and context,
    so two configs whose different upstream parameters happen to produce the same State (a disabled stage's
    parameter, a decay with no dated document, two thresholds with no score between them) share everything
    downstream."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.items: OrderedDict = OrderedDict()
        self.bytes = 0
        self.hits = 0

    @staticmethod
    def _size(st: State) -> int:
        return st.col.nbytes + st.score.nbytes + sum(v.nbytes for v in st.extra.values()) + 256

    def get(self, key):
        st = self.items.get(key)
        if st is not None:
            self.items.move_to_end(key)
            self.hits += 1
        return st

    def put(self, key, st: State) -> None:
        n = self._size(st)
        if n > self.max_bytes // 4:
            return
        self.items[key] = st
        self.bytes += n
        while self.bytes > self.max_bytes and self.items:
            _, old = self.items.popitem(last=False)
            self.bytes -= self._size(old)


def _fork(st: State) -> State:
    """A shallow copy a stage may rewrite freely (arrays are never written in place by stages)."""
    info = {k: (dict(v) if isinstance(v, dict) else v) for k, v in st.info.items()}
    return State(st.col, st.score, st.skipped, dict(st.extra), info, None)


def _step(stage, st: State, cs: CandidateSet, ctx: Context) -> State:
    """One step of :meth:`Pipeline.run`."""
    st = stage.apply(st, cs, ctx)
    if st.skipped.any() and st.col.size and (st.col[st.skipped] >= 0).any():
        st = st.skip(st.skipped)
    return st


class Sweep:
    """Many configs of ``pipeline`` over the shared candidate set ``cs`` (built for the deepest arms any config
    asks for — see :func:`deepest_arms`).

    ``metrics``: names understood by :mod:`evalkit.measures.arrays`; ``keep``: metrics whose per-query values are
    returned for every config (default: the first metric); ``budget``: ``"auto"`` runs the budget packer only when
    a metric needs it, ``True`` / ``False`` force it; ``labels``: the dataset's harm labels
    (:func:`evalkit.engine.evaluate.dataset_labels`), without which ``secret_leak_rate`` is NaN.
    """

    def __init__(self, pipeline: Pipeline, cs: CandidateSet, qrels: dict | Judgments, metrics: list[str],
                 ctx: Context | None = None, keep: list[str] | None = None, budget: str | bool = "auto",
                 timings: bool = False, share_outputs: bool = True, memo_mb: int = 256,
                 memo_min_seconds: float = 1e-3, labels: HarmLabels | None = None):
        self.pipeline = pipeline
        self.cs = cs
        self.metrics = [m.name for m in parse_metrics(metrics)]
        self.keep = list(keep) if keep is not None else self.metrics[:1]
        bad = [m for m in self.keep if m not in self.metrics]
        if bad:
            raise ValueError(f"keep: {bad} are not among the metrics")
        self.judg = qrels if isinstance(qrels, Judgments) else Judgments(qrels, [q.id for q in cs.queries],
                                                                         cs.corpus.ids, labels)
        base = ctx or Context()
        self.ctx = Context(embedder=base.embedder, trace=False, timings=None,
                           options=dict(base.options or {}, render_blocks=False, count_ages=False))
        # budget_compliance against a preset without a [budget] table is 1 whatever is injected
        needs = any(m.needs_budget and not (m.measure == "budget_compliance" and not has_limits(pipeline.budget))
                    for m in parse_metrics(self.metrics))
        self.run_budget = needs if budget == "auto" else bool(budget)
        self.timings = timings
        self.share_outputs = share_outputs
        self.memo_min_seconds = memo_min_seconds
        self._outputs = _OutputMemo(memo_mb << 20)
        self._cost: dict[int, float] = {}  # stage position -> seconds of its last real run
        self._scorers: dict[str, Scorer] = {}
        self._stage_keys: dict[int, tuple] = {}
        self._base: int | None = None  # how many of the base pipeline's stages run (see _n_run)
        self._built_stages: dict[tuple, tuple] = {}  # (position, overrides JSON) -> (stage, stage key)
        self._arm_maps: dict[str, tuple] = {}  # arm overrides JSON -> (arm map, its key)

    # -- per config ------------------------------------------------------------------------------------------
    def _stages(self, p: Pipeline) -> list:
        stages = list(p.stages)
        if not self.run_budget:
            while stages and stages[-1].kind == "budget":
                stages.pop()
        return stages

    def _stage_key(self, s) -> tuple:
        k = self._stage_keys.get(id(s))
        if k is None or k[0] is not s:
            k = (s, (s.name, json.dumps(s.params(), sort_keys=True, default=str)))
            self._stage_keys[id(s)] = k
        return k[1]

    def plan(self, configs: list[SweepConfig]) -> list[tuple[tuple, dict, list, list]]:
        """Per config: (sort key, arm map, stages, stage keys); validation errors raise here, before any work.

        A grid repeats each stage's parameter set in many configs: a config without structural changes is
        built stage by stage, each (stage position, parameter overrides) built and validated once
        (:meth:`_built`), the arm map once per arm-override set — the same stages and keys
        :meth:`SweepConfig.pipeline` builds, at a fraction of the cost (planning was ~1/3 of a lean family's
        sweep CPU)."""
        out = []
        for c in configs:
            if c.replace or c.extra_arms:
                p = c.pipeline(self.pipeline)
                amap, akey = self._arm_map(p, None)
                stages = self._stages(p)
                skeys = [self._stage_key(s) for s in stages]
            else:
                c.check(self.pipeline)
                amap, akey = self._arm_map(None, c)
                # every stage is built (an invalid value of a dropped budget stage still raises), the run ones kept
                built = [self._built(j, s, c.overrides) for j, s in enumerate(self.pipeline.stages)]
                built = built[:self._n_run]
                stages, skeys = [b[0] for b in built], [b[1] for b in built]
            out.append(((akey, *skeys), amap, stages, skeys))
        return out

    @property
    def _n_run(self) -> int:
        """How many of the base pipeline's stages run (trailing budget stages may be dropped)."""
        if self._base is None:
            self._base = len(self._stages(self.pipeline))
        return self._base

    def _built(self, j: int, s, overrides: dict) -> tuple:
        """(stage, stage key) of base stage ``j`` under ``overrides``, as :meth:`Pipeline.with_params` builds it,
        memoised by the stage's overrides."""
        upd = overrides.get(s.display) or overrides.get(s.name)
        if not upd:
            return s, self._stage_key(s)
        try:  # typed so that 1, 1.0 and True stay apart (they validate differently); else their JSON
            k = (j, tuple(sorted((n, type(v), v) for n, v in upd.items())))
            hash(k)
        except TypeError:
            k = (j, json.dumps(upd, sort_keys=True, default=str))
        hit = self._built_stages.get(k)
        if hit is None:
            p = s.params()
            p.update(upd)
            new = type(s).from_dict(p)
            hit = self._built_stages[k] = (new, self._stage_key(new))
        return hit

    def _arm_map(self, p: Pipeline | None, c: SweepConfig | None) -> tuple[dict, str]:
        """(arm map, its key) of pipeline ``p``, or of config ``c`` over the base pipeline (memoised by its arm
        overrides)."""
        if p is not None:
            amap = arm_map(p)
            return amap, json.dumps(sorted(amap.items()))
        k = json.dumps(c.arms, sort_keys=True, default=str)
        hit = self._arm_maps.get(k)
        if hit is None:
            hit = self._arm_maps[k] = self._arm_map(c.pipeline(self.pipeline) if c.arms else self.pipeline, None)
        return hit

    def _scorer(self, akey: str, v: CandidateSet) -> Scorer:
        sc = self._scorers.get(akey)
        if sc is None:
            sc = self._scorers[akey] = Scorer(self.judg, v, self.metrics, budget=self.pipeline.budget)
        return sc

    def __getstate__(self) -> dict:
        """Pickled for cluster workers: the candidate set (with its warm memo) and the settings; the per-process
        caches (stage outputs, scorers, stage keys by object id, stage costs) start empty on the other side."""
        d = dict(self.__dict__)
        d["_outputs"] = _OutputMemo(self._outputs.max_bytes)
        d["_cost"], d["_scorers"], d["_stage_keys"] = {}, {}, {}
        d["_base"], d["_built_stages"], d["_arm_maps"] = None, {}, {}
        d.pop("shipped", None)  # the cluster future of this sweep's broadcast (evalkit.engine.cluster)
        from evalkit.engine.cluster import Portable  # lazy: startup
        d["ctx"] = Portable(self.ctx)  # the model is not shipped: a worker opens the same model from its install
        return d

    def __setstate__(self, d: dict) -> None:
        self.__dict__.update(d)
        self.ctx = self.ctx.context()

    def evaluate_plans(self, plans: list, order: list[int], stats: dict,
                       progress: Callable[[int], Any] | None = None,
                       sink: Callable[[int, dict, dict], Any] | None = None) -> dict[int, tuple[dict, dict]]:
        """Evaluate ``plans`` (from :meth:`plan`) in ``order``: {plan index: (kept per-query values, means)};
        ``sink(i, per, means)`` is called as each config finishes (the journal appends it)."""
        out: dict[int, tuple[dict, dict]] = {}
        every = max(1, len(order) // 50)
        stack = _Stack()
        cur_akey = None
        v = None
        tim = stats.setdefault("stage_seconds", {})
        for i in order:
            key, amap, stages, skeys = plans[i]
            akey = key[0]
            if akey != cur_akey:
                v = view(self.cs, amap)
                cur_akey = akey
                stack.cut(0)
                stack.push(akey, State.empty(self.cs.Q))
            full = [akey, *skeys]
            n = stack.common(full)
            stack.cut(n)
            st = stack.states[-1]
            for j in range(n - 1, len(stages)):
                stage = stages[j]
                ck = (j, full[j + 1])
                okey = None
                if self.share_outputs and self._cost.get(j, 1.0) >= self.memo_min_seconds:
                    if stack.fps[-1] is None:
                        stack.fps[-1] = fingerprint(st) or b""
                    if stack.fps[-1]:
                        okey = (akey, ck, stack.fps[-1])
                        hit = self._outputs.get(okey)
                        if hit is not None:
                            st = hit
                            stats["shared_outputs"] = stats.get("shared_outputs", 0) + 1
                            stack.push(full[j + 1], st)
                            continue
                t0 = time.perf_counter()
                st = _step(stage, _fork(st), v, self.ctx)
                dt = time.perf_counter() - t0
                self._cost[j] = dt  # share outputs only of stages whose runs cost more than hashing a State
                if self.timings:
                    tim[stage.display] = tim.get(stage.display, 0.0) + dt
                stats["stage_calls"] = stats.get("stage_calls", 0) + 1
                if okey is not None:
                    self._outputs.put(okey, st)
                stack.push(full[j + 1], st)
            if self.timings:
                t0 = time.perf_counter()
            per, means = self._scorer(akey, v).score(st)
            if self.timings:
                tim["(metrics)"] = tim.get("(metrics)", 0.0) + time.perf_counter() - t0
            out[i] = ({m: per[m] for m in self.keep if m in per}, means)
            if sink is not None:
                sink(i, *out[i])
            if progress is not None and len(out) % every == 0:
                progress(len(out))
        return out

    # -- public ----------------------------------------------------------------------------------------------
    def run(self, configs: list[SweepConfig], workers: int = 1,
            progress: Callable[[int], Any] | None = None, cluster=None, journal=None,
            log: Callable[[str], None] | None = None) -> SweepResult:
        """Evaluate ``configs``.

        ``workers > 1`` forks that many processes (POSIX only); ``cluster`` (a ``distributed.Client``) sends
        contiguous slices to its workers instead (:mod:`evalkit.engine.cluster`); ``journal`` (a
        :class:`~evalkit.engine.journal.SweepJournal`) supplies configs already evaluated and records the
        others as they finish. Whatever the route, every config's metrics are the same bits."""
        t0, c0 = time.perf_counter(), time.process_time()
        plans = self.plan(configs)
        keys = [c.key() for c in configs]
        results: dict[int, tuple[dict, dict]] = {}
        if journal is not None:
            for i, k in enumerate(keys):
                hit = journal.get(k)
                if hit is not None:
                    results[i] = hit
        todo = [i for i in range(len(plans)) if i not in results]
        order = sorted(todo, key=lambda i: plans[i][0])
        resumed = len(results)
        if journal is not None and log:
            log(f"  journal {journal.path}: {resumed} of {len(configs)} configs already done, computing "
                f"{len(order)}")
        sink = (lambda i, per, means: journal.add(keys[i], per, means)) if journal is not None else None
        stats: dict = {}
        workers = max(1, int(workers))
        try:
            if cluster is not None and order:
                from evalkit.engine.cluster import n_workers, run_on_cluster  # lazy: startup
                warm = self.evaluate_plans(plans, order[:1], stats, sink=sink)  # fill the memo that is shipped
                results.update(warm)
                res, st, wcpu = run_on_cluster(cluster, self, configs, order[1:], log=log,
                                               on_slice=(lambda r: [sink(i, *v) for i, v in r.items()])
                                               if sink else None) if order[1:] else ({}, [], 0.0)
                results.update(res)
                for one in st:
                    _merge_stats(stats, one)
                cpu = time.process_time() - c0 + wcpu
                workers = n_workers(cluster)
            elif workers > 1 and len(order) >= 4 * workers and hasattr(os, "fork"):
                res, cpu = self._parallel(plans, order, workers, stats, progress, sink)
                results.update(res)
            else:
                results.update(self.evaluate_plans(plans, order, stats, progress, sink))
                cpu = time.process_time() - c0
                workers = 1
        finally:
            if journal is not None:
                journal.flush()
        N = len(configs)
        means = {m: np.full(N, np.nan) for m in self.metrics}
        Qj = len(self.judg.judged_ids)
        per_query = {m: np.zeros((N, Qj)) for m in self.keep}
        for i, (per, mm) in results.items():
            for m, v in mm.items():
                if m in means:
                    means[m][i] = v
            for m, v in per.items():
                per_query[m][i] = v
        naive = sum(len(plans[i][2]) for i in todo)
        return SweepResult(list(configs), list(self.metrics), means, per_query, list(self.judg.judged_ids),
                           time.perf_counter() - t0, cpu, self.cs.Q, stats.get("stage_calls", 0), naive,
                           stats.get("stage_seconds", {}), workers, stats.get("shared_outputs", 0), resumed)

    def _parallel(self, plans, order, workers, stats, progress, sink=None):
        c0 = time.process_time()
        warm = self.evaluate_plans(plans, order[:1], stats, sink=sink)  # fill the shared memo before forking
        rest = order[1:]
        bounds = np.linspace(0, len(rest), workers * 2 + 1).astype(int)
        slices = [rest[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1) if bounds[i + 1] > bounds[i]]
        global _ACTIVE
        _ACTIVE = (self, plans)
        results = dict(warm)
        child_cpu = 0.0
        try:
            ctx = mp.get_context("fork")
            with ctx.Pool(workers) as pool:
                done = 1
                for res, st, cpu in pool.imap_unordered(_work, slices):
                    results.update(res)
                    if sink is not None:
                        for i, v in res.items():
                            sink(i, *v)
                    child_cpu += cpu
                    _merge_stats(stats, st)
                    done += len(res)
                    if progress:
                        progress(done)
        finally:
            _ACTIVE = None
        return results, time.process_time() - c0 + child_cpu


_ACTIVE: tuple | None = None


def _merge_stats(into: dict, st: dict) -> None:
    """Add one worker's counters and stage seconds to ``into``."""
    for k in ("stage_calls", "shared_outputs"):
        into[k] = into.get(k, 0) + st.get(k, 0)
    for k, v in st.get("stage_seconds", {}).items():
        into.setdefault("stage_seconds", {})[k] = into["stage_seconds"].get(k, 0.0) + v


def _work(slice_):
    c0 = time.process_time()
    sweep, plans = _ACTIVE
    stats: dict = {}
    res = sweep.evaluate_plans(plans, slice_, stats)
    return res, stats, time.process_time() - c0


def deepest_arms(pipeline: Pipeline, configs: list[SweepConfig]) -> list:
    """Arm specs covering every config: each arm at the largest depth any config asks for."""
    specs = list(pipeline.arms)
    for c in configs:
        if c.arms:
            specs.extend(c.pipeline(pipeline).arms)
    return specs


def sweep(pipeline: Pipeline, cs: CandidateSet, qrels, configs: list[SweepConfig], metrics: list[str],
          ctx: Context | None = None, keep: list[str] | None = None, workers: int = 1,
          budget: str | bool = "auto") -> SweepResult:
    """One-call form of :class:`Sweep`."""
    return Sweep(pipeline, cs, qrels, metrics, ctx=ctx, keep=keep, budget=budget).run(configs, workers=workers)


__all__ = ["Sweep", "SweepConfig", "SweepResult", "sweep", "deepest_arms", "sequence_stages"]
