"""``kind = "python"``: a memory system as a Python object in this process (mem0, OpenClaw's driver, your own).

System file::

    kind = "python"
    [python]
    object = "package.module:factory"   # a class or a function returning the object, or the object itself
    [python.options]                    # keyword arguments for the factory (optional)
    store = "chroma"

The object speaks :mod:`retrievers.systems.protocol`. Synchronous methods run in worker threads (at most
``limits.concurrency`` at once; a system that is not thread-safe says ``concurrency = 1``); ``async def`` methods
are awaited. From the Python API an object is passed directly (:func:`PythonAdapter.of`).

**Keyed by its code.** An answer is cached under the hash of the code that produced it (:func:`code_hash`): the
source file of the object's module and of its class's module and, where cheap (at most ``PACKAGE_FILES`` files,
``PACKAGE_BYTES`` bytes), every file of the package folder each lives in (a driver script beside the adapter
counts). Edit the system and the next run asks it again; a system that ``version()`` alone names is not trusted
to bump it.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import anyio

from retrievers.errors import ConfigError
from retrievers.systems.adapter import Adapter, check_keys, kind
from retrievers.systems.protocol import Answer, SystemFault, as_answer
from retrievers.types import Document


def import_object(spec: str, where: str) -> Any:
    """``"package.module:attr"`` (dots after the colon walk attributes) → the object; ConfigError otherwise."""
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise ConfigError(f"{where}: object {spec!r} must be 'package.module:name'")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import {mod!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{where}: module {mod!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


PACKAGE_FILES = 200
PACKAGE_BYTES = 4 << 20


def code_files(module_names) -> dict[str, Path]:
    """The files :func:`code_hash` reads for these modules, by their path relative to the folder that holds the
    module's top-level package (so a checkout elsewhere hashes the same): each module's source file and, when it is
    inside a package, every file of that package's folder (recursively, without ``__pycache__`` and dot-files)
    when they are at most ``PACKAGE_FILES`` files of ``PACKAGE_BYTES`` bytes together."""
    out: dict[str, Path] = {}
    for name in module_names:
        mod = sys.modules.get(name) if name else None
        path = getattr(mod, "__file__", None)
        if not path:
            continue
        src = Path(path).resolve()
        depth = name.count(".") + (src.name == "__init__.py")
        root = src.parents[depth] if depth < len(src.parents) else src.parent
        files = [src]
        if getattr(mod, "__package__", None) and (src.parent / "__init__.py").is_file():
            pkg = sorted(f for f in src.parent.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                         and not any(part.startswith(".") for part in f.relative_to(src.parent).parts))
            if len(pkg) <= PACKAGE_FILES and sum(f.stat().st_size for f in pkg) <= PACKAGE_BYTES:
                files = pkg
        for f in files:
            out[f.relative_to(root).as_posix() if f.is_relative_to(root) else f.as_posix()] = f
    return dict(sorted(out.items()))


def code_hash(module_names) -> str | None:
    """sha256 (16 hex digits) of the files :func:`code_files` names, each with its relative path; None when no
    module has a source file (a built-in, an object defined in an interactive session).

    >>> code_hash(["retrievers.systems.python"]) == code_hash(["retrievers.systems.python"])
    True
    """
    files = code_files(module_names)
    if not files:
        return None
    h = hashlib.sha256()
    for rel, f in files.items():
        h.update(rel.encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"<unreadable>")
        h.update(b"\0")
    return h.hexdigest()[:16]


@kind("python")
class PythonAdapter(Adapter):
    """A protocol object driven in worker threads (sync methods) or awaited (async ones)."""

    default_concurrency = 1

    def __init__(self, obj: Any, label: str, concurrency: int = 1):
        super().__init__(label)
        if not callable(getattr(obj, "search", None)):
            raise ConfigError(f"system {label}: the object has no search(query, *, k, as_of, group, context) method")
        self.obj = obj
        self.can_ingest = callable(getattr(obj, "ingest", None))
        self.can_reset = callable(getattr(obj, "reset", None))
        self.limiter = anyio.CapacityLimiter(max(1, concurrency))
        self.modules = [type(obj).__module__, getattr(obj, "__module__", None) or type(obj).__module__]

    def code(self) -> str | None:
        return code_hash(dict.fromkeys(self.modules))

    @classmethod
    def of(cls, obj: Any, label: str | None = None, concurrency: int = 1) -> "PythonAdapter":
        """An adapter over an object handed to the Python API."""
        return cls(obj, label or getattr(obj, "name", None) or type(obj).__name__, concurrency)

    @classmethod
    def validate(cls, table: dict, where: str) -> dict:
        check_keys(table, {"object", "options"}, {"object"}, where)
        if not isinstance(table["object"], str):
            raise ConfigError(f"{where}: object must be a string 'package.module:name'")
        opts = table.get("options", {})
        if not isinstance(opts, dict):
            raise ConfigError(f"{where}: options must be a table")
        return {"object": table["object"], "options": dict(opts)}

    @classmethod
    def from_table(cls, table: dict, label: str, concurrency: int, timeout: float) -> "PythonAdapter":
        where = f"system {label} [python]"
        target = import_object(table["object"], where)
        if inspect.isclass(target) or (callable(target) and not hasattr(target, "search")):
            try:
                obj = target(**table.get("options", {}))
            except TypeError as exc:
                raise ConfigError(f"{where}: {table['object']}(…) refused the options ({exc})") from None
        else:
            obj = target
        adapter = cls(obj, label, concurrency)
        adapter.modules.insert(0, table["object"].partition(":")[0])
        return adapter

    async def _call(self, name: str, *args, **kw) -> Any:
        fn = getattr(self.obj, name)
        try:
            if inspect.iscoroutinefunction(fn):
                return await fn(*args, **kw)
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kw), limiter=self.limiter)
        except (SystemFault, ConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - the system's own failure: a fault of this call, counted
            raise SystemFault("error", f"{type(exc).__name__}: {exc}") from exc

    async def start(self) -> None:
        if callable(getattr(self.obj, "start", None)):
            await self._call("start")

    async def version(self) -> str | None:
        if callable(getattr(self.obj, "version", None)):
            v = await self._call("version")
            return None if v is None else str(v)
        return None

    async def search(self, query: str, *, k: int, as_of: float | None, group: str | None,
                     context: list[str]) -> Answer:
        raw = await self._call("search", query, k=k, as_of=as_of, group=group, context=list(context))
        ans = as_answer(raw, f"system {self.label}")
        if ans.injected is None and callable(getattr(self.obj, "injected", None)):
            block = await self._call("injected", query, ans.hits, k=k, as_of=as_of, group=group,
                                     context=list(context))
            if block is not None and not isinstance(block, str):
                raise SystemFault("malformed", f"system {self.label}: injected() returned "
                                               f"{type(block).__name__}, not a string")
            ans.injected = block
        return ans

    async def ingest(self, documents: list[Document], *, group: str | None) -> dict[str, str]:
        if not self.can_ingest:
            await super().ingest(documents, group=group)
        out = await self._call("ingest", list(documents), group=group)
        if out is None:
            return {}
        if isinstance(out, dict):  # id -> reason
            return {str(k): str(v) for k, v in out.items()}
        if isinstance(out, (list, tuple, set)):  # the ids it refused
            return {str(i): "refused" for i in out}
        raise SystemFault("malformed", f"system {self.label}: ingest() returned {type(out).__name__}; expected "
                                       f"None or the ids it refused")

    async def indexed(self, group: str | None) -> list[str] | None:
        if not callable(getattr(self.obj, "indexed", None)):
            return None
        ids = await self._call("indexed", group)
        return None if ids is None else sorted(str(i) for i in ids)

    async def reset(self, group: str | None) -> None:
        if not self.can_reset:
            await super().reset(group)
        await self._call("reset", group)

    async def close(self) -> None:
        if callable(getattr(self.obj, "close", None)):
            try:
                await self._call("close")
            except Exception:  # noqa: BLE001 - closing never fails a run
                pass


__all__ = ["PythonAdapter", "import_object"]
