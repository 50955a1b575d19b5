"""One view of a run's numbers, built either from a RunWriter in memory (during `evalkit run`) or from a saved run
folder (`evalkit report`, `evalkit compare`), so reports and comparisons never care where the numbers came from.

Only light imports (csv/json/numpy): report generation must stay fast, and a saved folder is parsed lazily —
per-query values on first use, results JSONL only for the (dataset, retriever) pairs asked for.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from evalkit.runfolder.read import (RunFolderError, per_query_decimals, per_query_rows, read_budgets, read_results,
                                   read_run, safe)


def _float(v: Any) -> float:
    if v is None or v == "":
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


class RunData:
    """Metric means, breakdown rows, per-query values, results and optional latency of one run."""

    def __init__(self, manifest: dict, metrics: list[dict], by_category: list[dict],
                 per_query_rows: Callable[[], Iterable[tuple[str, str, str, str, str, float]]],
                 results: Callable[[str, str], list[dict]], budgets: Callable[[str, str], list[dict]],
                 latency: dict | None = None, path: Path | None = None):
        self.manifest = manifest
        self.path = path
        self.diagnostics: dict = {}  # diagnostics.json: dataset -> retriever -> funnel / thresholds / budget curve
        self.latency = latency
        self._results = results
        self._budgets = budgets
        self._pq_rows = per_query_rows
        self._pq: dict[tuple[str, str], dict[str, dict[str, float]]] | None = None
        self._cats: dict[str, dict[str, str]] = {}
        self.means: dict[str, dict[str, dict[str, float]]] = {}
        for r in metrics:
            self.means.setdefault(r["dataset"], {}).setdefault(r["retriever"], {})[r["metric"]] = _float(r["value"])
        self.breakdown: dict[tuple[str, str], dict[str, dict[str, dict[str, tuple[float, int]]]]] = {}
        for r in by_category:
            key = (r["dataset"], r["breakdown"])
            (self.breakdown.setdefault(key, {}).setdefault(r["retriever"], {}).setdefault(r["metric"], {})
             [str(r["bucket"])]) = (_float(r["value"]), int(_float(r["n"])) if str(r["n"]) != "" else 0)

    # --- constructors ------------------------------------------------------------------------------------------

    @classmethod
    def from_writer(cls, writer) -> "RunData":
        """The run a :class:`~evalkit.runfolder.write.RunWriter` holds: its rows in memory and those of the folders
        it included (:meth:`~evalkit.runfolder.write.RunWriter.include`), read from disk when asked."""
        included = writer.included_results() if getattr(writer, "included", None) else {}

        def rows():
            for r in writer.per_query:
                yield (r["dataset"], r["retriever"], r["query_id"], r.get("category") or "", r["metric"],
                       _float(r["value"]))
            for folder in getattr(writer, "included", ()):
                for row in per_query_rows(folder):
                    yield row[0], row[1], row[2], row[3], row[4], _float(row[5])

        def results(ds, ret):
            if (ds, ret) in writer.results:
                return writer.results[(ds, ret)]
            if (safe(ds), safe(ret)) in included:
                return read_results(included[(safe(ds), safe(ret))], ds, ret)
            raise RunFolderError(f"no results for {ds}/{ret}")

        def budgets(ds, ret):
            if (ds, ret) not in writer.results and (safe(ds), safe(ret)) in included:
                return read_budgets(included[(safe(ds), safe(ret))], ds, ret)
            return [it.get("budget") or {} for it in writer.results.get((ds, ret), [])]

        latency = None
        text = writer.extra_files.get("latency.json")
        if text:
            latency = _parse_latency(text, "latency.json")
        out = cls(dict(writer.manifest), list(writer.metrics), list(writer.by_category), rows, results, budgets,
                  latency, path=None)
        out.diagnostics = dict(getattr(writer, "diagnostics", {}) or {})
        return out

    @classmethod
    def from_folder(cls, path: Path) -> "RunData":
        """Read a saved run folder (RunFolderError with one line for other versions / damaged folders)."""
        path = Path(path)
        run = read_run(path)
        metrics = run["metrics"]
        if not isinstance(metrics, list) or any(not isinstance(r, dict) or not {"dataset", "retriever", "metric",
                                                                                   "value"} <= set(r) for r in metrics):
            raise RunFolderError(f"{path}: damaged run folder (metrics.json rows lack dataset/retriever/metric/value)")
        by_cat = _read_csv(path / "metrics_by_category.csv", ["dataset", "retriever", "breakdown", "bucket", "metric",
                                                               "value", "n"], required=False)
        if not (path / "per_query.csv").exists():
            raise RunFolderError(f"{path}: damaged run folder (per_query.csv missing)")

        def rows():
            for row in per_query_rows(path):
                yield row[0], row[1], row[2], row[3], row[4], _float(row[5])

        def results(ds, ret):
            try:
                return read_results(path, ds, ret)
            except json.JSONDecodeError as exc:
                raise RunFolderError(f"{path}: damaged results for {ds}/{ret} ({exc.msg})") from None

        def budgets(ds, ret):
            return read_budgets(path, ds, ret)

        latency = None
        lf = path / "latency.json"
        if lf.exists():
            latency = _parse_latency(lf.read_text(encoding="utf-8"), str(lf))
        out = cls(run["manifest"], metrics, by_cat, rows, results, budgets, latency, path=path)
        df = path / "diagnostics.json"
        if df.exists():
            try:
                out.diagnostics = json.loads(df.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise RunFolderError(f"{path}: damaged diagnostics.json ({exc.msg})") from None
        return out

    # --- queries -----------------------------------------------------------------------------------------------

    def datasets(self) -> list[str]:
        return list(self.means)

    def retrievers(self, dataset: str) -> list[str]:
        return list(self.means.get(dataset, {}))

    def mean(self, dataset: str, retriever: str, metric: str) -> float:
        return self.means.get(dataset, {}).get(retriever, {}).get(metric, math.nan)

    def _load_pq(self) -> dict:
        if self._pq is None:
            pq: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
            cats: dict[str, dict[str, str]] = {}
            for ds, ret, q, cat, metric, v in self._pq_rows():
                pq.setdefault((ds, ret), {}).setdefault(metric, {})[q] = v
                if cat:
                    cats.setdefault(ds, {})[q] = cat
            self._pq, self._cats = pq, cats
        return self._pq

    def per_query(self, dataset: str, retriever: str, metric: str) -> dict[str, float]:
        return self._load_pq().get((dataset, retriever), {}).get(metric, {})

    @property
    def per_query_decimals(self) -> int | None:
        """How this run's per-query values were stored: None = full precision, 6 = a folder written before they
        were (:func:`evalkit.runfolder.read.per_query_decimals`)."""
        return per_query_decimals(self.manifest)

    def per_query_metrics(self, dataset: str, retriever: str) -> list[str]:
        return sorted(self._load_pq().get((dataset, retriever), {}))

    def has_per_query(self, dataset: str, metric: str) -> bool:
        pq = self._load_pq()
        return any(metric in v for (ds, _), v in pq.items() if ds == dataset)

    def categories(self, dataset: str) -> dict[str, str]:
        self._load_pq()
        return self._cats.get(dataset, {})

    def matrix(self, dataset: str, metric: str, retrievers: list[str]) -> tuple[list[str], np.ndarray]:
        """Per-query values ``(n, len(retrievers))`` over the queries every listed retriever was scored on."""
        cols = [self.per_query(dataset, r, metric) for r in retrievers]
        if not cols:
            return [], np.zeros((0, 0))
        common = set(cols[0])
        for c in cols[1:]:
            common &= set(c)
        qs = sorted(common)
        m = np.empty((len(qs), len(cols)))
        for j, c in enumerate(cols):
            m[:, j] = [c[q] for q in qs]
        keep = np.all(np.isfinite(m), axis=1)
        return [q for q, k in zip(qs, keep) if k], m[keep]

    def results(self, dataset: str, retriever: str) -> list[dict]:
        return self._results(dataset, retriever)

    def budgets(self, dataset: str, retriever: str) -> list[dict]:
        return self._budgets(dataset, retriever)

    def retriever_info(self, name: str) -> dict:
        return (self.manifest.get("retrievers") or {}).get(name) or {}

    def clusters(self, dataset: str) -> tuple[str, dict[str, str]] | None:
        """(what a cluster is, {query id: cluster}) when the dataset declared dependent queries, else None."""
        c = ((self.manifest.get("datasets") or {}).get(dataset) or {}).get("clusters")
        if not c or not c.get("of"):
            return None
        return str(c.get("what") or "cluster"), dict(c["of"])

    def dataset_info(self, name: str) -> dict:
        return (self.manifest.get("datasets") or {}).get(name) or {}


def _read_csv(path: Path, header: list[str], required: bool = True) -> list[dict]:
    if not path.exists():
        if required:
            raise RunFolderError(f"{path.parent}: damaged run folder ({path.name} missing)")
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        rd = csv.DictReader(fh)
        if rd.fieldnames is None or not set(header) <= set(rd.fieldnames):
            raise RunFolderError(f"{path.parent}: damaged run folder ({path.name} header is {rd.fieldnames!r})")
        return list(rd)


def _parse_latency(text: str, where: str) -> dict | None:
    """``{dataset: {retriever: {stage: [seconds…], "total": [...]}}}``; anything else is ignored (None)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    out: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for ds, rets in data.items():
        if not isinstance(rets, dict):
            continue
        for ret, stages in rets.items():
            if not isinstance(stages, dict):
                continue
            for stage, vals in stages.items():
                if isinstance(vals, list) and vals and all(isinstance(v, (int, float)) for v in vals):
                    out.setdefault(ds, {}).setdefault(ret, {})[stage] = np.asarray(vals, dtype=np.float64)
    return out or None
