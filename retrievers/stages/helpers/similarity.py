"""Pairwise similarity of a candidate set's documents, memoised so a sweep pays once: the snippet-token Jaccard
(OpenClaw's and HookClaw's MMR similarity), the document cosine and the query cosine (not assuming unit norms).

A *slab* is how a greedy stage reads a similarity without gathering anything (Q, K, K)-shaped per config:
:func:`pair_slabs` gives ``(M, mq, idx)`` with the similarity of columns ``i`` and ``j`` of query ``q`` at
``M[mq[q], idx[q, i], idx[q, j]]`` — the root set's whole document × document matrix (up to :data:`PAIR_BLOCK`
distinct documents) or one (C, C) block per query. The per-document parts (token sets, the matrix) are memoised on
the *root* candidate set, so every view of a sweep shares them. Read by the ``diversity.*`` stages
(:mod:`retrievers.stages.diversity`).

>>> snippet_tokens("Deploy the API, then deploy-check it.") == {"deploy", "the", "api", "then", "check", "it"}
True
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates.table import CandidateSet, take_rows
from retrievers.text import utf16_truncate

_ASCII_WORD = re.compile(r"[a-z0-9_]+")


def snippet_tokens(text: str, snippet_chars: int = 700) -> frozenset[str]:
    """Token set of a snippet: the text cut to ``snippet_chars`` UTF-16 units (0 = whole text), lower-cased,
    ASCII ``[a-z0-9_]+`` runs (OpenClaw's MMR tokens; HookClaw's ``\\b\\w+\\b`` without the u flag is the same
    set). CJK, Cyrillic and accented letters are dropped (``café`` → ``caf``)."""
    snippet = utf16_truncate(text, snippet_chars) if snippet_chars else text
    return frozenset(_ASCII_WORD.findall(snippet.lower()))


def _unique_docs(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique corpus indices of the set, local index (Q, C) into them; 0 on padding)."""
    docs = np.unique(cs.doc[cs.valid])
    local = np.searchsorted(docs, np.where(cs.valid, cs.doc, docs[0] if len(docs) else 0))
    return docs, np.where(cs.valid, local, 0)


#: up to this many distinct documents the whole document × document matrix is built once; above it, one
#: (C, C) block per query
PAIR_BLOCK = 4096


def _root_pairs(cs: CandidateSet, kind: str, builder) -> dict:
    """Per-document similarity source of ``kind``, memoised on the *root* candidate set (shared by every view):
    ``docs`` (the root's unique corpus indices), ``local`` (root (Q, C) → index into ``docs``), ``gram(idx)``
    (the (n, n) matrix of the documents ``docs[idx]``) and ``G`` (the full matrix when ``len(docs) <=
    PAIR_BLOCK``, else None). ``builder(root, docs)`` returns ``gram``."""
    root = cs.root

    def build():
        docs, local = _unique_docs(root)
        gram = builder(root, docs)
        G = gram(np.arange(len(docs))) if 0 < len(docs) <= PAIR_BLOCK else None
        return {"docs": docs, "local": local, "gram": gram, "G": G}
    return root.memo(("pairs.root", kind), build)


#: a view's per-query blocks are read from its root's when those take at most this many bytes (``exact`` kinds)
ROOT_BLOCK_BYTES = 256 << 20


def pair_slabs(cs: CandidateSet, kind: str, builder,
               exact: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, mq, idx)``: the similarity of columns ``i`` and ``j`` of query ``q`` is ``M[mq[q], idx[q, i],
    idx[q, j]]`` (undefined on padding). Either the root's document × document matrix (``M`` = ``G[None]``,
    ``idx`` = document index) or, for large sets, one (C, C) block per query. Memoised per set; nothing
    (Q, K, K)-shaped is gathered per config.

    ``exact``: a pair's value does not depend on which other documents share its block (Jaccard: integer
    counts and one division; not the cosine, whose matrix product may sum in another order for another block
    shape). Then a view reads the root set's per-query blocks through its ``root_col`` (built once, at most
    :data:`ROOT_BLOCK_BYTES`), instead of building blocks of its own: a sweep's presets each cut their own view of
    the same root, and each view's blocks cost one sparse product per query."""
    def build():
        r = _root_pairs(cs, kind, builder)
        rc = cs.root_col
        local = np.where(rc >= 0, take_rows(r["local"], np.maximum(rc, 0)), 0)
        if not len(r["docs"]):
            return np.zeros((1, 1, 1)), np.zeros(cs.Q, dtype=np.int64), np.zeros((cs.Q, cs.C), dtype=np.int64)
        if r["G"] is not None:
            return r["G"][None], np.zeros(cs.Q, dtype=np.int64), local.astype(np.int64)
        root = cs.root
        if exact and root is not cs and root.Q * root.C * root.C * 8 <= ROOT_BLOCK_BYTES:
            M, mq, idx = pair_slabs(root, kind, builder, exact)
            return M, mq, take_rows(idx, np.maximum(rc, 0))
        M = np.empty((cs.Q, cs.C, cs.C))
        for q in range(cs.Q):
            M[q] = r["gram"](local[q])
        return M, np.arange(cs.Q, dtype=np.int64), np.broadcast_to(np.arange(cs.C, dtype=np.int64), (cs.Q, cs.C))
    return cs.memo(("pairs.slabs", kind), build)


