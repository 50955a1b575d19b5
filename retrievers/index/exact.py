"""Exact vector search: the k best visible documents by cosine, the same bits in every process and on every machine.

The default vector backend (``IndexSettings.backend = "exact"``). For a batch of query rows of one group:

1. **Shortlist** — float32 BLAS products ``S = Q @ U.T`` of blocks of query rows against the group's unit
   vectors ``U`` (at most :data:`MAX_BLOCK` rows and :data:`BLOCK_CELLS` cells a product: the prefix path cuts ``U``
   into tiles of 131 k units for 256 rows, the gathered path takes fewer rows, 32 at 1 M units). A BLAS product's
   rounding may depend on the block shape, the thread count and the CPU's kernels, so ``S`` only *selects*: per
   row, over its visible units, ``t`` = the ``depth``-th best document score in float32 (MaxP: a document's best
   unit), and every visible unit with ``S ≥ t − EPS`` is kept.
2. **Final score** — each kept unit is scored again as ``Σ_j float64(q_j) · float64(u_j)``: each product of two
   float32 values is exact in float64 and the sum runs in numpy's fixed pairwise order over the 384 terms, so the
   score does not depend on the batch, the threads or the BLAS library. Documents are ranked by that score
   (MaxP: best unit), ties by document index (:func:`maxp`).

Why the shortlist is exact: a float32 dot product of unit vectors of dimension ``d`` is within ``d · 2⁻²⁴ ≈ 2.3e-5``
of the float64 value for ``d = 384`` (a worst-case bound; typical errors are ~1e-7), below :data:`EPS` = 1e-4. A
document in the true top ``depth`` scores at least the true ``depth``-th score, which is at least ``t`` minus the
error, so its best unit passes ``S ≥ t − EPS``; a document whose best unit was not kept scores below every kept
top-``depth`` document, so a partial MaxP over the shortlist cannot lift it into the result.

Two forms of the visible set. :func:`search` takes, per row, the positions of its visible units (any set: scoped
notes, revised versions). :func:`search_prefix` takes the group's units in *visibility order* (undated documents
first, then by creation time: :meth:`retrievers.index.visibility.VisibleSets.order`), where the set an as-of cut
leaves visible is a prefix: row ``i`` sees ``vectors[:limits[i]]``. Rows are sorted by their prefix, so a block's
product covers only the longest prefix of its rows, and a row reads its scores as a slice — no gather, no mask, and
no O(N) Python work per query. The ``depth``-th best score comes from :func:`kth_largest` (block maxima bound it
from below, then a partition of the few scores above the bound: the same value as a full partition, in a fraction
of its time). Both give the same documents and the same bits (the final score and its ranking do not depend on the
shortlist, only on the visible set).

Cost: the products stream the visible vectors once per block of rows (1 M × 384 float32 = 1.5 GB; 256 rows share
each pass on the prefix path — with 32 rows the pass, not the arithmetic, bounded it: 16.1 → 11.5 CPU ms a query
over 1 M random units, half visible on average); the per-row work is numpy over the visible units (a slice or a
column gather, a block maximum, a compare) — no Python per unit. Documented size: one group up to ~2 M units of
384-d fits a 4 GB peak (vectors 3 GB + a 256 MB block); beyond that use ``--backend hnsw``.

Example::

    >>> import numpy as np
    >>> U = np.eye(3, dtype=np.float32); q = np.array([[0.6, 0.8, 0.0]], dtype=np.float32)
    >>> docs, scores = search(q, U, np.arange(3), [None], [2])[0]
    >>> docs.tolist(), scores.round(6).tolist()
    ([1, 0], [0.8, 0.6])
"""
from __future__ import annotations

import numpy as np

EPS = 1e-4  # shortlist margin (> the float32 error bound of a 384-d cosine, see the module docstring)
CHUNK = 256  # scores per block maximum in kth_largest
MAX_BLOCK = 256  # query rows per BLAS product
BLOCK_CELLS = 1 << 25  # rows × units per product (128 MB of float32)


