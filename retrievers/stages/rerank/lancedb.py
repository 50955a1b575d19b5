"""``rerank.lancedb`` — memory-lancedb-pro @6a50220 ``rerankResults`` (PIPELINES.md §B.4 step 5, Appendix D): an HTTP
cross-encoder (jina / siliconflow / pinecone formats) blended with the fused score, with the original's cosine
fallback. :func:`lancedb_cosine` is its ``cosineSimilarity`` (the diversity stage shares it).

Usage: ``{stage = "rerank.lancedb", mode = "lightweight", limit = 3}`` in a preset's ``[[stages]]``.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Context, Stage, param, register
from retrievers.stages.rerank import http as rh
from retrievers.stages.rerank.models import api_key, compact, count


def assemble(src: State, rows: np.ndarray, score: np.ndarray) -> State:
    """New rows taken from ``src`` by row position (``rows`` (Q, W), -1 = empty); a position may repeat."""
    ok = rows >= 0
    safe = np.where(ok, rows, 0)  # rows only has width > 0 when src has rows to take from
    col = np.where(ok, np.take_along_axis(src.col, safe, axis=1), -1).astype(np.int64)
    extra = {k: np.take_along_axis(v, safe, axis=1) for k, v in src.extra.items()}
    return State(col, np.where(ok, score, -np.inf), src.skipped, extra, src.info, src.trace)


def clamp01(v: float, fallback: float) -> float:
    """memory-lancedb-pro ``clamp01``: non-finite → ``fallback`` (0 if that is non-finite too)."""
    if not math.isfinite(v):
        return fallback if math.isfinite(fallback) else 0.0
    return min(1.0, max(0.0, v))


def _lancedb_cosine(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray, str | None]:
    """cos(query vector, entry vector) per (q, c) in float64 with the original's rules, memoised on ``cs``.

    Returns (cos (Q, C), usable (Q, C) bool, reason when nothing is usable). Zero norm → 0. A missing entry
    vector (no embeddings / NaN row) or a missing query vector makes the cell unusable.
    """
    if getattr(cs.corpus, "raw_vectors", None) is not None:
        return cs.memo(("rerank.lancedb", "cosine", "raw"), lambda: _lancedb_cosine_raw(cs))

    def build():
        Q, C = cs.doc.shape
        cos = np.zeros((Q, C))
        emb, qemb = cs.corpus.embeddings, cs.qemb
        if qemb is None:
            return cos, np.zeros((Q, C), bool), "missing_query_vector"
        if emb is None:
            return cos, np.zeros((Q, C), bool), "missing_entry_vector"
        if emb.shape[1] != qemb.shape[1]:
            return cos, np.zeros((Q, C), bool), "dim_mismatch"
        usable = np.zeros((Q, C), bool)
        qv = qemb.astype(np.float64)
        q_ok = np.isfinite(qv).all(axis=1)
        qv = np.nan_to_num(qv)
        qnorm = np.sqrt(np.einsum("qd,qd->q", qv, qv))
        safe = np.where(cs.valid, cs.doc, 0)
        for lo in range(0, Q, 64):  # chunked: only candidate vectors, (chunk, C, dim) float64 stays small
            sl = slice(lo, lo + 64)
            d = emb[safe[sl]].astype(np.float64)
            usable[sl] = cs.valid[sl] & np.isfinite(d).all(axis=2) & (emb.shape[1] > 0) & q_ok[sl, None]
            d = np.nan_to_num(d)
            dot = np.einsum("qcd,qd->qc", d, qv[sl])
            norm = np.sqrt(np.einsum("qcd,qcd->qc", d, d)) * qnorm[sl, None]
            with np.errstate(invalid="ignore", divide="ignore"):
                cos[sl] = np.where(norm == 0, 0.0, dot / np.where(norm == 0, 1.0, norm))
        return np.where(usable, cos, np.nan), usable, None
    return cs.memo(("rerank.lancedb", "cosine"), build)


def lancedb_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """lancedb-pro ``cosineSimilarity`` (retriever.ts @6a50220) on the vectors as given, float64, summed left to
    right: raises ``ValueError`` when the sizes differ; a zero norm → 0."""
    if len(a) != len(b):
        raise ValueError("Vector dimensions must match for cosine similarity")
    dot = na = nb = 0.0
    for x, y in zip(a.tolist(), b.tolist()):
        dot += x * y
        na += x * x
        nb += y * y
    norm = na ** 0.5 * nb ** 0.5
    return 0.0 if norm == 0 else dot / norm


def _lancedb_cosine_raw(cs: CandidateSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidate-file form of :func:`_lancedb_cosine`: float64 on the vectors exactly as given (no float32
    rounding), entry vectors of any size. A cell is unusable when the entry has no vector, the query has none, or
    the sizes differ (the original throws there, and the whole rerank falls back to its input); the third element
    holds the reason per unusable cell."""
    Q, C = cs.doc.shape
    cos = np.full((Q, C), np.nan)
    usable = np.zeros((Q, C), bool)
    why = np.full((Q, C), None, dtype=object)
    raw = cs.corpus.raw_vectors
    for q in range(Q):
        qv = cs.queries[q].metadata.get("query_embedding")
        qv = None if qv is None else np.asarray(qv, dtype=np.float64)
        for c in range(C):
            d = int(cs.doc[q, c])
            if d < 0:
                continue
            v = raw[d]
            if qv is None or v is None:
                why[q, c] = "missing_query_vector" if qv is None else "missing_entry_vector"
                continue
            try:
                cos[q, c] = lancedb_cosine(qv, v)
            except ValueError:
                why[q, c] = "dim_mismatch"
                continue
            usable[q, c] = True
    return cos, usable, why


