"""A loopback echo memory service for ``evalkit perf`` section 7: answers every search with the same ``k`` hits
after ``--delay-ms`` (the "system's own time"), reporting that time as ``took_ms``. Run in its own process so the
measured client does not share a GIL with it::

    python -m evalkit.perf.echo --port 0 --delay-ms 20      # prints "listening <port>" once ready

``POST /search`` ``{"query", "k"}`` → ``{"results": [{"id": "d0", "score": 1.0}, …], "took_ms": …}``;
``POST /v1/chat/completions`` (section 8, answers) → a chat completion whose content is ``CORRECT``.
"""
from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--hits", type=int, default=10)
    args = ap.parse_args(argv)
    delay = args.delay_ms / 1000.0

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            t0 = time.perf_counter()
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n) or b"{}")
            if delay:
                time.sleep(delay)
            if self.path.endswith("/chat/completions"):
                body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "CORRECT"}}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            k = min(int(req.get("k", args.hits)), args.hits)
            body = json.dumps({"results": [{"id": f"d{i}", "score": float(k - i)} for i in range(k)],
                               "took_ms": (time.perf_counter() - t0) * 1000.0}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    print(f"listening {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
