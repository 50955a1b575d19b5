"""Multi-signal fusion and scoring for HookClaw (v2.0, v2.1), the Phase-3 policy (D1) and the two-stage design (D2).

Stages (formulas in each docstring; references are to ``spec/PIPELINES.md``):

* ``fuse.hookclaw_rrf`` — HookClaw v2.0 ``fuseResults`` (§C.2) with its in-memory BM25 (``Bm25Index``).
* ``score.hookclaw_fts_boost`` — HookClaw v2.1 path-level FTS boost (§C.3).
* ``decay.hookclaw`` — HookClaw's hour-based half-life decay from the path date (§C.1 step 5).
* ``fuse.phase3`` — the Phase-3 policy: modes A/B/C, max-of-normalised scores, tier boosts, expansion passes with
  early stop (§D1.2–D1.5).
* ``fuse.two_stage`` — the seed-003 recall + hybrid stage (§6 steps 1–3); the reranker is ``rerank.yes_no``.

HookClaw stages chain on OpenClaw's output: they read the incoming rows as HookClaw's "vector results".
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone

import numpy as np

from retrievers.candidates import (ArmHits, CandidateSet, State, desc_perm, flat_index, jit_kernel, kernel_example,
                                   take_rows)
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.enrich import path_dates, query_entities, temporal_windows
from retrievers.stages.filters import DEFAULT_EXCLUDES, glob_to_regex, path_excluded
from retrievers.stages.guards import secret_mask, window_keep
from retrievers.stages.intent import early_stop, has_rare_token, mode_b_runs_vector, mode_c_runs_fts, phase3_mode
from retrievers.stages.query import doc_flags, js_trim, utf16_truncate

LN2 = math.log(2.0)
DAY = 86400.0


# ---- helpers -------------------------------------------------------------------------------------------------

def resolve_arm_name(cs: CandidateSet, name: str) -> str | None:
    """The key of the arm called ``name`` (or of its only variant ``name#0``); None when there is neither."""
    if name in cs.arms:
        return name
    return f"{name}#0" if f"{name}#0" in cs.arms else None


def resolve_arm(cs: CandidateSet, name: str) -> ArmHits | None:
    """The arm called ``name`` (or its only variant ``name#0``); None when the candidate set has neither (e.g.
    a query transform produced no variant: HookClaw's FTS query with no tokens)."""
    key = resolve_arm_name(cs, name)
    return None if key is None else cs.arms[key]


def effective_rank(rank: np.ndarray, keep: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Ranks (1-based, 0 = absent) recomputed among the rows where ``keep`` holds (Q, C): what a search that
    excluded the other rows up front would have returned. Rows are counted in rank order, equal ranks by
    column. ``order``: the rows already sorted that way (:func:`rank_order`; the result is the same)."""
    present = (rank > 0) & keep
    if order is None:
        order = rank_order(rank)
    pres_sorted = take_rows(present, order)
    r_sorted = np.cumsum(pres_sorted, axis=1)
    out = np.zeros_like(rank)
    np.put_along_axis(out, order, np.where(pres_sorted, r_sorted, 0), axis=1)
    return out


def rank_order(rank: np.ndarray) -> np.ndarray:
    """(Q, C) columns sorted by rank (absent rows last), equal ranks by column: a stable argsort."""
    return np.argsort(np.where(rank > 0, rank, np.iinfo(np.int32).max), axis=1, kind="stable")


def arm_effective_rank(cs: CandidateSet, arm: str, keep_key, keep_fn) -> np.ndarray:
    """:func:`effective_rank` of arm ``arm`` (an arm key) among the rows where ``keep_fn()`` holds, memoised on the
    candidate set under ``keep_key`` (the arm's rank order once per arm; a bounded number of keep masks, so a
    sweep over a threshold stays bounded)."""
    def build():
        rank = cs.arms[arm].rank
        order = cs.memo(("signals.rank_order", arm), lambda: rank_order(rank))
        return effective_rank(rank, keep_fn(), order)
    return cs.memo_lru("signals.effective_rank", (arm, keep_key), build, size=32)


def _rank_of(values: list) -> np.ndarray:
    """Rank of every element in sorted order (ties share the order of first appearance)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    r = np.empty(len(values), dtype=np.int64)
    r[order] = np.arange(len(values))
    return r


def path_rank(cs: CandidateSet) -> np.ndarray:
    """(Q, C) rank of each candidate's path among all corpus paths (ascending string order)."""
    full = cs.corpus.cached(("signals.path_rank",), lambda: _rank_of(cs.corpus.paths))
    return cs.memo(("signals.path_rank",), lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], 0))


def id_rank(cs: CandidateSet) -> np.ndarray:
    """(Q, C) rank of each candidate's document id (ascending string order)."""
    full = cs.corpus.cached(("signals.id_rank",), lambda: _rank_of(cs.corpus.ids))
    return cs.memo(("signals.id_rank",), lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], 0))


def file_ids(cs: CandidateSet, empty_is_own: bool = True) -> np.ndarray:
    """(Q, C) integer id of each candidate's file (path). Documents without a path get their own id when
    ``empty_is_own`` (else they all share one "" file, as a JS ``Map`` keyed by path would)."""
    def build():
        corpus = cs.corpus
        codes: dict = {}
        arr = np.empty(corpus.n, dtype=np.int64)
        for d, p in enumerate(corpus.paths):
            k = p if (p or not empty_is_own) else ("\0id", d)
            arr[d] = codes.setdefault(k, len(codes))
        return arr
    full = cs.corpus.cached(("signals.file_ids", empty_is_own), build)
    return cs.memo(("signals.file_ids", empty_is_own),
                   lambda: np.where(cs.valid, full[np.where(cs.valid, cs.doc, 0)], -1))


def _carry(out: State, st: State) -> State:
    out.skipped, out.trace, out.info = st.skipped, st.trace, st.info
    return out


def _state_from_lists(cs: CandidateSet, cols: list[list[int]], scores: list[list[float]],
                      extra: dict[str, list[list[float]]] | None = None) -> State:
    K = max((len(c) for c in cols), default=0)
    col = np.full((cs.Q, K), -1, dtype=np.int64)
    sc = np.full((cs.Q, K), -np.inf)
    ex = {k: np.full((cs.Q, K), np.nan) for k in (extra or {})}
    for q, (c, s) in enumerate(zip(cols, scores)):
        col[q, :len(c)] = c
        sc[q, :len(s)] = s
        for k, v in (extra or {}).items():
            ex[k][q, :len(v[q])] = v[q]
    return State(col, sc, np.zeros(cs.Q, dtype=bool), ex)


