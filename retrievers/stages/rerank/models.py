"""What the rerank stages share: the models that score (query, document) pairs, and their process-wide caches.

* Local cross-encoders (sentence-transformers ``CrossEncoder`` from a local directory; nothing is downloaded) are
  loaded once per process (:func:`load_cross_encoder`), and their outputs are memoised per process per (model,
  query text, document text) (:func:`local_pair_values`, :func:`local_matrix`), so a sweep over thousands of
  configs scores each pair once.
* HTTP rerank APIs (jina / siliconflow / pinecone formats, :mod:`retrievers.stages.rerank.http`) are asked for the
  pairs not memoised yet (:func:`http_pair_scores`); a failure raises (no silently degraded reranker).
* :data:`STATS` counts model loads, ``predict`` calls, pairs scored and HTTP requests, so tests and reports see how
  many model calls and requests a run really made; :func:`clear_caches` forgets models and pair scores.

Wall-clock time is only *measured* (latency in ``State.info["rerank"]``); it never enters a score.

Usage::

    from retrievers.stages.rerank.models import STATS, clear_caches
    clear_caches(); before = dict(STATS)   # ... run a pipeline with a rerank stage ...
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import ConfigError, Stage
from retrievers.stages.rerank import http as rh

STATS: dict[str, int] = {"model_loads": 0, "predict_calls": 0, "pairs_scored": 0, "http_requests": 0}
_MODELS: dict[tuple, Any] = {}
_MODEL_LOCK = threading.Lock()
_PAIR_CACHE: dict[tuple, Any] = {}
_STATS_LOCK = threading.Lock()


def count(name: str, n: int = 1) -> None:
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
            count("model_loads")
    return model


def _model_key(model_path: str, max_length: int | None) -> tuple:
    return (os.path.abspath(os.path.expanduser(model_path)), max_length)


def local_pair_values(model_path: str, max_length: int | None, batch_size: int, pairs: list[tuple[str, str]],
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
        count("predict_calls")
        count("pairs_scored", len(batch))
        if not raw_logits and out.ndim != 1:
            raise ConfigError(f"cross-encoder {model_path!r} has {out.shape[-1]} outputs; rerank.cross_encoder needs a "
                              "single-score model (use rerank.yes_no for yes/no classifiers)")
        for pr, v in zip(batch, out):
            _PAIR_CACHE[(mkey, pr)] = np.atleast_1d(np.asarray(v, dtype=np.float64)) if raw_logits else float(v)
    return [_PAIR_CACHE[(mkey, pr)] for pr in pairs], len(todo), secs


def api_key(env_name: str) -> str:
    return os.environ.get(env_name, "") if env_name else ""


def compact(st: State) -> State:
    return st.keep(st.col >= 0)


def doc_texts(cs: CandidateSet, field: str) -> list[str]:
    return cs.corpus.raw_texts if field == "raw" else cs.corpus.texts


def check_http(stage: Stage) -> None:
    if getattr(stage, "provider") in rh.PROVIDERS and not stage.endpoint:
        raise ConfigError(f"stage {stage.name!r}: provider {stage.provider!r} needs an endpoint")


def http_pair_scores(stage: Stage, cs: CandidateSet, head: State, texts: list[str]) -> tuple[np.ndarray, list[dict]]:
    """Scores from an HTTP rerank API for the rows of ``head`` (NaN = not returned); one request per query.

    Only pairs not memoised yet are sent (``top_n`` = number of documents sent). Any failure raises RuntimeError:
    the generic stages have no fallback (a silently degraded reranker would corrupt an evaluation).
    """
    key = api_key(stage.api_key_env)
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
            count("http_requests")
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


def local_matrix(stage: Stage, cs: CandidateSet, head: State, texts: list[str], raw_logits: bool
                  ) -> tuple[list[list[Any]], list[dict]]:
    """Per query, the model outputs of its rows (one ``predict`` call for every new pair of the batch)."""
    pairs, owner = [], []
    for q in range(cs.Q):
        query = cs.queries[q].text
        for c in head.col[q][head.col[q] >= 0]:
            pairs.append((query, texts[cs.doc[q, c]]))
            owner.append(q)
    vals, n_new, secs = local_pair_values(stage.model_path, stage.max_length, stage.batch_size, pairs, raw_logits)
    per_q: list[list[Any]] = [[] for _ in range(cs.Q)]
    for q, v in zip(owner, vals):
        per_q[q].append(v)
    n_in = (head.col >= 0).sum(axis=1)
    total = max(1, len(pairs))
    recs = [{"stage": stage.display, "path": "local", "n_in": int(n_in[q]), "n_new_pairs_batch": n_new,
             "latency_ms": secs * 1000.0 * int(n_in[q]) / total} for q in range(cs.Q)]
    return per_q, recs
