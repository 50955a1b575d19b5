"""The ``score.*`` stages: they rescore the incoming rows. Two jobs, one module each:

* :mod:`~retrievers.stages.score.adjust` — the seed systems' own adjustments: ``score.recency_boost``,
  ``score.importance``, ``score.length_norm`` (lancedb-pro), ``score.hookclaw_fts_boost``, ``score.utility``
  (HookClaw);
* :mod:`~retrievers.stages.score.blend` — added signals blended in by their standardised value (no seed system):
  ``score.neighbours``, ``score.doc_cosine``, ``score.feedback``, ``score.rm3``.
"""
from retrievers.stages.score import adjust, blend  # noqa: F401  (registration side effects)
