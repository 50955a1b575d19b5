"""The shared index: what every arm searches, built once per dataset and reused from disk.

* :mod:`~retrievers.index.shared` — :class:`SharedIndex` (embeddings + a Chroma collection + bm25s indexes, per
  group) and :class:`IndexSettings`;
* :mod:`~retrievers.index.chroma` — where a Chroma collection lives and how it is opened, checked and built;
* :mod:`~retrievers.index.lexical` — bm25s indexes and the tokenizers;
* :mod:`~retrievers.index.corpus` — columnar document features (numpy) the stages gather from;
* :mod:`~retrievers.index.visibility` — as-of visibility: which documents a query may search.
"""
