"""System files: a live memory system described in TOML, validated, with a hash as its identity (like a preset).

A system file is accepted wherever a preset is (``evalkit run --retrievers mem0,bm25``); the shipped ones are in the
repository's ``systems/`` folder (``evalkit systems`` lists them). Top-level keys::

    name = "my-memory"                 # default: the file's stem
    description = "one line"
    system = "my-memory 1.4 (what it is, for the report)"
    kind = "http"                      # python | http | mcp: the table of that name configures it
    k = 10                             # hits asked per query (default 10)
    namespace = "evalkit-{run}-{group}"   # the group id the system sees; {group} = the dataset's group (a LoCoMo
                                       # conversation, a LongMemEval haystack; "default" when the dataset has
                                       # none), {run} = a token new for every run (a persistent service never
                                       # mixes two runs' memories). Default "{group}".
    isolation = "namespace"            # how groups stay apart: each in its own namespace (default), or "reset"
                                       # (the system forgets the previous group before the next is ingested)
    [limits]
    concurrency = 4                    # requests in flight (python kind: worker threads); default 4, python 1
    timeout = 30.0                     # seconds per request
    retries = 2                        # bounded retries of a timeout / 5xx / lost connection, back-off doubling
    backoff = 0.25                     # seconds before the first retry
    fault_threshold = 0.05             # share of queries allowed to fault before the run stops
    [compare]                          # optional: the preset that re-implements this system (`evalkit agree`)
    preset = "openclaw_core_2026_2_26"
    [compare.matching]                 # the index settings under which the preset should match it exactly
    embed_backend = "torch"
    representation = "truncate"
    backend = "exact"
    indexed_only = true                # only the documents the system itself indexes

Identity: :meth:`SystemSpec.canonical` (defaults filled, keys sorted, environment references kept as written —
never their values) hashed to 12 hex digits, like a preset; the run manifest and the response cache name it.

Usage::

    spec = load_system("systems/mem0.toml")
    spec.name, spec.kind, spec.hash          # ('mem0', 'python', '<12 hex digits>')
"""
from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrievers.errors import ConfigError
from retrievers.systems import http as _http  # noqa: F401 - registers the kind
from retrievers.systems import mcp as _mcp  # noqa: F401 - registers the kind
from retrievers.systems import python as _python  # noqa: F401 - registers the kind
from retrievers.systems.adapter import KINDS, Adapter, check_keys
from retrievers.systems.mapping import check_template

TOP_KEYS = {"name", "description", "system", "kind", "k", "namespace", "isolation", "limits", "compare"}  # + a kind's
ISOLATION = ("namespace", "reset")
MATCHING_KEYS = {"embed_backend", "representation", "backend", "indexed_only"}


@dataclass(frozen=True)
class Limits:
    concurrency: int = 4
    timeout: float = 30.0
    retries: int = 2
    backoff: float = 0.25
    fault_threshold: float = 0.05

    @classmethod
    def from_table(cls, t: dict, where: str, kind_name: str) -> "Limits":
        check_keys(t, {"concurrency", "timeout", "retries", "backoff", "fault_threshold"}, set(), where)
        d = {"concurrency": KINDS[kind_name].default_concurrency, **t}
        try:
            lim = cls(concurrency=int(d["concurrency"]), timeout=float(d.get("timeout", cls.timeout)),
                      retries=int(d.get("retries", cls.retries)), backoff=float(d.get("backoff", cls.backoff)),
                      fault_threshold=float(d.get("fault_threshold", cls.fault_threshold)))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if lim.concurrency < 1 or lim.timeout <= 0 or lim.retries < 0 or lim.backoff < 0 \
                or not 0.0 <= lim.fault_threshold <= 1.0:
            raise ConfigError(f"{where}: need concurrency >= 1, timeout > 0, retries >= 0, backoff >= 0 and "
                              f"0 <= fault_threshold <= 1")
        return lim


@dataclass(frozen=True)
class SystemSpec:
    """A validated system file (see the module docstring). :meth:`open` builds its adapter."""

    name: str
    kind: str
    table: dict[str, Any]
    description: str = ""
    system: str = ""
    k: int = 10
    namespace: str = "{group}"
    isolation: str = "namespace"
    limits: Limits = field(default_factory=Limits)
    compare: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    instance: Any = field(default=None, compare=False, repr=False)  # an object handed to the Python API

    def canonical(self) -> dict:
        return {"kind": self.kind, self.kind: self.table, "k": self.k, "namespace": self.namespace,
                "isolation": self.isolation, "limits": self.limits.__dict__.copy()}

    @property
    def hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def open(self) -> Adapter:
        """A new adapter for one run (not started)."""
        if self.instance is not None:
            return _python.PythonAdapter.of(self.instance, self.name, self.limits.concurrency)
        return KINDS[self.kind].from_table(self.table, self.name, self.limits.concurrency, self.limits.timeout)

    def group_id(self, group: str | None, run: str) -> str:
        """The namespace the system sees for a dataset group in run ``run``."""
        return self.namespace.format_map({"group": group or "default", "run": run})