def _dense_pairs(cs: CandidateSet, kind: str, builder, exact: bool = False) -> np.ndarray:
    """(Q, C, C) matrix of a pair source; NaN on padding."""
    M, mq, idx = pair_slabs(cs, kind, builder, exact)
    out = M[mq[:, None, None], idx[:, :, None], idx[:, None, :]]
    m = cs.valid[:, :, None] & cs.valid[:, None, :]
    return np.where(m, out, np.nan)


def _jaccard_builder(snippet_chars: int):
    def builder(root: CandidateSet, docs: np.ndarray):
        from scipy import sparse  # lazy: startup
        texts = root.corpus.raw_texts
        cache: dict = root.corpus.cached(("snippet_tokens", snippet_chars), dict)
        vocab: dict[str, int] = {}
        indptr, indices = [0], []
        for d in docs.tolist():
            toks = cache.get(d)
            if toks is None:
                toks = cache[d] = snippet_tokens(texts[d], snippet_chars)
            indices.extend(vocab.setdefault(t, len(vocab)) for t in sorted(toks))
            indptr.append(len(indices))
        X = sparse.csr_matrix((np.ones(len(indices), dtype=np.int32), indices, indptr),
                              shape=(len(docs), max(1, len(vocab))))
        sizes = np.diff(np.asarray(indptr)).astype(np.float64)

        def gram(idx):
            sub = X[idx]
            inter = (sub @ sub.T).toarray().astype(np.float64)
            union = sizes[idx][:, None] + sizes[idx][None, :] - inter
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 1.0)
        return gram
    return builder


def jaccard_slabs(cs: CandidateSet, snippet_chars: int = 700):
    """:func:`pair_slabs` of the snippet-token Jaccard (see :func:`jaccard_matrix`)."""
    return pair_slabs(cs, f"jaccard.ascii_word.{snippet_chars}", _jaccard_builder(snippet_chars), exact=True)


def jaccard_matrix(cs: CandidateSet, snippet_chars: int = 700) -> np.ndarray:
    """Pairwise Jaccard of snippet token sets (Q, C, C): ``|A ∩ B| / |A ∪ B|``; both empty → 1, one empty → 0;
    NaN on padding. Token sets and the document matrix are built once on the root candidate set."""
    return _dense_pairs(cs, f"jaccard.ascii_word.{snippet_chars}", _jaccard_builder(snippet_chars), exact=True)


def _doc_vectors(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    emb = cs.corpus.embeddings
    if emb is None:
        raise RuntimeError("this stage needs document embeddings (the index / candidate file did not provide them)")
    docs, local = _unique_docs(cs)
    E = np.asarray(emb[docs], dtype=np.float64)
    return docs, local, E


def _cosine_builder(root: CandidateSet, docs: np.ndarray):
    emb = root.corpus.embeddings
    if emb is None:
        raise RuntimeError("this stage needs document embeddings (the index / candidate file did not provide them)")
    E = np.asarray(emb[docs], dtype=np.float64)
    norms = np.sqrt(np.einsum("ud,ud->u", E, E))

    def gram(idx):
        e, n = E[idx], norms[idx]
        dots = e @ e.T
        den = n[:, None] * n[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den == 0, 0.0, dots / np.where(den == 0, 1.0, den))
    return gram


def cosine_slabs(cs: CandidateSet):
    """:func:`pair_slabs` of the document cosine (see :func:`cosine_matrix`)."""
    return pair_slabs(cs, "cosine_dd_true", _cosine_builder)


def cosine_matrix(cs: CandidateSet) -> np.ndarray:
    """Pairwise cosine between the columns of each query (Q, C, C): ``dot/(‖a‖·‖b‖)``, zero norm → 0, a missing
    (NaN) vector → NaN (never "similar"). Vectors need not be unit-norm. NaN on padding."""
    return _dense_pairs(cs, "cosine_dd_true", _cosine_builder)


def query_cosine(cs: CandidateSet) -> np.ndarray:
    """cos(query, doc) per column (Q, C), not assuming unit norms; zero norm → 0; NaN when missing."""
    def build():
        if cs.qemb is None:
            raise RuntimeError("this stage needs query embeddings")
        docs, local, E = _doc_vectors(cs)
        q = np.asarray(cs.qemb, dtype=np.float64)
        d = E[local] if len(docs) else np.zeros((cs.Q, cs.C, q.shape[1]))
        dots = np.einsum("qcd,qd->qc", d, q)
        den = np.sqrt(np.einsum("qcd,qcd->qc", d, d)) * np.sqrt(np.einsum("qd,qd->q", q, q))[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(den == 0, 0.0, dots / np.where(den == 0, 1.0, den))
        return np.where(cs.valid, out, np.nan)
    return cs.memo(("cosine_qd_true",), build)


__all__ = ["PAIR_BLOCK", "ROOT_BLOCK_BYTES", "snippet_tokens", "pair_slabs", "jaccard_slabs", "jaccard_matrix",
           "cosine_slabs", "cosine_matrix", "query_cosine"]