def block_rows(n_units: int) -> int:
    """Query rows per BLAS product for a group of ``n_units`` vectors (depends on the group only)."""
    return int(max(1, min(MAX_BLOCK, BLOCK_CELLS // max(1, n_units))))


def exact_scores(q: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Σ_j float64(q_j)·float64(v_j) per row of ``vectors``: the deterministic final score (fixed summation order)."""
    return (vectors.astype(np.float64) * q.astype(np.float64)).sum(axis=1)


def kth_largest(s: np.ndarray, k: int) -> float:
    """The ``k``-th largest value of ``s`` (1 ≤ k ≤ len(s)), equal to ``np.partition(s, len(s) - k)[len(s) - k]``.

    The maxima of consecutive blocks of :data:`CHUNK` values bound it from below: the ``k`` largest block maxima are
    ``k`` values of ``s``, so at least ``k`` values are ≥ the ``k``-th of them, ``lb``. Every value ≥ the answer is
    then ≥ ``lb``: the answer is the ``k``-th largest of the (few) values ≥ ``lb``. Two passes over ``s`` instead of
    a partition of all of it.

    >>> float(kth_largest(np.arange(10_000, dtype=np.float32)[::-1].copy(), 3))
    9997.0
    """
    m = len(s)
    nc = m // CHUNK
    if nc >= 4 * k:
        cm = s[:nc * CHUNK].reshape(nc, CHUNK).max(axis=1)
        lb = np.partition(cm, nc - k)[nc - k]
        s = s[s >= lb]
        m = len(s)
    return np.partition(s, m - k)[m - k]


def search_prefix(qemb: np.ndarray, vectors: np.ndarray, unit_doc: np.ndarray, limits, depths,
                  starts: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query row: (doc indices, cosine scores) of its best ``depths[i]`` documents among ``vectors[:limits[i]]``.

    ``vectors`` (U, d): the group's unit vectors in visibility order (a document's units adjacent), ``unit_doc`` (U,)
    their documents; ``limits[i]``: how many of them row ``i`` sees (a document boundary). ``starts``: the position
    of each document's first unit (ascending), for MaxP; None = one unit per document. Same result, same bits, as
    :func:`search` over the same visible units.

    Rows go in blocks of :data:`MAX_BLOCK` (sorted by prefix), the units in tiles of ``BLOCK_CELLS // rows``
    (cut at document starts): a block's product is one tile at a time, so 256 rows share each pass over the
    vectors at any store size (32 did at 1 M units when the product spanned the whole prefix: the pass, not the
    arithmetic, bounded it). Per row, each tile's ``depth``-th best document score raises a lower bound ``lb`` on
    the row's threshold ``t``; a tile keeps only its units with ``S ≥ lb − EPS`` (a superset of the final shortlist,
    as ``lb ≤ t``), and ``t`` itself is the ``depth``-th best document score over the kept units (every document
    of the true top ``depth`` keeps its best unit) — the shortlist of :func:`search`, tile by tile.

    >>> U = np.eye(3, dtype=np.float32); q = np.array([[0.6, 0.8, 0.0]] * 2, dtype=np.float32)
    >>> [d.tolist() for d, _ in search_prefix(q, U, np.array([2, 0, 1]), [3, 1], [2, 2])]
    [[0, 2], [2]]
    """
    limits = np.asarray(limits, dtype=np.int64).reshape(-1)
    out: list = [None] * len(qemb)
    order = np.argsort(limits, kind="stable")
    step = min(MAX_BLOCK, max(1, len(order)))
    for b0 in range(0, len(order), step):
        rows = order[b0:b0 + step]
        lims = limits[rows]
        top = int(lims[-1])
        kept: list[list] = [[] for _ in rows]
        lb = np.full(len(rows), -np.inf)
        for c0, c1 in _tiles(top, starts, max(CHUNK, BLOCK_CELLS // len(rows))):
            first = int(np.searchsorted(lims, c0, side="right"))  # rows that see part of this tile
            prod = qemb[rows[first:]] @ vectors[c0:c1].T
            for r in range(first, len(rows)):
                s = prod[r - first, :min(int(lims[r]), c1) - c0]
                depth = int(depths[rows[r]])
                if starts is None:
                    docmax = s
                else:
                    at = starts[np.searchsorted(starts, c0):np.searchsorted(starts, c0 + len(s))] - c0
                    docmax = np.maximum.reduceat(s, at)
                if 0 < depth < len(docmax):
                    lb[r] = max(lb[r], float(kth_largest(docmax, depth)))
                keep = np.flatnonzero(s >= lb[r] - EPS)
                kept[r].append((keep + c0, s[keep]))
        for r, i in enumerate(rows.tolist()):
            out[i] = _top_prefix(qemb[i], vectors, unit_doc, kept[r], starts, int(lims[r]), int(depths[i]))
    return out


def _tiles(top: int, starts: np.ndarray | None, width: int) -> list[tuple[int, int]]:
    """``[0, top)`` in consecutive tiles of about ``width`` units, each cut at a document start (MaxP: a document's
    units never straddle two tiles)."""
    cuts = np.arange(0, top, width, dtype=np.int64)
    if starts is not None:
        cuts = np.unique(starts[np.minimum(np.searchsorted(starts, cuts), len(starts) - 1)])
        cuts = cuts[cuts < top]
    bounds = cuts.tolist() + [top]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _top_prefix(q, vectors, unit_doc, kept, starts, lim, depth):
    if lim == 0 or depth <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    n_docs = lim if starts is None else int(np.searchsorted(starts, lim))
    if depth < n_docs:
        units = np.concatenate([u for u, _ in kept])
        s = np.concatenate([v for _, v in kept])
        if starts is None:
            docmax = s
        else:  # the kept units' best per document (a document's kept units are adjacent)
            doc = np.searchsorted(starts, units, side="right")
            docmax = np.maximum.reduceat(s, np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]]))
        sel = units[s >= kth_largest(docmax, depth) - EPS]
    else:
        sel = np.arange(lim)
    return maxp(unit_doc[sel], exact_scores(q, vectors[sel]), depth)


def search(qemb: np.ndarray, vectors: np.ndarray, unit_doc: np.ndarray, cols: list, depths: list[int],
           one_per_doc: bool | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query row: (doc indices, cosine scores) of its best ``depths[i]`` documents, exactly.

    ``vectors`` (U, d): the group's unit vectors (unit norm); ``unit_doc`` (U,): the document of each unit, non-
    decreasing (a document's units are adjacent); ``cols[i]``: the positions among the U units row ``i`` may see
    (ascending), None = every one. ``one_per_doc``: every document has one unit (skips the MaxP reduction)."""
    n = len(vectors)
    if one_per_doc is None:
        one_per_doc = n == 0 or bool(np.all(np.diff(unit_doc) > 0))
    out: list = [None] * len(qemb)
    step = block_rows(n)
    for b0 in range(0, len(qemb), step):
        block = qemb[b0:b0 + step]
        prod = block @ vectors.T if n else np.zeros((len(block), 0), dtype=np.float32)
        for r in range(len(block)):
            i = b0 + r
            c = cols[i]
            s = prod[r] if c is None else prod[r, c]
            ud = unit_doc if c is None else unit_doc[c]
            out[i] = _one(qemb[i], vectors, s, ud, c, int(depths[i]), one_per_doc)
    return out


def _one(q, vectors, s, ud, c, depth, one_per_doc):
    m = len(s)
    if m == 0 or depth <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if one_per_doc:
        docmax = s
    else:
        starts = np.flatnonzero(np.r_[True, ud[1:] != ud[:-1]])
        docmax = np.maximum.reduceat(s, starts)
    if depth < len(docmax):
        t = np.partition(docmax, len(docmax) - depth)[len(docmax) - depth]
        sel = np.flatnonzero(s >= t - EPS)
    else:
        sel = np.arange(m)
    units = sel if c is None else np.asarray(c)[sel]
    return maxp(ud[sel], exact_scores(q, vectors[units]), depth)


def maxp(unit_doc: np.ndarray, sims: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Best unit per document, documents sorted by score desc (ties: document index asc), top ``depth``."""
    if unit_doc.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    order = np.lexsort((unit_doc, -sims))
    d = unit_doc[order]
    _, first = np.unique(d, return_index=True)
    first.sort()
    docs, scores = d[first], sims[order][first]
    o = np.lexsort((docs, -scores))[:depth]
    return docs[o], scores[o]


__all__ = ["EPS", "block_rows", "exact_scores", "kth_largest", "maxp", "search", "search_prefix"]
