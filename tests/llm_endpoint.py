"""A real OpenAI-compatible chat server on 127.0.0.1 for the answer tests: it answers by a readable rule (so a test
can say which verdict each question must get) and misbehaves on purpose when told to (the fault tests).

Rule: a reader request (its system prompt mentions "memory notes") is answered with the text after ``ANSWER:`` in
the notes block when there is one, else "I don't know"; a judge request is answered CORRECT when the given answer
equals the reference (case-insensitive), else WRONG — a judge prompt containing "strict" always says WRONG.

``faults``: a list consumed one request at a time before the rule applies: ``("status", code, headers)``,
``("sleep", seconds)`` (then the rule), ``("body", raw_bytes)``, ``("close",)`` (drop the connection).
``requests`` counts every POST received.
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedLLM:
    def __init__(self, delay: float = 0.0):
        self.faults: list[tuple] = []
        self.requests = 0
        self.delay = delay
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n))
                with outer.lock:
                    outer.requests += 1
                    fault = outer.faults.pop(0) if outer.faults else None
                if fault and fault[0] == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault and fault[0] == "status":
                    body = b'{"error": {"message": "scripted"}}'
                    self.send_response(fault[1])
                    for k, v in (fault[2] if len(fault) > 2 else {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if fault and fault[0] == "sleep":
                    time.sleep(fault[1])
                if outer.delay:
                    time.sleep(outer.delay)
                body = fault[1] if fault and fault[0] == "body" else json.dumps(
                    {"choices": [{"message": {"role": "assistant", "content": outer.rule(req["messages"])}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @staticmethod
    def rule(messages: list[dict]) -> str:
        system, user = messages[0]["content"], messages[-1]["content"]
        if "memory notes" in system:
            m = re.search(r"ANSWER: ([^\n]+)", user)
            return m.group(1).strip() if m else "I don't know"
        if "strict" in system:
            return "WRONG"
        ref = re.search(r"Reference answer: (.*)", user).group(1).strip()
        given = re.search(r"Given answer: (.*)", user).group(1).strip()
        return "CORRECT" if ref.lower() == given.lower() else "WRONG"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
