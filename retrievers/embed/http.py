"""An OpenAI-compatible embeddings endpoint as an embedding model: ``POST {base}/embeddings``.

The same request/response shape is served by OpenAI itself, Ollama (``/v1/embeddings``), text-embeddings-inference,
vLLM and LM Studio::

    request  {"model": "<name>", "input": ["text", ...], "encoding_format": "float"}
    response {"data": [{"index": 0, "embedding": [0.1, ...]}, ...], "model": "<name>", ...}

:class:`HTTPEmbeddings` posts texts in batches of ``batch_size`` with a per-request ``timeout``; a connection
failure, a timeout, HTTP 429 or a 5xx answer is retried at most ``retries`` times with exponential back-off
(``backoff * 2**i`` seconds); anything else (4xx, a body that is not the format, a wrong number of vectors, a
vector of another dimension than expected) fails at once. Every failure is one :class:`EmbeddingServiceError` line
that names the URL and what went wrong; the key (``Authorization: Bearer``) comes from an environment variable and
never appears in a message. Vectors come back L2-normalised float32 (a server that already normalises, as OpenAI
does, is passed through bit for bit).

It quacks like a SentenceTransformer where evalkit needs it (``encode``), so :class:`retrievers.embed.model.Embedder`
caches it like a local model and latency mode times it as the real round trip.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import numpy as np

from retrievers.types import DataError

RETRY_STATUS = {429, 500, 502, 503, 504}


class EmbeddingServiceError(DataError):
    """The embedding server is down, timed out, or answered with an error or something that is not the format."""


def endpoint(url: str) -> str:
    """``http://host:port/v1`` (or the full ``…/embeddings`` URL) → the URL that is posted to."""
    url = url.rstrip("/")
    return url if url.endswith("/embeddings") else url + "/embeddings"


class HTTPEmbeddings:
    def __init__(self, url: str, model: str, api_key: str | None = None, batch_size: int = 64,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.5, dim: int | None = None):
        if not url.startswith(("http://", "https://")):
            raise DataError(f"--embedder {url!r}: an embedding endpoint URL starts with http:// or https://")
        if not model:
            raise DataError(f"--embedder {url}: give the server's model name (--embed-model NAME)")
        self.url = endpoint(url)
        self.model_name = model
        self.api_key = api_key
        self.batch_size = max(1, int(batch_size))
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        self.dim = dim  # expected dimension; None = whatever the first answer has, then every answer must agree
        self.requests = 0

    def get_sentence_embedding_dimension(self) -> int:
        if self.dim is None:
            self.embed(["dimension probe"])
        return int(self.dim)

    def encode(self, texts, batch_size: int | None = None, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        """SentenceTransformer-like: ``(n, dim)`` float32, unit norm (the other arguments are accepted and
        ignored; vectors are always normalised, batches are ``self.batch_size``)."""
        return self.embed(list(texts))

    def embed(self, texts: list[str]) -> np.ndarray:
        out = [self._batch(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        if not out:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)

    def _batch(self, texts: list[str]) -> np.ndarray:
        body = json.dumps({"model": self.model_name, "input": texts, "encoding_format": "float"}).encode()
        doc = self._post(body)
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) and "embedding" in d for d in data):
            raise EmbeddingServiceError(f"embedding server {self.url} answered without a 'data' list of "
                                        "embeddings (not the OpenAI /v1/embeddings format)")
        if len(data) != len(texts):
            raise EmbeddingServiceError(f"embedding server {self.url} returned {len(data)} embeddings for "
                                        f"{len(texts)} texts")
        data = sorted(data, key=lambda d: d.get("index", 0))
        try:
            vecs = np.array([d["embedding"] for d in data], dtype=np.float64)
        except (TypeError, ValueError):
            raise EmbeddingServiceError(f"embedding server {self.url} returned embeddings that are not lists of "
                                        "numbers of one length") from None
        if vecs.ndim != 2:
            raise EmbeddingServiceError(f"embedding server {self.url} returned embeddings of different lengths")
        if self.dim is None:
            self.dim = vecs.shape[1]
        if vecs.shape[1] != self.dim:
            raise EmbeddingServiceError(f"embedding server {self.url} returned {vecs.shape[1]}-d embeddings for "
                                        f"model {self.model_name!r}, expected {self.dim}-d")
        if not np.isfinite(vecs).all():
            raise EmbeddingServiceError(f"embedding server {self.url} returned non-finite numbers")
        v32 = vecs.astype(np.float32)
        norms = np.linalg.norm(vecs, axis=1)
        if np.any(norms == 0):
            raise EmbeddingServiceError(f"embedding server {self.url} returned an all-zero embedding")
        off = np.abs(norms - 1.0) > 1e-6
        if off.any():  # normalise only what is not unit norm already: a normalised answer passes bit for bit
            v32[off] = (vecs[off] / norms[off, None]).astype(np.float32)
        return v32

    def _post(self, body: bytes):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests += 1
            req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as exc:
                detail = _detail(exc)
                why = f"answered HTTP {exc.code}{detail}"
                if exc.code in RETRY_STATUS:
                    continue
                raise EmbeddingServiceError(f"embedding server {self.url} {why}") from None
            except (TimeoutError, socket.timeout):
                why = f"did not answer within {self.timeout:g} s (timeout)"
                continue
            except (urllib.error.URLError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, (TimeoutError, socket.timeout)):
                    why = f"did not answer within {self.timeout:g} s (timeout)"
                else:
                    why = f"is unreachable ({reason})"
                continue
            try:
                return json.loads(raw)
            except ValueError:
                raise EmbeddingServiceError(f"embedding server {self.url} answered with a body that is not "
                                            "JSON") from None
        tries = self.retries + 1
        raise EmbeddingServiceError(f"embedding server {self.url} {why}; gave up after {tries} "
                                    f"attempt{'s' if tries > 1 else ''}")


def _detail(exc: urllib.error.HTTPError) -> str:
    """A short reason from an error body (OpenAI: {"error": {"message": …}}), on one line."""
    try:
        doc = json.loads(exc.read() or b"null")
        msg = doc.get("error") if isinstance(doc, dict) else None
        msg = msg.get("message") if isinstance(msg, dict) else msg
    except (ValueError, OSError):
        msg = None
    msg = " ".join(str(msg or exc.reason or "").split())[:200]
    return f": {msg}" if msg else ""