def is_system_file(path: Path) -> bool:
    """A ``.toml`` file with a top-level ``kind`` key is a system file (a preset has none)."""
    try:
        with open(path, "rb") as fh:
            return "kind" in tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return False


def system_names(folder: Path) -> list[str]:
    """The system files in ``folder`` by name (file stem)."""
    return sorted(p.stem for p in Path(folder).glob("*.toml") if is_system_file(p))


def find_system(name_or_path: str, folders: list[Path] = ()) -> Path | None:
    """The system file ``name_or_path`` names: an existing ``.toml`` path that is a system file, else
    ``<folder>/<name>.toml`` in the first folder that has it; None when it names no system (a preset, perhaps)."""
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.is_file():
        return p if is_system_file(p) else None
    for f in folders:
        c = Path(f) / f"{name_or_path}.toml"
        if c.is_file() and is_system_file(c):
            return c
    return None


def load_system(name_or_path: str, folders: list[Path] = ()) -> SystemSpec:
    """The validated system file ``name_or_path`` (a path, or a name found in ``folders``); ConfigError (one
    line naming the file) on anything wrong."""
    path = find_system(name_or_path, folders)
    if path is None:
        raise ConfigError(f"unknown system {name_or_path!r}" + (
            f" (systems: {', '.join(n for f in folders for n in system_names(f))})" if folders else ""))
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    return system_from_dict(raw, str(path), default_name=path.stem)


def system_from_dict(raw: dict, where: str, default_name: str = "system") -> SystemSpec:
    """A :class:`SystemSpec` from a parsed system file (``where`` names it in errors)."""
    check_keys(raw, TOP_KEYS | set(KINDS), {"kind"}, where)
    kind_name = raw["kind"]
    if kind_name not in KINDS:
        raise ConfigError(f"{where}: kind {kind_name!r} is not one of {', '.join(sorted(KINDS))}")
    others = sorted(k for k in KINDS if k != kind_name and k in raw)
    if others:
        raise ConfigError(f"{where}: kind is {kind_name!r} but the file has a [{others[0]}] table")
    if kind_name not in raw:
        raise ConfigError(f"{where}: kind {kind_name!r} needs a [{kind_name}] table")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name or any(c in name for c in " ,=/"):
        raise ConfigError(f"{where}: name {name!r} must be non-empty without spaces, commas, '=' or '/'")
    table = KINDS[kind_name].validate(raw[kind_name], f"{where} [{kind_name}]")
    k = raw.get("k", 10)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"{where}: k must be an integer >= 1")
    ns = raw.get("namespace", "{group}")
    if not isinstance(ns, str):
        raise ConfigError(f"{where}: namespace must be a string")
    check_template(ns, frozenset({"group", "run"}), f"{where} namespace")
    iso = raw.get("isolation", "namespace")
    if iso not in ISOLATION:
        raise ConfigError(f"{where}: isolation must be one of {', '.join(ISOLATION)}")
    if iso == "namespace" and "{group}" not in ns:
        raise ConfigError(f"{where}: isolation 'namespace' needs {{group}} in the namespace template")
    limits = Limits.from_table(raw.get("limits", {}), f"{where} [limits]", kind_name)
    cmp = raw.get("compare", {})
    check_keys(cmp, {"preset", "matching"}, {"preset"} if cmp else set(), f"{where} [compare]")
    check_keys(cmp.get("matching", {}), MATCHING_KEYS, set(), f"{where} [compare.matching]")
    for k_ in ("description", "system"):
        if not isinstance(raw.get(k_, ""), str):
            raise ConfigError(f"{where}: {k_} must be a string")
    return SystemSpec(name=name, kind=kind_name, table=table, description=raw.get("description", ""),
                      system=raw.get("system", ""), k=k, namespace=ns, isolation=iso, limits=limits,
                      compare=dict(cmp), path=None if where.startswith("<") else where)


def system_of(obj: Any, name: str | None = None, k: int = 10, namespace: str = "{group}",
              limits: Limits | None = None) -> SystemSpec:
    """A :class:`SystemSpec` for a protocol object handed to the Python API (no file): kind ``python``; its
    identity is the object's class path (and ``version()`` where it has one, in the response-cache key)."""
    cls = type(obj)
    label = name or getattr(obj, "name", None) or cls.__name__
    return SystemSpec(name=label, kind="python", table={"object": f"{cls.__module__}:{cls.__qualname__}",
                                                        "options": {}, "instance": True},
                      description=(cls.__doc__ or "").strip().split("\n")[0], k=k, namespace=namespace,
                      limits=limits or Limits(concurrency=1), instance=obj)


__all__ = ["SystemSpec", "Limits", "load_system", "system_from_dict", "system_of", "find_system", "system_names",
           "is_system_file"]
