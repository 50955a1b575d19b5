"""The run folder — DESIGN.md §4's output contract — in one package: writing, reading, claiming and viewing it.

Layout::

    OUT/
      manifest.json              versions, preset hashes + canonical configs, dataset hashes, embedding model,
                                 index settings (Chroma HNSW / exact), seeds, machine, schema version
      metrics.json / metrics.csv rows (dataset, retriever, metric, value) — overall means
      metrics_by_category.csv    (dataset, retriever, breakdown, bucket, metric, value, n)
      per_query.csv              (dataset, retriever, query_id, category, metric, value) — values whole
                                 (repr; manifest per_query_decimals null; older folders: 6 decimals)
      results/<dataset>/<retriever>.jsonl   per query: ranked [[id, score]], injected ids, skipped, budget,
                                 injected_block (the block rendered for the prompt, when one was)
      runs/<dataset>/<retriever>.trec       TREC run files (qid Q0 docid rank score tag), trec_eval-ordered as the
                                 harness ranked (ties nudged: write.trec_score_texts)
      diagnostics.json           per dataset × retriever: recall funnel over its stages, threshold sensitivity,
                                 quality at a token budget (evalkit/engine/funnel.py, measures/budget_curve.py)
      report.md / report.html    human reports (evalkit/report)

* :mod:`~evalkit.runfolder.write` — :class:`RunWriter`: the folder written atomically;
* :mod:`~evalkit.runfolder.read` — the schema version, the file-name rule (``safe``), ``read_run`` /
  ``read_results``;
* :mod:`~evalkit.runfolder.claim` — an output path is claimed before any work; nothing of the user's is replaced;
* :mod:`~evalkit.runfolder.history` — a new folder per default run, ``latest``, ``evalkit runs``;
* :mod:`~evalkit.runfolder.view` — :class:`RunData`: one view of a run's numbers, from a writer in memory or a
  saved folder (what reports and comparisons read).

Below the engine: nothing here imports a runner, a pipeline or a report.
"""
