"""An OpenAI-compatible chat endpoint as the answer runs use it: one call = (messages, parameters) → text, cached by
content, retried by the live adapters' fault rules, many in flight at once.

**Deterministic parameters.** Every call sends ``temperature 0`` and ``seed 0`` (an endpoint that rejects ``seed``
with HTTP 400 is asked once more without it, and the endpoint is remembered as seedless), and the caller's
``max_tokens``.

**Content-addressed cache.** A call's key is ``sha256([CACHE_FORMAT, model id, template hash, parameters,
messages])`` — the endpoint's URL is *not* in it (the same model served on another port answers from the cache);
the entry is a verified atomic file (:mod:`retrievers.cachefile`, written without fsync: an entry a power cut loses
is asked again) under ``$EVALKIT_CACHE/answers/``. A rerun reads
every answer from there and sends nothing (:attr:`Endpoint.asked` counts what was sent). Faults are never cached.

**Faults cost one line each** (the live adapters' table, docs/systems.md): connection refused / reset, a timeout,
HTTP 429 (waits ``Retry-After`` seconds when the server gives it, else the back-off), HTTP 5xx — retried
``retries`` times with back-off ``backoff · 2^i`` s (at most 60 s); each failed attempt is one line in
:attr:`Endpoint.fault_lines`, handed to ``on_fault`` as it happens (the CLI prints it); HTTP 4xx other than 429 (refused) and a malformed body (not
JSON, no ``choices[0].message.content`` string) are not retried; an empty answer is an answer (the reader
declined or said nothing: the judge decides), never a fault. A call that still fails raises :class:`LLMFault`
(kind + one line); the caller scores it and a rerun asks it again.

Usage::

    ep = Endpoint("http://127.0.0.1:8011/v1", "smollm2-135m-instruct")
    text = ep.chat([{"role": "user", "content": "Say yes."}], template="ab12", max_tokens=8).text
"""
from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from retrievers import cachefile

CACHE_FORMAT = "evalkit-answer-call/1"
KINDS = ("down", "timeout", "rate_limited", "server_error", "refused", "malformed")


