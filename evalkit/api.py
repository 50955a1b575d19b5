"""The public Python API: what ``import evalkit`` offers (``evalkit/__init__.py`` exposes these names lazily).

Thin glue over the workflows — every number is computed by the same code as the command line (`evalkit run`,
`compare`, `gate`, `tune`, `ablate`, `replay`); this module only turns Python arguments into their inputs and their
outputs into objects that render themselves.

Usage (the examples in every docstring here run as doctests in ``make test``)::

    >>> import evalkit
    >>> run = evalkit.run("memory-workspace", ["bm25"], limit=20)
    >>> run.metrics[["dataset", "retriever"]].values.tolist()
    [['memory-workspace', 'bm25']]

Errors: bad input raises one exception with a one-line message — :class:`retrievers.errors.ConfigError` (a preset,
stage, parameter or system file), :class:`retrievers.types.DataError` (a dataset, a split, a run file),
:class:`evalkit.runfolder.read.RunFolderError` (a run folder), :class:`evalkit.errors.OutputPathError` (an output
path holding something of yours), :class:`ValueError` for anything else. All are ``ValueError`` or
:class:`evalkit.errors.CLIError` subclasses; the command line prints the same message as ``evalkit: error: …``.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from evalkit import PUBLIC, __version__
from evalkit.data import registry
from evalkit.engine.experiment import load_retrievers
from evalkit.engine.live.retriever import system_folders
from evalkit.engine.options import RunOptions
from evalkit.measures import catalogue
from evalkit.report.build import build_reports, write_reports
from evalkit.report.console import headline_text, ranked
from evalkit.runfolder.claim import MARKER, claim_folder
from evalkit.runfolder.history import resolve_run_folder
from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter
from evalkit.workflows import ablation as ablation_flow
from evalkit.workflows import compare as compare_flow
from evalkit.workflows import gate as gate_flow
from evalkit.workflows import replay as replay_flow
from evalkit.workflows import run_dicts
from evalkit.workflows import run as run_flow
from evalkit.workflows.compare import Comparison
from evalkit.workflows.gate import GateResult
from evalkit.workflows.gate_baseline import load_expected as load_gate_baseline
from retrievers.embed.model import Embedder, make_embedder
from retrievers.index.shared import IndexSettings
from retrievers.pipeline import Pipeline, preset_names
from retrievers.pipeline import load_preset as _load_preset_impl
from retrievers.systems.file import SystemSpec, system_names, system_of
from retrievers.types import Dataset

__all__ = ["__version__", *PUBLIC]  # the one list of public names lives in evalkit/__init__.py

VALUE_DECIMALS = 6  # the precision of a run folder's means (evalkit.runfolder.write.value_text): views show what it
# stores; per-query values are stored whole (exact_text), so Run.per_query shows them whole


def _log(*parts) -> None:
    """Progress lines go to stderr: a notebook shows them, a doctest or a pipe of the results does not."""
    print(*parts, file=sys.stderr)


# ---- what there is --------------------------------------------------------------------------------------------------

def datasets(details: bool = False) -> list[str] | pd.DataFrame:
    """The registered dataset names (any BEIR folder path works too, without registering).

    ``details=True``: a DataFrame with each one's description and where it was found (``path`` None when it is not
    in the data directory: ``$EVALKIT_DATA``, else ``datasets/`` of the repository).

    >>> import evalkit
    >>> "memory-workspace" in evalkit.datasets()
    True
    >>> list(evalkit.datasets(details=True).columns)
    ['name', 'title', 'description', 'path']
    """
    if not details:
        return list(registry.DATASETS)
    return pd.DataFrame([{"name": e.name, "title": e.title or e.name, "description": e.description,
                          "path": None if p is None else str(p)} for e, p in registry.available()])


def load_dataset(name_or_path: str | Path, **opts) -> Dataset:
    """A registered dataset by name, or any BEIR folder by path, as a :class:`retrievers.Dataset` (documents,
    queries, qrels, splits). ``opts`` go to the loader (e.g. ``qrels_unknown="drop"``). DataError (one line) when
    it cannot be found or read.

    >>> import evalkit
    >>> ds = evalkit.load_dataset("memory-workspace")
    >>> ds.name, len(ds.queries) > 0, len(ds.documents) > 0, "test" in ds.splits
    ('memory-workspace', True, True, True)
    """
    return registry.load_dataset(str(name_or_path), **opts)


def presets() -> list[str]:
    """The shipped preset names (a preset ``.toml`` path works wherever a name does).

    >>> import evalkit
    >>> "bm25" in evalkit.presets()
    True
    """
    return preset_names()


def load_preset(name_or_path: str | Path) -> Pipeline:
    """A preset by name or ``.toml`` path as a :class:`retrievers.Pipeline` (arms, stages, budget; ``.hash`` is its
    identity). ``Pipeline.with_params({"stage": {"param": value}})`` makes a variant. ConfigError (one line naming the
    file) on anything wrong.

    >>> import evalkit
    >>> p = evalkit.load_preset("bm25")
    >>> p.name, [s.name for s in p.stages]
    ('bm25', ['fuse.single', 'cutoff.top_k', 'budget.pack'])
    """
    return _load_preset_impl(str(name_or_path))


def systems() -> list[str]:
    """The live system files found by name (``systems/`` of the repository, and ``$EVALKIT_SYSTEMS``): pass a name
    in ``run(..., retrievers=[name])``.

    >>> import evalkit
    >>> "mem0" in evalkit.systems()
    True
    """
    return sorted({n for f in system_folders() for n in system_names(f)})


def measure_names(with_help: bool = False) -> list[str] | list[tuple[str, str]]:
    """The measure catalogue: every measure family a run can report (``@k`` = any cut-off, e.g. ``ndcg@10``).
    ``with_help=True``: ``(name, one-line help)`` pairs. (Not ``evalkit.measures()``: ``evalkit.measures`` is the
    package that computes them.)

    >>> import evalkit
    >>> "ndcg@k" in evalkit.measure_names()
    True
    >>> dict(evalkit.measure_names(with_help=True))["recall@k"][:6]
    'share '
    """
    out = []
    for f in catalogue.FAMILIES:
        name = f.name + ("@k" if f.cutoff != "none" else "")
        out.append((name, (f.help or "").format(k="k")))
    return out if with_help else [n for n, _ in out]


# ---- a run ----------------------------------------------------------------------------------------------------------

class Run:
    """A run's numbers as pandas views — what `evalkit run` writes into a run folder, in memory or read back.

    * :attr:`metrics` — one row per (dataset, retriever), one column per measure;
    * :attr:`per_query` — one row per (dataset, retriever, query), with the query's category;
    * :attr:`results` — one row per returned document: dataset, retriever, query_id, rank, doc_id, score,
      injected (the budget packer put it into the prompt);
    * :meth:`report` writes the run folder (the same files as ``evalkit run --out``); :attr:`path` is where it was
      written or read; :meth:`to_markdown` is the run report.

    Values are the run folder's (6 decimals), so a run and its folder read back are equal.

    >>> import evalkit, tempfile
    >>> run = evalkit.run("memory-workspace", ["bm25"], limit=20)
    >>> folder = run.report(tempfile.mkdtemp() + "/run")
    >>> again = evalkit.read_run(folder)
    >>> again.metrics.equals(run.metrics), again.per_query.equals(run.per_query)
    (True, True)
    >>> list(run.results.columns)
    ['dataset', 'retriever', 'query_id', 'rank', 'doc_id', 'score', 'injected']
    """

    def __init__(self, data: RunData, writer: RunWriter | None = None):
        self._data = data
        self._writer = writer  # the rows in memory (a run computed here): report() can write them anywhere
        self._path = data.path

    @property
    def path(self) -> Path | None:
        """The run folder (None for a run kept in memory and not written yet)."""
        return self._path

    @property
    def manifest(self) -> dict:
        """Versions, preset hashes and configs, dataset hashes, the embedding model, index settings."""
        return self._data.manifest

    @property
    def datasets(self) -> list[str]:
        return self._data.datasets()

    def retrievers(self, dataset: str | None = None) -> list[str]:
        """The retrievers of ``dataset`` (default: of the first dataset)."""
        ds = dataset or (self.datasets[0] if self.datasets else None)
        return self._data.retrievers(ds) if ds else []

    @property
    def metrics(self) -> pd.DataFrame:
        rows = []
        for ds in self._data.datasets():
            for ret in self._data.retrievers(ds):
                rows.append({"dataset": ds, "retriever": ret,
                             **{m: _value(v) for m, v in self._data.means[ds][ret].items()}})
        names = _columns(k for r in rows for k in r if k not in ("dataset", "retriever"))
        return pd.DataFrame(rows, columns=["dataset", "retriever", *names])

    @property
    def per_query(self) -> pd.DataFrame:
        rows = []
        for ds in self._data.datasets():
            cats = self._data.categories(ds)
            for ret in self._data.retrievers(ds):
                by_q: dict[str, dict[str, float]] = {}
                for m in self._data.per_query_metrics(ds, ret):
                    for q, v in self._data.per_query(ds, ret, m).items():
                        by_q.setdefault(q, {})[m] = v
                rows += [{"dataset": ds, "retriever": ret, "query_id": q, "category": cats.get(q) or None, **vals}
                         for q, vals in sorted(by_q.items())]
        names = _columns(k for r in rows for k in r if k not in ("dataset", "retriever", "query_id", "category"))
        return pd.DataFrame(rows, columns=["dataset", "retriever", "query_id", "category", *names])

    @property
    def results(self) -> pd.DataFrame:
        rows = []
        for ds in self._data.datasets():
            for ret in self._data.retrievers(ds):
                for it in self._data.results(ds, ret):
                    inj = set(it.get("injected") or ())
                    rows += [{"dataset": ds, "retriever": ret, "query_id": it["query_id"], "rank": i, "doc_id": d,
                              "score": float(s), "injected": d in inj} for i, (d, s) in enumerate(it["ranked"], 1)]
        return pd.DataFrame(rows, columns=["dataset", "retriever", "query_id", "rank", "doc_id", "score", "injected"])

    @property
    def answers(self) -> pd.DataFrame:
        """An answer run's per-question table (`evalkit answer`, :func:`answer`): one row per (dataset, retriever,
        question) — answer, verdict, attribution, each judge's grade, the measures, tokens; empty for a run
        without answers."""
        files = ({k: v for k, v in self._writer.extra_files.items() if k.startswith("answers/")} if self._writer
                 else {str(f.relative_to(self._path)): f.read_text(encoding="utf-8")
                       for f in sorted((self._path / "answers").glob("*/*.jsonl"))} if self._path else {})
        rows = []
        for name, text in sorted(files.items()):
            ds = name.split("/")[1]
            ret = name.split("/")[2][:-len(".jsonl")]
            for line in text.splitlines():
                r = json.loads(line)
                judges = r.pop("judges", None) or {}
                rows.append({"dataset": ds, "retriever": ret, **r, **{f"judge:{j}": v for j, v in judges.items()}})
        return pd.DataFrame(rows)

    def report(self, path: str | Path) -> Path:
        """Write the run folder at ``path`` (metrics, per-query rows, results, TREC runs, report.md / .html — the
        files of ``evalkit run --out path``), atomically; a path holding anything of yours is refused. A run read
        from a folder is copied. Returns the folder."""
        if self._writer is not None:
            self._writer.claim_at(Path(path))
            write_reports(self._writer)
            written = self._writer.write()
        else:
            claim = claim_folder(Path(path), "run")
            with claim.staging() as tmp:
                for f in sorted(self._path.iterdir()):
                    if f.name != MARKER:
                        (shutil.copytree if f.is_dir() else shutil.copy2)(f, tmp / f.name)
            written = claim.path
        self._path = written
        return written

    def to_table(self) -> str:
        """The headline table `evalkit run` prints: per dataset, the denominator and one row per retriever over
        the headline measures, best nDCG@10 first (``print(run.metrics)`` shows every measure and lets pandas
        fold the columns).

        >>> import evalkit
        >>> print(evalkit.run("memory-workspace", ["bm25"], limit=20).to_table())  # doctest: +ELLIPSIS
        <BLANKLINE>
        memory-workspace
        ...
        retriever ... ndcg@10 ...
        bm25 ...
        """
        rows = {ds: ranked({r: self._data.means[ds][r] for r in self._data.retrievers(ds)})
                for ds in self._data.datasets()}
        counts = {ds: {r: len(self._data.per_query(ds, r, "ndcg@10")) for r in self._data.retrievers(ds)}
                  for ds in self._data.datasets()}
        return headline_text(self.manifest.get("datasets") or {}, rows, counts)

    def to_markdown(self) -> str:
        """The run report (report.md: leaderboards, significance, breakdowns, notes)."""
        if self._path is not None and (self._path / "report.md").exists():
            return (self._path / "report.md").read_text(encoding="utf-8")
        return build_reports(self._data, title="evalkit run")["report.md"]

    def __repr__(self) -> str:
        where = f" at {self._path}" if self._path else " (in memory)"
        return (f"<evalkit.Run: {len(self.datasets)} dataset(s) {', '.join(self.datasets)}; "
                f"retrievers {', '.join(self.retrievers())}{where}>")


def _columns(names) -> list[str]:
    """Measure columns in the catalogue's order (family, then plain before ``injected_``, then cut-off); names the
    catalogue does not parse (a live system's counters, a run file's) after them, sorted — the same order whether
    the run is in memory or read from its folder."""
    order = {f.name: i for i, f in enumerate(catalogue.FAMILIES)}

    def key(n: str):
        try:
            m = catalogue.parse(n)
        except (ValueError, KeyError):
            return (len(order), 0, 0, n)
        return (order.get(m.family.name, len(order)), m.injected, m.k or 0, n)

    return sorted(set(names), key=key)


def _value(v: float) -> float:
    return v if v is None or math.isnan(v) else round(float(v), VALUE_DECIMALS)


def _as_list(x: Any, single: tuple) -> list:
    return [x] if isinstance(x, single) else list(x)


def _retrievers(items: list) -> tuple[list[Pipeline], list[SystemSpec], bool]:
    """Retriever arguments → (pipelines, live systems, whether any is a Python object): names and ``.toml`` paths
    (presets or system files), :class:`Pipeline` objects, and objects with a ``search`` method (the live protocol,
    :mod:`retrievers.systems.protocol`)."""
    named = [str(x) for x in items if isinstance(x, (str, Path))]
    pipes, specs = load_retrievers(named) if named else ([], [])
    objects = False
    for x in items:
        if isinstance(x, Pipeline):
            pipes.append(x)
        elif isinstance(x, SystemSpec):
            specs.append(x)
        elif not isinstance(x, (str, Path)):
            if not callable(getattr(x, "search", None)):
                raise ValueError(f"retriever {x!r}: not a preset name, a .toml path, a Pipeline or an object with a "
                                 f"search(query, *, k, as_of, group, context) method")
            specs.append(system_of(x))
            objects = True
    names = [p.name for p in pipes] + [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"retriever name {dup[0]!r} given twice (give each object a distinct .name)")
    return pipes, specs, objects


def _embedder(embedder: str | Embedder | None) -> Embedder:
    return embedder if isinstance(embedder, Embedder) else make_embedder(embedder)


def run(datasets: str | Path | Dataset | Iterable[str | Path | Dataset], retrievers: Any, *,
        split: str | None = None, limit: int | None = None, out: str | Path | None = None,
        embedder: str | Embedder | None = None, run_files: dict[str, str | Path] | None = None,
        settings: IndexSettings | None = None, refresh: bool | None = None,
        qrels_unknown: str = "error") -> Run:
    """Run retrievers over datasets: the Python face of `evalkit run`.

    ``datasets``: a name, a BEIR folder path or a :class:`retrievers.Dataset`, or a list of them. ``retrievers``: one
    or a list of preset names, ``.toml`` paths (presets or live system files), :class:`retrievers.Pipeline` objects,
    live system names (:func:`systems`), or your own Python object speaking the live protocol
    (:mod:`retrievers.systems.protocol`: ``search(query, *, k, as_of, group, context)`` returning hits, optional
    ``ingest`` / ``reset`` …; its ``name`` attribute, else its class name, names it). ``split``: default ``test``
    when the dataset has one, else all; ``limit``: the first N queries. ``run_files``: ``{name: path}`` TREC run files
    scored beside the retrievers. ``out``: also write the run folder there (else keep it in memory;
    :meth:`Run.report` writes it later). ``embedder``: a model folder, an ``http(s)://…/v1`` endpoint or an
    :class:`Embedder` (default: ``$EVALKIT_EMBEDDER``, else the shipped model). ``refresh``: live systems are asked
    again instead of answered from the response cache — the default when a Python object is given (its code is not
    part of the cache key). Every retriever is validated before any work.

    >>> import evalkit
    >>> run = evalkit.run("memory-workspace", ["bm25", evalkit.load_preset("bm25").with_params(
    ...     {"budget": {"max_chunks": 3}}, name="bm25_top3")], limit=20)
    >>> run.metrics["retriever"].tolist()
    ['bm25', 'bm25_top3']
    >>> bool((run.metrics["ndcg@10"] == run.metrics["ndcg@10"][0]).all())   # same ranking, a smaller budget
    True
    """
    items = _as_list(datasets, (str, Path, Dataset))
    rets = _as_list(retrievers, (str, Path, Pipeline, SystemSpec)) if (
        isinstance(retrievers, (str, Path, Pipeline, SystemSpec, list, tuple))) else [retrievers]
    if not items:
        raise ValueError("run: no dataset given")
    if not rets and not run_files:
        raise ValueError("run: no retriever given")
    if limit is not None and limit < 1:
        raise ValueError(f"run: limit must be >= 1, got {limit}")
    for d in items:
        if not isinstance(d, (str, Path, Dataset)):
            raise ValueError(f"run: dataset {d!r} is not a name, a folder path or a retrievers.Dataset")
    pipes, specs, objects = _retrievers(rets)
    files = {str(k): str(v) for k, v in (run_files or {}).items()}
    clash = set(files) & ({p.name for p in pipes} | {s.name for s in specs})
    if clash:
        raise ValueError(f"run: run file name {sorted(clash)[0]!r} is also a retriever's name")
    options = RunOptions(settings=settings or IndexSettings(), split=split, limit=limit,
                         load_opts={"qrels_unknown": qrels_unknown}, run_files=files, systems=specs,
                         refresh=objects if refresh is None else refresh)
    writer, written = run_flow.run([d if isinstance(d, Dataset) else str(d) for d in items], pipes,
                                   Path(out) if out is not None else None, options,
                                   make_embedder=lambda: _embedder(embedder),
                                   argv=[_call_line(items, pipes, specs, files, split, limit)], log=_log)
    return Run(RunData.from_folder(written) if written else RunData.from_writer(writer), writer)


def _call_line(items, pipes, specs, files, split, limit) -> str:
    """The run's Python call as the report's "Command:" line shows it (objects by name):
    ``evalkit.run(['my-notes'], ['bm25', 'hybrid-rrf'], limit=20)``."""
    ds = [d.name if isinstance(d, Dataset) else str(d) for d in items]
    kw = "".join(f", {k}={v!r}" for k, v in (("split", split), ("limit", limit), ("run_files", files or None))
                 if v is not None)
    return f"evalkit.run({ds!r}, {[p.name for p in pipes] + [s.name for s in specs]!r}{kw})"


def evaluate(qrels: Any, run: Any, metrics: str | list[str] | None = None, *,
             per_query: bool = False) -> float | dict[str, float] | pd.DataFrame:
    """Score one in-memory run against qrels — ranx's ``evaluate`` verb on evalkit's measures.

    ``qrels``: ``{query_id: {doc_id: grade}}`` or a DataFrame ``q_id, doc_id, score``; ``run``: ``{query_id:
    {doc_id: score}}`` (ranx's ``Run.to_dict()``), ``{query_id: [(doc_id, score), …]}`` or a DataFrame ``q_id,
    doc_id, score``. The run is ranked by score descending, ties by document id descending (trec_eval's rule).
    Conventions as every run folder's (:mod:`evalkit.measures.lists`): grades ≥ 1 are relevant, queries with no
    relevant document are not scored, a query missing from the run scores 0. Returns a float for one metric name,
    ``{metric: mean}`` for a list (default: the headline measures), or with ``per_query=True`` a DataFrame
    (``query_id`` + one column per metric). Agrees with ``ranx.evaluate`` (tests/parity/test_run_dicts_ranx.py).

    >>> import evalkit
    >>> qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d2": 1}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}, "q2": {"d1": 0.7, "d2": 0.3}}
    >>> evalkit.evaluate(qrels, run, "mrr@10")
    0.75
    >>> evalkit.evaluate(qrels, run, ["recall@2", "precision@1"])
    {'recall@2': 0.75, 'precision@1': 0.5}
    >>> evalkit.evaluate(qrels, run, ["mrr@10"], per_query=True)
      query_id  mrr@10
    0       q1     1.0
    1       q2     0.5
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics or catalogue.names("headline"))
    means, per = run_dicts.evaluate_runs(qrels, run, names)
    if per_query:
        qids = sorted({q for m in names for q in per[m]})
        return pd.DataFrame([{"query_id": q, **{m: per[m].get(q) for m in names}} for q in qids],
                            columns=["query_id", *names])
    return means[names[0]] if isinstance(metrics, str) else {m: means[m] for m in names}


def fuse(runs: Any, method: str = "rrf", *, norm: str | None = "min-max", weights: list[float] | None = None,
         params: dict | None = None) -> dict[str, dict[str, float]]:
    """Fuse in-memory runs — ranx's ``fuse`` verb, computed by the library's own fusion stages (``fuse.rrf``,
    ``fuse.comb``), so what is tried here is what a preset runs.

    ``runs``: a list (or ``{name: run}``) of runs as :func:`evaluate` takes them. ``method``: ``rrf`` (``params``
    ``{"k": 60}``), ``wsum`` (weighted sum; ``weights``), ``sum``, ``mnz``, ``max``, ``min``, ``med``, ``anz``.
    ``norm`` (score methods): ranx's names ``min-max`` (default), ``zmuv``, ``max``, ``sum``, ``rank``, ``None``.
    Returns ``{query_id: {doc_id: score}}`` in ranking order; agrees with ``ranx.fuse``
    (tests/parity/test_run_dicts_ranx.py).

    >>> import evalkit
    >>> vec = {"q1": {"a": 0.9, "b": 0.5}}
    >>> bm25 = {"q1": {"b": 7.0, "c": 3.0}}
    >>> fused = evalkit.fuse([vec, bm25], method="rrf")
    >>> list(fused["q1"]), round(fused["q1"]["b"], 6)
    (['b', 'a', 'c'], 0.032522)
    >>> list(evalkit.fuse([vec, bm25], method="wsum", weights=[0.8, 0.2])["q1"])
    ['a', 'b', 'c']
    """
    return run_dicts.fuse_runs(runs, method=method, norm=norm, weights=weights, params=params)


class Experiment:
    """A run and its comparison, made by one :func:`experiment` call: ``.run`` (:class:`Run`), ``.comparison``
    (:class:`Comparison`); ``to_text()`` prints both (the headline table, then the paired tests)."""

    def __init__(self, run: Run, comparison: Comparison):
        self.run, self.comparison = run, comparison

    def to_text(self) -> str:
        return self.run.to_table().lstrip("\n") + "\n\n" + self.comparison.to_text()

    def __repr__(self) -> str:
        return f"<evalkit.Experiment: {len(self.run.retrievers())} retrievers on {', '.join(self.run.datasets)}>"


def experiment(datasets: Any, retrievers: Any, *, baseline: str | None = None, metrics: list[str] | None = None,
               alpha: float = 0.05, **run_options) -> Experiment:
    """Run retrievers and compare them in one call — PyTerrier's ``pt.Experiment`` verb: :func:`run` (with
    ``run_options``: ``split``, ``limit``, ``out``, ``embedder`` …), then :func:`compare` on that run against
    ``baseline`` (default: the first retriever) at ``alpha``.

    >>> import evalkit
    >>> top3 = evalkit.load_preset("bm25").with_params({"cutoff.top_k": {"k": 3}}, name="bm25_top3")
    >>> exp = evalkit.experiment("memory-workspace", ["bm25", top3], metrics=["ndcg@10"], limit=20)
    >>> exp.comparison.table[["a", "b", "metric"]].values.tolist()
    [['bm25', 'bm25_top3', 'ndcg@10']]
    >>> exp.to_text().startswith("memory-workspace")
    True
    """
    r = run(datasets, retrievers, **run_options)
    base = baseline or r.retrievers()[0]
    return Experiment(r, compare([r], baseline=base, metrics=metrics, alpha=alpha))


def answer(datasets: str | Path | Dataset | Iterable[str | Path | Dataset], retrievers: Any, *, reader: str,
           reader_model: str, judges: list[tuple[str, str] | tuple[str, str, str]] | None = None,
           split: str | None = None, limit: int | None = None, out: str | Path | None = None,
           embedder: str | Embedder | None = None, concurrency: int = 4, timeout: float = 300.0,
           reader_prompt: str = "reader-v1", price: tuple[float, float] | None = None,
           api_key_env: str | None = None, budgets: Iterable[int] = ()) -> Run:
    """Run retrievers and answer every question over each one's injected block: the Python face of `evalkit
    answer` (docs/answers.md). ``reader``: an OpenAI-compatible endpoint (``http://127.0.0.1:8011/v1`` from `evalkit
    serve-llm`) and ``reader_model`` the model id asked there; ``judges``: ``(url, model)`` or ``(url, model,
    prompt)`` each (default: the reader's endpoint and model with ``judge-v1``; the first judge is the verdict of
    record); ``price``: per million tokens (in, out); ``api_key_env``: the variable holding the key (never
    written); ``budgets``: also answer each preset re-packed by its own rule at these token budgets (``bm25@600``
    …: accuracy against the budget, one curve per preset). Returns the :class:`Run`; :attr:`Run.answers` is the per-question table, :attr:`Run.metrics` carries
    ``answer_correct``, ``answer_f1``, ``judge_kappa`` …

    Example (a model must be served first, so not a doctest)::

        run = evalkit.answer("locomo", ["bm25"], split="heldout", limit=3, reader="http://127.0.0.1:8011/v1",
                             reader_model="smollm2-135m-instruct")
        run.answers[["query_id", "verdict", "attribution"]]
    """
    from evalkit.engine.answer import AnswerSpec, Judge, Prompt  # lazy: startup
    from evalkit.engine.llm import Endpoint  # lazy: startup
    if concurrency < 1:
        raise ValueError(f"answer: concurrency must be >= 1, got {concurrency}")
    budgets = tuple(sorted({int(b) for b in budgets}))
    if budgets and budgets[0] < 1:
        raise ValueError(f"answer: budgets must be positive token counts, got {budgets}")

    def ep(url, model):
        return Endpoint(url, model, api_key_env=api_key_env, timeout=timeout,
                        on_fault=lambda line: _log(f"evalkit: answers: {line}"))
    js = [Judge(ep(j[0], j[1]), Prompt.load(j[2] if len(j) > 2 else "judge-v1"))
          for j in (judges or [(reader, reader_model)])]
    spec = AnswerSpec(ep(reader, reader_model), js, Prompt.load(reader_prompt), concurrency,
                      *(price if price is not None else (None, None)), budgets=budgets)
    items = _as_list(datasets, (str, Path, Dataset))
    pipes, specs, _ = _retrievers(_as_list(retrievers, (str, Path, Pipeline, SystemSpec)))
    options = RunOptions(settings=IndexSettings(), split=split, limit=limit, systems=specs, answer=spec)
    writer, written = run_flow.run([d if isinstance(d, Dataset) else str(d) for d in items], pipes,
                                   Path(out) if out is not None else None, options,
                                   make_embedder=lambda: _embedder(embedder),
                                   argv=[_call_line(items, pipes, specs, {}, split, limit).replace("evalkit.run(", "evalkit.answer(", 1)], log=_log)
    return Run(RunData.from_folder(written) if written else RunData.from_writer(writer), writer)


def read_run(path: str | Path) -> Run:
    """A run folder written by `evalkit run` (or :meth:`Run.report`), or ``reports/runs/<dataset>`` for its latest
    run. RunFolderError (one line) for a folder of another version or a damaged one.

    >>> import evalkit, tempfile
    >>> folder = evalkit.run("memory-workspace", "bm25", limit=5).report(tempfile.mkdtemp() + "/r")
    >>> evalkit.read_run(folder).metrics.loc[0, "retriever"]
    'bm25'
    """
    folder = resolve_run_folder(Path(path))
    return Run(RunData.from_folder(folder))


# ---- comparing, gating --------------------------------------------------------------------------------------------

def compare(runs: Iterable[Run | str | Path], *, baseline: str | None = None, metrics: list[str] | None = None,
            alpha: float = 0.05, examples: int = 5) -> Comparison:
    """Paired significance tests between runs, query by query — the Python face of `evalkit compare` (see
    :mod:`evalkit.workflows.compare` for which systems are paired). ``runs``: :class:`Run` objects and/or run folder
    paths (in-memory runs are labelled ``run1``, ``run2`` … by position). ``baseline``: a run folder (path or label)
    or a retriever label. ``alpha`` (0 < alpha < 1, default 0.05): the significance level of the ▲ / ▼ marks, the
    Holm-adjusted intervals and the ranking's tie groups, stated in every rendering (``cmp.alpha``). The result
    renders itself: ``to_text()``, ``to_markdown()``, ``to_html()``, ``.table`` (a DataFrame), ``save(folder)``.

    >>> import evalkit
    >>> top3 = evalkit.load_preset("bm25").with_params({"cutoff.top_k": {"k": 3}}, name="bm25_top3")
    >>> run = evalkit.run("memory-workspace", ["bm25", top3], limit=20)
    >>> cmp = evalkit.compare([run], baseline="bm25", metrics=["ndcg@10"])
    >>> cmp.table[["a", "b", "metric"]].values.tolist()
    [['bm25', 'bm25_top3', 'ndcg@10']]
    >>> cmp.to_markdown().startswith("# evalkit compare")
    True
    >>> evalkit.compare([run], baseline="bm25", metrics=["ndcg@10"], alpha=0.01).alpha    # a stricter level
    0.01
    """
    if not 0 < alpha < 1:
        raise ValueError(f"compare: alpha must be between 0 and 1, got {alpha}")
    given = [r._data if isinstance(r, Run) else r for r in _as_list(runs, (Run, str, Path))]
    if not given:
        raise ValueError("compare: no run given")
    return compare_flow.compare(given, metrics=metrics, baseline=baseline, n_examples=examples, alpha=alpha)


def gate(baseline_path: str | Path, *, datasets: list[str] | None = None, retrievers: list[str] | None = None,
         metrics: list[str] | None = None, tolerance: float | None = None, alpha: float = 0.05, update: bool = False,
         settings: IndexSettings | None = None, embedder: str | Embedder | None = None) -> GateResult:
    """The CI regression gate — the Python face of `evalkit gate`: re-run what the baseline file records (or the
    ``datasets`` / ``retrievers`` given) and judge every row OK / WARN / FAIL / NEW / MISSING
    (:mod:`evalkit.workflows.gate`). ``update=True`` writes the baseline from this run first (a new file is
    created) and judges against it. ``result.failed`` is what `evalkit gate` turns into exit 1; ``to_text()`` /
    ``to_markdown()`` render it.

    >>> import evalkit, tempfile
    >>> base = tempfile.mkdtemp() + "/expected.json"
    >>> evalkit.gate(base, datasets=["memory-workspace"], retrievers=["bm25"], update=True).failed
    False
    >>> evalkit.gate(base).failed        # the same retriever again: nothing moved
    False
    """
    if tolerance is not None and not tolerance >= 0:
        raise ValueError(f"gate: tolerance must be >= 0, got {tolerance}")
    if not 0 < alpha < 1:
        raise ValueError(f"gate: alpha must be between 0 and 1, got {alpha}")
    path = Path(baseline_path)
    expected = None if (update and not path.exists()) else load_gate_baseline(path)
    wanted = list(metrics or (expected or {}).get("metrics", gate_flow.GATE_METRICS))
    backend = None if isinstance(embedder, Embedder) else gate_flow.gate_backend

    def embedder_for(recorded: dict | None) -> Embedder:
        if backend is None:
            return embedder
        return make_embedder(embedder, backend=backend(recorded, embedder, None, os.environ))

    measured = gate_flow.measure(path, expected, datasets, retrievers, wanted, update, settings or IndexSettings(),
                                 embedder_for, log=_log)
    if update:
        expected, _ = gate_flow.update_baseline(path, expected, measured, tolerance, alpha, bool(retrievers))
    return gate_flow.run_gate(path, expected, measured, alpha=alpha, tolerance=tolerance,
                              retrievers_given=bool(retrievers))


# ---- tuning, ablation, replay ---------------------------------------------------------------------------------------

def tune(space_path: str | Path, *, dataset: str | None = None, out: str | Path | None = None,
         method: str | None = None, trials: int | None = None, workers: int | None = None,
         settings: IndexSettings | None = None, **options):
    """Tune a preset's stage parameters over a search space (a TOML file; format in :mod:`evalkit.tune.space`) —
    the Python face of `evalkit tune`. ``options`` are :class:`evalkit.tune.protocol.Options` fields (``split_by``,
    ``folds``, ``final`` …). Writes the output folder (default ``reports/tune/<space name>``) and returns its
    :class:`evalkit.tune.run.TuneResult` (``.out``, ``.summary``, ``.text``).

    >>> import evalkit
    >>> callable(evalkit.tune)     # a real tune sweeps hundreds of configs: see tune/*.toml and `evalkit tune`
    True
    """
    from evalkit.tune.protocol import Options  # lazy: startup
    from evalkit.tune.run import run_tune  # lazy: startup
    from evalkit.tune.space import load_space  # lazy: startup

    space = load_space(space_path, dataset=dataset, method=method, trials=trials)
    return run_tune(space, out=out, workers=workers, settings=settings or IndexSettings(), log=_log,
                    options=Options(**options) if options else None)


def ablate(preset: str | Pipeline, dataset: str | Dataset, *, split: str | None = None, limit: int | None = None,
           latency_queries: int = 30, repeats: int = 3, settings: IndexSettings | None = None,
           embedder: str | Embedder | None = None):
    """Stage-by-stage ablation of ``preset`` on ``dataset`` — the Python face of `evalkit ablate`: per stage, the
    quality with it off (paired tests, Holm) and its cost in ms. Returns an
    :class:`evalkit.workflows.ablation.AblationResult` (``rows``, ``frame()`` a DataFrame, ``to_markdown()``).

    >>> import evalkit
    >>> res = evalkit.ablate("bm25", "memory-workspace", limit=20, latency_queries=0)   # 0: no latency pass
    >>> [r.label for r in res.rows]
    ['fuse.single', 'cutoff.top_k', 'budget']
    """
    return ablation_flow.run_ablation(preset, dataset, split=split, latency_queries=latency_queries, limit=limit,
                                      settings=settings, embedder=_embedder(embedder), repeats=repeats, log=_log)


def replay(log: str | Path, dataset: str, retrievers: list[str], *, k: int = 10, refresh: bool = False,
           settings: IndexSettings | None = None, embedder: str | Embedder | None = None):
    """Replay a logged-query file (one JSON event per line: ``ts``, ``query``, ``injected`` …; DESIGN.md §4)
    through retrievers over ``dataset`` — the Python face of `evalkit replay`. Returns an
    :class:`evalkit.workflows.replay.ReplayResult` (behaviour, agreement with production, ``to_markdown()``).

    >>> import evalkit
    >>> callable(evalkit.replay)   # needs a query log of your own: `evalkit import` writes one from real logs
    True
    """
    return replay_flow.run_replay(Path(log), dataset, list(retrievers), settings=settings,
                                  embedder=_embedder(embedder), k=k, log=_log, refresh=refresh)
