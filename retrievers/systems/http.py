"""``kind = "http"``: a memory service behind a JSON HTTP API, mapped declaratively (no code to write).

System file (every request: ``method``, ``path`` — fields allowed, URL-quoted —, ``params`` = the query string
and ``body`` = the JSON body, both templates; see :mod:`retrievers.systems.mapping`)::

    kind = "http"
    [http]
    base_url = "http://127.0.0.1:8080"
    headers = { Authorization = "Bearer ${MEMORY_API_KEY}" }   # ${NAME}: read from the environment
    [http.search]
    method = "POST"
    path = "/v1/search"
    body = { query = "{query}", top_k = "{k}", user_id = "{group}", as_of = "{as_of}" }
    [http.search.answer]
    results = "results"          # where the list is
    id = "metadata.evk_id"       # per hit: the dataset id the service echoes …
    text = "memory"              # … and/or the text
    score = "score"
    [http.ingest]                # optional: one document per request (default), or `batch` per request
    path = "/v1/memories"
    body = { text = "{text}", user_id = "{group}", metadata = { evk_id = "{id}" } }
    [http.ingest.answer]         # optional: did the service keep it? (default: a boolean `success` / `ok`
    success = "success"          # key when the answer has one, else the HTTP status)
    [http.reset]                 # optional: forget a group
    method = "DELETE"
    path = "/v1/users/{group}"
    [http.version]               # optional: the version the service reports (a GET)
    path = "/version"
    field = "version"

Ingest answers: 2xx → read with :class:`~retrievers.systems.mapping.IngestAnswerMap` (a ``200 {"success": false}`` is
a refused note); another 4xx → every document of that request refused (with the status as reason).
Search answers: 2xx → read; HTTP 429 / 5xx → a ``server_error`` fault (retried by the driver); another 4xx → ``refused``
(counted, not retried); a body that is not JSON or not the declared shape → ``malformed``; a timeout → ``timeout``;
a refused connection or a connection dropped mid-answer → :class:`SystemDown` (the driver retries, then stops).
"""
from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import asyncio

import aiohttp

from retrievers.errors import ConfigError
from retrievers.systems.adapter import Adapter, check_keys, kind
from retrievers.systems.mapping import (
    DOC_FIELDS,
    RESET_FIELDS,
    SEARCH_FIELDS,
    AnswerMap,
    IngestAnswerMap,
    check_template,
    doc_values,
    env_expand,
    get_path,
    MISSING,
    render,
    search_values,
)
from retrievers.systems.protocol import Answer, SystemDown, SystemFault
from retrievers.types import Document

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_REQ_KEYS = {"method", "path", "params", "body"}


def _request(t: dict, allowed: frozenset[str], where: str, default_method: str, extra: set[str] = frozenset(),
             required: set[str] = frozenset({"path"})) -> dict:
    check_keys(t, _REQ_KEYS | set(extra), set(required), where)
    out = {"method": str(t.get("method", default_method)).upper(), "path": t.get("path", ""),
           "params": t.get("params", {}), "body": t.get("body")}
    if out["method"] not in METHODS:
        raise ConfigError(f"{where}: method {out['method']!r} is not one of {', '.join(METHODS)}")
    if not isinstance(out["path"], str) or (out["path"] and not out["path"].startswith("/")):
        raise ConfigError(f"{where}: path must be a string starting with /")
    if not isinstance(out["params"], dict):
        raise ConfigError(f"{where}: params must be a table")
    for k in ("path", "params", "body"):
        check_template(out[k], allowed, f"{where} {k}")
    return out


@dataclass
class _Prepared:
    method: str
    url: str
    params: dict
    body: Any


def _prepare(req: dict, values: dict) -> _Prepared:
    path = render_path(req["path"], values)
    params = {k: v for k, v in render(req["params"], values).items() if v is not None}
    body = render(req["body"], values) if req["body"] is not None else None
    return _Prepared(req["method"], path, params, body)


def render_path(path: str, values: dict) -> str:
    """A path template with every field URL-quoted (a group name with a slash stays one path segment)."""
    return path.format_map({k: urllib.parse.quote("" if v is None else str(v), safe="") for k, v in values.items()})


