"""``rerank.yes_no`` — seed 003 / PIPELINES.md §6 (D2): ``p = sigmoid(logit_yes − logit_no)``, keep 10; p from a local
model, from a candidate file (injected) or from an HTTP rerank API. :func:`yes_probability` is the logit → p rule.

Usage: ``{stage = "rerank.yes_no", provider = "injected", keep = 10}``; ``yes_probability(np.array([[2.0, 0.0]]), 0)``
→ ``array([0.8808])``.
"""
from __future__ import annotations

import math

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Compared, ConfigError, Context, Stage, param, register
from retrievers.stages.rerank import http as rh
from retrievers.stages.rerank.models import (
    check_http,
    compact,
    doc_texts,
    http_pair_scores,
    load_cross_encoder,
    local_matrix,
)
from retrievers.types import DataError


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
        check_http(self)

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
        texts = doc_texts(cs, self.text)
        if self.provider == "local":
            per_q, recs = local_matrix(self, cs, head, texts, raw_logits=True)
            yes = self.yes_index
            for q, vals in enumerate(per_q):
                if not vals:
                    continue
                z = np.stack(vals)
                if yes is None and z.shape[1] > 1:
                    yes = self._yes_from_labels()
                p[q, :len(vals)] = yes_probability(z, yes)
            return p, recs
        p, recs = http_pair_scores(self, cs, head, texts)
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
        head = compact(st).head(self.top_k_input)
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