@register
class LanceDBRerank(Stage):
    """memory-lancedb-pro @6a50220 ``rerankResults`` (PIPELINES.md §B.4 step 5; seed 000 "Cross-Encoder Reranking").

    Input truncation: with ``mode`` ≠ ``"none"`` only the first ``2·limit`` rows enter the reranker and **the rest are
    discarded for good**; ``mode = "none"`` returns the input untouched (no truncation). ``limit`` is the retrieve
    limit (auto-recall 3, ``memory_recall`` tool 5, clamped to [1, 20] by ``retrieve``).

    ``mode = "cross-encoder"`` with a key in ``$api_key_env``: one POST per query to ``endpoint`` with
    ``{model, query, documents = entry texts, top_n = #docs}`` in the ``provider`` format (jina/siliconflow:
    ``Authorization: Bearer``, string documents; pinecone: ``Api-Key`` + ``X-Pinecone-API-Version: 2024-10``,
    ``{text}`` documents + ``rank_fields``), ``timeout_s`` socket timeout. Answer scores: ``results[].relevance_score``
    (jina/siliconflow) or ``data[].score`` (pinecone). Then

    * each answer item with a valid index (``0 ≤ index < n``): ``clamp01(0.6·ce + 0.4·s)``; a non-finite blend (e.g.
      an item without a score) → ``0.5·s`` (Appendix D);
    * each row not returned: ``0.8·s``;
    * stable sort, score descending, of [returned rows in response order …, unreturned rows in input order …]; ties
      keep that order.

    **Duplicates** (Appendix D: a repeated valid index yields a duplicate result): the State holds the same candidate
    column twice — each answer item becomes its own row (same ``col``, its own blended score, extra columns copied
    from the source row), so the list can grow beyond its input length. Later stages see both rows; the final list
    may name a document twice, exactly as the original's result array does. Out-of-range, negative, missing or
    NaN-coercing indices are ignored (counted as ``n_ignored``); JavaScript coercions of odd answers (string or
    fractional indices, string/null scores) are reproduced (see ``retrievers.stages.rerank.http.lancedb_items``). No
    request is made for an empty input.

    **Cosine path** (``mode = "lightweight"``, no API key, or after any HTTP error / non-2xx status / invalid JSON /
    bad shape / timeout / exception): ``clamp01(0.7·s + 0.3·cos(query vector, entry vector))``, a non-finite value →
    ``s``; stable sort desc. ``cos`` uses ``cs.qemb`` and ``cs.corpus.embeddings`` in float64; zero norm → 0. A
    missing query or entry vector (or a dimension mismatch) anywhere in a query's input → that query's input is
    returned unchanged (still truncated to ``2·limit``), as the original's try/catch does.

    ``State.info["rerank"][q]``: ``path`` ∈ {"cross-encoder", "cosine", "unchanged", "empty", "none"}, ``fallback``
    (None, "no_api_key", "http_<status>", "timeout", "connection", "invalid_json", "bad_shape", "exception"),
    ``cosine_error`` (why a query stayed unchanged), ``latency_ms`` (HTTP round trip; 0 for a memoised answer),
    ``status``, ``n_in``, ``n_returned``, ``n_duplicates``, ``n_ignored``, ``cached``.

    Defaults: mode cross-encoder, provider jina, endpoint ``https://api.jina.ai/v1/rerank``, model
    ``jina-reranker-v3``, timeout 5 s (as shipped), ``api_key_env = ""`` (no key ⇒ cosine fallback, which is what
    the shipped plugin does without ``rerankApiKey``; the key itself never enters the preset hash). Successful
    answers are memoised on the candidate set per (provider, endpoint, model, query, documents), so a sweep sends
    each distinct request once; failures are retried. Requests for a batch run on up to
    ``ctx.options["rerank_workers"]`` (default 4) threads; results do not depend on it.
    """

    name = "rerank.lancedb"
    kind = "rerank"
    vectors = True
    mode: str = param("cross-encoder", choices=("cross-encoder", "lightweight", "none"))
    limit: int = param(3, ge=1, le=20, doc="the retrieve limit; the reranker sees the first 2·limit rows")
    provider: str = param("jina", choices=rh.PROVIDERS)
    endpoint: str = param(rh.JINA_ENDPOINT)
    model: str = param(rh.JINA_MODEL)
    api_key_env: str = param("", doc="environment variable holding the API key ('' = no key ⇒ cosine fallback)")
    timeout_s: float = param(5.0, gt=0.0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q = cs.Q
        if self.mode == "none":
            n = (st.col >= 0).sum(axis=1)
            st.info["rerank"] = [{"stage": self.display, "path": "none", "n_in": int(n[q])} for q in range(Q)]
            return st
        head = compact(st).head(2 * self.limit)
        K = head.col.shape[1]
        n = (head.col >= 0).sum(axis=1)
        recs = [{"stage": self.display, "path": None, "fallback": None, "n_in": int(n[q])} for q in range(Q)]
        for q in range(Q):
            if n[q] == 0:
                recs[q]["path"] = "empty"
        active = [q for q in range(Q) if n[q] > 0]

        ce_rows: dict[int, tuple[list[int], list[float]]] = {}
        cos_q: list[int] = []
        key = api_key(self.api_key_env)
        if self.mode == "cross-encoder" and not key:
            for q in active:
                recs[q]["fallback"] = "no_api_key"
            cos_q = active
        elif self.mode == "cross-encoder":
            answers = self._request_all(cs, head, active, key, recs, ctx)
            for q in active:
                res = answers[q]
                if res is not None:
                    ce_rows[q] = res
                else:
                    cos_q.append(q)
        else:
            cos_q = active

        rows = np.where(head.col >= 0, np.arange(K)[None, :], -1)
        score = head.score.copy()
        if cos_q:
            self._cosine(cs, head, cos_q, rows, score, recs)
        if ce_rows:
            W = max([K] + [len(r) for r, _ in ce_rows.values()])
            if W > K:
                rows = np.concatenate([rows, np.full((Q, W - K), -1)], axis=1)
                score = np.concatenate([score, np.full((Q, W - K), -np.inf)], axis=1)
            for q, (r, s) in ce_rows.items():
                rows[q] = -1
                score[q] = -np.inf
                rows[q, :len(r)] = r
                score[q, :len(s)] = s
                recs[q]["path"] = "cross-encoder"
        st.info["rerank"] = recs
        return assemble(head, rows, score)

    # -- cross-encoder over HTTP -------------------------------------------------------------------------------------
    def _request_all(self, cs: CandidateSet, head: State, active: list[int], key: str, recs: list[dict],
                     ctx: Context) -> dict[int, tuple[list[int], list[float]] | None]:
        texts = cs.corpus.raw_texts  # the entry text, as stored
        cache = cs.memo(("rerank.lancedb", "answers"), dict)
        jobs = {}
        for q in active:
            cols = head.col[q][head.col[q] >= 0]
            jobs[q] = (cs.queries[q].text, tuple(texts[cs.doc[q, c]] for c in cols))

        def call(q: int):
            query, docs = jobs[q]
            ck = (self.provider, self.endpoint, self.model, self.api_key_env, query, docs)
            if ck in cache:
                return q, rh.HTTPOutcome(data=cache[ck], status=200), True
            headers, body = rh.build_request(self.provider, key, self.model, query, list(docs), len(docs))
            count("http_requests")
            res = rh.post_json(self.endpoint, headers, body, self.timeout_s)
            if res.reason is None:
                cache[ck] = res.data
            return q, res, False

        workers = max(1, int(ctx.options.get("rerank_workers", 4)))
        if workers > 1 and len(active) > 1:
            with ThreadPoolExecutor(max_workers=min(workers, len(active))) as ex:
                outcomes = list(ex.map(call, active))
        else:
            outcomes = [call(q) for q in active]

        out: dict[int, tuple[list[int], list[float]] | None] = {}
        for q, res, cached in outcomes:
            rec = recs[q]
            rec.update(status=res.status, latency_ms=res.latency_ms, cached=cached)
            if res.reason is not None:
                rec["fallback"], rec["detail"] = res.reason, res.detail
                out[q] = None
                continue
            s = head.score[q, :int((head.col[q] >= 0).sum())]
            try:
                returned, unreturned, ignored = rh.lancedb_items(self.provider, res.data, len(s))
            except rh.RerankFallback as exc:
                rec["fallback"], rec["detail"] = exc.reason, exc.detail
                out[q] = None
                continue
            except Exception as exc:  # noqa: BLE001 - the original catches everything and falls back
                rec["fallback"], rec["detail"] = "exception", f"{type(exc).__name__}: {exc}"
                out[q] = None
                continue
            items = [(r, clamp01(ce * 0.6 + s[r] * 0.4, s[r] * 0.5)) for r, ce in returned]
            items += [(r, s[r] * 0.8) for r in unreturned]
            order = sorted(range(len(items)), key=lambda i: -items[i][1] if not math.isnan(items[i][1]) else math.inf)
            seen = [r for r, _ in returned]
            rec.update(n_returned=len(returned), n_duplicates=len(seen) - len(set(seen)), n_ignored=ignored)
            out[q] = ([items[i][0] for i in order], [items[i][1] for i in order])
        return out

    # -- cosine fallback -----------------------------------------------------------------------------------------------
    def _cosine(self, cs: CandidateSet, head: State, cos_q: list[int], rows: np.ndarray, score: np.ndarray,
                recs: list[dict]) -> None:
        cos_all, usable_all, why = _lancedb_cosine(cs)
        qs = np.asarray(cos_q)
        col = head.col[qs]
        valid = col >= 0
        safe = np.where(valid, col, 0)
        cos = np.take_along_axis(cos_all[qs], safe, axis=1)
        usable = np.take_along_axis(usable_all[qs], safe, axis=1) | ~valid
        s = head.score[qs]
        with np.errstate(invalid="ignore", over="ignore"):
            comb = 0.7 * s + 0.3 * cos
        new = np.where(np.isfinite(comb), np.clip(comb, 0.0, 1.0), np.where(np.isfinite(s), s, 0.0))
        key = np.where(valid, -new, np.inf)
        perm = np.argsort(key, axis=1, kind="stable")
        ok_q = usable.all(axis=1)
        for i, q in enumerate(cos_q):
            if not ok_q[i]:
                recs[q]["path"] = "unchanged"
                reason = why if not isinstance(why, np.ndarray) else next(
                    (why[q, c] for c in head.col[q] if c >= 0 and not usable_all[q, c]), None)
                recs[q]["cosine_error"] = reason or self._cosine_error(cs, q, head)
                continue
            recs[q]["path"] = "cosine"
            p = perm[i]
            rows[q] = np.where(np.take_along_axis(valid[i], p, axis=0), p, -1)
            score[q] = np.where(rows[q] >= 0, new[i][p], -np.inf)

    @staticmethod
    def _cosine_error(cs: CandidateSet, q: int, head: State) -> str:
        if cs.qemb is not None and not np.isfinite(cs.qemb[q]).all():
            return "missing_query_vector"
        return "missing_entry_vector"
