"""The candidate table a batch of queries carries through the stages.

Two objects:

* :class:`CandidateSet` — shared and immutable for a batch of Q queries: the union of every arm's hits
  (``doc[q, c]`` = corpus index, ``-1`` = padding), each arm's score and 1-based rank per column
  (``NaN`` / 0 when the arm did not return that document), the queries' ``as_of`` times and embeddings.
  It is computed once per (dataset, queries, arm specs) and reused by every preset and every config of a
  sweep. Derived per-column features (timestamps, token sets, pairwise similarities) are memoised on it.
* :class:`State` — what one pipeline run rewrites: ``col[q, k]`` (a column of the candidate set, ``-1`` =
  empty slot) in the current order, the running ``score[q, k]``, a per-query ``skipped`` flag (a gate
  fired), and optional extra per-row columns that travel with the rows.

Everything is vectorised over queries: a latency run is simply a batch of one.
Order conventions: "sort" is always a *stable* sort by score descending (JavaScript's ``Array.sort`` is
stable and every seed system relies on that), empty slots last.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from retrievers.index.corpus import Corpus
from retrievers.kernels.registry import jit_kernel, kernel_example
from retrievers.types import Query


#: bytes of gathered document vectors :meth:`CandidateSet.qd_cosine` holds at once (a block of queries)
_GATHER_BYTES = 64 << 20


@dataclass
class ArmHits:
    """One arm's result for every query, aligned to the candidate-set columns."""

    score: np.ndarray  # (Q, C) float64, NaN = not returned by this arm
    rank: np.ndarray  # (Q, C) int32, 1-based, 0 = not returned

    def present(self, depth: int | None = None) -> np.ndarray:
        if depth is None:
            return self.rank > 0
        return (self.rank > 0) & (self.rank <= depth)


