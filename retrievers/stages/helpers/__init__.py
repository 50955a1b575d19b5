"""Helpers shared by the stage modules. A helper module never imports a stage module (nor ``retrievers.stages.base``
stage classes): stages import helpers, never the other way round.

* :mod:`~retrievers.stages.helpers.signals` — arm lookup, effective ranks, file ids, tie orders, stable sorts,
  :func:`~retrievers.stages.helpers.signals.carry`, :func:`~retrievers.stages.helpers.signals.doc_flags`;
* :mod:`~retrievers.stages.helpers.keywords` — stop words and OpenClaw's keyword extraction (query transform
  ``openclaw_keywords``).
"""
