"""The options of a quality run, built once and passed down instead of a parameter list.

`evalkit run` (``evalkit/commands/run.py``) and the Python API (:func:`evalkit.run`, :func:`evalkit.answer`) build
one :class:`RunOptions` from their arguments; :func:`evalkit.workflows.run.run` and
:func:`evalkit.engine.experiment.run_dataset` read it. A new option of the run is one field here (with its
docstring), set where the options are built and read where it is used; nothing in between names it.

Usage::

    opts = RunOptions(settings=IndexSettings(), split="test", limit=20)
    dr = run_dataset("memory-workspace", load_pipelines(["bm25"]), opts, embedder)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.engine.answer import AnswerSpec
from retrievers.index.shared import IndexSettings
from retrievers.systems.file import SystemSpec


@dataclass(frozen=True)
class RunOptions:
    """What a quality run does with each dataset, besides which datasets and retrievers it runs (frozen: built
    once, read everywhere; ``dataclasses.replace`` for a variant)."""

    settings: IndexSettings = field(default_factory=IndexSettings)
    """How the shared index is built: as-of visibility, representation, vector backend
    (:class:`retrievers.index.shared.IndexSettings`)."""
    split: str | None = None
    """The split whose queries are scored; None: ``test`` when the dataset has one, else ``all``
    (:func:`evalkit.engine.experiment.select_queries`)."""
    limit: int | None = None
    """Score only the split's first ``limit`` queries (None: all)."""
    load_opts: dict = field(default_factory=dict)
    """Keyword options for the dataset loader (e.g. ``{"qrels_unknown": "drop"}``)."""
    run_files: dict[str, str | Path] = field(default_factory=dict)
    """External TREC run files, retriever name → path, scored as more retrievers (:mod:`evalkit.engine.trec_runs`)."""
    run_file_missing: str = "zero"
    """What a query a run file lacks counts: ``zero`` (as ``trec_eval -c``) or ``skip`` (score the answered ones)."""
    systems: tuple[SystemSpec, ...] = ()
    """Live systems (:mod:`evalkit.engine.live`), ingested as of each query and asked, scored as more retrievers."""
    refresh: bool = False
    """Live systems: ask every query again instead of answering from the response cache."""
    diagnose: bool = False
    """Record each pipeline's recall funnel, threshold sensitivity and budget curve (``diagnostics.json``)."""
    answer: AnswerSpec | None = None
    """Also answer and judge every retriever's injected blocks (:mod:`evalkit.workflows.answer`); None: do not."""
    cluster: Any = None
    """A Dask cluster for the corpus embedding and the pipelines' query blocks (:mod:`evalkit.engine.distribute`):
    ``local[:N]``, ``tcp://HOST:PORT`` or a ``distributed.Client``; None: one process. Metrics byte-identical."""

    def __post_init__(self):
        # callers hand over what they hold (None for "none", lists): stored in one form, so readers need no `or`
        object.__setattr__(self, "load_opts", dict(self.load_opts or {}))
        object.__setattr__(self, "run_files", dict(self.run_files or {}))
        object.__setattr__(self, "systems", tuple(self.systems or ()))
