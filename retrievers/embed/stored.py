"""Stored vectors: a dataset that brings its own document and query embeddings (an imported memory store whose
vectors came from the user's own embedding model, with query vectors from the same model).

A dataset declares them in ``dataset.info["stored_vectors"]`` = ``{"path": <.npz file>, "label": <where they come
from>, "dim": N}``; the file holds ``doc_ids``, ``doc_vectors`` (n × N), ``query_texts``, ``query_vectors``
(m × N). :class:`SharedIndex` then uses :class:`StoredVectors` in place of the embedding model: documents get their
stored vectors (one vector per document, no splitting), queries the vector stored for their text, and vector search
is exact cosine (numpy over every visible document — a flat LanceDB table without a vector index searches the same
way). Nothing is embedded, so nothing goes to the embedding cache; ``model_id`` is ``stored:<label>:dim<N>:<sha256
of the file>``, which keys the index and its candidate caches apart from any model and from other stores.

A text the file has no vector for (a query variant a pipeline rewrites, a query added later) is a
:class:`DataError`: there is no model to embed it with.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from retrievers.types import DataError, Dataset, Document


class StoredVectors:
    """Embedder-shaped access to a dataset's stored vectors (``encode`` looks query texts up, never embeds)."""

    backend = "stored"
    max_seq_length = 0

    def __init__(self, path: Path, label: str):
        path = Path(path)
        try:
            raw = path.read_bytes()
            with np.load(path, allow_pickle=False) as z:
                doc_ids, docs = z["doc_ids"], z["doc_vectors"]
                q_texts, queries = z["query_texts"], z["query_vectors"]
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"{path}: unreadable stored vectors ({exc})") from None
        if docs.ndim != 2 or queries.ndim != 2 or len(doc_ids) != len(docs) or len(q_texts) != len(queries) \
                or docs.shape[1] != queries.shape[1] or docs.shape[1] == 0:
            raise DataError(f"{path}: stored vectors of inconsistent shapes (documents {docs.shape}, "
                            f"queries {queries.shape})")
        self.path = path
        self._dim = int(docs.shape[1])
        self.model_name = f"stored vectors ({label}, dim {self._dim})"
        self.model_id = f"stored:{label}:dim{self._dim}:{hashlib.sha256(raw).hexdigest()[:16]}"
        self._docs = dict(zip((str(i) for i in doc_ids), _unit(docs, path, "document")))
        self._queries = dict(zip((str(t) for t in q_texts), _unit(queries, path, "query")))
        self.model_calls = 0
        self.texts_embedded = 0

    @classmethod
    def for_dataset(cls, dataset: Dataset) -> "StoredVectors | None":
        decl = dataset.info.get("stored_vectors")
        if not decl:
            return None
        return cls(Path(decl["path"]), str(decl.get("label") or "stored"))

    @property
    def dim(self) -> int:
        return self._dim

    def describe(self) -> dict:
        return {"model": self.model_name, "backend": "stored", "max_length": None, "id": self.model_id}

    @property
    def model(self):
        raise DataError(f"{self.model_name}: no embedding model to run (latency mode and query rewriting need "
                        "one); import the store without query vectors to re-embed with the local model")

    def tokenizer(self):
        return self.model

    def document_vectors(self, documents: list[Document]) -> np.ndarray:
        missing = [d.id for d in documents if d.id not in self._docs]
        if missing:
            raise DataError(f"{self.path}: no stored vector for {len(missing)} document(s) (first: {missing[0]})")
        return np.stack([self._docs[d.id] for d in documents])

    def encode(self, texts: list[str], desc: str = "", chunk: int = 0) -> np.ndarray:
        """The stored query vectors of ``texts`` (unit norm, float32)."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        missing = [t for t in texts if t not in self._queries]
        if missing:
            raise DataError(f"{self.model_name}: no stored query vector for the text {missing[0][:80]!r} "
                            f"({len(missing)} text(s)); a pipeline that rewrites queries needs an embedding model")
        return np.stack([self._queries[t] for t in texts])


def _unit(m: np.ndarray, path: Path, what: str) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    if not np.isfinite(m).all() or (norms == 0).any():
        raise DataError(f"{path}: a {what} vector is zero or not finite (cosine undefined)")
    return (m / norms).astype(np.float32)
