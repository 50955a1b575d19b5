"""The ``rerank.*`` stages (kind ``rerank``); :mod:`~retrievers.stages.rerank.http` is their HTTP client."""
from retrievers.stages.rerank import lancedb  # noqa: F401  (registration side effects)
