"""The ``rerank.*`` stages (kind ``rerank``): they re-score the head of the list with a reranker.

* :mod:`~retrievers.stages.rerank.lancedb` — ``rerank.lancedb``, memory-lancedb-pro's rerank step (HTTP
  cross-encoder blended with the fused score, cosine fallback);
* :mod:`~retrievers.stages.rerank.cross_encoder` — ``rerank.cross_encoder``, a BEIR-style cross-encoder rerank;
* :mod:`~retrievers.stages.rerank.yes_no` — ``rerank.yes_no``, the seed-003 yes/no reranker;
* :mod:`~retrievers.stages.rerank.models` — what they share: local models loaded once per process, pair scores
  memoised per process, HTTP pair scoring, ``STATS``;
* :mod:`~retrievers.stages.rerank.http` — the HTTP rerank client (request formats, strict and lancedb-pro answer
  parsing, JavaScript coercions).

``State.info["rerank"]``: one dict per query, written by whichever rerank stage ran last, with at least ``stage``
(display name), ``path`` (what produced the scores) and ``n_in`` (rows that entered the reranker).
"""
from retrievers.stages.rerank import cross_encoder, lancedb, yes_no  # noqa: F401  (registration side effects)
