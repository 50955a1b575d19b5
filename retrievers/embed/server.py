"""An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 over any evalkit :class:`~retrievers.embed.Embedder`.

A live system that embeds through an OpenAI-style endpoint (OpenClaw's ``memorySearch.remote.baseUrl``, mem0's
``openai`` embedder, most memory services) can then use exactly the vectors evalkit's presets use — same model,
same runtime, same 256-word-piece truncation, same content-hash cache — so a live-vs-preset comparison differs
only in what the systems do, not in their embeddings. The client side of the same format is
:mod:`retrievers.embed.http`.

Routes::

    POST /v1/embeddings   {"model": "...", "input": "text" | ["text", ...], "encoding_format": "float"}
        → {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}], "model": "...",
           "usage": {"prompt_tokens": n, "total_tokens": n}}          (unit-norm float32 vectors, as OpenAI's)
    GET  /v1/models       → the one model
    GET  /health          → {"ok": true}

A body that is not that shape is HTTP 400 with ``{"error": {"message": ...}}``; ``encoding_format = "base64"`` is
refused (400), as the vectors are sent as floats. Requests are counted (``stats``: requests, texts). One
``Embedder`` call at a time (a lock): the model is not re-entrant, and the machine has two cores anyway.

Usage (it loads the model and binds a port, so not a doctest; ``tests/system`` serves it for real)::

        srv = EmbeddingServer(Embedder()).start()
        srv.url                                   # 'http://127.0.0.1:41235/v1' (a free port)
        srv.stop()

``evalkit serve-embeddings --port 18080`` runs one in the foreground.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 64 * 1024 * 1024


class EmbeddingServer:
    """The server (see the module docstring); ``port=0`` picks a free port."""

    def __init__(self, embedder, host: str = "127.0.0.1", port: int = 0, name: str | None = None):
        self.embedder = embedder
        self.host = host
        self.port = port
        self.name = name or str(getattr(embedder, "model_name", None) or "all-MiniLM-L6-v2").rsplit("/", 1)[-1]
        self.stats = {"requests": 0, "texts": 0, "errors": 0}
        self._lock = threading.Lock()
        self._tok = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL a client is configured with (``…/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """(vectors as float lists, prompt tokens) for ``texts``."""
        with self._lock:
            vecs = self.embedder.encode(list(texts), desc="serving embeddings")
            if self._tok is None and callable(getattr(self.embedder, "tokenizer", None)):
                self._tok = self.embedder.tokenizer()
            ntok = sum(len(self._tok(t, add_special_tokens=True, truncation=True,
                                     max_length=getattr(self.embedder, "max_seq_length", 256))["input_ids"])
                       for t in texts) if self._tok is not None else 0
        return [v.astype(float).tolist() for v in vecs], int(ntok)

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, dict]:
        """The answer to one request (status, JSON body): the routing, kept apart from the socket code."""
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route in ("/v1/models", "/models"):
            return 200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "evalkit"}]}
        if method == "GET" and route == "/health":
            return 200, {"ok": True}
        if method != "POST" or route not in ("/v1/embeddings", "/embeddings"):
            return 404, {"error": {"message": f"no route {method} {route}", "type": "invalid_request_error"}}
        try:
            req = json.loads(raw or b"null")
            if not isinstance(req, dict) or "input" not in req:
                raise ValueError("expected a JSON object with 'input'")
            inp = req["input"]
            texts = [inp] if isinstance(inp, str) else inp
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
                raise ValueError("'input' must be a string or a non-empty list of strings")
            if req.get("encoding_format", "float") != "float":
                raise ValueError("only encoding_format 'float' is served")
        except ValueError as exc:
            self.stats["errors"] += 1
            return 400, {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}}
        vecs, ntok = self.embed(texts)
        self.stats["requests"] += 1
        self.stats["texts"] += len(texts)
        return 200, {"object": "list", "model": req.get("model") or self.name,
                     "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)],
                     "usage": {"prompt_tokens": ntok, "total_tokens": ntok}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def _serve(self, method: str) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n > MAX_BODY:
                    status, body = 413, {"error": {"message": "request body too large"}}
                    self.close_connection = True
                else:
                    raw = self.rfile.read(n) if n else b""
                    try:
                        status, body = server.handle(method, self.path, raw)
                    except Exception as exc:  # noqa: BLE001 - a failed encode is the client's 500, not a dead server
                        server.stats["errors"] += 1
                        status, body = 500, {"error": {"message": f"{type(exc).__name__}: {exc}"}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server naming
                self._serve("GET")

            def do_POST(self):  # noqa: N802
                self._serve("POST")

            def log_message(self, *args: Any) -> None:  # quiet: the stats count requests
                pass

        return Handler

    def start(self) -> "EmbeddingServer":
        """Serve from a daemon thread; returns self (``url`` is set)."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="evalkit-embed-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


__all__ = ["EmbeddingServer"]
