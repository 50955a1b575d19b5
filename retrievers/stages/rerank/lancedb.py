"""Rerank stages: memory-lancedb-pro's rerank step, a BEIR-style cross-encoder rerank, the seed-003 yes/no reranker.

* ``rerank.lancedb`` — memory-lancedb-pro @6a50220 ``rerankResults`` (PIPELINES.md §B.4 step 5, Appendix D):
  HTTP cross-encoder (jina / siliconflow / pinecone formats) blended with the fused score, cosine fallback.
* ``rerank.cross_encoder`` — FUSION_CATALOG §5.4: score the top ``top_k`` (query, document) pairs with a
  sentence-transformers ``CrossEncoder`` from a local path (or an HTTP rerank API) and re-sort.
* ``rerank.yes_no`` — seed 003 / PIPELINES.md §6 (D2): ``p = sigmoid(logit_yes − logit_no)``, keep 10.

Models are loaded once per process (cached by path) and pair scores are memoised per process per
(model, query text, document text), so a sweep over thousands of configs scores each pair once. HTTP answers are
memoised on the candidate set (successful answers only). Counters in :data:`STATS` let tests and reports see how
many model calls and requests a run really made. Wall-clock time is only *measured* (latency in
``State.info["rerank"]``); it never enters a score.

``State.info["rerank"]``: one dict per query, written by whichever rerank stage ran last, with at least
``stage`` (display name), ``path`` (what produced the scores) and ``n_in`` (rows that entered the reranker).
"""
from __future__ import annotations

import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Compared, ConfigError, Context, Stage, param, register
from retrievers.stages.rerank import http as rh
from retrievers.types import DataError

STATS: dict[str, int] = {"model_loads": 0, "predict_calls": 0, "pairs_scored": 0, "http_requests": 0}
_MODELS: dict[tuple, Any] = {}
_MODEL_LOCK = threading.Lock()
_PAIR_CACHE: dict[tuple, Any] = {}
_HTTP_PROVIDERS = rh.PROVIDERS
_STATS_LOCK = threading.Lock()


def _count(name: str, n: int = 1) -> None:
    with _STATS_LOCK:
        STATS[name] += n


def clear_caches() -> None:
    """Forget loaded models and memoised pair scores (tests; a long-lived process swapping model files)."""
    with _MODEL_LOCK:
        _MODELS.clear()
        _PAIR_CACHE.clear()


def load_cross_encoder(model_path: str, max_length: int | None = None):
    """A sentence-transformers ``CrossEncoder`` from a local directory, loaded once per process.

    Never downloads (``local_files_only=True``); a missing directory is a :class:`ConfigError`.
    """
    path = os.path.abspath(os.path.expanduser(model_path))
    key = (path, max_length)
    with _MODEL_LOCK:
        model = _MODELS.get(key)
        if model is None:
            if not os.path.isdir(path):
                raise ConfigError(f"cross-encoder model_path {model_path!r} is not a directory (models are loaded "
                                  "from a local path only; nothing is downloaded)")
            from sentence_transformers import CrossEncoder  # lazy: startup
            model = CrossEncoder(path, local_files_only=True, max_length=max_length)
            _MODELS[key] = model
            _count("model_loads")
    return model


def _model_key(model_path: str, max_length: int | None) -> tuple:
    return (os.path.abspath(os.path.expanduser(model_path)), max_length)


