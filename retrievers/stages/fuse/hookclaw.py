"""``fuse.hookclaw_rrf`` — HookClaw v2.0 ``fuseResults`` (``spec/PIPELINES.md`` §C.2) with its in-memory BM25
(``Bm25Index``), chained on OpenClaw's output: it reads the incoming rows as HookClaw's "vector results"."""
from __future__ import annotations

import math
import re

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.query_text import path_dates, query_entities, temporal_windows
from retrievers.stages.filter import window_keep
from retrievers.stages.helpers.signals import carry, resolve_arm, state_from_lists
from retrievers.text import js_trim, utf16_truncate


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
    5. Stable sort desc; then the temporal window: ``fuseResults`` receives ``queryEnrichment.temporalFilter``,
       which ``enrichQuery`` parses whenever the enricher ran — ``enableTemporalParsing`` **or** ``enableBm25``
       (hook-handler.js a105310 ``getQueryEnricher``) — so it applies when ``enrichment`` and ``temporal`` are
       both on and the prompt parses to a window: drop docs whose path date is before the start or after the end
       (undated kept); then the first ``max_results``. Without the enricher there is no window (RRF can still
       run on a non-empty BM25 list).

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
    temporal: bool = param(True, doc="pass the enricher's temporal window to RRF (as shipped whenever the enricher "
                                     "ran, i.e. = enrichment; false = a variant that drops it)")
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
        windows = temporal_windows(cs) if (self.temporal and self.enrichment) else np.full((cs.Q, 2), np.nan)
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
        return carry(state_from_lists(cs, out_cols, out_scores, ex), st)


__all__ = ["HookClawRRF", "hookclaw_bm25", "hookclaw_tokens"]
