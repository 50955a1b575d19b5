"""A real rerank HTTP server on 127.0.0.1 for tests: records every request, answers from a script.

    srv = RerankServer().start()          # ephemeral port, ThreadingHTTPServer in a daemon thread
    srv.script = lambda req: Reply(body=provider_answer("jina", [(2, 0.95), (0, 0.4)]))
    ... POST to srv.url ...
    srv.requests[0].headers["authorization"], srv.requests[0].json["top_n"]
    srv.stop()

``Reply`` can delay its answer (``delay_s``; interrupted when the server stops), send any status, a JSON-able
body or raw bytes. ``provider_answer`` builds a well-formed answer in a provider's format (jina / siliconflow:
``results[].relevance_score``; pinecone: ``data[].score``) from ``(index, score)`` pairs.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-able object, or bytes sent as they are
    delay_s: float = 0.0
    content_type: str = "application/json"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    raw: bytes
    json: Any = None


@dataclass
class RerankServer:
    script: Callable[[Recorded], Reply] | None = None
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------------
    def start(self) -> "RerankServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server naming
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    parsed = json.loads(raw.decode("utf-8")) if raw else None
                except ValueError:
                    parsed = None
                rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, raw, parsed)
                with server._lock:
                    server.requests.append(rec)
                reply = server.script(rec) if server.script else Reply(404, {"error": "no script"})
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    return
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode("utf-8")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def log_message(self, *args):  # keep test output clean
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request, client_address):  # a client that timed out is not an error here
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1/rerank"

    def reset(self, script: Callable[[Recorded], Reply] | None = None) -> None:
        with self._lock:
            self.requests.clear()
        self.script = script


def documents_of(req: Recorded) -> list[str]:
    """The document texts a request carried (strings, or pinecone's ``{text}`` objects)."""
    docs = req.json["documents"]
    return [d["text"] if isinstance(d, dict) else d for d in docs]


def provider_answer(provider: str, items: list[tuple[Any, Any]], docs: list[str] | None = None,
                    model: str = "test-reranker") -> dict:
    """A provider-format answer body from ``(index, score)`` pairs, in the given order."""
    def doc(i):
        return {"text": docs[i]} if docs is not None and isinstance(i, int) and 0 <= i < len(docs) else None

    if provider == "pinecone":
        data = [{"index": i, "score": s, **({"document": doc(i)} if doc(i) else {})} for i, s in items]
        return {"model": model, "data": data, "usage": {"rerank_units": 1}}
    results = [{"index": i, "relevance_score": s, **({"document": doc(i)} if doc(i) else {})} for i, s in items]
    return {"model": model, "results": results, "usage": {"total_tokens": 1}}