def _local_pair_values(model_path: str, max_length: int | None, batch_size: int, pairs: list[tuple[str, str]],
                       raw_logits: bool) -> tuple[list[Any], int, float]:
    """Model outputs for ``pairs`` (memoised): ``predict()`` scores, or raw logits when ``raw_logits``.

    Returns (values, number of newly scored pairs, seconds spent in the model).
    """
    mkey = ("logits" if raw_logits else "predict",) + _model_key(model_path, max_length)
    todo: dict[tuple[str, str], None] = {}
    for pr in pairs:
        if (mkey, pr) not in _PAIR_CACHE:
            todo.setdefault(pr, None)
    secs = 0.0
    if todo:
        model = load_cross_encoder(model_path, max_length)
        batch = list(todo)
        kwargs: dict[str, Any] = {"batch_size": batch_size, "show_progress_bar": False, "convert_to_numpy": True}
        if raw_logits:
            import torch  # lazy: startup
            kwargs["activation_fn"] = torch.nn.Identity()
        t0 = time.perf_counter()
        out = np.asarray(model.predict(batch, **kwargs))
        secs = time.perf_counter() - t0
        _count("predict_calls")
        _count("pairs_scored", len(batch))
        if not raw_logits and out.ndim != 1:
            raise ConfigError(f"cross-encoder {model_path!r} has {out.shape[-1]} outputs; rerank.cross_encoder needs a "
                              "single-score model (use rerank.yes_no for yes/no classifiers)")
        for pr, v in zip(batch, out):
            _PAIR_CACHE[(mkey, pr)] = np.atleast_1d(np.asarray(v, dtype=np.float64)) if raw_logits else float(v)
    return [_PAIR_CACHE[(mkey, pr)] for pr in pairs], len(todo), secs


def _api_key(env_name: str) -> str:
    return os.environ.get(env_name, "") if env_name else ""


def _compact(st: State) -> State:
    return st.keep(st.col >= 0)


def _assemble(src: State, rows: np.ndarray, score: np.ndarray) -> State:
    """New rows taken from ``src`` by row position (``rows`` (Q, W), -1 = empty); a position may repeat."""
    ok = rows >= 0
    safe = np.where(ok, rows, 0)  # rows only has width > 0 when src has rows to take from
    col = np.where(ok, np.take_along_axis(src.col, safe, axis=1), -1).astype(np.int64)
    extra = {k: np.take_along_axis(v, safe, axis=1) for k, v in src.extra.items()}
    return State(col, np.where(ok, score, -np.inf), src.skipped, extra, src.info, src.trace)


def _clamp01(v: float, fallback: float) -> float:
    """memory-lancedb-pro ``clamp01``: non-finite → ``fallback`` (0 if that is non-finite too)."""
    if not math.isfinite(v):
        return fallback if math.isfinite(fallback) else 0.0
    return min(1.0, max(0.0, v))


def _doc_texts(cs: CandidateSet, field: str) -> list[str]:
    return cs.corpus.raw_texts if field == "raw" else cs.corpus.texts


def _check_http(stage: Stage) -> None:
    if getattr(stage, "provider") in _HTTP_PROVIDERS and not stage.endpoint:
        raise ConfigError(f"stage {stage.name!r}: provider {stage.provider!r} needs an endpoint")


def _http_pair_scores(stage: Stage, cs: CandidateSet, head: State, texts: list[str]) -> tuple[np.ndarray, list[dict]]:
    """Scores from an HTTP rerank API for the rows of ``head`` (NaN = not returned); one request per query.

    Only pairs not memoised yet are sent (``top_n`` = number of documents sent). Any failure raises RuntimeError:
    the generic stages have no fallback (a silently degraded reranker would corrupt an evaluation).
    """
    key = _api_key(stage.api_key_env)
    if not key:
        raise RuntimeError(f"stage {stage.name!r}: provider {stage.provider!r} needs an API key in the environment "
                           f"variable {stage.api_key_env or '(api_key_env is empty)'!r}")
    mkey = ("http", stage.provider, stage.endpoint, stage.model)
    Q, K = head.col.shape
    out = np.full((Q, K), np.nan)
    recs = []
    for q in range(Q):
        cols = head.col[q][head.col[q] >= 0]
        query = cs.queries[q].text
        docs = [texts[cs.doc[q, c]] for c in cols]
        todo = list(dict.fromkeys(d for d in docs if (mkey, (query, d)) not in _PAIR_CACHE))
        rec = {"stage": stage.display, "path": stage.provider, "n_in": len(docs), "n_scored": len(todo),
               "latency_ms": 0.0, "n_unreturned": 0}
        if todo:
            headers, body = rh.build_request(stage.provider, key, stage.model, query, todo, len(todo))
            _count("http_requests")
            res = rh.post_json(stage.endpoint, headers, body, stage.timeout_s)
            rec["latency_ms"] = res.latency_ms
            if res.reason is not None:
                raise RuntimeError(f"stage {stage.name!r}: rerank request to {stage.endpoint} failed: {res.reason} "
                                   f"{res.detail}".rstrip())
            try:
                scores = rh.strict_scores(stage.provider, res.data, len(todo))
            except rh.RerankFallback as exc:
                raise RuntimeError(f"stage {stage.name!r}: unusable answer from {stage.endpoint}: {exc}") from None
            for d, s in zip(todo, scores):
                if s is not None:
                    _PAIR_CACHE[(mkey, (query, d))] = s
        for k, d in enumerate(docs):
            v = _PAIR_CACHE.get((mkey, (query, d)))
            if v is None:
                rec["n_unreturned"] += 1
            else:
                out[q, k] = v
        recs.append(rec)
    return out, recs


