"""The user's own embedding model (issue 22): ``--embedder`` as a local sentence-transformers folder or an
OpenAI-compatible ``/v1/embeddings`` endpoint, tested against a real HTTP server on 127.0.0.1
(``tests/rerank_server.py``'s scripted ThreadingHTTPServer) that embeds with the shipped local model — and its
failure modes: server down, error status (retried or not), wrong dimension, timeout, a body that is not the format.
Every failure is one line naming the URL."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrievers.embed.http import EmbeddingServiceError, HTTPEmbeddings
from retrievers.embed.model import DEFAULT_MODEL, Embedder, make_embedder, model_path
from tests.helpers import free_port
from tests.rerank_server import Reply, RerankServer
from tests.helpers import ROOT

TEXTS = ["Which VLAN are the IoT devices on?", "The NAS backs up to the cloud every night at 02:00.",
         "Grandma's lasagne recipe uses ricotta, not béchamel.", "deploy: kubectl rollout restart deploy/api"]


@pytest.fixture(scope="module")
def local():
    emb = Embedder(backend="torch", progress=False)
    emb.model.encode(TEXTS[:1])  # loaded before the server needs it (a cold load can outlast a request timeout)
    return emb


@pytest.fixture()
def server(local):
    srv = RerankServer().start()
    srv.reset(embedding_script(local))
    yield srv
    srv.stop()


def base(srv: RerankServer) -> str:
    return srv.url.rsplit("/", 1)[0]  # http://127.0.0.1:PORT/v1


def embedding_script(local, dim_override: int | None = None):
    def script(req):
        if req.path != "/v1/embeddings":
            return Reply(404, {"error": {"message": "no such route"}})
        texts = req.json["input"]
        vecs = local.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        if dim_override:
            vecs = np.full((len(texts), dim_override), 1 / np.sqrt(dim_override), dtype=np.float32)
        data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vecs)]
        return Reply(body={"object": "list", "model": req.json["model"], "data": data[::-1]})  # any order
    return script


def test_http_embedder_equals_the_local_model_it_wraps(server, local, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_EMBED_API_KEY", "sk-test-123")
    emb = Embedder(base(server), remote_model="minilm-test", cache_dir=tmp_path, batch_size=3, progress=False)
    got = emb.encode(TEXTS)
    sent = list(server.requests)
    assert [len(r.json["input"]) for r in sent] == [3, 1]  # batched
    assert {r.headers.get("authorization") for r in sent} == {"Bearer sk-test-123"}
    want = local.model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    # JSON floats round-trip float32 exactly; the server saw batches of 3 + 1 (other padding than one batch of 4)
    assert np.allclose(got, want, atol=1e-6) and got.dtype == np.float32
    direct = HTTPEmbeddings(base(server), "minilm-test").embed(TEXTS[:1])
    assert np.array_equal(direct[0], local.model.encode(TEXTS[:1], normalize_embeddings=True)[0])
    assert emb.dim == 384 and emb.backend == "http"
    assert server.requests[0].json["model"] == "minilm-test"
    assert emb.model_id.startswith("http:minilm-test@") and emb.model_id != local.model_id
    n = len(server.requests)
    again = Embedder(base(server), remote_model="minilm-test", cache_dir=tmp_path, progress=False)
    assert np.array_equal(again.encode(TEXTS), got) and len(server.requests) == n  # cached: no request


def test_http_server_down_is_one_line_after_bounded_retries(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    emb = Embedder(url, remote_model="m", cache_dir=tmp_path, retries=2, progress=False)
    emb.model.backoff = 0.01
    with pytest.raises(EmbeddingServiceError) as e:
        emb.encode(TEXTS)
    msg = str(e.value)
    assert "\n" not in msg and url + "/embeddings" in msg and "unreachable" in msg and "after 3 attempts" in msg


def test_http_error_status_retried_when_transient_not_when_client_error(server, tmp_path):
    server.reset(lambda req: Reply(503, {"error": {"message": "model loading"}}))
    h = HTTPEmbeddings(base(server), "m", retries=2, backoff=0.01)
    with pytest.raises(EmbeddingServiceError, match=r"answered HTTP 503: model loading; gave up after 3 attempts"):
        h.embed(TEXTS)
    assert len(server.requests) == 3
    server.reset(lambda req: Reply(401, {"error": {"message": "invalid api key"}}))
    with pytest.raises(EmbeddingServiceError, match=r"answered HTTP 401: invalid api key$"):
        h.embed(TEXTS)
    assert len(server.requests) == 1  # a client error is not retried


def test_http_wrong_dimension_is_one_line(server, local, tmp_path):
    h = HTTPEmbeddings(base(server), "m", dim=384)
    server.reset(embedding_script(local, dim_override=512))
    with pytest.raises(EmbeddingServiceError, match=r"returned 512-d embeddings for model 'm', expected 384-d"):
        h.embed(TEXTS)
    # no expected size given: the first answer sets it and a later one that differs fails
    h = HTTPEmbeddings(base(server), "m", batch_size=2)
    server.reset(embedding_script(local))
    h.embed(TEXTS[:2])
    server.reset(embedding_script(local, dim_override=512))
    with pytest.raises(EmbeddingServiceError, match="expected 384-d"):
        h.embed(TEXTS[2:])


def test_http_timeout_and_malformed_answers(server, tmp_path):
    server.reset(lambda req: Reply(body={"data": []}, delay_s=1.5))
    h = HTTPEmbeddings(base(server), "m", timeout=0.2, retries=1, backoff=0.01)
    with pytest.raises(EmbeddingServiceError, match=r"did not answer within 0.2 s \(timeout\); gave up after 2"):
        h.embed(TEXTS[:1])
    server.reset(lambda req: Reply(body=b"<html>busy</html>", content_type="text/html"))
    with pytest.raises(EmbeddingServiceError, match="not JSON"):
        h.embed(TEXTS[:1])
    server.reset(lambda req: Reply(body={"data": [{"index": 0, "embedding": [1.0, 0.0]}]}))
    with pytest.raises(EmbeddingServiceError, match="returned 1 embeddings for 2 texts"):
        h.embed(TEXTS[:2])


def test_cli_embedder_down_exits_with_one_line(tmp_path):
    env = dict(os.environ, EVALKIT_CACHE=str(tmp_path / "cache"), CI="1")
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--dataset", "memory-workspace",
                           "--retrievers", "dense", "--embedder", url, "--embed-model", "m", "--embed-timeout", "1",
                           "--out", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0
    lines = [x for x in proc.stderr.splitlines() if x.startswith("evalkit: error")]
    assert len(lines) == 1 and "unreachable" in lines[0] and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip() == lines[0]  # the probe fails before any dataset work: nothing else printed
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_local_folder_embedder_reads_dimension_and_max_length(tmp_path, local):
    src = Path(model_path(DEFAULT_MODEL))
    folder = tmp_path / "my-model"
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(src / "model.safetensors", folder / "model.safetensors")
    cfg = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps({**cfg, "max_seq_length": 128}))
    emb = make_embedder(str(folder), backend="torch", cache_dir=tmp_path / "cache", progress=False)
    assert emb.max_seq_length == 128 and emb.dim == 384 and emb.model_name == "my-model"
    assert emb.model_id != local.model_id and ":seq128" in emb.model_id
    short = emb.encode(TEXTS[:2])
    assert np.allclose(short, local.encode(TEXTS[:2]), atol=1e-6)  # short texts: same weights, same vectors
    with pytest.raises(Exception, match="not a sentence-transformers model folder"):
        Embedder(str(tmp_path), progress=False)
