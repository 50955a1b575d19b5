"""Candidate generation: arms (what to search) → the shared candidate table every preset's stages run over.

* :mod:`~retrievers.candidates.arms` — :class:`ArmSpec` (an arm's identity keys the candidate cache);
* :mod:`~retrievers.candidates.search` — run the arms against the shared index (cached per arm and query);
* :mod:`~retrievers.candidates.table` — :class:`CandidateSet` (shared, immutable), :class:`State` (one pipeline
  run's rows), :class:`ArmHits`;
* :mod:`~retrievers.candidates.files` — the candidate JSON schema → a CandidateSet without an index
  (``evalkit score``, stage tests).
"""