class LLMFault(Exception):
    """A call that failed after its retries: ``kind`` (one of :data:`KINDS`) and a one-line message."""

    def __init__(self, kind: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind in ("down", "timeout", "rate_limited", "server_error")


@dataclass
class Reply:
    """One call's answer: ``text``, token counts as the endpoint reported them (``usage``; 0 when absent),
    ``cached`` (read from the cache, nothing sent)."""

    text: str
    tokens_in: int
    tokens_out: int
    cached: bool


def cache_root() -> Path:
    return Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit") / "answers"


def call_key(model: str, template: str, params: dict, messages: list[dict]) -> str:
    """The content address of one call (what makes two calls the same call)."""
    raw = json.dumps([CACHE_FORMAT, model, template, params, messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass
class Endpoint:
    """One OpenAI-compatible chat endpoint (``base`` ends in ``/v1``, or is the full ``…/chat/completions`` URL) and
    the model id asked there. ``api_key_env`` names the environment variable holding the key (read at call time,
    never stored or written anywhere)."""

    base: str
    model: str
    api_key_env: str | None = None
    timeout: float = 120.0
    retries: int = 3
    backoff: float = 0.5
    cache_dir: Path | None = None
    asked: int = 0           # calls sent (cache misses that reached the endpoint)
    cache_hits: int = 0
    faults: dict = field(default_factory=dict)   # kind -> count of failed attempts (retried ones included)
    fault_lines: list = field(default_factory=list)  # one line per failed attempt
    on_fault: Callable[[str], None] | None = field(default=None, repr=False)  # called with each line as it happens
    _seedless: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _writer: ThreadPoolExecutor | None = field(default=None, repr=False)   # see writing_behind()
    _pending: dict = field(default_factory=dict, repr=False)               # path -> entry not yet on disk
    _writes: list[Future] = field(default_factory=list, repr=False)

    def __post_init__(self):
        u = urlsplit(self.base if "://" in self.base else "http://" + self.base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"endpoint {self.base!r} is not an http(s) URL")
        path = u.path.rstrip("/")
        self._path = path if path.endswith("/chat/completions") else path + "/chat/completions"
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self.cache_dir = Path(self.cache_dir) if self.cache_dir else cache_root()

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self._host}{':' + str(self._port) if self._port else ''}{self._path}"

    def chat(self, messages: list[dict], *, template: str, max_tokens: int, sleep=time.sleep) -> Reply:
        """One deterministic call (from the cache when it was asked before); :class:`LLMFault` after the retries."""
        params = {"temperature": 0, "seed": 0, "max_tokens": int(max_tokens)}
        key = call_key(self.model, template, params, messages)
        path = self.cache_dir / key[:2] / (key + cachefile.SUFFIX)
        with self._lock:
            hit = self._pending.get(path)
        if hit is None:
            hit = cachefile.read(path) if path.exists() else None
        if hit is not None:
            with self._lock:
                self.cache_hits += 1
            return Reply(hit["text"], hit["tokens_in"], hit["tokens_out"], True)
        reply = self._retrying(messages, params, sleep)
        entry = {"text": reply.text, "tokens_in": reply.tokens_in, "tokens_out": reply.tokens_out,
                 "model": self.model, "template": template}
        if self._writer is None:
            cachefile.write(path, entry, durable=False)
        else:
            with self._lock:
                self._pending[path] = entry
                self._writes.append(self._writer.submit(self._write_entry, path, entry))
        return reply

    def _write_entry(self, path: Path, entry: dict) -> None:
        cachefile.write(path, entry, durable=False)
        with self._lock:
            self._pending.pop(path, None)

    @contextlib.contextmanager
    def writing_behind(self):
        """Within the block, each answer's cache entry is written by one background thread instead of the calling
        one: creating a file costs ~0.6 ms on this machine's disk, which sat on every call's critical path and kept a
        concurrency-8 pass below the endpoint's capacity. An entry not yet on disk is served from memory to the
        calls of this endpoint; on leaving the block every entry is on disk (a write's error is raised there). A
        process killed inside the block loses at most the entries still queued: they are asked again on resume.

        Usage::

            with ep.writing_behind():
                replies = [ep.chat(m, template=t, max_tokens=64) for m in batches]
        """
        if self._writer is not None:  # already inside one (the same endpoint as reader and judge)
            yield self
            return
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="answer-cache")
        try:
            yield self
        finally:
            writer, self._writer = self._writer, None
            writer.shutdown(wait=True)
            writes, self._writes = self._writes, []
            for f in writes:
                f.result()

    def _retrying(self, messages, params, sleep) -> Reply:
        for attempt in range(self.retries + 1):
            try:
                return self._post(messages, params)
            except LLMFault as exc:
                last = attempt >= self.retries or not exc.retryable
                wait = min(exc.retry_after if exc.retry_after is not None else self.backoff * (2 ** attempt), 60.0)
                line = f"{self.model} at {self.url}: {exc.kind}: {exc}" + (
                    "" if last else f" (retry {attempt + 1} of {self.retries} in {wait:g} s)")
                with self._lock:
                    self.faults[exc.kind] = self.faults.get(exc.kind, 0) + 1
                    self.fault_lines.append(line)
                if self.on_fault is not None:
                    self.on_fault(line)
                if last:
                    raise
                sleep(wait)
        raise AssertionError("unreachable")

    def _conn(self, fresh: bool = False) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None or fresh:
            if c is not None:
                c.close()
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout)
        return c

    def _post(self, messages, params) -> Reply:
        body = {"model": self.model, "messages": messages, **params}
        if self._seedless:
            body.pop("seed")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        status, raw, retry_after = self._send(json.dumps(body).encode(), headers)
        if status == 400 and "seed" in body and b"seed" in raw:  # an endpoint without seeds: once more without
            self._seedless = True
            return self._post(messages, params)
        if status == 429:
            raise LLMFault("rate_limited", "HTTP 429" + (f" (Retry-After {retry_after:g} s)"
                                                         if retry_after is not None else ""), retry_after)
        if status >= 500:
            raise LLMFault("server_error", f"HTTP {status}: {raw[:120].decode('utf-8', 'replace')}")
        if status >= 400:
            raise LLMFault("refused", f"HTTP {status}: {raw[:120].decode('utf-8', 'replace')}")
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMFault("malformed", f"HTTP {status} but no choices[0].message.content in "
                                        f"{raw[:80].decode('utf-8', 'replace')!r}") from None
        if not isinstance(text, str):
            raise LLMFault("malformed", f"choices[0].message.content is {type(text).__name__}, not a string")
        usage = data.get("usage") or {}
        with self._lock:
            self.asked += 1
        return Reply(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), False)

    def _send(self, body: bytes, headers: dict) -> tuple[int, bytes, float | None]:
        for fresh in (False, True):  # a kept-alive connection the server closed: reconnect once
            conn = self._conn(fresh)
            try:
                conn.request("POST", self._path, body, headers)
                resp = conn.getresponse()
                raw = resp.read()
                ra = resp.getheader("Retry-After")
                try:
                    retry_after = float(ra) if ra is not None else None
                except ValueError:
                    retry_after = None
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    self._local.conn = None
                return resp.status, raw, retry_after
            except TimeoutError:
                conn.close()
                self._local.conn = None
                raise LLMFault("timeout", f"no answer within {self.timeout:g} s") from None
            except (ConnectionRefusedError, OSError) as exc:
                conn.close()
                self._local.conn = None
                if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)) \
                        and not fresh:
                    continue
                if isinstance(exc, http.client.RemoteDisconnected):
                    raise LLMFault("malformed", "the server closed the connection without an answer") from None
                raise LLMFault("down", f"cannot reach the endpoint ({exc.__class__.__name__}: "
                                       f"{exc.strerror or exc})") from None
            except http.client.HTTPException as exc:
                conn.close()
                self._local.conn = None
                raise LLMFault("malformed", f"not an HTTP answer ({exc.__class__.__name__})") from None
        raise AssertionError("unreachable")