def stable_desc_perm(score: np.ndarray, valid: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Permutation (Q, K) of a stable sort by score descending (NaN as −inf, empty slots last, ties in the
    current order: :func:`retrievers.candidates.desc_perm`); identity for queries where ``active`` is False."""
    perm = desc_perm(score, valid)
    if active is not None:
        perm = np.where(active[:, None], perm, np.arange(score.shape[1])[None, :])
    return perm


def tie_perm(cs: CandidateSet, key: tuple, keys_fn) -> tuple[np.ndarray, np.ndarray]:
    """Memoised per-row tie order of a candidate set: ``perm`` = ``np.lexsort(keys_fn(), axis=1)`` (last key
    primary, equal keys by column) and ``rank`` its inverse (the position of each column in that order)."""
    def build():
        perm = np.lexsort(keys_fn(), axis=1) if cs.C else np.zeros((cs.Q, 0), dtype=np.int64)
        rank = np.empty_like(perm)
        np.put_along_axis(rank, perm, np.broadcast_to(np.arange(cs.C), perm.shape), axis=1)
        return perm, rank
    return cs.memo(("signals.tie_perm",) + key, build)


def sort_desc_by(keys: list[np.ndarray], present: np.ndarray, tie: np.ndarray) -> np.ndarray | None:
    """Per-row order of the ``present`` columns by ``keys`` descending (first key primary), remaining ties in
    the ``tie`` permutation's order; the other columns after them in no particular order. None when a present
    row holds a non-finite key (callers then use their general sort).

    Fast path: one unstable argsort of the primary key — exact wherever a row's present keys are distinct; only
    rows where two present columns share a primary key are sorted again, stably in ``tie`` order, one key at a
    time (least significant first)."""
    negs = []
    for k in keys:
        if not np.isfinite(k).all() and not np.isfinite(k[present]).all():
            return None
        negs.append(np.where(present, -k, np.inf))
    perm = np.argsort(negs[0], axis=1)
    sp = np.take(negs[0], flat_index(perm, perm.shape[1]))
    rows = np.flatnonzero(((sp[:, 1:] == sp[:, :-1]) & (sp[:, 1:] < np.inf)).any(axis=1))
    if rows.size:
        sub = tie[rows]
        for neg in reversed(negs):
            sub = take_rows(sub, np.argsort(take_rows(neg[rows], sub), axis=1, kind="stable"))
        perm[rows] = sub
    return perm


def _doc_key_hookclaw(corpus, d: int) -> str:
    """HookClaw ``docKey``: the path if non-empty, else the first 100 UTF-16 units of the text."""
    return corpus.paths[d] or utf16_truncate(corpus.raw_texts[d], 100)


# ---- HookClaw in-memory BM25 (Bm25Index, a105310) --------------------------------------------------------------

_BM25_TOKEN = re.compile(r"\b[\w.@/\-]+\b", re.ASCII)


def hookclaw_tokens(text: str) -> list[str]:
    """``Bm25Index`` tokeniser: lower-case, every match of ``\\b[\\w.@/\\-]+\\b`` (ASCII ``\\w``/``\\b``):
    ``src/api.ts``, ``a@b.c``, ``wink-bm25`` stay whole; ``.NET`` → ``net``; ``naïve`` → ``na``, ``ve``."""
    return _BM25_TOKEN.findall((text or "").lower())


def hookclaw_bm25(texts: list[str], query: str, boost_terms: list[str] = (), max_results: int = 10,
                  k1: float = 1.2, b: float = 0.75) -> list[tuple[int, float]]:
    """HookClaw v2.0 ``Bm25Index.search`` over ``texts`` (added in this order) → [(text index, score)].

    Candidates = documents containing any query token, discovered token by token (posting sets in insertion
    order). For every query token *occurrence* (duplicates count again): skip tf = 0;
    ``idf = ln((N − df + 0.5)/(df + 0.5) + 1)``; ``tfn = tf·(k1+1)/(tf + k1·(1 − b + b·len/avgdl))``; term score
    ``idf·tfn``, ×2 when the token equals a lower-cased boost term (multi-word entities never match). Keep
    score > 0, stable sort desc (ties in discovery order), first ``max_results``. Example C2: query
    ``serilog logging NETSDK1005`` boost [NETSDK1005] → b.md 2.380126, a.md 1.590830, d.md 1.571138.
    """
    docs = [hookclaw_tokens(t) for t in texts]
    if not docs:
        return []
    q = hookclaw_tokens(query)
    if not q:
        return []
    tfs = []
    postings: dict[str, list[int]] = {}
    for i, toks in enumerate(docs):
        tf: dict[str, int] = {}
        for t in toks:
            tf[t] = tf.get(t, 0) + 1
        tfs.append(tf)
        for t in tf:
            postings.setdefault(t, []).append(i)
    N = len(docs)
    avgdl = sum(len(t) for t in docs) / N
    boost = {t.lower() for t in boost_terms}
    cand: dict[int, None] = {}
    for t in q:
        for i in postings.get(t, ()):
            cand.setdefault(i, None)
    out = []
    for i in cand:
        s = 0.0
        for t in q:
            tf = tfs[i].get(t, 0)
            if tf == 0:
                continue
            df = len(postings[t])
            idf = math.log((N - df + 0.5) / (df + 0.5) + 1)
            tfn = tf * (k1 + 1) / (tf + k1 * (1 - b + b * (len(docs[i]) / avgdl)))
            ts = idf * tfn
            if t in boost:
                ts *= 2
            s += ts
        if s > 0:
            out.append((i, s))
    out.sort(key=lambda x: -x[1])
    return out[:max_results]


# ---- HookClaw v2.0 fuseResults -------------------------------------------------------------------------------

@register
class HookClawRRF(Stage):
    """HookClaw v2.0 ``fuseResults`` (§C.2; ``src/rank-fusion.js`` at a105310), chained on the incoming rows
    (OpenClaw's ``memory_search`` output = HookClaw's ``vectorResults``).

    1. ``key(doc)`` = path if non-empty else the first 100 characters of the text. Unique docs = vector list then
       BM25 list, first occurrence of a key kept (a second chunk of the same file is dropped). No docs → [].
    2. ``N`` = unique docs; a doc absent from a signal gets rank ``N + 1``.
    3. Ranks (1-based): vector / BM25 = position of the key's first occurrence in that list; recency = position
       after a stable sort by path date desc (first ``\\d{4}-\\d{2}-\\d{2}`` of the path, V8 semantics; undated =
       epoch 0; equal dates keep insertion order); entity (only when entities are passed and non-empty) = stable
       sort by the number of lower-cased entities that are substrings of the lower-cased text (zero-match docs
       still ranked); no entities → every doc gets ``N + 1``.
    4. ``rrf = Σ w_s/(k + rank_s)``, ``weights`` = [vector, bm25, recency, entity] (default .4/.3/.2/.1), k 60.
    5. Stable sort desc; then the temporal window (if ``temporal`` and the query parses to one): drop docs whose
       path date is before the start or after the end (undated kept); then the first ``max_results``.

    The BM25 list (``bm25``): ``"empty"`` — as shipped: the in-memory index is never populated, so BM25 is
    always []; ``"vector_results"`` — the seed's design: index the texts of the incoming rows, search the trimmed
    prompt with the entities as boost terms, first ``max_results`` (:func:`hookclaw_bm25`); ``"candidates"`` —
    the same BM25 over every candidate of the query; ``"arm"`` — the rows of ``bm25_arm`` in rank order, first
    ``max_results`` (externally computed BM25, e.g. Example C1).
    RRF runs only when the BM25 list is non-empty or ``enrichment`` (the query enricher ran: temporal parsing
    or BM25 enabled); otherwise the incoming list passes unchanged.
    ``use_entities = false`` is as shipped (the hook never passes entities to RRF). ``normalize =
    "max_possible"`` divides by ``Σ w_s/(k + 1)`` (the score of a doc ranked first everywhere) so the fused
    score lives in (0, 1] like a similarity (fixed sibling; order unchanged). Extra columns ``vec_rank``,
    ``bm25_rank``, ``recency_rank``, ``entity_rank``. Texts (BM25, entity matching) are the items' snippets: the
    text cut to ``snippet_chars`` (700, OpenClaw's snippet) UTF-16 units. Example C1: [02-13 0.01626124, 02-10 0.01603791,
    notes/errors.md 0.01570486, MEMORY.md 0.01570169]. Ties: stable (unique-doc insertion order).
    """

    name = "fuse.hookclaw_rrf"
    kind = "fusion"
    weights: list = param([0.4, 0.3, 0.2, 0.1], doc="[vector, bm25, recency, entity]")
    k: float = param(60.0, ge=0.0)
    max_results: int = param(3, ge=0)
    bm25: str = param("empty", choices=("empty", "vector_results", "candidates", "arm"))
    bm25_arm: str = param("bm25")
    use_entities: bool = param(False)
    temporal: bool = param(True, doc="apply the parsed temporal window (enableTemporalParsing)")
    enrichment: bool = param(True, doc="the query enricher ran (enableTemporalParsing or enableBm25)")
    normalize: str = param("none", choices=("none", "max_possible"))
    snippet_chars: int = param(700, ge=0, doc="HookClaw's items are OpenClaw snippets (0 = full text)")

    def __post_init__(self):
        super().__post_init__()
        if len(self.weights) != 4 or not all(isinstance(w, (int, float)) for w in self.weights):
            raise ConfigError(f"stage {self.name!r}: weights must be 4 numbers [vector, bm25, recency, entity]")

    def _bm25_list(self, cs: CandidateSet, q: int, vec_cols: list[int], ents: list[str]) -> list[int]:
        """The BM25 list (columns) of query ``q``; memoised on the candidate set: per query for ``"arm"`` and
        ``"candidates"``, per (query, incoming rows) for ``"vector_results"`` (bounded), so configs that do not
        change what BM25 sees never re-tokenise or re-score."""
        if self.bm25 == "empty":
            return []
        key = (q, tuple(ents)) + ((tuple(vec_cols),) if self.bm25 == "vector_results" else ())
        memo: dict = cs.memo(("hookclaw_rrf.bm25", self.bm25, self.bm25_arm, self.max_results, self.snippet_chars),
                             dict)
        got = memo.get(key)
        if got is None:
            if len(memo) >= 200_000:  # vector_results over many distinct incoming lists: stay bounded
                memo.clear()
            got = memo[key] = self._bm25_compute(cs, q, vec_cols, ents)
        return list(got)

    def _bm25_compute(self, cs: CandidateSet, q: int, vec_cols: list[int], ents: list[str]) -> tuple[int, ...]:
        if self.bm25 == "arm":
            hits = resolve_arm(cs, self.bm25_arm)
            if hits is None:
                return ()
            cols = np.nonzero(hits.rank[q] > 0)[0]
            cols = cols[np.argsort(hits.rank[q][cols], kind="stable")]
            return tuple(int(c) for c in cols[: self.max_results])
        pool = vec_cols if self.bm25 == "vector_results" else [int(c) for c in np.nonzero(cs.valid[q])[0]]
        texts = [self._snippet(cs.corpus, int(cs.doc[q, c])) for c in pool]
        hits = hookclaw_bm25(texts, js_trim(cs.queries[q].text), ents, self.max_results)
        return tuple(pool[i] for i, _ in hits)

    def _snippet(self, corpus, d: int) -> str:
        t = corpus.raw_texts[d]
        return utf16_truncate(t, self.snippet_chars) if self.snippet_chars else t

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        wv, wb, wr, we = (float(w) for w in self.weights)
        k = self.k
        dates = path_dates(cs)
        windows = temporal_windows(cs) if self.temporal else np.full((cs.Q, 2), np.nan)
        ents_all = query_entities(cs)
        corpus = cs.corpus
        texts_low = corpus.cached(("hookclaw.lower", self.snippet_chars), dict)
        out_cols, out_scores = [], []
        ex = {n: [] for n in ("vec_rank", "bm25_rank", "recency_rank", "entity_rank")}
        scale = (wv + wb + wr + we) / (k + 1) if self.normalize == "max_possible" else 1.0
        scale = scale if scale > 0 else 1.0
        for q in range(cs.Q):
            vec_cols = [int(c) for c in st.col[q] if c >= 0] if st.col.shape[1] else []
            vec_scores = [float(s) for c, s in zip(st.col[q], st.score[q]) if c >= 0] if st.col.shape[1] else []
            ents = ents_all[q]
            bm_cols = self._bm25_list(cs, q, vec_cols, ents)
            if not bm_cols and not self.enrichment:  # RRF does not run: the vector list passes unchanged
                out_cols.append(vec_cols)
                out_scores.append(vec_scores)
                for n in ex:
                    ex[n].append([math.nan] * len(vec_cols))
                continue
            keys: dict[str, int] = {}
            uniq: list[int] = []
            for c in vec_cols + bm_cols:
                kk = _doc_key_hookclaw(corpus, cs.doc[q, c])
                if kk not in keys:
                    keys[kk] = len(uniq)
                    uniq.append(c)
            n = len(uniq)
            if n == 0:
                out_cols.append([])
                out_scores.append([])
                for nm in ex:
                    ex[nm].append([])
                continue
            default = n + 1

            def first_pos(cols: list[int]) -> dict[str, int]:
                m: dict[str, int] = {}
                for i, c in enumerate(cols):
                    m.setdefault(_doc_key_hookclaw(corpus, cs.doc[q, c]), i + 1)
                return m

            vr, br = first_pos(vec_cols), first_pos(bm_cols)
            ukeys = list(keys)
            d = [dates[q, c] for c in uniq]
            dkey = [0.0 if math.isnan(x) else x for x in d]  # undated = epoch 0
            rec_order = sorted(range(n), key=lambda i: -dkey[i])
            rec = np.empty(n, dtype=np.int64)
            rec[rec_order] = np.arange(1, n + 1)
            if self.use_entities and ents:
                low_ents = [e.lower() for e in ents]
                counts = []
                for c in uniq:
                    di = int(cs.doc[q, c])
                    t = texts_low.get(di)
                    if t is None:
                        t = texts_low[di] = self._snippet(corpus, di).lower()
                    counts.append(sum(1 for e in low_ents if e in t))
                ent_order = sorted(range(n), key=lambda i: -counts[i])
                ent = np.empty(n, dtype=np.int64)
                ent[ent_order] = np.arange(1, n + 1)
            else:
                ent = np.full(n, default)
            rows = []
            for i, key in enumerate(ukeys):
                r_v, r_b = vr.get(key, default), br.get(key, default)
                score = (wv / (k + r_v) + wb / (k + r_b) + wr / (k + rec[i]) + we / (k + ent[i])) / scale
                rows.append((score, i, r_v, r_b, int(rec[i]), int(ent[i])))
            rows.sort(key=lambda r: -r[0])
            w = windows[q]
            if not np.isnan(w).all():
                keep = window_keep(np.array([[d[r[1]] for r in rows]]), w[None, :])[0]
                rows = [r for r, kp in zip(rows, keep) if kp]
            rows = rows[: self.max_results]
            out_cols.append([uniq[r[1]] for r in rows])
            out_scores.append([r[0] for r in rows])
            for nm, j in (("vec_rank", 2), ("bm25_rank", 3), ("recency_rank", 4), ("entity_rank", 5)):
                ex[nm].append([float(r[j]) for r in rows])
        return _carry(_state_from_lists(cs, out_cols, out_scores, ex), st)


# ---- HookClaw v2.1 FTS boost ---------------------------------------------------------------------------------

@register
class HookClawFTSBoost(Stage):
    """HookClaw v2.1 FTS path boost (§C.3; ``hook-handler.js`` + ``fts-search.js`` at 4cc4583).

    FTS rows = the lexical ``arm`` (query transform ``hookclaw_fts``: OR of the non-stop-word tokens) in rank
    order, first ``fetch`` (SQL ``LIMIT 2·(2·maxResults)`` = 12); ``fts = rel/(rel + rel_k)`` with ``rel`` = the raw
    BM25 score (= −FTS5 rank; non-finite or ≤ 0 → 0), rel_k 2 (−0.5 → 0.2, −2 → 0.5, −6 → 0.75); stable sort
    desc, keep ``keep`` (2·maxResults = 6). Per path the max fts. Every incoming row whose *path* has an fts
    score gets ``score = min(1, score + weight·fts)`` (weight = ``ftsBoostWeight`` 0.3; all chunks of a
    matching file are boosted); FTS-only hits are not added; rows are re-sorted (stable) only for queries where
    something was boosted. The FTS search only runs when the incoming list is non-empty (automatic here).
    ``key = "path"`` is as shipped (documents without a path all share the key ""); ``"path_or_id"`` keys a
    path-less document by its id. Ties: stable (the incoming order). Extra column ``fts``. Example C3: A 0.52 → 0.72, B 0.51 → 0.71, X 0.55.
    """

    name = "score.hookclaw_fts_boost"
    kind = "score"
    arm: str = param("fts")
    fetch: int = param(12, ge=0)
    keep: int = param(6, ge=0)
    weight: float = param(0.3, ge=0.0)
    rel_k: float = param(2.0, gt=0.0)
    key: str = param("path", choices=("path", "path_or_id"))

    def fts_by_col(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) fts score of the kept FTS rows (NaN elsewhere)."""
        def build():
            hits = resolve_arm(cs, self.arm)
            out = np.full((cs.Q, cs.C), np.nan)
            if hits is None:
                return out
            present = hits.present(self.fetch) if self.fetch else np.zeros((cs.Q, cs.C), bool)
            rel = np.where(np.isfinite(hits.score), hits.score, 0.0)
            rel = np.where(rel > 0, rel, 0.0)
            fts = rel / (rel + self.rel_k)
            # stable sort desc within the fetched rows (rank order breaks ties), keep the first `keep`
            order_key = np.where(present, hits.rank, np.iinfo(np.int32).max)
            by_rank = np.argsort(order_key, axis=1, kind="stable")
            f_sorted = take_rows(np.where(present, fts, -np.inf), by_rank)
            perm = np.argsort(-f_sorted, axis=1, kind="stable")
            cols = take_rows(by_rank, perm)[:, : self.keep]
            ok = take_rows(present, cols)
            qi = np.repeat(np.arange(cs.Q)[:, None], cols.shape[1], axis=1)
            out[qi[ok], cols[ok]] = fts[qi[ok], cols[ok]]
            return out
        return cs.memo(("score.hookclaw_fts_boost", self.arm, self.fetch, self.keep, self.rel_k), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        fts = self.fts_by_col(cs)
        files = file_ids(cs, empty_is_own=self.key == "path_or_id")
        row_files = st.gather(files, fill=-1)
        same = (row_files[:, :, None] == files[:, None, :]) & ~np.isnan(fts)[:, None, :] & st.valid[:, :, None]
        best = np.where(same, fts[:, None, :], -np.inf).max(axis=2) if cs.C else np.full(st.col.shape, -np.inf)
        hit = np.isfinite(best)
        new = np.where(hit, np.minimum(1.0, st.score + self.weight * np.where(hit, best, 0.0)), st.score)
        out = State(st.col, np.where(st.valid, new, -np.inf), st.skipped,
                    dict(st.extra, fts=np.where(hit, best, np.nan)), st.info, st.trace)
        return out.permute(stable_desc_perm(out.score, out.valid, hit.any(axis=1)))


# ---- HookClaw decay ------------------------------------------------------------------------------------------

@register
class HookClawDecay(Stage):
    """HookClaw ``applyTemporalDecay`` (§C.1 step 5): ``score ×= exp(−ln2 · ageH / half_life_hours)``.

    Date = the first ``\\d{4}-\\d{2}-\\d{2}`` anywhere in the path at 00:00 UTC, parsed with V8 semantics
    (``2026-02-30`` → 2026-03-02; month 00/13+, day 00/32+ invalid → no date); ``ageH = max(0, as_of −
    date)/3600``; undated rows unchanged. Then a stable sort by score desc. ``half_life_hours <= 0`` → the list
    is returned untouched and not re-sorted (as is a query without ``as_of``). Defaults: 24 h (v2.0 handler
    default, seed 004 §1.1), v2.1 plugin default 168 h (12 h → 0.951695, 168 h → 0.5). ``date_source =
    "path_or_timestamp"`` falls back to the document timestamp (path-less datasets; not HookClaw). With
    ``respect_topic_shift`` queries flagged by ``gate.topic_shift`` (option B) are not decayed.
    """

    name = "decay.hookclaw"
    kind = "score"
    half_life_hours: float = param(24.0)
    date_source: str = param("path", choices=("path", "path_or_timestamp"))
    respect_topic_shift: bool = param(True)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.half_life_hours <= 0 or st.col.shape[1] == 0:
            return st
        dates = path_dates(cs)
        if self.date_source == "path_or_timestamp":
            dates = np.where(np.isnan(dates), cs.doc_feature("timestamp"), dates)
        d = st.gather(dates)
        now = cs.as_of[:, None]
        active = ~np.isnan(cs.as_of)
        shift = st.info.get("topic_shift")
        if self.respect_topic_shift and shift is not None:
            active &= ~np.asarray(shift, dtype=bool)
        age_h = np.maximum(0.0, now - d) / 3600.0
        factor = np.exp(-LN2 / self.half_life_hours * age_h)
        apply = active[:, None] & st.valid & ~np.isnan(d)
        new = np.where(apply, st.score * np.where(apply, factor, 1.0), st.score)
        out = State(st.col, new, st.skipped, st.extra, st.info, st.trace)
        return out.permute(stable_desc_perm(new, st.valid, active))


# ---- Phase-3 policy -------------------------------------------------------------------------------------------

_P3_HISTORICAL = r"\b(history|historical|originally|back in|last year|years? ago|in (19|20)\d\d)\b"
_FILENAME_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def _norm_path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def _filename_ts(path: str) -> float:
    """[A7] a real calendar ``YYYY-MM-DD`` in the file name (last path segment) → 00:00 UTC, else NaN."""
    m = _FILENAME_DATE.search(_norm_path(path).rsplit("/", 1)[-1])
    if not m:
        return math.nan
    try:
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=timezone.utc).timestamp()
    except ValueError:
        return math.nan


def phase3_doc_features(cs: CandidateSet, use_timestamp: bool) -> tuple[np.ndarray, np.ndarray]:
    """(Q, C) tier boost (+0.10 under ``memory/topics/``, +0.05 exactly ``MEMORY.md``) and age timestamp
    ([A7]: file-name date, else mtime, else — only with ``use_timestamp`` — the document timestamp)."""
    def build():
        corpus = cs.corpus

        def per_corpus():
            paths = [_norm_path(p) for p in corpus.paths]
            tier = np.array([0.10 if p.startswith("memory/topics/") else (0.05 if p == "MEMORY.md" else 0.0)
                             for p in paths])
            ts = np.array([_filename_ts(p) for p in corpus.paths])
            return tier, ts
        tier, ts = corpus.cached(("phase3.doc",), per_corpus)
        ts = np.where(np.isnan(ts), corpus.mtime, ts)
        if use_timestamp:
            ts = np.where(np.isnan(ts), corpus.timestamp, ts)
        idx = np.where(cs.valid, cs.doc, 0)
        return np.where(cs.valid, tier[idx], 0.0), np.where(cs.valid, ts[idx], np.nan)
    return cs.memo(("phase3.features", use_timestamp), build)


@register
class Phase3Fusion(Stage):
    """Phase-3 hybrid retrieval policy (seed 001; PIPELINES.md §D1, every [A#] listed in ``phase3_policy``).

    Pre-filter (§D1.1): candidates whose path matches ``exclude`` (default ``**/node_modules/**``,
    ``**/.git/**``, ``**/logs/**``, ``**/*.log``) — and, with ``exclude_secrets``, whose text holds a secret
    (``filter.secret_guard`` patterns; "never surface secrets") — are removed *before* any top-k, so the arms'
    ranks are recomputed among the rest.
    Mode per query: ``st.info["phase3_mode"]`` from ``route.phase3``, else :func:`phase3_mode` ([A1]–[A4]).
    Per pass (main = arms ``vec_arm``/``fts_arm``; expansion pass i = ``{vec_expansion_arm}#i`` /
    ``{fts_expansion_arm}#i``, query transform ``phase3_expansions``):

    * **A**: vector top 12 + FTS top 12.
    * **B**: FTS top 20; "strong" = ``nf >= 0.5`` [A11]; ``mode_b = "literal"`` [A12]: vector top 6 only when
      there are ``>= 3`` strong hits; ``"fallback"``: vector top 6 when there are fewer.
    * **C**: vector top 20; FTS top 8 iff the vector scores are flat (``top1 − top5 < 0.05``, the last score if
      fewer than 5 [A13]; no vector hit counts as flat) or the query has a rare token [A14].

    Scores: ``nv = clamp(cos, 0, 1)`` [A5]; ``nf = rel/(1 + rel)``, ``rel`` = raw BM25 score (= −FTS5 rank; 0 if
    ≤ 0) [A6]; a component the pass did not retrieve is 0; ``base = max(nv, nf)``; passes merge per document
    keeping the max base ("dedupe by chunk hash": the document id; ``dedupe = "path_lines"`` merges documents
    with the same (path, start_line, end_line) into the first). ``score = base + 0.10·[memory/topics/] +
    0.05·[MEMORY.md] − 0.10·[older than 365 days [A7] and the query is not historical [A8]]``, no clamping [A9].
    Order: score desc, base desc, path asc, start_line asc [A10], then document id asc.
    Early stop (checked after each pass [A17]; τ = 0.5 [A18]; ``early_stop`` rule, see
    :func:`retrievers.stages.intent.early_stop`): when true no further expansion pass runs.
    Writes ``st.info["phase3"] = {"mode", "passes", "early_stop", "vector_ran", "fts_ran"}`` (per query arrays)
    and extra columns ``nv``, ``nf``, ``base``. All rows are kept (the packer enforces ≤ 6 chunks / 1,200 tokens).
    Example D1-1: [c5 0.90, c1 0.88, c2 0.80, c4 0.66, c3 0.64].
    """

    name = "fuse.phase3"
    kind = "fusion"
    vec_arm: str = param("vec")
    fts_arm: str = param("fts")
    vec_expansion_arm: str = param("vecx", doc="variant arms vecx#0.. ('' = no expansion passes)")
    fts_expansion_arm: str = param("ftsx")
    max_expansions: int = param(4, ge=0, le=4, doc="[A15]")
    a_vec: int = param(12, ge=0)
    a_fts: int = param(12, ge=0)
    b_fts: int = param(20, ge=0)
    b_vec: int = param(6, ge=0)
    b_min_strong: int = param(3, ge=0)
    strong_nf: float = param(0.5, doc="[A11]")
    mode_b: str = param("literal", choices=("literal", "fallback"), doc="[A12]")
    c_vec: int = param(20, ge=0)
    c_fts: int = param(8, ge=0)
    flat_spread: float = param(0.05, doc="[A13]")
    flat_at: int = param(5, ge=1)
    topics_boost: float = param(0.10)
    curated_boost: float = param(0.05)
    old_penalty: float = param(0.10)
    old_days: float = param(365.0)
    historical: str = param(_P3_HISTORICAL, doc="[A8] regex (case-insensitive); metadata.historical also counts")
    age_timestamp: bool = param(False, doc="[A7] fall back to the document timestamp (not in the spec)")
    tau: float = param(0.5, doc="[A18]")
    early_stop: str = param("converge_or_evidence", choices=("converge_or_evidence", "converge", "evidence", "off"))
    exclude: list = param(list(DEFAULT_EXCLUDES))
    exclude_secrets: bool = param(True)
    dedupe: str = param("id", choices=("id", "path_lines"))

    def __post_init__(self):
        super().__post_init__()
        try:
            re.compile(self.historical)
        except re.error as exc:
            raise ConfigError(f"stage {self.name!r} parameter 'historical': invalid regex ({exc})") from None

    # -- per candidate set ------------------------------------------------------------------------------------
    def _excluded(self, cs: CandidateSet) -> np.ndarray:
        pats = tuple(glob_to_regex(g) for g in self.exclude)
        paths = cs.corpus.paths
        bad = doc_flags(cs, ("exclude_paths", tuple(self.exclude), False), lambda d: path_excluded(paths[d], pats))
        if self.exclude_secrets:
            bad = bad | secret_mask(cs)
        return bad | ~cs.valid

    def _historical(self, cs: CandidateSet) -> np.ndarray:
        return cs.memo(("phase3.historical", self.historical), lambda: np.array(
            [bool(q.metadata.get("historical")) or re.search(self.historical, q.text, re.IGNORECASE) is not None
             for q in cs.queries], dtype=bool))

    def _groups(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) representative column of each candidate's dedupe group."""
        if self.dedupe == "id":
            return np.broadcast_to(np.arange(cs.C)[None, :], (cs.Q, cs.C))

        def build():
            corpus = cs.corpus
            out = np.broadcast_to(np.arange(cs.C)[None, :], (cs.Q, cs.C)).copy()
            for q in range(cs.Q):
                seen: dict = {}
                for c in np.nonzero(cs.valid[q])[0]:
                    d = cs.doc[q, c]
                    p, s, e = corpus.paths[d], int(corpus.start_line[d]), int(corpus.end_line[d])
                    if p and s >= 0 and e >= 0:
                        out[q, c] = seen.setdefault((p, s, e), int(c))
            return out
        return cs.memo(("phase3.groups",), build)

    def _keep(self, cs: CandidateSet) -> tuple[tuple, np.ndarray]:
        """(key, mask): the rows the pre-filter keeps, memoised per exclusion settings."""
        key = ("phase3.keep", tuple(self.exclude), self.exclude_secrets)
        return key, cs.memo(key, lambda: ~self._excluded(cs))

    def _pass(self, cs: CandidateSet, vec: str | None, fts: str | None, modes: np.ndarray, rare: np.ndarray):
        """One pass over arms ``vec`` / ``fts`` (arm keys or None): (present (Q,C), nv, nf, vector_ran (Q,),
        fts_ran (Q,)). A function of the candidate set, the modes and the pass parameters only, so it is memoised
        (bounded): a sweep over τ, boosts or age penalties reuses every pass. The arrays are shared: never
        written."""
        keep_key, keep = self._keep(cs)
        key = (vec, fts, keep_key, modes.tobytes(), self.a_vec, self.a_fts, self.b_fts, self.b_vec, self.b_min_strong,
               self.strong_nf, self.mode_b, self.c_vec, self.c_fts, self.flat_spread, self.flat_at)
        return cs.memo_lru("phase3.pass", key, lambda: self._pass_arrays(cs, vec, fts, keep_key, keep, modes, rare),
                           size=32)

    def _pass_arrays(self, cs: CandidateSet, vec_key: str | None, fts_key: str | None, keep_key, keep, modes, rare):
        Q, C = cs.Q, cs.C
        zeros = np.zeros((Q, C))
        vec = cs.arms[vec_key] if vec_key is not None else None
        fts = cs.arms[fts_key] if fts_key is not None else None
        if vec is not None:
            vrank = arm_effective_rank(cs, vec_key, keep_key, lambda: keep)
            cos = np.where(vrank > 0, vec.score, np.nan)
        else:
            vrank, cos = np.zeros((Q, C), dtype=np.int32), np.full((Q, C), np.nan)
        if fts is not None:
            frank = arm_effective_rank(cs, fts_key, keep_key, lambda: keep)
            rel = np.where(frank > 0, np.where(np.isfinite(fts.score), fts.score, 0.0), 0.0)
            rel = np.maximum(rel, 0.0)
            nf_all = rel / (1.0 + rel)
        else:
            frank, nf_all = np.zeros((Q, C), dtype=np.int32), zeros
        is_a, is_b, is_c = modes == "A", modes == "B", modes == "C"
        # mode B: strong FTS hits among the FTS top b_fts
        in_b_fts = (frank > 0) & (frank <= self.b_fts)
        n_strong = (in_b_fts & (nf_all >= self.strong_nf)).sum(axis=1)
        b_vec = mode_b_runs_vector(n_strong, self.b_min_strong, self.mode_b)
        # mode C: flat vector confidence or a rare token
        top = np.full((Q, max(self.c_vec, 1)), np.nan)
        in_c = (vrank > 0) & (vrank <= self.c_vec)
        qi, ci = np.nonzero(in_c)
        top[qi, vrank[qi, ci] - 1] = cos[qi, ci]
        c_fts = mode_c_runs_fts(top, rare, self.flat_spread, self.flat_at)
        vdepth = np.where(is_a, self.a_vec, np.where(is_b, np.where(b_vec, self.b_vec, 0), self.c_vec))
        fdepth = np.where(is_a, self.a_fts, np.where(is_b, self.b_fts, np.where(c_fts, self.c_fts, 0)))
        in_v = (vrank > 0) & (vrank <= vdepth[:, None])
        in_f = (frank > 0) & (frank <= fdepth[:, None])
        nv = np.where(in_v, np.clip(np.nan_to_num(cos, nan=0.0), 0.0, 1.0), 0.0)
        nf = np.where(in_f, nf_all, 0.0)
        vector_ran = np.where(is_b, b_vec, True) & (vec is not None)
        fts_ran = np.where(is_c, c_fts, True) & (fts is not None)
        return in_v | in_f, nv, nf, vector_ran & (vdepth > 0), fts_ran & (fdepth > 0)

    def _tie(self, cs: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
        """[A10] tie order after score and base: path asc, start_line asc, document id asc (then column)."""
        def keys():
            start = np.where(cs.valid, cs.corpus.start_line[np.where(cs.valid, cs.doc, 0)], -1)
            return id_rank(cs), start, path_rank(cs)
        return tie_perm(cs, ("phase3",), keys)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, C = cs.Q, cs.C
        modes = st.info.get("phase3_mode")
        if modes is None or len(modes) != Q:
            modes = cs.memo(("phase3.modes_default",), lambda: np.array([phase3_mode(q.text) for q in cs.queries],
                                                                      dtype="<U1"))
        modes = np.asarray(modes)
        rare = cs.memo(("phase3.rare",), lambda: np.array([has_rare_token(q.text) for q in cs.queries], dtype=bool))
        tier, ts = phase3_doc_features(cs, self.age_timestamp)
        old = (cs.as_of[:, None] - ts) / DAY > self.old_days
        old = np.where(np.isnan(ts) | np.isnan(cs.as_of)[:, None], False, old) & ~self._historical(cs)[:, None]
        boost = tier - np.where(old, self.old_penalty, 0.0)
        boost_c = np.ascontiguousarray(boost)
        groups = self._groups(cs)
        tie = self._tie(cs)
        files = file_ids(cs)

        present = np.zeros((Q, C), dtype=bool)
        best_nv, best_nf, best_base = np.zeros((Q, C)), np.zeros((Q, C)), np.full((Q, C), -np.inf)
        stopped = np.zeros(Q, dtype=bool)
        passes = np.zeros(Q, dtype=np.int64)
        vector_ran = np.zeros(Q, dtype=bool)
        fts_ran = np.zeros(Q, dtype=bool)
        pass_arms = [(resolve_arm_name(cs, self.vec_arm), resolve_arm_name(cs, self.fts_arm))]
        for i in range(self.max_expansions):
            va = f"{self.vec_expansion_arm}#{i}" if self.vec_expansion_arm else None
            fa = f"{self.fts_expansion_arm}#{i}" if self.fts_expansion_arm else None
            va, fa = (va if va in cs.arms else None), (fa if fa in cs.arms else None)
            if va is None and fa is None:
                continue
            pass_arms.append((va, fa))
        for pi, (va, fa) in enumerate(pass_arms):
            active = ~stopped
            if not active.any():
                break
            p, nv, nf, vr, fr = self._pass(cs, va, fa, modes, rare)
            if self.dedupe == "path_lines":
                p, nv, nf = _group_max(groups, p, nv, nf)
            p = p & active[:, None]
            base = np.maximum(nv, nf)
            present |= p
            best_nv = np.where(p, np.maximum(best_nv, nv), best_nv)
            best_nf = np.where(p, np.maximum(best_nf, nf), best_nf)
            best_base = np.where(p, np.maximum(best_base, base), best_base)
            passes += active
            if pi == 0:
                vector_ran, fts_ran = vr.copy(), fr.copy()
            if self.early_stop == "off":
                continue
            # the rule reads the first 3 rows in order and the set of the others: only the top 3 are sorted
            s_sorted, f_sorted, ok = jit_kernel(_early_stop_rows)(present, best_base, boost_c, tie[1], files, 3)
            if not ok:  # a non-finite score: the general order
                score = np.where(present, best_base + boost, -np.inf)
                order = self._order(present, score, best_base, tie)
                s_sorted = take_rows(np.where(present, score, np.nan), order)
                f_sorted = take_rows(np.where(present, files, -1), order)
            stopped |= active & early_stop(s_sorted, f_sorted, self.tau, self.early_stop)
        score = np.where(present, best_base + boost, -np.inf)
        order = self._order(present, score, best_base, tie)
        n = int(present.sum(axis=1).max()) if present.size else 0
        order = order[:, :n]
        flat = flat_index(order, C)
        ok = np.take(present, flat)
        col = np.where(ok, order, -1).astype(np.int64)
        take = lambda a, fill: np.where(ok, np.take(a, flat), fill)  # noqa: E731
        out = State(col, take(score, -np.inf), st.skipped,
                    {"nv": take(best_nv, np.nan), "nf": take(best_nf, np.nan), "base": take(best_base, np.nan)},
                    st.info, st.trace)
        st.info["phase3"] = {"mode": modes, "passes": passes, "early_stop": stopped, "vector_ran": vector_ran,
                             "fts_ran": fts_ran}
        return out

    @staticmethod
    def _order(present, score, base, tie) -> np.ndarray:
        """Per row: the present columns by score desc, base desc, then the ``tie`` order (path, start line,
        document id, column); the other columns after them."""
        perm, rank = tie
        order = sort_desc_by([score, base], present, perm)
        if order is not None:
            return order
        # non-finite scores (e.g. an infinite old_penalty): one general lexsort, NaN after every number
        Q, C = present.shape
        qq = np.repeat(np.arange(Q), C)
        key_s = np.where(present, score, -np.inf).ravel()
        key_b = np.where(present, base, -np.inf).ravel()
        order = np.lexsort((rank.ravel(), -key_b, -key_s, ~present.ravel(), qq))
        return (order.reshape(Q, C) - (np.arange(Q) * C)[:, None]).astype(np.int64)


@kernel_example(lambda: (np.ones((1, 2), dtype=np.bool_), np.zeros((1, 2)), np.zeros((1, 2)),
                         np.zeros((1, 2), dtype=np.int64), np.zeros((1, 2), dtype=np.int64), 3))
def _early_stop_rows(present, base, boost, rank, files, k):  # pragma: no cover - jitted
    """What the early-stop rule reads, per row: ``(scores, files, ok)`` with the ``k`` best present rows first
    in the Phase-3 order (score = base + boost desc, base desc, ``rank`` asc), then the other present rows in
    column order, then NaN / -1. ``ok`` is False (and nothing else meaningful) when a present row has a
    non-finite score or base."""
    Q, C = present.shape
    s_out = np.empty((Q, C))
    f_out = np.empty((Q, C), dtype=np.int64)
    sc = np.empty(C)
    top = np.empty(k, dtype=np.int64)
    for q in range(Q):
        m = 0  # present rows seen; the best min(m, k) of them are top[0..], best first
        for c in range(C):
            if not present[q, c]:
                continue
            b = base[q, c]
            x = b + boost[q, c]
            if not (np.isfinite(b) and np.isfinite(x)):
                return s_out, f_out, False
            sc[c] = x
            # insertion into the top list: c goes above an entry it beats (ties: the entry stays above)
            j = min(m, k)
            while j > 0:
                t = top[j - 1]
                if x > sc[t] or (x == sc[t] and (b > base[q, t] or (b == base[q, t] and rank[q, c] < rank[q, t]))):
                    if j < k:
                        top[j] = t
                    j -= 1
                else:
                    break
            if j < k:
                top[j] = c
            m += 1
        n = min(m, k)
        for i in range(n):
            s_out[q, i] = sc[top[i]]
            f_out[q, i] = files[q, top[i]]
        for c in range(C):
            if present[q, c]:
                intop = False
                for i in range(n):
                    if top[i] == c:
                        intop = True
                if not intop:
                    s_out[q, n] = sc[c]
                    f_out[q, n] = files[q, c]
                    n += 1
        for i in range(n, C):
            s_out[q, i] = np.nan
            f_out[q, i] = -1
    return s_out, f_out, True


def _group_max(groups: np.ndarray, p: np.ndarray, nv: np.ndarray, nf: np.ndarray):
    """Merge members of a dedupe group into its representative column (max of each component)."""
    Q, C = p.shape
    gp = np.zeros_like(p)
    gnv, gnf = np.zeros_like(nv), np.zeros_like(nf)
    qi = np.repeat(np.arange(Q)[:, None], C, axis=1)
    np.logical_or.at(gp, (qi, groups), p)
    np.maximum.at(gnv, (qi, groups), np.where(p, nv, 0.0))
    np.maximum.at(gnf, (qi, groups), np.where(p, nf, 0.0))
    return gp, gnv, gnf


# ---- two-stage recall + hybrid (seed 003) ---------------------------------------------------------------------

@register
class TwoStageRecall(Stage):
    """Seed-003 stage 1 + hybrid (PIPELINES.md §6 steps 1–3, [B1]–[B5], [B8]); the reranker is ``rerank.yes_no``.

    1. Vector recall: the ``vec_depth`` (100) highest-cosine rows of ``vec_arm`` with ``cos >= min_cos`` (0.5).
    2. BM25 (k1 1.2, b 0.75 [B1] — the lexical arm's own scorer): the ``lex_depth`` (100) best rows of ``lex_arm``
       with a positive score [B2]; candidates = recall ∪ BM25 top. BM25-only candidates keep their true cosine
       even below 0.5 [B3]: the vector arm's score if it returned them, else ``cs.qd_cosine()`` when embeddings
       exist, else 0 [B8].
    3. ``bm25n = bm25 / max(bm25 over candidates)`` (0 if no match or max 0) [B4], where ``bm25`` is the lexical
       arm's raw score of the candidate (0 if the arm did not return it); ``hybrid = vec_weight·cos +
       lex_weight·bm25n`` (0.7/0.3); sort desc, ties → document id asc [B5]; keep ``keep`` (100).
    Extra columns ``cos``, ``bm25n``. Example D2-1: hybrid x2 0.765, x4 0.636, x1 0.574, x3 0.445, x5 0.42.
    """

    name = "fuse.two_stage"
    kind = "fusion"
    vec_arm: str = param("vec")
    lex_arm: str = param("bm25")
    vec_depth: int = param(100, ge=0)
    min_cos: float = param(0.5)
    lex_depth: int = param(100, ge=0)
    vec_weight: float = param(0.7)
    lex_weight: float = param(0.3)
    keep: int = param(100, ge=0)

    def _cosines(self, cs: CandidateSet, vkey: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(NaN mask of the vector arm's cosine, cosine with NaN → 0, the same with missing cosines taken from
        ``cs.qd_cosine()`` first when embeddings exist [B3]/[B8]); memoised per vector arm."""
        def build():
            vec = cs.arms[vkey] if vkey is not None else None
            cos = np.where(vec.rank > 0, vec.score, np.nan) if vec is not None else np.full((cs.Q, cs.C), np.nan)
            try:
                filled = np.where(np.isnan(cos), cs.qd_cosine(), cos)
            except RuntimeError:
                filled = cos
            return np.isnan(cos), np.nan_to_num(cos, nan=0.0), np.nan_to_num(filled, nan=0.0)
        return cs.memo(("two_stage.cos", vkey), build)

    def _lexical(self, cs: CandidateSet, lkey: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(rank among the lexical arm's positive-score rows [B2], raw score (0 when absent)); memoised."""
        def build():
            if lkey is None:
                return np.zeros((cs.Q, cs.C), dtype=np.int32), np.zeros((cs.Q, cs.C))
            lex = cs.arms[lkey]
            lr = arm_effective_rank(cs, lkey, ("two_stage.positive",),
                                    lambda: np.nan_to_num(lex.score, nan=0.0) > 0)
            return lr, np.where(lex.rank > 0, np.nan_to_num(lex.score, nan=0.0), 0.0)
        return cs.memo(("two_stage.lex", lkey), build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, C = cs.Q, cs.C
        vkey, lkey = resolve_arm_name(cs, self.vec_arm), resolve_arm_name(cs, self.lex_arm)
        if vkey is not None:
            vec = cs.arms[vkey]
            vr = arm_effective_rank(cs, vkey, ("two_stage.min_cos", float(self.min_cos)),
                                    lambda: np.nan_to_num(vec.score, nan=-np.inf) >= self.min_cos)
            recall = (vr > 0) & (vr <= self.vec_depth)
        else:
            recall = np.zeros((Q, C), dtype=bool)
        lr, raw = self._lexical(cs, lkey)
        lex_top = (lr > 0) & (lr <= self.lex_depth)
        cand = (recall | lex_top) & cs.valid
        missing, cos, filled = self._cosines(cs, vkey)
        if (cand & missing).any():  # a candidate without the arm's cosine: use the true cosine for all
            cos = filled
        bm = np.where(cand, raw, 0.0)
        mx = bm.max(axis=1, keepdims=True) if C else np.zeros((Q, 1))
        bm25n = np.where(mx > 0, bm / np.where(mx > 0, mx, 1.0), 0.0)
        hybrid = self.vec_weight * cos + self.lex_weight * bm25n
        # [B5] hybrid desc, then document id asc (then column)
        order = sort_desc_by([hybrid], cand, tie_perm(cs, ("id",), lambda: (id_rank(cs),))[0])
        if order is None:  # non-finite weights: one general lexsort, NaN after every number
            qq = np.repeat(np.arange(Q), C)
            order = np.lexsort((id_rank(cs).ravel(), -np.where(cand, hybrid, -np.inf).ravel(), ~cand.ravel(), qq))
            order = (order.reshape(Q, C) - (np.arange(Q) * C)[:, None]).astype(np.int64)
        n = min(int(cand.sum(axis=1).max()) if cand.size else 0, self.keep)
        order = order[:, :n]
        flat = flat_index(order, C)
        ok = np.take(cand, flat)
        take = lambda a, fill: np.where(ok, np.take(a, flat), fill)  # noqa: E731
        out = State(np.where(ok, order, -1).astype(np.int64), take(hybrid, -np.inf), st.skipped,
                    {"cos": take(cos, np.nan), "bm25n": take(bm25n, np.nan)}, st.info, st.trace)
        return out


__all__ = ["hookclaw_bm25", "hookclaw_tokens", "resolve_arm", "resolve_arm_name", "effective_rank", "rank_order",
           "arm_effective_rank", "stable_desc_perm", "tie_perm", "sort_desc_by", "file_ids",
           "HookClawRRF", "HookClawFTSBoost", "HookClawDecay", "Phase3Fusion", "TwoStageRecall"]
