"""Reference memory services for the live-system tests: one small keyword memory behind a real HTTP API and a real
MCP server (the official ``mcp`` SDK), with faults on demand.

The memory: per group (namespace), documents in insertion order; a search scores each by the number of distinct
lower-cased word tokens it shares with the query, best first (ties: insertion order), drops zero scores and returns
``k``. Every hit echoes the metadata the document was stored with (``evk_id``).

HTTP (``python tests/memory_service.py http --port P`` or :class:`HTTPService` in a thread)::

    POST   /v1/memories        {"text", "user_id", "metadata"}  or  {"user_id", "documents": [{...}, ...]}
    POST   /v1/search          {"query", "top_k", "user_id", "as_of"} -> {"results": [{"id", "memory", "score",
                                                                          "metadata"}], "took_ms": ...}
    DELETE /v1/users/<user_id>
    GET    /version            {"version": "ref-1.0"}

Faults (``faults`` dict / ``--faults JSON``): ``{"status": {"<query text>": 503}}`` answers that status for that
query; ``{"sleep": {"<query text>": 2.0}}`` sleeps first; ``{"malformed": ["<query text>"]}`` answers a body that is
not the format; ``{"flaky": {"<query text>": N}}`` answers 503 to the first N asks of that query, then normally;
``{"die_after": N}`` exits the process (``os._exit``) on the N-th search; ``delay`` (seconds) before every search.
Refusals at ingest (answered ``200 {"success": false, "message": …}``, as mcp-memory-service answers them):
``{"refuse": ["<evk_id>", ...]}`` refuses those notes; ``{"dedup": true}`` refuses a note whose exact text is
already stored in *any* group (a deduplication that spans namespaces). A batched ingest answers
``{"ids": [id | null, ...], "stored": [bool, ...]}``, one per document.

MCP (``python tests/memory_service.py mcp-stdio`` / ``mcp-http --port P``): tools ``store(text, group, doc_id,
metadata)``, ``search(query, group, k)`` → ``{"results": [...]}``, ``reset(group)``; the same faults by query text
(a tool error for ``status``), ``die_after`` too. Faults also come from the environment variable ``MEMORY_FAULTS``
(JSON), so a server started with and without faults is the same system file.
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from retrievers.types import Dataset, Document, Query

TOKEN = re.compile(r"\w+")
VERSION = "ref-1.0"


class Memory:
    def __init__(self, faults: dict | None = None):
        self.groups: dict[str, list[dict]] = {}
        self.faults = faults or {}
        self.searches = 0
        self.asked: dict[str, int] = {}
        self.ingested = 0
        self.refused = 0
        self.refusal = ""
        self.lock = threading.Lock()

    def store(self, text: str, group: str, metadata: dict | None = None) -> str | None:
        """The new memory's id, or None when the service refuses the note (``self.refusal`` says why)."""
        with self.lock:
            if (metadata or {}).get("evk_id") in self.faults.get("refuse", []):
                self.refused += 1
                self.refusal = "refused by policy"
                return None
            if self.faults.get("dedup") and any(it["text"] == text for g in self.groups.values() for it in g):
                self.refused += 1
                self.refusal = "Duplicate content detected"
                return None
            items = self.groups.setdefault(group, [])
            mid = f"m{len(items)}"
            items.append({"id": mid, "text": text, "metadata": dict(metadata or {}),
                          "tok": set(TOKEN.findall(text.lower()))})
            self.ingested += 1
            return mid

    def fault(self, query: str) -> tuple[str, Any] | None:
        """The fault to play for this search, if any (counts the search)."""
        with self.lock:
            self.searches += 1
            n = self.asked[query] = self.asked.get(query, 0) + 1
            die = self.faults.get("die_after")
        if die is not None and self.searches >= int(die):
            os._exit(3)
        delay = self.faults.get("delay", 0.0) + self.faults.get("sleep", {}).get(query, 0.0)
        if delay:
            time.sleep(delay)
        if query in self.faults.get("status", {}):
            return "status", int(self.faults["status"][query])
        if n <= int(self.faults.get("flaky", {}).get(query, 0)):
            return "status", 503
        if query in self.faults.get("malformed", []):
            return "malformed", None
        return None

    def search(self, query: str, group: str, k: int) -> list[dict]:
        q = set(TOKEN.findall(query.lower()))
        with self.lock:
            items = list(self.groups.get(group, []))
        scored = [(len(q & it["tok"]), i, it) for i, it in enumerate(items)]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [{"id": it["id"], "memory": it["text"], "score": float(sc), "metadata": it["metadata"]}
                for sc, _, it in scored]

    def reset(self, group: str) -> int:
        with self.lock:
            return len(self.groups.pop(group, []))


# ---- a small dataset with time, two groups, and the ranking the service must give on it ---------------------------

DAY = 86400.0


def timed_dataset() -> Dataset:
    d = [Document("u1", "alpha evergreen note", group="g1"),
         Document("d1", "alpha apple day one", group="g1", created=1 * DAY, timestamp=1 * DAY),
         Document("d2", "alpha banana day two", group="g1", created=2 * DAY, timestamp=2 * DAY),
         Document("d3", "alpha cherry day three", group="g1", created=3 * DAY, timestamp=3 * DAY),
         Document("e1", "beta banana group two", group="g2", created=1 * DAY, timestamp=1 * DAY),
         Document("e2", "beta cherry group two", group="g2", created=2 * DAY, timestamp=2 * DAY)]
    q = [Query("q1", "alpha", as_of=1.5 * DAY, group="g1"),
         Query("q2", "alpha", as_of=3.5 * DAY, group="g1"),
         Query("q3", "banana", as_of=1.5 * DAY, group="g1"),
         Query("q4", "banana cherry", as_of=1.5 * DAY, group="g2"),
         Query("q5", "cherry", as_of=None, group="g2")]
    qrels = {"q1": {"d1": 1}, "q2": {"d3": 1}, "q3": {"d2": 1}, "q4": {"e1": 1}, "q5": {"e2": 1}}
    return Dataset("timed", d, q, qrels, {"all": [x.id for x in q]})