def _local_matrix(stage: Stage, cs: CandidateSet, head: State, texts: list[str], raw_logits: bool
                  ) -> tuple[list[list[Any]], list[dict]]:
    """Per query, the model outputs of its rows (one ``predict`` call for every new pair of the batch)."""
    pairs, owner = [], []
    for q in range(cs.Q):
        query = cs.queries[q].text
        for c in head.col[q][head.col[q] >= 0]:
            pairs.append((query, texts[cs.doc[q, c]]))
            owner.append(q)
    vals, n_new, secs = _local_pair_values(stage.model_path, stage.max_length, stage.batch_size, pairs, raw_logits)
    per_q: list[list[Any]] = [[] for _ in range(cs.Q)]
    for q, v in zip(owner, vals):
        per_q[q].append(v)
    n_in = (head.col >= 0).sum(axis=1)
    total = max(1, len(pairs))
    recs = [{"stage": stage.display, "path": "local", "n_in": int(n_in[q]), "n_new_pairs_batch": n_new,
             "latency_ms": secs * 1000.0 * int(n_in[q]) / total} for q in range(cs.Q)]
    return per_q, recs


# ======================================================================================================================
# memory-lancedb-pro @6a50220
# ======================================================================================================================

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
        head = _compact(st).head(2 * self.limit)
        K = head.col.shape[1]
        n = (head.col >= 0).sum(axis=1)
        recs = [{"stage": self.display, "path": None, "fallback": None, "n_in": int(n[q])} for q in range(Q)]
        for q in range(Q):
            if n[q] == 0:
                recs[q]["path"] = "empty"
        active = [q for q in range(Q) if n[q] > 0]

        ce_rows: dict[int, tuple[list[int], list[float]]] = {}
        cos_q: list[int] = []
        key = _api_key(self.api_key_env)
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
        return _assemble(head, rows, score)

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
            _count("http_requests")
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
            items = [(r, _clamp01(ce * 0.6 + s[r] * 0.4, s[r] * 0.5)) for r, ce in returned]
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


# ======================================================================================================================
# Generic cross-encoder (BEIR Rerank)
# ======================================================================================================================

