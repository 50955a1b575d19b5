"""Diversity stages: reorder (or shorten) a ranked list so near-duplicates do not crowd the top. Scores are
never changed, so after these stages a list is not necessarily sorted by score.

Greedy algorithms loop over *steps* (one pick per step) and are vectorised over queries. Everything that depends
only on the candidate set — snippet token sets, pairwise Jaccard, pairwise / query cosines — is memoised on it.

Stages: ``diversity.openclaw_mmr`` (OpenClaw §A.7), ``diversity.hookclaw_mmr`` (HookClaw §C.1 step 7),
``diversity.cosine_defer`` (lancedb-pro ``applyMMRDiversity``), ``diversity.mmr`` (classic embedding MMR).
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.normalize import minmax
from retrievers.stages.query import utf16_truncate

_ASCII_WORD = re.compile(r"[a-z0-9_]+")


def snippet_tokens(text: str, snippet_chars: int = 700) -> frozenset[str]:
    """Token set of a snippet: the text cut to ``snippet_chars`` UTF-16 units (0 = whole text), lower-cased,
    ASCII ``[a-z0-9_]+`` runs (OpenClaw's MMR tokens; HookClaw's ``\\b\\w+\\b`` without the u flag is the same
    set). CJK, Cyrillic and accented letters are dropped (``café`` → ``caf``)."""
    return frozenset(_ASCII_WORD.findall(utf16_truncate(text, snippet_chars).lower()))


def _unique_docs(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique corpus indices of the set, local index (Q, C) into them; 0 on padding)."""
    docs = np.unique(cs.doc[cs.valid])
    local = np.searchsorted(docs, np.where(cs.valid, cs.doc, docs[0] if len(docs) else 0))
    return docs, np.where(cs.valid, local, 0)


def _pairwise_from_gram(cs: CandidateSet, local: np.ndarray, gram_fn, n_docs: int, block: int = 4096):
    """(Q, C, C) values of a per-document Gram matrix: gathered from the full (U, U) matrix when U is small,
    else computed per query."""
    Q, C = cs.Q, cs.C
    if n_docs <= block:
        G = gram_fn(np.arange(n_docs))
        return G[local[:, :, None], local[:, None, :]]
    out = np.empty((Q, C, C))
    for q in range(Q):
        out[q] = gram_fn(local[q])
    return out


def jaccard_matrix(cs: CandidateSet, snippet_chars: int = 700) -> np.ndarray:
    """Pairwise Jaccard of snippet token sets (Q, C, C); both empty → 1, one empty → 0; NaN on padding."""
    def build():
        from scipy import sparse
        docs, local = _unique_docs(cs)
        texts = cs.corpus.raw_texts
        cache: dict = cs.corpus.cached(("snippet_tokens", snippet_chars), dict)
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

        if len(docs) == 0:
            return np.full((cs.Q, cs.C, cs.C), np.nan)
        J = _pairwise_from_gram(cs, local, gram, len(docs))
        m = cs.valid[:, :, None] & cs.valid[:, None, :]
        return np.where(m, J, np.nan)
    return cs.memo(("jaccard", "ascii_word", snippet_chars), build)


