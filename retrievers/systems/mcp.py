"""``kind = "mcp"``: a memory server speaking the Model Context Protocol, through the official SDK (PyPI ``mcp``).

System file (a stdio ``command`` the SDK spawns, or a streamable-HTTP ``url``; tool ``arguments`` are templates,
:mod:`retrievers.systems.mapping`)::

    kind = "mcp"
    [mcp]
    command = ["python", "-m", "my_memory.server"]   # or: url = "http://127.0.0.1:8000/mcp"
    env = { MEMORY_DB = "${HOME}/.my-memory" }       # optional, stdio only
    [mcp.search]
    tool = "search"
    arguments = { query = "{query}", k = "{k}", user = "{group}" }
    [mcp.search.answer]          # read from the tool's structured content, else its first text block as JSON
    results = "results"
    id = "metadata.evk_id"
    text = "text"
    score = "score"
    [mcp.store]                  # optional: one tool call per document
    tool = "store"
    arguments = { text = "{text}", user = "{group}", metadata = { evk_id = "{id}" } }
    [mcp.store.answer]           # optional: did it keep the note? (default: a boolean `success` / `ok` key)
    success = "success"
    [mcp.reset]                  # optional
    tool = "forget"
    arguments = { user = "{group}" }

A search result flagged ``isError`` is a ``refused`` fault (counted, not retried); a result that is not the declared
shape is ``malformed``; no answer within the timeout is ``timeout``; a server that exits or drops the connection is
:class:`SystemDown`. A store result flagged ``isError`` or answering ``success: false`` is a refused note
(:class:`~retrievers.systems.mapping.IngestAnswerMap`). The server's version is what it reports at initialisation
(``serverInfo.version``).

The SDK's client lives in a task of its own (:meth:`MCPAdapter.connect`): when the server dies, the SDK cancels that
task's scope, not the caller's — every call in flight ends as :class:`SystemDown`, one line, never a stray
cancellation. A stdio server's stderr goes to the file ``stderr_log`` names (set by the driver), not the terminal.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import anyio

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
    render,
    search_values,
)
from retrievers.systems.protocol import Answer, SystemDown, SystemFault
from retrievers.types import Document


def _tool(t: dict, allowed: frozenset[str], where: str, answer: bool = False, ingest: bool = False) -> dict:
    check_keys(t, {"tool", "arguments"} | ({"answer"} if answer or ingest else set()),
               {"tool"} | ({"answer"} if answer else set()), where)
    if not isinstance(t["tool"], str) or not t["tool"]:
        raise ConfigError(f"{where}: tool must be a tool name")
    args = t.get("arguments", {})
    if not isinstance(args, dict):
        raise ConfigError(f"{where}: arguments must be a table")
    check_template(args, allowed, f"{where} arguments")
    out = {"tool": t["tool"], "arguments": args}
    if answer:
        out["answer"] = AnswerMap.from_table(t["answer"], f"{where}.answer").record()
    if ingest and "answer" in t:
        out["answer"] = IngestAnswerMap.from_table(t["answer"], f"{where}.answer").record()
    return out


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@kind("mcp")
class MCPAdapter(Adapter):
    """An MCP server's tools as the protocol's search / ingest / reset."""

    def __init__(self, table: dict, label: str, concurrency: int, timeout: float):
        super().__init__(label)
        self.table = table
        self.can_ingest = "store" in table
        self.can_reset = "reset" in table
        self.logs_stderr = "command" in table  # a stdio server evalkit spawns
        self.answer = AnswerMap.from_table(table["search"]["answer"], f"system {label} [mcp.search.answer]")
        self.store_answer = IngestAnswerMap.from_table((table.get("store") or {}).get("answer", {}),
                                                       f"system {label} [mcp.store.answer]")
        self.timeout = timeout
        self.limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.client = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._version: str | None = None
        self._gone: str | None = None  # why the session ended (set by the client's task)
        self._closing: anyio.Event | None = None
        self._calls: set[anyio.CancelScope] = set()

    @classmethod
    def validate(cls, table: dict, where: str) -> dict:
        check_keys(table, {"command", "url", "env", "cwd", "search", "store", "reset"}, {"search"}, where)
        if ("command" in table) == ("url" in table):
            raise ConfigError(f"{where}: give exactly one of command (a stdio server) and url (streamable HTTP)")
        out: dict[str, Any] = {}
        if "command" in table:
            cmd = table["command"]
            if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)):
                raise ConfigError(f"{where}: command must be a non-empty list of strings")
            out["command"] = list(cmd)
            env = table.get("env", {})
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                raise ConfigError(f"{where}: env must be a table of strings")
            out["env"] = dict(env)
            if "cwd" in table:
                out["cwd"] = str(table["cwd"])
        else:
            if not isinstance(table["url"], str) or not table["url"].startswith(("http://", "https://", "${")):
                raise ConfigError(f"{where}: url must start with http:// or https://")
            if "env" in table or "cwd" in table:
                raise ConfigError(f"{where}: env and cwd are for a stdio command, not a url")
            out["url"] = table["url"]
        out["search"] = _tool(table["search"], SEARCH_FIELDS, f"{where}.search", answer=True)
        if "store" in table:
            out["store"] = _tool(table["store"], DOC_FIELDS, f"{where}.store", ingest=True)
        if "reset" in table:
            out["reset"] = _tool(table["reset"], RESET_FIELDS, f"{where}.reset")
        return out

    async def connect(self) -> None:
        from mcp import Client  # lazy: startup
        from mcp.client.stdio import StdioServerParameters, stdio_client  # lazy: startup
        where = f"system {self.label} [mcp]"
        self._stack = contextlib.AsyncExitStack()
        if "command" in self.table:
            env = dict(os.environ)
            env.update({k: env_expand(v, f"{where} env {k}") for k, v in self.table.get("env", {}).items()})
            params = StdioServerParameters(command=self.table["command"][0], args=self.table["command"][1:],
                                           env=env, cwd=self.table.get("cwd"))
            # the server's stderr (often a log line per request) goes to a file, not into evalkit's output
            errlog = self._stack.enter_context(open(self.stderr_log, "a", encoding="utf-8")) \
                if self.stderr_log else sys.stderr
            target: Any = stdio_client(params, errlog=errlog)
            what = " ".join(self.table["command"])
        else:
            target = env_expand(self.table["url"], where)
            what = target
        ready = anyio.Event()
        self._closing = anyio.Event()
        failed: list[BaseException] = []

        async def own() -> None:
            """Hold the SDK's client (its task group, its cancel scope) in this task, away from the caller's."""
            try:
                async with Client(target, read_timeout_seconds=self.timeout) as client:
                    self.client = client
                    ready.set()
                    await self._closing.wait()
            except BaseException as exc:  # noqa: BLE001 - the SDK raises groups, OSErrors, cancellations
                inner = _innermost(exc)
                failed.append(inner)
                self._gone = f"{type(inner).__name__}: {inner}" if str(inner) else type(inner).__name__
            finally:
                self.client = None
                if self._gone is None and not self._closing.is_set():
                    self._gone = "the session ended"
                for scope in list(self._calls):  # every call in flight ends as SystemDown
                    scope.cancel()
                ready.set()

        tg = await self._stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(own)
        await ready.wait()
        if self.client is None:
            await self.close()
            inner = failed[0] if failed else None
            raise SystemDown(f"system {self.label}: cannot connect to MCP server {what} "
                             f"({type(inner).__name__ if inner else 'closed'}: {inner})")
        info = getattr(self.client, "server_info", None)
        self._version = getattr(info, "version", None) or None

    async def close(self) -> None:
        stack, self._stack = self._stack, None
        if self._closing is not None:
            self._closing.set()
        if stack is not None:
            with contextlib.suppress(BaseException):
                with anyio.move_on_after(10):
                    await stack.aclose()
        self.client = None

    async def version(self) -> str | None:
        return self._version

    async def _call(self, spec: dict, values: dict) -> Any:
        where = f"system {self.label}: tool {spec['tool']}"
        if self.client is None:
            raise SystemDown(f"{where}: the MCP session ended ({self._gone or 'closed'})")
        args = render(spec["arguments"], values)
        res = None
        try:
            with anyio.CancelScope() as scope:  # cancelled by the client's task when the session dies
                self._calls.add(scope)
                try:
                    async with self.limiter:
                        res = await self.client.call_tool(spec["tool"], args)
                finally:
                    self._calls.discard(scope)
        except BaseException as exc:  # noqa: BLE001 - an outer cancellation (our own timeout) passes through
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                raise
            inner = _innermost(exc)
            name = type(inner).__name__
            if isinstance(inner, TimeoutError) or "timeout" in name.lower() or "timed out" in str(inner).lower():
                raise SystemFault("timeout", f"{where}: no answer within {self.timeout:g} s") from None
            raise SystemDown(f"{where}: {name}: {inner}" if self._gone is None else
                             f"{where}: the MCP session ended ({self._gone})") from None
        if scope.cancelled_caught or res is None:
            raise SystemDown(f"{where}: the MCP session ended (server gone: {self._gone or 'closed'})")
        if getattr(res, "is_error", False):
            text = " ".join(c.text for c in res.content if getattr(c, "type", "") == "text")
            raise SystemFault("refused", f"{where}: tool error: {' '.join(text.split())[:200]}")
        return res

    def _payload(self, res: Any, where: str) -> Any:
        sc = getattr(res, "structured_content", None)
        if sc is not None:
            return sc
        texts = [c.text for c in res.content if getattr(c, "type", "") == "text"]
        if not texts:
            raise SystemFault("malformed", f"{where}: the tool result has no structured content and no text")
        try:
            return json.loads(texts[0])
        except ValueError:
            raise SystemFault("malformed", f"{where}: the tool's text is not JSON ({texts[0][:120]!r})") from None

    async def search(self, query: str, *, k: int, as_of: float | None, group: str | None,
                     context: list[str]) -> Answer:
        spec = self.table["search"]
        res = await self._call(spec, search_values(query, k, as_of, group, context))
        where = f"system {self.label}: tool {spec['tool']}"
        return self.answer.read(self._payload(res, where), where)

    async def ingest(self, documents: list[Document], *, group: str | None) -> dict[str, str]:
        if not self.can_ingest:
            await super().ingest(documents, group=group)
        spec = self.table["store"]
        where = f"system {self.label}: tool {spec['tool']}"
        refused: dict[str, str] = {}
        for d in documents:
            try:
                res = await self._call(spec, doc_values(d, group))
            except SystemDown:
                raise
            except SystemFault as exc:
                if exc.kind != "refused":
                    raise
                refused[d.id] = str(exc).split("tool error: ", 1)[-1] or "tool error"
                continue
            sc = getattr(res, "structured_content", None)
            if sc is None:
                texts = [c.text for c in res.content if getattr(c, "type", "") == "text"]
                try:
                    sc = json.loads(texts[0]) if texts else None
                except ValueError:
                    sc = None  # a plain-text answer: the call's success is all it says
            refused.update(self.store_answer.refused(sc, [d.id], where))
        return refused

    async def reset(self, group: str | None) -> None:
        if not self.can_reset:
            await super().reset(group)
        await self._call(self.table["reset"], {"group": group})


__all__ = ["MCPAdapter"]