@register
class CrossEncoderRerank(Stage):
    """BEIR-style cross-encoder rerank (FUSION_CATALOG §5.4; BEIR ``Rerank``; seed 004 §3.1 proposes one).

    Takes the first ``top_k`` rows, scores each (query text, document text) pair — ``provider = "local"``:
    ``CrossEncoder(model_path).predict(pairs, batch_size)`` (the model's default activation: sigmoid for a
    one-logit model); an HTTP provider (jina / siliconflow / pinecone format, see ``rerank.lancedb``): the returned
    relevance score — then

        score = ce                              if blend = 1   (default: the model score replaces it, as BEIR)
        score = blend·ce + (1 − blend)·s        otherwise

    and stable-sorts those rows by score descending (ties keep the previous order, i.e. previous score desc then
    previous position). Rows beyond ``top_k`` are dropped (``keep_rest = false``, BEIR) or appended after the
    reranked block in their previous order with their previous scores (``keep_rest = true``). Rows an HTTP reranker
    did not return keep their previous score and follow the returned rows in input order. HTTP failures raise
    (there is no fallback in this generic stage).

    Document text: ``text = "full"`` (title + " " + text, the BEIR convention) or ``"raw"`` (text only).
    The model is loaded once per process (``local_files_only``; nothing is downloaded) and pair scores are
    memoised per (model, query text, document text): re-running a config, or another config of a sweep, makes no
    model call for pairs already scored. ``State.info["rerank"][q]`` records ``path``, ``n_in`` and ``latency_ms``
    (the model time of the batch, shared by the queries in proportion to their pairs).
    Defaults: provider local, top_k 100, blend 1.0, keep_rest false, batch_size 32 (BEIR uses 128), text full.
    """

    name = "rerank.cross_encoder"
    kind = "rerank"
    provider: str = param("local", choices=("local",) + rh.PROVIDERS)
    model_path: str = param("", doc="local CrossEncoder directory (provider local)")
    endpoint: str = param(rh.JINA_ENDPOINT, doc="HTTP providers only")
    model: str = param(rh.JINA_MODEL, doc="HTTP providers only")
    api_key_env: str = param("", doc="HTTP providers only: environment variable holding the key")
    timeout_s: float = param(5.0, gt=0.0)
    top_k: int = param(100, ge=1)
    blend: float = param(1.0, ge=0.0, le=1.0)
    keep_rest: bool = param(False)
    batch_size: int = param(32, ge=1)
    max_length: int | None = param(None, ge=1, doc="tokenizer truncation (None = the model's own)")
    text: str = param("full", choices=("full", "raw"))

    def __post_init__(self):
        super().__post_init__()
        if self.provider == "local" and not self.model_path:
            raise ConfigError(f"stage {self.name!r}: provider 'local' needs model_path")
        _check_http(self)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        full = _compact(st)
        head = full.head(self.top_k)
        Q, K = head.col.shape
        texts = _doc_texts(cs, self.text)
        if self.provider == "local":
            per_q, recs = _local_matrix(self, cs, head, texts, raw_logits=False)
            ce = np.full((Q, K), np.nan)
            for q, vals in enumerate(per_q):
                ce[q, :len(vals)] = vals
        else:
            ce, recs = _http_pair_scores(self, cs, head, texts)
        s = head.score
        new = ce if self.blend == 1.0 else self.blend * ce + (1.0 - self.blend) * s
        have = ~np.isnan(ce)
        out = head.with_score(np.where(have, new, s)).sort(key=np.where(have, new, -np.inf))
        st.info["rerank"] = recs
        if not self.keep_rest or full.col.shape[1] <= self.top_k:
            return out
        tail = State(full.col[:, self.top_k:], full.score[:, self.top_k:], full.skipped,
                     {k: v[:, self.top_k:] for k, v in full.extra.items()}, full.info, full.trace)
        return State(np.concatenate([out.col, tail.col], axis=1), np.concatenate([out.score, tail.score], axis=1),
                     st.skipped, {k: np.concatenate([out.extra[k], tail.extra[k]], axis=1) for k in out.extra},
                     st.info, st.trace)


# ======================================================================================================================
# Seed 003: yes/no reranker
# ======================================================================================================================