def _doc_vectors(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    emb = cs.corpus.embeddings
    if emb is None:
        raise RuntimeError("this stage needs document embeddings (the index / candidate file did not provide them)")
    docs, local = _unique_docs(cs)
    E = np.asarray(emb[docs], dtype=np.float64)
    return docs, local, E


def cosine_matrix(cs: CandidateSet) -> np.ndarray:
    """Pairwise cosine between the columns of each query (Q, C, C): ``dot/(‖a‖·‖b‖)``, zero norm → 0, a missing
    (NaN) vector → NaN (never "similar"). Vectors need not be unit-norm."""
    def build():
        docs, local, E = _doc_vectors(cs)
        if len(docs) == 0:
            return np.full((cs.Q, cs.C, cs.C), np.nan)
        norms = np.sqrt(np.einsum("ud,ud->u", E, E))

        def gram(idx):
            e, n = E[idx], norms[idx]
            dots = e @ e.T
            den = n[:, None] * n[None, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(den == 0, 0.0, dots / np.where(den == 0, 1.0, den))

        S = _pairwise_from_gram(cs, local, gram, len(docs))
        m = cs.valid[:, :, None] & cs.valid[:, None, :]
        return np.where(m, S, np.nan)
    return cs.memo(("cosine_dd_true",), build)


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


def _state_pairs(st: State, M: np.ndarray) -> np.ndarray:
    """(Q, K, K) values of a (Q, C, C) candidate-set matrix for the current rows."""
    col = np.where(st.valid, st.col, 0)
    rows = np.arange(st.col.shape[0])[:, None, None]
    return M[rows, col[:, :, None], col[:, None, :]]


def greedy_select(valid: np.ndarray, rel: np.ndarray, raw: np.ndarray, sim: np.ndarray, lam: float, *,
                  raw_tiebreak: bool, first_fixed: bool = False, max_select: int | None = None) -> np.ndarray:
    """Greedy MMR over queries at once: each step picks, per query, the candidate maximising
    ``lam·rel − (1 − lam)·max_{j∈selected} sim(·, j)`` (0 while nothing is selected). Ties: higher ``raw``
    (if ``raw_tiebreak``), then the earliest position. ``first_fixed``: position 0 is picked first.
    Returns a permutation (Q, K): picks in order, then unpicked rows in their order, then empty slots."""
    Q, K = valid.shape
    selected = np.zeros((Q, K), dtype=bool)
    maxsim = np.full((Q, K), -np.inf)
    pick_step = np.full((Q, K), np.inf)
    qs = np.arange(Q)
    rel = np.where(np.isnan(rel), -np.inf, rel)
    raw = np.where(np.isnan(raw), -np.inf, raw)
    sim = np.where(np.isnan(sim), 0.0, sim)
    steps = K if max_select is None else min(K, max_select)
    for step in range(steps):
        cand = valid & ~selected
        active = cand.any(axis=1)
        if not active.any():
            break
        if step == 0 and first_fixed:
            pick = np.argmax(cand, axis=1)
        else:
            penalty = np.where(np.isneginf(maxsim), 0.0, maxsim)
            with np.errstate(invalid="ignore"):
                mmr = lam * rel - (1.0 - lam) * penalty
            mmr = np.where(cand & ~np.isnan(mmr), mmr, -np.inf)
            tie = cand & (mmr == mmr.max(axis=1, keepdims=True))
            if raw_tiebreak:
                r = np.where(tie, raw, -np.inf)
                tie &= r == r.max(axis=1, keepdims=True)
            pick = np.argmax(tie, axis=1)
        qa, pa = qs[active], pick[active]
        selected[qa, pa] = True
        pick_step[qa, pa] = step
        maxsim[qa] = np.fmax(maxsim[qa], sim[qa, pa, :])
    pos = np.broadcast_to(np.arange(K, dtype=np.float64), (Q, K))
    key = np.where(selected, pick_step, np.where(valid, K + pos, 2 * K + pos))
    return np.argsort(key, axis=1, kind="stable")


@register
class OpenClawMMR(Stage):
    """OpenClaw MMR (§A.7), applied to the whole sorted list *before* the minScore filter; scores unchanged.

    Relevance = min-max of the score over all items (max == min → 1); similarity = Jaccard of snippet token
    sets (snippet = text cut to 700 UTF-16 units, lower-cased ASCII ``[a-z0-9_]+``; both empty → 1, one empty →
    0). Greedy: pick argmax ``λ·rel − (1 − λ)·max Jaccard(item, selected)``; ties → higher raw score → earlier
    position. The whole list is returned reordered; λ = 1 → plain stable sort by score; ≤ 1 item → unchanged.
    Defaults λ 0.7; ``enabled = false`` (OpenClaw's default) is a no-op.
    """

    name = "diversity.openclaw_mmr"
    kind = "diversity"
    enabled: bool = param(True)
    lam: float = param(0.7, ge=0.0, le=1.0, doc="λ: relevance weight (OpenClaw clamps its config to [0, 1])")
    snippet_chars: int = param(700, ge=0, doc="UTF-16 units of text used for tokens (0 = whole text)")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if not self.enabled or st.col.shape[1] <= 1:
            return st
        if self.lam == 1.0:
            return st.sort()
        raw = np.where(st.valid, st.score, np.nan)
        rel = minmax(raw)
        sim = _state_pairs(st, jaccard_matrix(cs, self.snippet_chars))
        perm = greedy_select(st.valid, rel, raw, sim, self.lam, raw_tiebreak=True)
        return st.permute(perm)


@register
class HookClawMMR(Stage):
    """HookClaw MMR (§C.1 step 7) on *raw* scores: the first item is always selected, then repeatedly the
    candidate maximising ``λ·score − (1 − λ)·max Jaccard(candidate, selected)`` (tokens: lower-cased ASCII
    ``\\b\\w+\\b`` of the snippet; both empty → 1), ties → earliest; stops after ``k`` (maxResults) picks and
    returns only the picks. ≤ 1 item → as is. Defaults λ 0.7, k 3, snippet 700 (HookClaw's items are OpenClaw
    snippets). Scores unchanged.
    """

    name = "diversity.hookclaw_mmr"
    kind = "diversity"
    lam: float = param(0.7, ge=0.0, le=1.0)
    k: int = param(3, ge=1, doc="maxResults: stop after this many picks")
    snippet_chars: int = param(700, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        raw = np.where(st.valid, st.score, np.nan)
        sim = _state_pairs(st, jaccard_matrix(cs, self.snippet_chars))
        perm = greedy_select(st.valid, raw, raw, sim, self.lam, raw_tiebreak=False, first_fixed=True,
                             max_select=self.k)
        return st.permute(perm).head(self.k)


@register
class CosineDefer(Stage):
    """lancedb-pro ``applyMMRDiversity``: walk the list in order; an item whose cosine with *any already selected*
    item is ``> threshold`` is deferred (compared only with selected items, never with deferred ones). Output =
    selected (in order) + deferred (in order); scores unchanged, so the list may no longer be score-sorted.
    A missing/empty vector is never "too similar". Default threshold 0.85 (lancedb-pro @6a50220 step 12).
    """

    name = "diversity.cosine_defer"
    kind = "diversity"
    threshold: float = param(0.85, ge=-1.0, le=1.0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, K = st.col.shape
        if K <= 1:
            return st
        S = _state_pairs(st, cosine_matrix(cs))
        with np.errstate(invalid="ignore"):
            close = S > self.threshold  # NaN (missing vector) → False
        valid = st.valid
        selected = np.zeros((Q, K), dtype=bool)
        selected[:, 0] = valid[:, 0]
        for i in range(1, K):
            too = (selected[:, :i] & close[:, i, :i]).any(axis=1)
            selected[:, i] = valid[:, i] & ~too
        pos = np.broadcast_to(np.arange(K), (Q, K))
        key = np.where(selected, pos, np.where(valid, K + pos, 2 * K + pos))
        return st.permute(np.argsort(key, axis=1, kind="stable"))


@register
class MMR(Stage):
    """Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998) on embeddings: greedily pick
    ``argmax λ·rel(d) − (1 − λ)·max_{s∈S} cos(d, s)``; ``relevance = "query_cosine"`` (cos(query, doc), the
    classic form) or ``"score"`` (min-max of the running score). Ties → earliest position. ``k > 0`` keeps only
    the first k picks (Haystack ``top_k``, LangChain ``k``); ``k = 0`` reorders the whole list. Defaults λ 0.5,
    k 0. Not used by a seed system (a baseline / tuning knob). Scores unchanged.
    """

    name = "diversity.mmr"
    kind = "diversity"
    lam: float = param(0.5, ge=0.0, le=1.0)
    k: int = param(0, ge=0)
    relevance: str = param("query_cosine", choices=("query_cosine", "score"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        raw = np.where(st.valid, st.score, np.nan)
        rel = st.gather(query_cosine(cs)) if self.relevance == "query_cosine" else minmax(raw)
        sim = _state_pairs(st, cosine_matrix(cs))
        perm = greedy_select(st.valid, rel, raw, sim, self.lam, raw_tiebreak=False,
                             max_select=self.k or None)
        out = st.permute(perm)
        return out.head(self.k) if self.k else out


__all__ = ["OpenClawMMR", "HookClawMMR", "CosineDefer", "MMR", "greedy_select", "jaccard_matrix",
           "cosine_matrix", "query_cosine", "snippet_tokens"]
