"""The OpenAI-compatible embedding server over evalkit's own embedder, on a real socket: evalkit's HTTP embedding
client (retrievers/embed_http.py) gets back exactly the vectors the embedder computes; bad requests are HTTP 400 with
an OpenAI-style error body; unknown routes 404."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from retrievers.embed import Embedder
from retrievers.embed.http import HTTPEmbeddings
from retrievers.embed.server import EmbeddingServer

TEXTS = ["Nightly Postgres backups run at 2am UTC.", "The garage access point drops clients at night.", "héllo 🌍"]


@pytest.fixture(scope="module")
def server():
    srv = EmbeddingServer(Embedder(backend="torch")).start()
    yield srv
    srv.stop()


def _post(url: str, body) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_client_gets_the_embedders_own_vectors(server):
    client = HTTPEmbeddings(server.url, "all-MiniLM-L6-v2", batch_size=2)
    got = client.encode(TEXTS)
    want = server.embedder.encode(TEXTS)
    assert got.shape == (3, 384) and np.array_equal(got, want)  # float32 → JSON → float32 round-trips exactly
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_openai_shapes_and_errors(server):
    status, body = _post(server.url + "/embeddings", {"model": "x", "input": "one text"})
    assert status == 200 and body["object"] == "list" and body["data"][0]["index"] == 0
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 2
    for bad in ({"input": []}, {"input": [1, 2]}, {"nope": 1}, {"input": "x", "encoding_format": "base64"}):
        status, body = _post(server.url + "/embeddings", bad)
        assert status == 400 and body["error"]["message"].startswith("bad request")
    status, body = _post(server.url + "/chat/completions", {"input": "x"})
    assert status == 404
    with urllib.request.urlopen(server.url + "/models", timeout=10) as r:
        assert json.loads(r.read())["data"][0]["id"] == "all-MiniLM-L6-v2"