def _sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def yes_probability(logits: np.ndarray, yes_index: int | None = None) -> np.ndarray:
    """p(yes) from reranker logits (n,) or (n, L).

    One logit: ``sigmoid(logit)``. Two: ``sigmoid(logit_yes − logit_no)`` = ``e^yes / (e^yes + e^no)`` (the softmax of
    the yes label). More: the softmax of the yes column. Computed in float64.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim == 1 or z.shape[1] == 1:
        return _sigmoid(z.reshape(-1))
    if yes_index is None or not 0 <= yes_index < z.shape[1]:
        raise ConfigError(f"yes/no reranker: yes_index {yes_index!r} does not address one of {z.shape[1]} outputs")
    if z.shape[1] == 2:
        return _sigmoid(z[:, yes_index] - z[:, 1 - yes_index])
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    return e[:, yes_index] / e.sum(axis=1)


def _injected_p(cs: CandidateSet, q: int, doc_id: str) -> float:
    meta = cs.queries[q].metadata or {}
    where = f"query {cs.queries[q].id!r} document {doc_id!r}"
    pmap, lmap = meta.get("rerank_p"), meta.get("rerank_logits")
    for name, m in (("rerank_p", pmap), ("rerank_logits", lmap)):
        if m is not None and not isinstance(m, dict):
            raise DataError(f"candidate file: {where}: metadata.{name} must be an object {{doc id: value}}")
    if pmap is not None and doc_id in pmap:
        v = pmap[doc_id]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
            raise DataError(f"candidate file: {where}: metadata.rerank_p must be a number in [0, 1], got {v!r}")
        return float(v)
    if lmap is not None and doc_id in lmap:
        v = lmap[doc_id]
        vals = v if isinstance(v, list) else [v]
        if not 1 <= len(vals) <= 2 or any(isinstance(x, bool) or not isinstance(x, (int, float))
                                          or not math.isfinite(x) for x in vals):
            raise DataError(f"candidate file: {where}: metadata.rerank_logits must be [logit_yes, logit_no] or one "
                            f"logit, got {v!r}")
        return float(yes_probability(np.array([vals], dtype=np.float64), 0)[0])
    raise DataError(f"candidate file: {where}: no reranker probability (set queries[].metadata.rerank_p "
                    f"{{doc id: p}} or metadata.rerank_logits {{doc id: [yes, no]}} for every reranked candidate)")


@register
class YesNoRerank(Stage):
    """Seed 003 reranker (PIPELINES.md §6, D2 step 4–5): ``p = sigmoid(logit_yes − logit_no)`` = e^yes/(e^yes + e^no).

    The first ``top_k_input`` rows (seed: 100) are scored; rows beyond are dropped. The score becomes ``p``; rows are
    sorted by p descending, **ties → previous score (the hybrid score) descending → document id ascending**; the
    first ``keep`` rows stay (seed ``top_k_output`` 10); then, if ``min_p`` is set, rows with ``p < min_p`` are
    dropped (the seed's "min relevance 0.6" is a target, so the filter is off by default: ``min_p = 0.6`` turns it
    on).

    Where p comes from (``provider``):

    * ``"local"``: a sentence-transformers ``CrossEncoder`` at ``model_path`` (loaded once per process, logits
      memoised per (model, query, document)); one output → ``sigmoid(logit)``; two outputs →
      ``sigmoid(logit_yes − logit_no)`` with the yes output at ``yes_index`` (default: the label named "yes" in the
      model's ``id2label``); more outputs → softmax of the yes column.
    * ``"injected"`` (default; the model scores as inputs, PIPELINES.md §7): per query, candidate-file
      ``queries[].metadata.rerank_p = {"<doc id>": p}`` (single-query form: top-level ``"metadata"``), or
      ``metadata.rerank_logits = {"<doc id>": [logit_yes, logit_no]}`` (or one logit); ``rerank_p`` wins when both
      name a document. Every reranked row needs a value (missing → DataError).
    * ``"jina" | "siliconflow" | "pinecone"``: an HTTP rerank API whose relevance score is taken as p (e.g. a
      Qwen3-Reranker served behind such an API returns p(yes)); ``top_n`` = number of documents. Failures raise;
      an answer that omits a document raises too (D2 needs p for every candidate).

    ``State.info["rerank"][q]``: ``path``, ``n_in``, ``latency_ms``.
    Defaults: provider injected, top_k_input 100, keep 10, min_p None, text full, batch_size 32.
    """

    name = "rerank.yes_no"
    kind = "rerank"
    compares = {"min_p": Compared("output", ">=")}
    provider: str = param("injected", choices=("injected", "local") + rh.PROVIDERS)
    model_path: str = param("", doc="local CrossEncoder directory (provider local)")
    endpoint: str = param(rh.JINA_ENDPOINT, doc="HTTP providers only")
    model: str = param(rh.JINA_MODEL, doc="HTTP providers only")
    api_key_env: str = param("", doc="HTTP providers only: environment variable holding the key")
    timeout_s: float = param(5.0, gt=0.0)
    top_k_input: int = param(100, ge=1)
    keep: int = param(10, ge=0)
    min_p: float | None = param(None, ge=0.0, le=1.0, doc="drop rows with p < min_p (seed target 0.6; None = off)")
    yes_index: int | None = param(None, ge=0, doc="index of the yes logit (None: the label named 'yes')")
    batch_size: int = param(32, ge=1)
    max_length: int | None = param(None, ge=1)
    text: str = param("full", choices=("full", "raw"))

    def __post_init__(self):
        super().__post_init__()
        if self.provider == "local" and not self.model_path:
            raise ConfigError(f"stage {self.name!r}: provider 'local' needs model_path")
        _check_http(self)

    def _probabilities(self, cs: CandidateSet, head: State) -> tuple[np.ndarray, list[dict]]:
        Q, K = head.col.shape
        p = np.full((Q, K), np.nan)
        n_in = (head.col >= 0).sum(axis=1)
        if self.provider == "injected":
            ids = cs.corpus.ids
            for q in range(Q):
                for k in range(int(n_in[q])):
                    p[q, k] = _injected_p(cs, q, ids[cs.doc[q, head.col[q, k]]])
            return p, [{"stage": self.display, "path": "injected", "n_in": int(n_in[q])} for q in range(Q)]
        texts = _doc_texts(cs, self.text)
        if self.provider == "local":
            per_q, recs = _local_matrix(self, cs, head, texts, raw_logits=True)
            yes = self.yes_index
            for q, vals in enumerate(per_q):
                if not vals:
                    continue
                z = np.stack(vals)
                if yes is None and z.shape[1] > 1:
                    yes = self._yes_from_labels()
                p[q, :len(vals)] = yes_probability(z, yes)
            return p, recs
        p, recs = _http_pair_scores(self, cs, head, texts)
        missing = (head.col >= 0) & np.isnan(p)
        if missing.any():
            q = int(np.nonzero(missing.any(axis=1))[0][0])
            raise RuntimeError(f"stage {self.name!r}: the reranker at {self.endpoint} returned no score for "
                               f"{int(missing[q].sum())} of {int(n_in[q])} documents of query {cs.queries[q].id!r}")
        return p, recs

    def _yes_from_labels(self) -> int:
        model = load_cross_encoder(self.model_path, self.max_length)
        labels = {int(k): str(v).lower() for k, v in (getattr(model.config, "id2label", None) or {}).items()}
        hits = [k for k, v in labels.items() if v == "yes"]
        if len(hits) != 1:
            raise ConfigError(f"stage {self.name!r}: model {self.model_path!r} has labels {labels}; set yes_index")
        return hits[0]

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        head = _compact(st).head(self.top_k_input)
        p, recs = self._probabilities(cs, head)
        valid = head.col >= 0
        id_rank = cs.corpus.cached(("rerank.yes_no", "id_rank"), lambda: _id_ranks(cs.corpus.ids))
        ranks = np.where(valid, id_rank[cs.doc[np.arange(cs.Q)[:, None], np.where(valid, head.col, 0)]], 0)
        prev = np.where(np.isnan(head.score), -np.inf, head.score)
        order = np.lexsort((ranks, -prev, -np.where(valid, p, -np.inf), ~valid), axis=1)
        out = head.permute(order)
        out = out.with_score(np.take_along_axis(p, order, axis=1)).head(self.keep)
        if self.min_p is not None:
            out = out.keep(out.score >= self.min_p)
        st.info["rerank"] = recs
        return out


def _id_ranks(ids: list[str]) -> np.ndarray:
    order = sorted(range(len(ids)), key=ids.__getitem__)
    r = np.empty(len(ids), dtype=np.int64)
    r[order] = np.arange(len(ids))
    return r
