"""`evalkit run` as a workflow: datasets × retrievers (and external TREC run files) → one run folder (metrics,
per-query rows, results, TREC run files, diagnostics, report.md / report.html).

:func:`run` claims the output folder before any work, runs every dataset (:func:`evalkit.engine.experiment.
run_dataset`), records it, writes the reports and the folder, and links ``latest`` when the folder is a default
one (:mod:`evalkit.runfolder.history`). `evalkit run` (``evalkit/commands/run.py``) only parses the arguments.

Usage::

    writer, folder = run(["memory-workspace"], load_pipelines(["bm25", "dense"]), Path("out"),
                         RunOptions(settings=IndexSettings()), make_embedder=make_embedder)
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

from evalkit.data.registry import load_dataset, require_distinct
from evalkit.engine.cluster import open_client
from evalkit.engine.distribute import cluster_encoder
from evalkit.engine.answer import budget_variants
from evalkit.engine.experiment import record, run_dataset, start_manifest
from evalkit.engine.options import RunOptions
from evalkit.workflows.answer import record_answers
from evalkit.report import write_reports
from evalkit.runfolder.history import link_latest
from evalkit.runfolder.write import RunWriter
from retrievers.embed.model import Embedder
from retrievers.pipeline import Pipeline
from retrievers.types import Dataset


def run(datasets: list[str | Dataset], pipelines: list[Pipeline], out: Path | None, options: RunOptions, *,
        make_embedder: Callable[[], Embedder], default_out: bool = False, argv: list[str] | None = None,
        log=print) -> tuple[RunWriter, Path | None]:
    """Run ``pipelines`` (and the TREC run files and live systems of ``options``) over every dataset into the
    folder ``out``; a run folder always carries its diagnostics (``options.diagnose`` is set).

    ``out`` is claimed before any work (a path holding anything of the user's is refused); ``make_embedder`` is
    called after that (an HTTP embedder probes its server then). ``default_out``: ``out`` is a new default folder,
    so ``latest`` is linked to it once written. Returns the writer (its rows, for the terminal table) and the
    folder written. ``out=None`` keeps the run in memory (the Python API, :mod:`evalkit.api`): no folder, no
    reports, the folder returned is None. A dataset may be a name, a folder path or a loaded
    :class:`~retrievers.types.Dataset`; every one is read before any work, and two with the same name are a
    DataError naming both (:func:`evalkit.data.registry.require_distinct`): nothing is written. ``options.answer``:
    also answer and judge every retriever's injected blocks (:mod:`evalkit.workflows.answer`, `evalkit answer`).
    ``options.cluster``: the corpus embedding and the pipelines' query blocks run on its workers
    (:mod:`evalkit.engine.distribute`), metrics byte-identical."""
    options = replace(options, diagnose=True)
    writer = RunWriter(out)
    if options.answer is not None and options.answer.budgets:  # accuracy against the budget: one curve each
        pipelines = budget_variants(pipelines, options.answer.budgets)
        if options.systems:
            log(f"  answers: --budgets sweeps presets only; {', '.join(s.name for s in options.systems)} answer "
                f"with the block their system returns")
    # every dataset is read before any work, so two that carry one name are refused with nothing written
    loaded = [(None, d) if isinstance(d, Dataset) else (str(d), load_dataset(str(d), **options.load_opts))
              for d in datasets]
    require_distinct(loaded)
    embedder = make_embedder()
    start_manifest(writer, argv if argv is not None else sys.argv, options.settings, embedder)
    with open_client(options.cluster) as client:
        if client is not None:
            embedder.remote = cluster_encoder(client, log=log)
        try:
            while loaded:
                _, given = loaded.pop(0)  # dropped once run: a run of several datasets holds the rest only
                dr = run_dataset(given.name, pipelines, options, embedder, dataset=given, log=log, client=client)
                record(writer, dr)
                if options.answer is not None:
                    record_answers(writer, dr, options.answer, log=log)
        finally:
            embedder.remote = None
    if out is None:
        return writer, None
    write_reports(writer)
    written = writer.write()
    if default_out:
        link_latest(written, log)
    return writer, written
