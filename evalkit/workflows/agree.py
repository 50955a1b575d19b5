"""Live system vs the preset that re-implements it: per-query agreement, metric difference, every disagreement
classified (``evalkit agree SYSTEM --dataset D``).

The system file names its preset and the index settings under which the preset should see exactly what the system
sees (``[compare]`` / ``[compare.matching]``, :mod:`retrievers.systems.file`). Each matching setting is a
*factor*: the embedding runtime (``embed_backend``), one vector per document vs MaxP (``representation``), exact
vs HNSW search (``backend``), and only the documents the system reports it indexed (``indexed_only``; e.g. OpenClaw
never indexes ``.git/`` or log files). The live system runs once (answers cached, :mod:`evalkit.engine.live`);
the preset runs under every subset of the factors (2^F configurations, each over the same queries, the same
as-of protocol and the same cutoff k).

Per configuration: how many queries get the identical top-k list (ids and order), the same set, the same top-1;
the mean |Δ| of the shared documents' scores; and the measure differences (live − preset, mean and mean |Δ|).

Every query whose list differs under the preset as prescribed (no factor) is explained by the *smallest* set(s) of
factors under which it agrees (every set of that size that does, joined by "or"); a query that no set fixes is
``unexplained`` — the residual the comparison leaves. Under all factors together the residual should be 0.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.data.registry import load_dataset
from evalkit.runfolder.claim import claim_folder
from evalkit.engine.experiment import run_dataset, select_queries
from evalkit.engine.options import RunOptions
from evalkit.engine.live.retriever import find, run_system, system_folders
from evalkit.measures import catalogue
from evalkit.measures.lists import evaluate
from evalkit.report import agree as render
from retrievers.embed import Embedder
from retrievers.errors import ConfigError
from retrievers.index.shared import IndexSettings
from retrievers.pipeline import load_preset
from retrievers.systems.file import system_names
from retrievers.types import Dataset

FACTORS = ("embed_backend", "representation", "backend", "indexed_only")
LABELS = {"embed_backend": "embedding runtime", "representation": "one vector per document (vs MaxP)",
          "backend": "exact search (vs HNSW)", "indexed_only": "documents the system does not index"}
METRICS = tuple(catalogue.names("agree"))


@dataclass
class Config:
    factors: tuple[str, ...]
    lists: dict[str, list[tuple[str, float]]]
    metrics: dict[str, dict[str, float]]
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return "as prescribed" if not self.factors else " + ".join(self.factors)


@dataclass
class Agreement:
    system: str
    preset: str
    dataset: str
    protocol: str
    k: int
    queries: list[str]
    live: dict[str, list[tuple[str, float]]]
    live_metrics: dict[str, dict[str, float]]
    configs: list[Config]
    settings: dict[str, dict]
    causes: dict[str, str] = field(default_factory=dict)  # query id -> cause (of the prescribed config's misses)

    def rows(self) -> list[dict]:
        out = []
        for c in self.configs:
            ident = same = top1 = 0
            dscore: list[float] = []
            for q in self.queries:
                a = [d for d, _ in self.live[q][:self.k]]
                b = [d for d, _ in c.lists.get(q, [])[:self.k]]
                ident += a == b
                same += set(a) == set(b)
                top1 += a[:1] == b[:1]
                pb = dict(c.lists.get(q, []))
                dscore += [abs(s - pb[d]) for d, s in self.live[q][:self.k] if d in pb]
            row = {"config": c.label, "identical": ident, "same_set": same, "same_top1": top1,
                   "queries": len(self.queries), "mean_abs_dscore": float(np.mean(dscore)) if dscore else 0.0,
                   "max_abs_dscore": float(np.max(dscore)) if dscore else 0.0}
            for m in METRICS:
                lv, pv = self.live_metrics.get(m, {}), c.metrics.get(m, {})
                qs = [q for q in lv if q in pv]
                diff = [lv[q] - pv[q] for q in qs]
                row[f"{m}_live"] = float(np.mean([lv[q] for q in qs])) if qs else math.nan
                row[f"{m}_preset"] = float(np.mean([pv[q] for q in qs])) if qs else math.nan
                row[f"{m}_mean_abs_diff"] = float(np.mean(np.abs(diff))) if diff else math.nan
            out.append(row)
        return out

    def cause_table(self) -> list[tuple[str, list[str]]]:
        by: dict[str, list[str]] = {}
        for q, c in self.causes.items():
            by.setdefault(c, []).append(q)
        order = {c.label: i for i, c in enumerate(self.configs)}
        return sorted(by.items(), key=lambda kv: (kv[0] == "unexplained", order.get(kv[0], 99), kv[0]))

    def to_json(self) -> dict:
        return {"system": self.system, "preset": self.preset, "dataset": self.dataset, "protocol": self.protocol,
                "k": self.k, "settings": self.settings, "rows": self.rows(),
                "causes": {c: qs for c, qs in self.cause_table()},
                "per_query": {q: {"live": [d for d, _ in self.live[q][:self.k]],
                                  **{c.label: [d for d, _ in c.lists.get(q, [])[:self.k]] for c in self.configs}}
                              for q in self.queries}}

    def to_text(self) -> str:
        return render.render_text(self)

    def to_markdown(self) -> str:
        return render.render_markdown(self)


def _restrict(ds: Dataset, keep: set[str]) -> Dataset:
    docs = [d for d in ds.documents if d.id in keep]
    out = Dataset(ds.name, docs, ds.queries, ds.qrels, dict(ds.splits), dict(ds.info), ds.unit)
    return out


def agree(system: str, dataset: str, preset: str | None = None, split: str | None = None,
          visibility: str = "all", embed_backend: str | None = None, refresh: bool = False,
          log=print) -> Agreement:
    """Run the comparison (see the module docstring)."""
    spec = find(system)
    if spec is None:
        known = [n for f in system_folders() for n in system_names(f)]
        raise ConfigError(f"unknown system {system!r} (systems: {', '.join(known) or 'none'})")
    preset = preset or spec.compare.get("preset")
    if not preset:
        raise ConfigError(f"system {spec.name}: no preset to compare with (give --preset or [compare] preset)")
    pipe = load_preset(preset)
    matching = dict(spec.compare.get("matching", {}))
    ds = select_queries(load_dataset(dataset), split)
    prescribed_backend = embed_backend or Embedder().backend
    base = IndexSettings(as_of_visibility=visibility)
    protocol = ds.as_of_visibility(visibility).protocol
    live_run = run_system(spec, ds, protocol, refresh=refresh, log=log)
    indexed = live_run.info.get("indexed_ids")
    factors = [f for f in FACTORS if f in matching and matching[f] not in (None, False)]
    if "indexed_only" in factors and indexed is None:
        raise ConfigError(f"system {spec.name} did not report what it indexed (run with --refresh to re-ingest, or "
                          f"drop indexed_only from [compare.matching])")
    prescribed = {"embed_backend": prescribed_backend, "representation": ds.info.get("representation", "auto"),
                  "backend": base.backend, "indexed_only": f"all {len(ds.documents)} documents"}
    settings = {f: {"prescribed": prescribed[f],
                    "matching": (f"{len(indexed)} documents the system indexed" if f == "indexed_only"
                                 else matching[f])} for f in factors}
    qids = [q.id for q in ds.queries]
    live = {q: live_run.results[q].ranked for q in qids}
    live_metrics = evaluate(ds.qrels, live, list(METRICS))
    embedders: dict[str, Embedder] = {}
    configs = []
    for n in range(len(factors) + 1):
        for combo in itertools.combinations(factors, n):
            backend = matching["embed_backend"] if "embed_backend" in combo else prescribed_backend
            emb = embedders.setdefault(backend, Embedder(backend=backend))
            st = IndexSettings(as_of_visibility=visibility,
                               representation=matching["representation"] if "representation" in combo else "auto",
                               backend=matching["backend"] if "backend" in combo else base.backend)
            dsx = _restrict(ds, set(indexed)) if "indexed_only" in combo else ds
            dr = run_dataset(ds.name, [pipe], RunOptions(settings=st), emb, dataset=dsx, log=lambda *a: None)
            res = dr.runs[pipe.name].results
            lists = {q: res[q].ranked for q in qids}
            configs.append(Config(combo, lists, evaluate(ds.qrels, lists, list(METRICS)), dr.seconds))
            log(f"  preset {pipe.name} [{configs[-1].label}]: "
                f"{sum(1 for q in qids if _same(live[q], lists[q], spec.k))}/{len(qids)} identical top-{spec.k}")
    ag = Agreement(spec.name, pipe.name, ds.name, protocol, spec.k, qids, live, live_metrics, configs, settings)
    first = configs[0]
    for q in qids:
        if _same(live[q], first.lists[q], spec.k):
            continue
        fixes = [c for c in configs[1:] if _same(live[q], c.lists[q], spec.k)]
        smallest = min((len(c.factors) for c in fixes), default=None)
        ag.causes[q] = " or ".join(c.label for c in fixes if len(c.factors) == smallest) if fixes else "unexplained"
    return ag


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]], k: int) -> bool:
    return [d for d, _ in a[:k]] == [d for d, _ in b[:k]]


def write_outputs(ag: Agreement, out) -> list[Path]:
    """agree.md and agree.json into the folder ``out`` (a path or the command's early claim), written whole or not
    at all; an existing folder is replaced only when it is an earlier agreement folder (evalkit/runfolder/claim.py)."""
    claim = claim_folder(out, "agree")
    with claim.staging() as tmp:
        (tmp / "agree.md").write_text(ag.to_markdown(), encoding="utf-8")
        (tmp / "agree.json").write_text(json.dumps(ag.to_json(), indent=1) + "\n", encoding="utf-8")
    return [claim.path / "agree.md", claim.path / "agree.json"]


__all__ = ["agree", "Agreement", "write_outputs", "FACTORS"]