@kind("http")
class HTTPAdapter(Adapter):
    """An HTTP JSON service (see the module docstring)."""

    def __init__(self, table: dict, label: str, concurrency: int, timeout: float):
        super().__init__(label)
        self.table = table
        self.can_ingest = table.get("ingest") is not None
        self.can_reset = table.get("reset") is not None
        self.answer = AnswerMap.from_table(table["search"]["answer"], f"system {label} [http.search.answer]")
        self.ingest_answer = IngestAnswerMap.from_table((table.get("ingest") or {}).get("answer", {}),
                                                        f"system {label} [http.ingest.answer]")
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.client: aiohttp.ClientSession | None = None

    @classmethod
    def validate(cls, table: dict, where: str) -> dict:
        check_keys(table, {"base_url", "headers", "search", "ingest", "reset", "version"}, {"base_url", "search"},
                   where)
        base = table["base_url"]
        if not isinstance(base, str) or not base.startswith(("http://", "https://", "${")):
            raise ConfigError(f"{where}: base_url must start with http:// or https://")
        headers = table.get("headers", {})
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ConfigError(f"{where}: headers must be a table of strings")
        s = dict(table["search"])
        ans = s.pop("answer", None)
        if ans is None:
            raise ConfigError(f"{where}.search: missing [http.search.answer] (where the hits are in the answer)")
        out = {"base_url": base, "headers": dict(headers),
               "search": dict(_request(s, SEARCH_FIELDS, f"{where}.search", "POST"),
                              answer=AnswerMap.from_table(ans, f"{where}.search.answer").record())}
        if "ingest" in table:
            t = table["ingest"]
            batch = t.get("batch", 1) if isinstance(t, dict) else 1
            if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
                raise ConfigError(f"{where}.ingest: batch must be an integer >= 1")
            fields = (SEARCH_FIELDS & {"group"}) | {"documents"} if batch > 1 else DOC_FIELDS
            req = _request({k: v for k, v in t.items() if k not in ("batch", "item", "answer")},
                           frozenset(fields), f"{where}.ingest", "POST")
            req["batch"] = batch
            if "answer" in t:
                req["answer"] = IngestAnswerMap.from_table(t["answer"], f"{where}.ingest.answer").record()
            if batch > 1:
                if "item" not in t:
                    raise ConfigError(f"{where}.ingest: batch > 1 needs an item template (one document of "
                                      f"the body's {{documents}} list)")
                check_template(t["item"], DOC_FIELDS, f"{where}.ingest item")
                req["item"] = t["item"]
            elif "item" in t:
                raise ConfigError(f"{where}.ingest: item is only for batch > 1")
            out["ingest"] = req
        if "reset" in table:
            out["reset"] = _request(table["reset"], RESET_FIELDS, f"{where}.reset", "POST")
        if "version" in table:
            v = table["version"]
            check_keys(v, {"path", "field"}, {"path", "field"}, f"{where}.version")
            out["version"] = {"path": v["path"], "field": v["field"]}
        return out

    async def connect(self) -> None:
        where = f"system {self.label} [http]"
        base = env_expand(self.table["base_url"], where)
        headers = {k: env_expand(v, f"{where} header {k}") for k, v in self.table["headers"].items()}
        self.base = base.rstrip("/")
        # aiohttp: a keep-alive pool of `concurrency` connections; ~0.3 ms per loopback request where httpx took
        # ~0.9 ms (evalkit perf section 7 measures the adapter's overhead)
        self.client = aiohttp.ClientSession(headers=headers, trust_env=False,
                                            connector=aiohttp.TCPConnector(limit=self.concurrency),
                                            timeout=aiohttp.ClientTimeout(total=self.timeout))

    async def close(self) -> None:
        if self.client is not None:
            try:
                await self.client.close()
            except Exception:  # noqa: BLE001 - closing never fails a run
                pass
            self.client = None

    async def _send(self, p: _Prepared, what: str) -> Any:
        assert self.client is not None, "start() first"
        where = f"system {self.label}: {p.method} {self.base}{p.url}"
        try:
            async with self.client.request(p.method, self.base + p.url, params=p.params or None,
                                           data=None if p.body is None else json.dumps(p.body).encode(),
                                           headers={"Content-Type": "application/json"} if p.body is not None
                                           else None) as r:
                status, raw = r.status, await r.read()
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise SystemFault("timeout", f"{where}: no answer within {self.timeout:g} s") from None
        except aiohttp.ClientError as exc:  # refused, reset, dropped mid-answer: the service is gone (or going)
            raise SystemDown(f"{where}: {type(exc).__name__}: {exc or 'connection lost'}") from None
        if status == 429 or status >= 500:
            raise SystemFault("server_error", f"{where}: HTTP {status} {_snippet(raw)}")
        if status >= 400:
            raise SystemFault("refused", f"{where}: HTTP {status} {_snippet(raw)}")
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise SystemFault("malformed", f"{where}: the {what} answer is not JSON ({_snippet(raw)})") from None

    async def search(self, query: str, *, k: int, as_of: float | None, group: str | None,
                     context: list[str]) -> Answer:
        req = self.table["search"]
        body = await self._send(_prepare(req, search_values(query, k, as_of, group, context)), "search")
        return self.answer.read(body, f"system {self.label}")

    async def ingest(self, documents: list[Document], *, group: str | None) -> dict[str, str]:
        if not self.can_ingest:
            await super().ingest(documents, group=group)
        req = self.table["ingest"]
        n = req["batch"]
        refused: dict[str, str] = {}
        for i in range(0, len(documents), n):
            docs = documents[i:i + n]
            values = doc_values(docs[0], group) if n == 1 else \
                {"group": group, "documents": [render(req["item"], doc_values(d, group)) for d in docs]}
            p = _prepare(req, values)
            try:
                body = await self._send(p, "ingest")
            except SystemDown:
                raise
            except SystemFault as exc:
                if exc.kind != "refused":  # a 4xx: the service refused these documents
                    raise
                refused.update({d.id: str(exc).split(": ", 2)[-1] for d in docs})
                continue
            refused.update(self.ingest_answer.refused(body, [d.id for d in docs],
                                                      f"system {self.label}: {p.method} {self.base}{p.url}"))
        return refused

    async def reset(self, group: str | None) -> None:
        if not self.can_reset:
            await super().reset(group)
        await self._send(_prepare(self.table["reset"], {"group": group}), "reset")

    async def version(self) -> str | None:
        v = self.table.get("version")
        if not v:
            return None
        body = await self._send(_Prepared("GET", v["path"], {}, None), "version")
        val = get_path(body, v["field"])
        if val is MISSING or val is None:
            raise SystemFault("malformed", f"system {self.label}: the version answer has no {v['field']!r}")
        return str(val)


def _snippet(raw: bytes, n: int = 160) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    return text[:n] + ("…" if len(text) > n else "")


__all__ = ["HTTPAdapter", "render_path"]
