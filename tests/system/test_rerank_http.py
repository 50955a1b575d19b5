"""Rerank stages against a real HTTP server on 127.0.0.1 (``tests/rerank_server.py``, a ThreadingHTTPServer speaking
the jina / siliconflow / pinecone formats): ``rerank.lancedb`` request formats, blends, worked example B2, partial and
odd answers, failures falling back to cosine, memoised answers; ``rerank.cross_encoder`` and ``rerank.yes_no`` over
HTTP. Nothing under test is mocked.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked
from retrievers.stages import Context
from retrievers.stages.rerank.lancedb import LanceDBRerank
from tests.rerank_cases import (  # noqa: F401  (fixtures)
    B2_FUSED,
    BAD_ANSWERS,
    CE_DOCS,
    D2_HYBRID,
    D2_P,
    DOCS5,
    KEY,
    KEY_ENV,
    QEMB,
    api_key,
    approx_rows,
    ce_cs,
    ce_pipe,
    cosine_expected,
    d2_cs,
    lance_cs,
    lance_pipe,
    rerank_srv,
    server,
)
from tests.rerank_server import Reply, documents_of, provider_answer

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
