"""Embedding models: text → unit-norm float32 vectors, cached by content hash.

* :mod:`~retrievers.embed.model` — :class:`Embedder` (the backends, the SQLite content-hash cache),
  :func:`make_embedder` (arguments, else ``EVALKIT_EMBEDDER`` …, else the shipped all-MiniLM-L6-v2);
* backends: :mod:`~retrievers.embed.openvino`, :mod:`~retrievers.embed.bf16`, :mod:`~retrievers.embed.onnx`
  (local runtimes of the same model) and :mod:`~retrievers.embed.http` (an OpenAI-compatible ``/v1/embeddings``
  endpoint);
* :mod:`~retrievers.embed.stored` — stored vectors: a dataset that brings its own document and query vectors
  stands in for the model.

Usage::

    from retrievers.embed import make_embedder
    vecs = make_embedder().encode(["where is the router config?"])   # (1, 384) float32, unit norm
"""
from retrievers.embed.model import Embedder, make_embedder

__all__ = ["Embedder", "make_embedder"]
