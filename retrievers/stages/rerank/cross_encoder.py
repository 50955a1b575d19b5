"""``rerank.cross_encoder`` — FUSION_CATALOG §5.4 / BEIR ``Rerank``: score the top ``top_k`` (query, document) pairs
with a sentence-transformers ``CrossEncoder`` from a local path (or an HTTP rerank API) and re-sort.

Usage: ``{stage = "rerank.cross_encoder", model_path = "/models/ms-marco-MiniLM", top_k = 100}``.
"""
from __future__ import annotations

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.rerank import http as rh
from retrievers.stages.rerank.models import check_http, compact, doc_texts, http_pair_scores, local_matrix


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
        check_http(self)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        full = compact(st)
        head = full.head(self.top_k)
        Q, K = head.col.shape
        texts = doc_texts(cs, self.text)
        if self.provider == "local":
            per_q, recs = local_matrix(self, cs, head, texts, raw_logits=False)
            ce = np.full((Q, K), np.nan)
            for q, vals in enumerate(per_q):
                ce[q, :len(vals)] = vals
        else:
            ce, recs = http_pair_scores(self, cs, head, texts)
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
