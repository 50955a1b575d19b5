"""What a tune runs on, prepared once: the dataset, the protocol's splits (:mod:`evalkit.tune.protocol`), the shared
index and the tuning candidate set built for the deepest arms the search can ask for (:class:`Env`); and the
identity of its sweep (:func:`sweep_key`: a journal written for another sweep, or by other code, is not reused).
The lockbox is never part of any of them."""
from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.data.registry import load_dataset
from evalkit.engine.context import make_context
from evalkit.engine.experiment import require_judged
from evalkit.engine.sweep import SweepConfig, deepest_arms
from evalkit.report.tune import flat_str
from evalkit.tune.protocol import Options, Protocol, resolve
from evalkit.tune.search import Trial
from evalkit.tune.space_model import Space
from retrievers.candidates.arms import ArmSpec
from retrievers.candidates.search import build_candidates
from retrievers.embed.model import Embedder
from retrievers.errors import ConfigError
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.pipeline import load_preset


@dataclass
class Env:
    ds: Any
    split: str | None
    pool: Any
    heldout: str | None
    heldout_ds: Any
    index: Any
    specs: list
    built: dict
    baselines: list
    cs: Any
    ctx: Any
    proto: Protocol


def prepare(space: Space, settings, embedder, log, rng, opts: Options | None = None) -> Env:
    """Dataset, the protocol's splits (:mod:`evalkit.tune.protocol`), shared index and the tuning candidate set
    (built for the deepest arms the search uses). The lockbox is never part of any of them."""
    ds = load_dataset(space.dataset)
    proto = resolve(space, ds, opts)
    pool = ds.subset(proto.pool)
    split = proto.split
    require_judged(pool, split)
    heldout_ds = None
    heldout = proto.heldout_name
    if proto.heldout:
        heldout_ds = ds.subset(proto.heldout)
        require_judged(heldout_ds, heldout)
    embedder = embedder or Embedder()
    settings = settings or IndexSettings()
    index = SharedIndex(pool, embedder=embedder, settings=settings)
    bound = arm_bound(space, rng)
    specs = deepest_arms(space.pipeline, bound) + [ArmSpec.from_dict(dict(a)) for a in space.extra_arms]
    built: dict[str, int] = {}
    for c in bound:
        for a, d in c.arms.items():
            built[a] = max(built.get(a, 0), d["depth"])
    for a in space.pipeline.arms:
        built[a.name] = max(built.get(a.name, 0), a.depth)
    baselines = [load_preset(b) for b in space.baselines]
    specs_all = specs + [a for b in baselines for a in b.arms]
    how = (f"held out {heldout}: {len(heldout_ds.queries)}" if heldout_ds is not None
           else proto.fold_text(proto.pool))
    log(f"tune {space.name}: {space.pipeline.name} on {ds.name} ({split or 'all'}: {len(pool.queries)} queries; "
        f"{how})")
    for line in proto.describe():
        log("  " + line)
    t0 = time.perf_counter()
    cs = build_candidates(index, pool.queries, specs_all)
    log(f"  candidates: {cs.Q} queries x {cs.C} columns in {time.perf_counter() - t0:.1f}s")
    return Env(ds, split, pool, heldout, heldout_ds, index, specs_all, built, baselines, cs,
                make_context([space.pipeline, *baselines], embedder), proto)


def arm_bound(space: Space, rng: np.random.Generator) -> list[SweepConfig]:
    """Configs whose arms cover the deepest depth the search can ask for (the candidates are built that deep)."""
    if not any(p.arm for p in space.params):
        return []
    if space.method == "grid":
        return [space.config(a)[0] for a in space.grid()]
    us = [np.zeros(space.dims), np.ones(space.dims) - 1e-12] + list(rng.random((4096, space.dims)))
    us += [np.asarray(c, dtype=float) for c in itertools.product([0.0, 1.0 - 1e-12], repeat=min(space.dims, 10))]
    cfgs = [space.config(space.decode(u))[0] for u in us]
    depth: dict[str, int] = {}
    for c in cfgs:
        for a, d in c.arms.items():
            depth[a] = max(depth.get(a, 0), int(d.get("depth", 0)))
    return [SweepConfig(arms={a: {"depth": d}}) for a, d in depth.items()]


def check_depths(space: Space, built: dict[str, int], trials: list[Trial]) -> None:
    for t in trials:
        for a, d in t.config.arms.items():
            if d.get("depth", 0) > built.get(a, 0):
                raise ConfigError(f"{space.path}: config {flat_str(t.flat)} asks arm {a!r} for depth {d['depth']} "
                                  f"but candidates were built to {built.get(a)} (non-monotone tie?)")


def code_digest() -> str:
    """sha256 of the code a config's metrics depend on (every module of ``retrievers``, ``evalkit.measures`` and
    the sweep engine): a journal written by other code is not reused."""
    import retrievers  # lazy: startup
    from evalkit import measures  # lazy: startup
    from evalkit.engine import sweep as sweep_module  # lazy: startup
    h = hashlib.sha256()
    files = sorted(Path(retrievers.__file__).parent.rglob("*.py")) + sorted(
        Path(measures.__file__).parent.rglob("*.py")) + [Path(sweep_module.__file__)]
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def sweep_key(space: Space, env: "Env", metrics: list[str], settings) -> dict:
    """What a config's metrics depend on besides the config: the journal of a sweep is keyed by it (preset
    hashes, dataset content hash, split, seed, metrics, index settings, embedding model, the space's parameters).
    The trial budget, batch and sampler are not part of it: a search given more trials resumes the same sweep."""
    raw = {k: v for k, v in space.raw.items() if k not in ("trials", "batch", "init", "method", "top", "workers")}
    return {"kind": "tune-sweep", "code": code_digest(), "preset": space.pipeline.hash,
            "baselines": [b.hash for b in env.baselines], "dataset": env.ds.content_hash(), "split": env.split,
            "pool": hashlib.sha256("\n".join(env.proto.pool).encode()).hexdigest()[:16],
            "seed": space.seed, "metrics": metrics, "keep": [space.objective], "space": raw,
            "index": repr(settings), "embedder": getattr(env.index.embedder, "model_id", None)}