class CandidateSet:
    """``root`` / ``root_col``: a :func:`view` remembers the shared set it was cut from and, per column, the
    column of that set (``-1`` on padding), so per-document work (token sets, pairwise similarities) is built
    once on the root and shared by every view; a set that is not a view is its own root."""

    def __init__(self, corpus: Corpus, queries: list[Query], doc: np.ndarray, arms: dict[str, ArmHits],
                 qemb: np.ndarray | None = None, meta: dict[str, Any] | None = None,
                 root: "CandidateSet | None" = None, root_col: np.ndarray | None = None):
        self.corpus = corpus
        self.queries = queries
        self.doc = doc
        self.arms = arms
        self._qemb = qemb  # an array, None, or a function computing it on first use (a BM25-only run embeds nothing)
        self.meta = meta or {}
        self.Q, self.C = doc.shape
        self.valid = doc >= 0
        self.as_of = np.array([q.as_of if q.as_of is not None else np.nan for q in queries], dtype=np.float64)
        self._memo: dict[Any, Any] = {}
        self.root = self if root is None else root
        self._root_col = root_col

    @property
    def qemb(self) -> np.ndarray | None:
        """(Q, dim) query embeddings (unit norm) or None; computed on first use when the set was built lazily."""
        if callable(self._qemb):
            self._qemb = self._qemb()
        return self._qemb

    @qemb.setter
    def qemb(self, value) -> None:
        self._qemb = value

    def __getstate__(self) -> dict:
        """Pickled with the query embeddings resolved (a function computing them holds the index and its model)."""
        _ = self.qemb
        return dict(self.__dict__)

    def qemb_source(self):
        """The query embeddings as they are now: the array, None, or a function a view calls when it needs them
        (so cutting a view does not embed the queries)."""
        return (lambda: self.qemb) if callable(self._qemb) else self._qemb

    @property
    def root_col(self) -> np.ndarray:
        """(Q, C) column of the root set behind each column (-1 on padding)."""
        if self._root_col is None:
            self._root_col = np.where(self.valid, np.arange(self.C, dtype=np.int64)[None, :], -1)
        return self._root_col

    # ---- memoised derived data -------------------------------------------------------------------
    def memo(self, key, fn: Callable[[], Any]):
        """Cache anything that depends only on the candidate set (not on a config): shared by a sweep."""
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def memo_lru(self, group: str, key, fn: Callable[[], Any], size: int = 16):
        """Like :meth:`memo` for values that also depend on a parameter (e.g. a threshold): at most ``size``
        entries per ``group`` are kept (least recently used dropped), so a sweep over many values stays bounded."""
        lru = self._memo.get(("lru", group))
        if lru is None:
            lru = self._memo[("lru", group)] = OrderedDict()
        if key in lru:
            lru.move_to_end(key)
            return lru[key]
        val = lru[key] = fn()
        while len(lru) > size:
            lru.popitem(last=False)
        return val

    def doc_feature(self, name: str, values: np.ndarray | None = None, fill=np.nan) -> np.ndarray:
        """Gather a per-document array (corpus attribute ``name`` or given ``values``) to (Q, C)."""
        def build():
            arr = getattr(self.corpus, name) if values is None else values
            out = np.asarray(arr)[np.where(self.valid, self.doc, 0)]
            if out.dtype.kind == "f":
                out = np.where(self.valid, out, fill)
            return out
        return self.memo(("feature", name), build)

    def arm(self, name: str) -> ArmHits:
        try:
            return self.arms[name]
        except KeyError:
            raise KeyError(f"candidate set has no arm {name!r} (has: {', '.join(self.arms)})") from None

    def qd_cosine(self) -> np.ndarray:
        """Cosine(query, doc) for every column (Q, C); needs query and document embeddings.

        Computed in blocks of queries (each block's gathered (rows, C, dim) float64 vectors at most
        ``_GATHER_BYTES``): every value is a reduction within its own query row, so the numbers are those of one
        pass over all queries, without its (Q, C, dim) temporaries (LoCoMo's 1,982 queries × ~180 columns × 384:
        three of ~1.1 GB each)."""
        def build():
            emb = self.corpus.embeddings
            if emb is None or self.qemb is None:
                raise RuntimeError("cosine needs query and document embeddings (the index did not provide them)")
            cols = np.where(self.valid, self.doc, 0)
            q = self.qemb.astype(np.float64)
            out = np.empty((self.Q, self.C), dtype=np.float64)
            step = max(1, _GATHER_BYTES // max(1, self.C * emb.shape[1] * 8))
            for a in range(0, self.Q, step):
                d = emb[cols[a:a + step]].astype(np.float64)  # (rows, C, dim)
                qa = q[a:a + step]
                dot = np.einsum("qcd,qd->qc", d, qa)
                norms = np.linalg.norm(d, axis=2) * np.linalg.norm(qa, axis=1)[:, None]
                with np.errstate(invalid="ignore", divide="ignore"):
                    # true cosine; zero norm → 0
                    out[a:a + step] = np.where(norms > 0, dot / np.where(norms > 0, norms, 1), 0.0)
            return np.where(self.valid, out, np.nan)
        return self.memo("qd_cosine", build)

    def dd_cosine(self) -> np.ndarray:
        """Pairwise cosine between the columns of each query (Q, C, C)."""
        def build():
            emb = self.corpus.embeddings
            if emb is None:
                raise RuntimeError("pairwise cosine needs document embeddings")
            d = emb[np.where(self.valid, self.doc, 0)].astype(np.float32)
            n = np.linalg.norm(d, axis=2, keepdims=True)
            d = np.where(n > 0, d / np.where(n > 0, n, 1), 0)  # true cosine for non-unit input vectors
            out = np.einsum("qcd,qed->qce", d, d).astype(np.float64)
            m = self.valid[:, :, None] & self.valid[:, None, :]
            return np.where(m, out, np.nan)
        return self.memo("dd_cosine", build)

    def ids(self, q: int, cols: np.ndarray) -> list[str]:
        ids = self.corpus.ids
        return [ids[self.doc[q, c]] for c in cols if c >= 0]


_LOW63 = np.int64(0x7FFFFFFFFFFFFFFF)


@lru_cache(maxsize=64)
def _row_offsets(Q: int, width: int) -> np.ndarray:
    out = (np.arange(Q, dtype=np.int64) * width)[:, None]
    out.setflags(write=False)
    return out


def flat_index(idx: np.ndarray, width: int) -> np.ndarray:
    """Indices ``idx`` (Q, K) into the columns of (Q, ``width``) arrays, as indices into their flattened form."""
    return idx + _row_offsets(idx.shape[0], width)


def take_rows(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``np.take_along_axis(a, idx, axis=1)`` for a 2-D ``a`` and indices ``0 <= idx < a.shape[1]``, as one flat
    ``np.take`` (several times faster on a (2,000 × 200) table: no broadcast index arrays)."""
    if a.ndim != 2 or a.shape[0] != idx.shape[0]:
        return np.take_along_axis(a, idx, axis=1)
    return np.take(a, flat_index(idx, a.shape[1]))


#: widest row :func:`desc_perm` sorts by insertion (measured: LongMemEval-S's 468 × 58 hybrid rows, 0.27 vs 0.53
#: ms for numpy's stable argsort; random keys break even near 96 columns, and insertion is quadratic beyond)
INSERTION_MAX_WIDTH = 64
_I64_MAX = np.iinfo(np.int64).max


@kernel_example(lambda: (np.array([[0.5, np.nan, -np.inf, 0.5, -0.0, 0.0, 1.0]]),
                         np.array([[True, True, True, False, True, True, True]])))
def insertion_desc_perm(key, valid):  # pragma: no cover - jitted
    """:func:`desc_perm` for float64 ``key``, one row at a time: each entry's sort image (the order-preserving
    int64 image of −key, NaN as −inf, −0.0 as 0.0; empty slots the largest int64) is inserted into the sorted
    prefix after every image it does not undercut, so equal keys keep their order. Rows hold a few dozen
    entries, already close to their order (first seen, by the arms' ranks), where this costs half of a stable
    argsort plus its masks."""
    Q, K = key.shape
    out = np.empty((Q, K), dtype=np.int64)
    img = np.empty(K, dtype=np.int64)
    for q in range(Q):
        for k in range(K):
            if valid[q, k]:
                x = key[q, k]
                neg = np.inf if np.isnan(x) else 0.0 - x  # 0.0 − x: −0.0 and 0.0 both give 0.0
                b = np.float64(neg).view(np.int64)
                if b < 0:
                    b = b ^ _LOW63
            else:
                b = _I64_MAX
            j = k
            while j > 0 and img[j - 1] > b:
                img[j] = img[j - 1]
                out[q, j] = out[q, j - 1]
                j -= 1
            img[j] = b
            out[q, j] = k
    return out


def desc_perm(key: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Permutation (Q, K) of a stable sort of every row by ``key`` descending: rows where ``valid`` holds first
    (also those at −inf), NaN counted as −inf, ties (0.0 and −0.0 included) in their current order.

    Rows of at most :data:`INSERTION_MAX_WIDTH` float64 keys go to :func:`insertion_desc_perm` (numba). Wider
    ones: one stable argsort of ``−key`` (empty slots +inf); only when a valid row sits at −inf (it would tie
    with the empty slots) is the key mapped to its order-preserving int64 image, so empty slots can rank above
    every float. Both give the same permutation (tests/unit/retrievers/stages/test_kernels.py)."""
    valid = np.asarray(valid, dtype=np.bool_)
    if (key.ndim == 2 and key.shape[1] <= INSERTION_MAX_WIDTH and key.dtype == np.float64 and key.size
            and valid.shape == key.shape):
        return jit_kernel(insertion_desc_perm)(key, valid)
    return argsort_desc_perm(key, valid)


def argsort_desc_perm(key: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """:func:`desc_perm` by numpy's stable argsort, at any width."""
    neg = np.where(valid, -key, np.inf)
    nan = np.isnan(neg)
    if nan.any():
        neg = np.where(nan, np.inf, neg)
    if not (valid & (neg == np.inf)).any():
        return np.argsort(neg, axis=1, kind="stable")
    b = (neg + 0.0).view(np.int64)  # + 0.0: −0.0 → 0.0 (they compare equal as floats)
    b = b ^ ((b >> 63) & _LOW63)  # IEEE bits → signed integers in the floats' order
    return np.argsort(np.where(valid, b, np.iinfo(np.int64).max), axis=1, kind="stable")


@dataclass
class State:
    col: np.ndarray  # (Q, K) int64 column into the candidate set, -1 = empty
    score: np.ndarray  # (Q, K) float64
    skipped: np.ndarray  # (Q,) bool: a gate decided not to retrieve
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # (Q, K) columns that move with the rows
    info: dict[str, Any] = field(default_factory=dict)  # per-query stage outputs, e.g. budget accounting
    trace: list | None = None

    @property
    def valid(self) -> np.ndarray:
        return self.col >= 0

    @staticmethod
    def empty(Q: int) -> "State":
        return State(np.full((Q, 0), -1, dtype=np.int64), np.zeros((Q, 0)), np.zeros(Q, dtype=bool))

    def gather(self, values: np.ndarray, fill=np.nan) -> np.ndarray:
        """Values of a (Q, C) candidate-set array for the current rows (``fill`` on empty slots)."""
        safe = np.where(self.col >= 0, self.col, 0)
        out = take_rows(values, safe)
        if np.ndim(fill) == 0 and (out.dtype.kind in "fc" or not (isinstance(fill, float) and np.isnan(fill))):
            out = np.where(self.col >= 0, out, fill)
        return out

    def permute(self, perm: np.ndarray) -> "State":
        """Reorder rows per query by ``perm`` (Q, K)."""
        flat = flat_index(perm, perm.shape[1])

        def take(a):
            return np.take(a, flat) if a.shape == perm.shape else np.take_along_axis(a, perm, axis=1)
        return State(take(self.col), take(self.score), self.skipped,
                     {k: take(v) for k, v in self.extra.items()}, self.info, self.trace)

    def with_score(self, score: np.ndarray) -> "State":
        return State(self.col, np.where(self.col >= 0, score, -np.inf), self.skipped, self.extra, self.info,
                     self.trace)

    def sort(self, key: np.ndarray | None = None) -> "State":
        """Stable sort by ``key`` (default: score) descending, NaN as −inf; empty slots last (after real rows
        at −inf); ties keep the current order (:func:`desc_perm`)."""
        return self.permute(desc_perm(self.score if key is None else key, self.col >= 0))

    def keep(self, mask: np.ndarray) -> "State":
        """Drop rows where ``mask`` is False, keeping the order of the rest (compacted to the left)."""
        mask = mask & (self.col >= 0)
        perm = np.argsort(~mask, axis=1, kind="stable")
        st = self.permute(perm)
        m = take_rows(mask, perm)
        width = int(m.sum(axis=1).max()) if m.size else 0
        col = np.where(m, st.col, -1)[:, :width]
        score = np.where(m, st.score, -np.inf)[:, :width]
        extra = {k: v[:, :width] for k, v in st.extra.items()}
        return State(col, score, self.skipped, extra, self.info, self.trace)

    def head(self, k: int) -> "State":
        """The first ``k`` rows per query."""
        k = max(0, int(k))
        return State(self.col[:, :k], self.score[:, :k], self.skipped,
                     {n: v[:, :k] for n, v in self.extra.items()}, self.info, self.trace)

    def skip(self, mask: np.ndarray) -> "State":
        """Mark queries as skipped (their lists become empty)."""
        mask = np.asarray(mask, dtype=bool)
        col = np.where(mask[:, None], -1, self.col)
        st = State(col, np.where(mask[:, None], -np.inf, self.score), self.skipped | mask, self.extra, self.info,
                   self.trace)
        return st.keep(col >= 0)

    def rows(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        m = self.col[q] >= 0
        return self.col[q][m], self.score[q][m]


def view(cs: CandidateSet, arm_map: dict[str, tuple[str, int]]) -> CandidateSet:
    """A candidate set for one pipeline: arms renamed (``{preset arm name: (shared arm key, depth)}``) and
    truncated to their depth, columns restricted to documents some mapped arm returned (first-seen order over
    the arms in ``arm_map`` order, then rank). Memoised on the shared set, so a sweep builds it once. The view's
    ``root`` / ``root_col`` point back to the shared set's root."""
    key = ("view", tuple(sorted((k, v) for k, v in arm_map.items())))

    def build():
        Q = cs.Q
        arms_src = {}
        present = np.zeros((Q, cs.C), dtype=bool)
        for name, (src, depth) in arm_map.items():
            h = cs.arm(src)
            p = h.present(depth)
            arms_src[name] = (h, p)
            present |= p
        # column order: first-seen over arms (in arm_map order), by rank within an arm
        order_key = np.full((Q, cs.C), np.inf)
        off = 0
        for name, (h, p) in arms_src.items():
            order_key = np.where(p & np.isinf(order_key), off + h.rank, order_key)
            off += cs.C + 1
        perm = np.argsort(order_key, axis=1, kind="stable")
        n = int(present.sum(axis=1).max()) if present.size else 0
        perm = perm[:, :n]
        ok = np.take_along_axis(present, perm, axis=1)
        doc = np.where(ok, np.take_along_axis(cs.doc, perm, axis=1), -1)
        arms = {}
        for name, (h, p) in arms_src.items():
            pp = np.take_along_axis(p, perm, axis=1) & ok
            arms[name] = ArmHits(np.where(pp, np.take_along_axis(h.score, perm, axis=1), np.nan),
                                 np.where(pp, np.take_along_axis(h.rank, perm, axis=1), 0).astype(np.int32))
        root_col = np.where(ok, np.take_along_axis(cs.root_col, perm, axis=1), -1)
        return CandidateSet(cs.corpus, cs.queries, doc, arms, qemb=cs.qemb_source(), meta=dict(cs.meta), root=cs.root,
                            root_col=root_col)
    return cs.memo(key, build)