def expected_lists(ds: Dataset, protocol: str, k: int = 10) -> dict[str, list[str]]:
    """The reference service's ranking over what each query may see, computed here independently of the driver
    (the creation order is the documented one: undated first, then by ``created``)."""
    out = {}
    for q in ds.queries:
        docs = [d for d in ds.documents if d.group == q.group]
        order = [d for d in docs if d.created is None] + sorted((d for d in docs if d.created is not None),
                                                               key=lambda d: d.created)
        if protocol == "strict" and q.as_of is not None:
            order = [d for d in order if d.created is None or d.created <= q.as_of]
        words = set(TOKEN.findall(q.text.lower()))
        scored = [(len(words & set(TOKEN.findall(d.text.lower()))), i, d.id) for i, d in enumerate(order)]
        out[q.id] = [d for s, _, d in sorted(scored, key=lambda x: (-x[0], x[1])) if s > 0][:k]
    return out



class HTTPService:
    """The HTTP API in a daemon thread (``start()`` → ``url``), or :meth:`serve_forever` in a process."""

    def __init__(self, faults: dict | None = None, port: int = 0):
        self.memory = Memory(faults)
        self.port = port
        self.httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self):
        mem = self.memory

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def log_message(self, *a):
                pass

            def _send(self, code: int, body: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _json(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"null")

            def do_GET(self):  # noqa: N802
                if self.path == "/version":
                    return self._send(200, {"version": VERSION})
                return self._send(404, {"error": "no route"})

            def do_DELETE(self):  # noqa: N802
                if self.path.startswith("/v1/users/"):
                    from urllib.parse import unquote
                    return self._send(200, {"removed": mem.reset(unquote(self.path[len("/v1/users/"):]))})
                return self._send(404, {"error": "no route"})

            def do_POST(self):  # noqa: N802
                body = self._json()
                if self.path == "/v1/memories":
                    docs = body.get("documents") or [body]
                    ids = [mem.store(d["text"], body.get("user_id") or d.get("user_id"), d.get("metadata"))
                           for d in docs]
                    if "documents" in body:
                        return self._send(200, {"ids": ids, "stored": [i is not None for i in ids]})
                    if ids[0] is None:
                        return self._send(200, {"success": False, "message": mem.refusal})
                    return self._send(200, {"success": True, "id": ids[0]})
                if self.path == "/v1/search":
                    t0 = time.perf_counter()
                    f = mem.fault(body["query"])
                    if f and f[0] == "status":
                        return self._send(f[1], {"error": "injected fault"})
                    if f and f[0] == "malformed":
                        return self._send(200, None, raw=b'{"results": "not a list"}')
                    hits = mem.search(body["query"], body["user_id"], int(body["top_k"]))
                    return self._send(200, {"results": hits, "took_ms": (time.perf_counter() - t0) * 1000})
                return self._send(404, {"error": "no route"})

        return H

    def _server(self) -> ThreadingHTTPServer:
        class Quiet(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client that timed out and left: not news
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        return Quiet(("127.0.0.1", self.port), self._handler())

    def start(self) -> "HTTPService":
        self.httpd = self._server()
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def serve_forever(self) -> None:
        self.httpd = self._server()
        self.port = self.httpd.server_address[1]
        print(f"listening {self.port}", flush=True)
        self.httpd.serve_forever()

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def mcp_server(faults: dict | None = None):
    from mcp.server.mcpserver import MCPServer

    mem = Memory(faults)
    srv = MCPServer("evalkit-reference-memory", version=VERSION)

    @srv.tool()
    def store(text: str, group: str, doc_id: str | None = None, metadata: dict | None = None) -> dict:
        """Store one memory in a group."""
        mid = mem.store(text, group, dict(metadata or {}, **({"evk_id": doc_id} if doc_id else {})))
        return {"success": True, "id": mid} if mid is not None else {"success": False, "message": mem.refusal}

    @srv.tool()
    def search(query: str, group: str, k: int = 5) -> dict:
        """Search a group's memories, best first."""
        f = mem.fault(query)
        if f and f[0] == "status":
            raise ValueError(f"injected fault {f[1]}")
        if f and f[0] == "malformed":
            return {"results": "not a list"}
        return {"results": mem.search(query, group, k)}

    @srv.tool()
    def reset(group: str) -> dict:
        """Forget a group."""
        return {"removed": mem.reset(group)}

    return srv


if __name__ == "__main__":
    mode = sys.argv[1]
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    faults = json.loads(sys.argv[sys.argv.index("--faults") + 1] if "--faults" in sys.argv
                        else os.environ.get("MEMORY_FAULTS", "null"))
    if mode == "http":
        HTTPService(faults, port).serve_forever()
    elif mode == "mcp-stdio":
        mcp_server(faults).run("stdio")
    elif mode == "mcp-http":
        mcp_server(faults).run("streamable-http", host="127.0.0.1", port=port)
    else:
        raise SystemExit(f"unknown mode {mode}")
