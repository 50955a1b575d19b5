"""Helpers shared by the stage modules. A helper module never imports a stage module (only ``retrievers.stages.base``,
other helpers and the library below the stages): stages import helpers, never the other way round
(``tests/unit/retrievers/stages/test_catalog.py`` checks it).

* :mod:`~retrievers.stages.helpers.signals` — arm lookup, effective ranks, file ids, tie orders, stable sorts,
  :func:`~retrievers.stages.helpers.signals.carry`, :func:`~retrievers.stages.helpers.signals.doc_flags`;
* :mod:`~retrievers.stages.helpers.normalize` — score mappings (``MAPPINGS``) and per-query normalisations
  (``NORMALISATIONS``);
* :mod:`~retrievers.stages.helpers.ages` — time rules and the negative-age counters of the time stages;
* :mod:`~retrievers.stages.helpers.query_text` — HookClaw / Phase-3 / conversation query processing (entities,
  temporal windows, path dates, expansions; query transforms ``hookclaw_fts``, ``phase3_expansions``,
  ``context_synthesis``);
* :mod:`~retrievers.stages.helpers.keywords` — stop words and OpenClaw's keyword extraction (query transform
  ``openclaw_keywords``);
* :mod:`~retrievers.stages.helpers.feedback` — HookClaw's utility tracker and citation rule;
* :mod:`~retrievers.stages.helpers.similarity` — pairwise similarity of a candidate set's documents (snippet-token
  Jaccard, document and query cosines), memoised as slabs the greedy diversity stages read.
"""
