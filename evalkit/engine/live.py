"""Drive a live memory system over a dataset: ingest as the memory was, ask every query, cache, count faults.

A system (:mod:`retrievers.systems`: a system file or an object) becomes one more retriever of a run — the same
measures, per-query rows, harms, significance tests and report as a preset. :func:`run_system` returns a
:class:`~evalkit.engine.runner.RetrieverRun`.

**Ingest as the memory was.** Groups (a LoCoMo conversation, a LongMemEval haystack) are driven one after another,
each in its own namespace (the system file's ``namespace`` template; ``isolation = "reset"`` makes the system forget
the previous group first). A group's documents enter in creation order (undated ones first, then by ``created``,
ties in corpus order). Under the **strict** as-of protocol each query is asked when exactly the documents created
at or before its ``as_of`` are in — the system cannot see the future; under **all** everything is ingested first.
A system that cannot ingest is asked as loaded (``protocol`` recorded as ``preloaded``).

**Mapping hits to dataset ids** (:class:`HitMapper`): the id the system echoes (a dataset id) → else the exact text of
one of the group's documents → else its normalised text (NFKC, case-folded, whitespace collapsed). A hit that maps to
nothing keeps its rank as a non-relevant hit (the run-file rule, :func:`evalkit.engine.trec_runs.place_foreign_ids`),
as does a second hit naming a document already listed; both are counted (``live_unmapped_hits``,
``live_duplicate_hits``) and warned about. A mapped document created after the query's ``as_of`` is counted as a
future note (``live_future_hits``: under strict it means the system kept something it should not have had).

**Injected text.** A system that reports what it injects (a whole block, or per-hit text) is measured on that text:
tokens (the budget's cl100k BPE counter), characters, chunks; its injected ids are the hits that carry injected
text. Otherwise — as for a preset without a packer — every hit is injected and the block is the hits' texts.

**Reruns cost nothing.** Every answer is cached in ``$EVALKIT_CACHE/live/responses.sqlite`` under
(system hash, system-reported version, group, query, as_of, context, k, ingest state) — the ingest state is a
chained hash of the content of every document ingested so far in that group, so it also names the dataset's corpus.
A group whose queries are all cached is neither ingested nor asked — nor need the system be reachable: the version
it last reported names the answers (one warning). ``refresh=True`` re-asks everything. Faulted answers are never
cached. A ``python`` system's keys also hold the hash of its code (:func:`retrievers.systems.python.code_hash`): an
edit asks it again. An ``http`` / ``mcp`` system that reports no version gets one warning naming the date its cached
answers were cached.

**Refused notes.** An ingest answer is read (:class:`retrievers.systems.mapping.IngestAnswerMap`): every note the
system refused is counted (``live_fault_note_refused``, ``live_notes_sent`` / ``live_notes_accepted``) and named in one
warning; more than ``limits.fault_threshold`` of the notes a run sends stops it (one line, no resume hint) and the
answers it had cached are taken back — they came from a memory missing those notes.

**Faults cost one line.** At most ``limits.concurrency`` requests are in flight; each has ``limits.timeout``
seconds; a timeout, an HTTP 5xx/429 or a lost connection is retried ``limits.retries`` times with back-off
(``backoff · 2^i`` s). A query that still fails (or got a malformed / refused answer) is a fault: scored as an empty
list, counted per kind, one warning. Above ``limits.fault_threshold`` of the queries the run stops: one
``evalkit: error:`` line naming the system and the last error, exit 2, no run folder written; the answered queries
are cached, so the rerun resumes ("run again to resume" is said only where it can help: a system gone, a timeout, a
5xx — not a 401 or a malformed answer). A system that is gone (:class:`~retrievers.systems.protocol.SystemDown` after the
retries) or a failed ingest stops the run the same way.

Latency: the wall time of each answering request, end to end — query text in, hits out, so comparable with a
preset's ``latency_with_embedding_*`` (``latency_with_embedding_{p50,p95,p99,mean}_ms`` rows over the answered
queries, the per-query times in the run's ``latency.json``; a cached answer keeps the time measured when it was asked) and ingest throughput (documents per second of ingest calls).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import sys
import time
import unicodedata
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from evalkit.data.registry import REPO_ROOT
from evalkit.engine.run_warnings import warning
from evalkit.engine.trec_runs import place_foreign_ids
from evalkit.engine.runner import QueryResult, RetrieverRun, percentiles
from retrievers.embed.model import cache_root
from retrievers.pipeline import Pipeline
from retrievers.stages.budget import count_tokens
from retrievers.systems.file import SystemSpec, find_system, load_system
from retrievers.systems.protocol import Answer, SystemDown, SystemFault
from retrievers.types import DataError, Dataset, Document, Query
from retrievers.index.visibility import VISIBLE_TO, audience

CACHE_FORMAT = 1
LATENCY_KEYS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms")


class LiveError(DataError):
    """A live run had to stop (system gone, too many faults, a failed ingest): one line, exit 2."""


# ---- the response cache ------------------------------------------------------------------------------------------

SYSTEMS_DIR = REPO_ROOT / "systems"  # the shipped system files (`evalkit systems` lists them)


def system_folders() -> list[Path]:
    """Where system names are looked up: ``$EVALKIT_SYSTEMS`` (os.pathsep-separated folders), then the repository's
    ``systems/``."""
    extra = [Path(p) for p in os.environ.get("EVALKIT_SYSTEMS", "").split(os.pathsep) if p]
    return extra + [SYSTEMS_DIR]


def find(name: str) -> SystemSpec | None:
    """The system ``name`` names (a system file path, or a shipped / $EVALKIT_SYSTEMS name), else None."""
    path = find_system(name, system_folders())
    return load_system(str(path)) if path is not None else None


def split_retrievers(names: list[str]) -> tuple[list[str], list[SystemSpec]]:
    """``--retrievers`` items → (preset names / paths, system specs), each system file validated now; ConfigError
    on a name used twice."""
    presets, systems = [], []
    for n in names:
        spec = find(n)
        if spec is None:
            presets.append(n)
        else:
            systems.append(spec)
    seen = [s.name for s in systems]
    dup = sorted({x for x in seen if seen.count(x) > 1})
    if dup:
        raise DataError(f"system {dup[0]!r} given twice")
    return presets, systems


class ResponseCache:
    """Answers of live systems, one SQLite file shared by processes (WAL), each row with a crc32 checked on read: a
    damaged row is one ``evalkit: cache:`` line and is asked again; a file SQLite calls damaged is set aside.
    ``stats``: hits, misses, written."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else cache_root() / "live" / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = {"hits": 0, "misses": 0, "written": 0}
        self._con: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._con is None:
            try:
                self._con = self._open()
            except sqlite3.DatabaseError as exc:
                aside = self.path.with_suffix(f".corrupt-{uuid.uuid4().hex[:8]}")
                print(f"evalkit: cache: {self.path} is corrupt ({exc}); moved aside to {aside.name}",
                      file=sys.stderr)
                with contextlib.suppress(OSError):
                    self.path.rename(aside)
                self._con = self._open()
        return self._con

    def _open(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")  # a cache: a power cut may lose the last answers, never corrupt
        con.execute("CREATE TABLE IF NOT EXISTS answers (k TEXT PRIMARY KEY, v BLOB NOT NULL, c INTEGER NOT NULL)")
        con.commit()
        return con

    def get(self, key: str) -> dict | None:
        row = self._db().execute("SELECT v, c FROM answers WHERE k = ?", (key,)).fetchone()
        if row is None:
            self.stats["misses"] += 1
            return None
        v, c = bytes(row[0]), int(row[1])
        try:
            if zlib.crc32(v, zlib.crc32(key.encode())) != c:
                raise ValueError("crc32 mismatch")
            val = json.loads(v)
        except ValueError as exc:
            print(f"evalkit: cache: {self.path} row {key[:12]}… is corrupt ({exc}); asking again", file=sys.stderr)
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return val

    def put(self, key: str, value: dict) -> None:
        v = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        con = self._db()
        con.execute("INSERT OR REPLACE INTO answers (k, v, c) VALUES (?, ?, ?)",
                    (key, v, zlib.crc32(v, zlib.crc32(key.encode()))))
        con.commit()
        self.stats["written"] += 1

    def delete(self, keys: list[str]) -> None:
        """Take answers back (a run that found them untrustworthy after caching them)."""
        if keys:
            con = self._db()
            con.executemany("DELETE FROM answers WHERE k = ?", [(k,) for k in keys])
            con.commit()

    def get_meta(self, key: str) -> dict | None:
        """A bookkeeping row (the version a system last reported), without counting a hit or a miss."""
        before = dict(self.stats)
        try:
            return self.get(key)
        finally:
            self.stats = before

    def put_meta(self, key: str, value: dict) -> None:
        before = dict(self.stats)
        self.put(key, value)
        self.stats = before

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
            self._con = None


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([CACHE_FORMAT, *parts], sort_keys=True, default=str).encode()).hexdigest()


def doc_digest(d: Document) -> str:
    """The content of one document as a system receives it (what makes two corpora the same memory)."""
    return _key(d.id, d.title, d.text, d.path, d.created, d.timestamp, d.group, d.metadata)


def ingest_states(docs: list[Document]) -> list[str]:
    """``states[n]`` names the memory after the first ``n`` documents of ``docs`` went in (a chained hash)."""
    out = [_key("empty")]
    for d in docs:
        out.append(_key(out[-1], doc_digest(d)))
    return out


# ---- the schedule ------------------------------------------------------------------------------------------------

def creation_order(docs: list[Document]) -> list[Document]:
    """Undated documents first (corpus order), then the dated ones by ``created`` (ties in corpus order)."""
    undated = [d for d in docs if d.created is None]
    dated = sorted((d for d in docs if d.created is not None), key=lambda d: d.created)
    return undated + dated


def visible_count(order: list[Document], as_of: float | None, protocol: str) -> int:
    """How many documents of ``order`` (creation order) are in the memory when a query at ``as_of`` is asked."""
    if protocol != "strict" or as_of is None or not math.isfinite(as_of):
        return len(order)
    return sum(1 for d in order if d.created is None or d.created <= as_of)


# ---- mapping hits back to the dataset ----------------------------------------------------------------------------

def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed: the last resort of :class:`HitMapper`."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class HitMapper:
    """Dataset id of a hit: echoed id → exact text → normalised text, among the documents of the query's group."""

    def __init__(self, ds: Dataset):
        self.ds = ds
        self.idx = ds.doc_index
        self._exact: dict[str, dict[str, str]] = {}
        self._norm: dict[str, dict[str, str]] = {}
        for d in ds.documents:
            g = d.group or ""
            self._exact.setdefault(g, {}).setdefault(d.text, d.id)
            self._norm.setdefault(g, {}).setdefault(normalise(d.text), d.id)

    def doc_id(self, hit, group: str | None) -> tuple[str | None, str]:
        """(dataset id or None, how it was found: id | text | normalised | unmapped)."""
        if hit.id is not None and hit.id in self.idx:
            return hit.id, "id"
        if hit.text:
            g = group or ""
            d = self._exact.get(g, {}).get(hit.text)
            if d is not None:
                return d, "text"
            d = self._norm.get(g, {}).get(normalise(hit.text))
            if d is not None:
                return d, "normalised"
        return None, "unmapped"


@dataclass
class Mapped:
    ranked: list[tuple[str, float]]
    injected: list[str]
    block: str
    counts: dict[str, int]


def map_answer(mapper: HitMapper, q: Query, ans: Answer) -> Mapped:
    """The ranked list, the injected ids and the injected block of one answer (see the module docstring). Hits are
    first named by dataset id where :class:`HitMapper` finds one; the list then goes through the run files' rule
    (:func:`evalkit.engine.trec_runs.place_foreign_ids`): an id the corpus lacks keeps its rank as a non-relevant hit.
    A second hit naming a document already listed is renamed so that it, too, is a foreign id in its slot."""
    counts = {"unmapped": 0, "duplicate": 0, "future": 0, "id": 0, "text": 0, "normalised": 0}
    named: list[tuple[str, float]] = []
    seen: set[str] = set()
    n = len(ans.hits)
    for i, h in enumerate(ans.hits):
        did, how = mapper.doc_id(h, q.group)
        counts[how] += how != "unmapped"
        if did is None:
            did = f"~unmapped:{h.id}" if h.id is not None else \
                f"~unmapped:text:{hashlib.sha1((h.text or '').encode()).hexdigest()[:10]}"
        elif did in seen:
            counts["duplicate"] += 1
            did = f"~duplicate:{did}:{i + 1}"
        else:
            doc = mapper.ds.documents[mapper.idx[did]]
            if q.as_of is not None and doc.created is not None and doc.created > q.as_of:
                counts["future"] += 1
        seen.add(did)
        named.append((did, float(h.score) if h.score is not None else float(n - i)))  # no score: list order ranks
    ranked, foreign = place_foreign_ids(named, mapper.idx)
    counts["unmapped"] = foreign - counts["duplicate"]
    per_hit = any(h.injected is not None for h in ans.hits)
    injected: list[str] = []
    texts: list[str] = []
    for (did, _), h in zip(ranked, ans.hits):
        if per_hit:
            if h.injected:
                injected.append(did)
                texts.append(h.injected)
        else:
            injected.append(did)
            texts.append(h.text if h.text is not None else
                         (mapper.ds.documents[mapper.idx[did]].text if did in mapper.idx else ""))
    block = ans.injected if ans.injected is not None else "\n\n".join(texts)
    return Mapped(ranked, injected, block, counts)


# ---- driving -----------------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    answer: Answer | None = None
    ms: float = float("nan")
    cached: bool = False
    retries: int = 0
    fault: tuple[str, str] | None = None  # (kind, message)


@dataclass
class LiveStats:
    queries: int = 0
    asked: int = 0
    cached: int = 0
    retries: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    ingested: int = 0  # notes sent to the system this run
    ingest_seconds: float = 0.0
    ingest_cached_docs: int = 0
    ingest_cached_seconds: float = 0.0
    groups_skipped: int = 0
    indexed: dict[str, list[str] | None] = field(default_factory=dict)  # group -> ids the system indexed
    refused: dict[str, str] = field(default_factory=dict)  # note id -> the system's reason (this run or recorded)
    cached_on: dict[str, int] = field(default_factory=dict)  # date an answer used was cached -> how many
    last_fault: str = ""
    version: str | None = None
    code: str | None = None  # hash of the system's code (python kind), part of the cache key
    unreachable: str = ""  # why the system could not be reached when every answer came from the cache
    stderr_log: str | None = None
    started: bool = False
    preloaded: bool = False  # the system cannot ingest: asked as loaded


@dataclass
class _Plan:
    """One group before it is driven: its queries, its documents in creation order, the memory's states and which
    queries (by how many documents they see) must still be asked."""

    group: str
    queries: list[Query]
    order: list[Document]
    states: list[str]
    todo: dict[int, list[Query]]
    last: int


class _Stop(Exception):
    pass


TRANSIENT = ("timeout", "server_error")  # a fault that a later run may not meet: resuming can help


class Driver:
    """One live run of one system over one dataset view (see the module docstring)."""

    def __init__(self, spec: SystemSpec, ds: Dataset, protocol: str, cache: ResponseCache, refresh: bool = False,
                 log=print, progress_every: float = 10.0):
        self.spec, self.ds, self.protocol, self.cache, self.refresh = spec, ds, protocol, cache, refresh
        self.log = log
        self.lim = spec.limits
        self.stats = LiveStats(queries=len(ds.queries))
        self.allowed = int(math.floor(self.lim.fault_threshold * len(ds.queries) + 1e-9))
        self.notes_allowed = 0  # refused notes allowed this run (set once the run knows how many it sends)
        self.notes_to_send = 0
        self.outcomes: dict[str, Outcome] = {}
        self.written: list[str] = []  # answers this run put into the cache
        self.run_token = uuid.uuid4().hex[:10]  # {run} in namespaces: a persistent service never mixes two runs
        self.progress_every = progress_every
        self._t_progress = time.perf_counter()

    # -- public ------------------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Outcome]:
        try:
            anyio.run(self._main)
        except _Stop as stop:
            raise LiveError(str(stop)) from None
        return self.outcomes

    # -- helpers -----------------------------------------------------------------------------------------------------
    def _where(self, resume: bool) -> str:
        done = sum(1 for o in self.outcomes.values() if o.answer is not None)
        return (f"{done} of {self.stats.queries} queries answered and cached"
                + ("; run again to resume" if resume and done < self.stats.queries else ""))

    def _stop(self, why: str, resume: bool = True) -> _Stop:
        """The run's one error line. ``resume``: running again can help (the system was gone, timed out, answered
        5xx); not after a refusal (a 401, a tool error, refused notes) or an answer that is not the format."""
        who = f"system {self.spec.name}: "
        return _Stop(f"{who}{why.replace(who, '')} ({self._where(resume)})")

    async def _retrying(self, fn, what: str, timeout: float):
        """(result, retries, wall ms of the answering attempt); SystemFault after the retries."""
        attempt = 0
        while True:
            t0 = time.perf_counter()
            try:
                with anyio.fail_after(timeout):
                    res = await fn()
                return res, attempt, (time.perf_counter() - t0) * 1000.0
            except TimeoutError:
                fault: SystemFault = SystemFault("timeout", f"system {self.spec.name}: {what}: no answer within "
                                                            f"{timeout:g} s")
            except SystemFault as exc:
                fault = exc
            if not fault.retryable and not isinstance(fault, SystemDown) or attempt >= self.lim.retries:
                raise fault
            await anyio.sleep(self.lim.backoff * (2 ** attempt))
            attempt += 1
            self.stats.retries += 1

    def _progress(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._t_progress >= self.progress_every:
            self._t_progress = now
            s = self.stats
            self.log(f"  system {self.spec.name}: {len(self.outcomes)}/{s.queries} queries "
                     f"({s.asked} asked, {s.cached} from cache), {s.ingested} notes sent")

    # -- the run -----------------------------------------------------------------------------------------------------
    async def _main(self) -> None:
        adapter = self.spec.open()
        self.stats.code = adapter.code()
        if self.spec.kind == "mcp" and "command" in self.spec.table and self.spec.instance is None:
            folder = cache_root() / "live" / "logs"
            folder.mkdir(parents=True, exist_ok=True)
            adapter.stderr_log = self.stats.stderr_log = str(folder / f"{self.spec.name}-{self.run_token}.stderr.log")
        try:
            unreachable = ""
            try:
                await adapter.connect()
                self.stats.version = await adapter.version()
                self.cache.put_meta(self._vkey(), {"version": self.stats.version})
            except SystemFault as exc:
                known = self.cache.get_meta(self._vkey())
                if known is None or not isinstance(exc, SystemDown):
                    raise self._stop(str(exc), resume=isinstance(exc, SystemDown)) from None
                self.stats.version, unreachable = known.get("version"), str(exc)  # perhaps all cached: see below
            if self.stats.stderr_log:
                self.log(f"  system {self.spec.name}: the server's stderr goes to {self.stats.stderr_log}")
            groups: dict[str, list[Query]] = {}
            for q in self.ds.queries:
                groups.setdefault(q.group or "", []).append(q)
            docs_by_group: dict[str, list[Document]] = {}
            for d in self.ds.documents:
                docs_by_group.setdefault(d.group or "", []).append(d)
            plans = [self._plan(adapter, g, groups[g], docs_by_group.get(g, [])) for g in sorted(groups)]
            if unreachable:
                if any(p.todo for p in plans):
                    raise self._stop(unreachable)
                self.stats.unreachable = unreachable  # every answer is cached: no server needed
            self.notes_to_send = sum(max(p.todo) for p in plans if p.todo)
            self.notes_allowed = int(math.floor(self.lim.fault_threshold * self.notes_to_send + 1e-9))
            for p in plans:
                await self._group(adapter, p)
            self._progress(force=True)
        finally:
            await adapter.close()

    def _qkey(self, g: str, q: Query, state: str) -> str:
        code = [self.stats.code] if self.stats.code else []  # without one, the keys of services stay as they were
        return _key("answer", self.spec.hash, self.stats.version, g, q.text, q.as_of, q.context, self.spec.k, state,
                    *code)

    def _ikey(self, g: str, state: str, n: int) -> str:
        code = [self.stats.code] if self.stats.code else []
        return _key("ingest", self.spec.hash, self.stats.version, g, state, n, *code)

    def _vkey(self) -> str:
        return _key("version", self.spec.hash, self.stats.code)

    def _plan(self, adapter, g: str, queries: list[Query], docs: list[Document]) -> _Plan:
        """Answer what the cache holds; the rest is what this group must still ingest and ask."""
        ingest = adapter.can_ingest
        protocol = self.protocol if ingest else "preloaded"
        self.stats.preloaded = not ingest
        order = creation_order(docs) if ingest else []
        states = ingest_states(order)
        cuts = {q.id: visible_count(order, q.as_of, protocol) for q in queries}
        todo: dict[int, list[Query]] = {}
        for q in queries:
            hit = None if self.refresh else self.cache.get(self._qkey(g, q, states[cuts[q.id]]))
            if hit is not None:
                self.outcomes[q.id] = Outcome(Answer.from_json(hit["answer"]), float(hit["ms"]), True,
                                              int(hit.get("retries", 0)))
                self.stats.cached += 1
                on = hit.get("at") or "?"
                self.stats.cached_on[on] = self.stats.cached_on.get(on, 0) + 1
            else:
                todo.setdefault(cuts[q.id], []).append(q)
        return _Plan(g, queries, order, states, todo, max(cuts.values(), default=0))

    def _refusals(self, refused: dict[str, str]) -> None:
        """Count the notes the system refused; above ``limits.fault_threshold`` of the notes this run sends, stop —
        and take back the answers this run cached: they came from a memory missing what it refused."""
        self.stats.refused.update(refused)
        n = len(self.stats.refused)
        if n > self.notes_allowed:
            self.cache.delete(self.written)
            for k in list(self.outcomes):
                if not self.outcomes[k].cached:
                    del self.outcomes[k]
            first = next(iter(self.stats.refused.items()))
            raise self._stop(f"{n} of {self.stats.ingested} notes sent refused by the system (this run sends "
                             f"{self.notes_to_send}; {self.lim.fault_threshold:.0%} may be refused, "
                             f"limits.fault_threshold): "
                             f"{', '.join(list(self.stats.refused)[:5])}{' …' if n > 5 else ''} (first: "
                             f"{first[0]}: {first[1]}); its answers would miss those notes — a service that "
                             f"deduplicates across namespaces may hold them from an earlier run (docs/systems.md)",
                             resume=False)

    async def _group(self, adapter, p: _Plan) -> None:
        g, order, states, todo, last = p.group, p.order, p.states, p.todo, p.last
        # ingest records of the states this run would have built (throughput and refusals of a cached rerun)
        rec = self.cache.get(self._ikey(g, states[last], last)) if last else None
        if not todo:
            self.stats.groups_skipped += 1
            if rec:
                self.stats.ingest_cached_docs += int(rec["docs"])
                self.stats.ingest_cached_seconds += float(rec["seconds"])
                self.stats.indexed[g] = rec.get("indexed")
                self.stats.refused.update({i: why for i, why in rec.get("refused", [])})
            self._progress()
            return
        if not self.stats.started:
            try:
                await adapter.start()
            except SystemFault as exc:
                raise self._stop(f"start failed: {exc}", resume=isinstance(exc, SystemDown)) from None
            self.stats.started = True
        ns = self.spec.group_id(g or None, self.run_token)
        if adapter.can_ingest and self.spec.isolation == "reset":
            try:
                await self._retrying(lambda: adapter.reset(ns), f"reset {ns}", self.lim.timeout)
            except SystemFault as exc:
                raise self._stop(f"reset of group {g or 'default'} failed: {exc}",
                                 resume=isinstance(exc, SystemDown) or exc.kind in TRANSIENT) from None
        have = 0
        seconds = 0.0
        refused: dict[str, str] = {}
        for cut in sorted(todo):
            if cut > have:
                batch = order[have:cut]
                t0 = time.perf_counter()
                try:
                    with anyio.fail_after(self.lim.timeout * max(1, len(batch))):
                        got = await adapter.ingest(batch, group=ns)
                except TimeoutError:
                    raise self._stop(f"ingest of {len(batch)} documents into {ns} timed out; the memory's state "
                                     f"is unknown") from None
                except SystemFault as exc:
                    raise self._stop(f"ingest into {ns} failed: {exc}",
                                     resume=isinstance(exc, SystemDown) or exc.kind in TRANSIENT) from None
                seconds += time.perf_counter() - t0
                self.stats.ingested += len(batch)
                have = cut
                refused.update(got or {})
                self._refusals(got or {})
            await self._ask(adapter, g, ns, todo[cut], states[cut])
        self.stats.ingest_seconds += seconds
        if have:
            try:
                self.stats.indexed[g] = await adapter.indexed(ns)
            except SystemFault:
                self.stats.indexed[g] = None
            if have == last:
                self.cache.put(self._ikey(g, states[have], have), {
                    "docs": have, "seconds": seconds, "indexed": self.stats.indexed[g],
                    "refused": [[i, why] for i, why in refused.items()]})

    async def _ask(self, adapter, g: str, ns: str, queries: list[Query], state: str) -> None:
        sem = anyio.Semaphore(self.lim.concurrency)
        today = time.strftime("%Y-%m-%d", time.gmtime())  # when an answer was cached (never a measure's input)

        async def one(q: Query) -> None:
            async with sem:
                try:
                    ans, retries, ms = await self._retrying(
                        lambda: adapter.search(q.text, k=self.spec.k, as_of=q.as_of, group=ns, context=q.context),
                        f"query {q.id}", self.lim.timeout)
                except SystemDown as exc:
                    raise self._stop(f"the system is gone: {exc}") from None
                except SystemFault as exc:
                    self.outcomes[q.id] = Outcome(fault=(exc.kind, str(exc)))
                    self.stats.faults[exc.kind] = self.stats.faults.get(exc.kind, 0) + 1
                    self.stats.last_fault = f"{exc.kind}: {exc}"
                    n = sum(self.stats.faults.values())
                    if n > self.allowed:
                        raise self._stop(f"{n} of {self.stats.queries} queries failed, more than the "
                                         f"{self.lim.fault_threshold:.0%} allowed (limits.fault_threshold); last: "
                                         f"{self.stats.last_fault}",
                                         resume=any(k in TRANSIENT for k in self.stats.faults)) from None
                    return
                self.stats.asked += 1
                self.outcomes[q.id] = Outcome(ans, ms, False, retries)
                key = self._qkey(g, q, state)
                self.cache.put(key, {"answer": ans.to_json(), "ms": ms, "retries": retries, "at": today})
                self.written.append(key)
                self._progress()

        try:
            async with anyio.create_task_group() as tg:
                for q in queries:
                    tg.start_soon(one, q)
        except BaseExceptionGroup as eg:  # the first stop wins; the rest were cancelled with it
            stops = [e for e in _leaves(eg) if isinstance(e, _Stop)]
            if stops:
                raise stops[0] from None
            raise


def _leaves(eg: BaseException):
    if isinstance(eg, BaseExceptionGroup):
        for e in eg.exceptions:
            yield from _leaves(e)
    else:
        yield eg


# ---- the run -----------------------------------------------------------------------------------------------------

class SystemPipeline(Pipeline):
    """A live system in the place of a preset's pipeline (no arms, no stages): its identity is the system file's."""

    def __init__(self, spec: SystemSpec, version: str | None):
        super().__init__(spec.name, spec.description or f"live system ({spec.kind})", [], [], {},
                         {k: v for k, v in {"system": spec.system or None, "kind": f"live system ({spec.kind})",
                                            "system_file": spec.path, "system_version": version}.items()
                          if v is not None})
        self.spec = spec

    def canonical(self) -> dict:
        return {"system": self.spec.canonical()}

    @property
    def hash(self) -> str:
        return self.spec.hash


def run_system(spec: SystemSpec, ds: Dataset, protocol: str, *, refresh: bool = False,
               cache: ResponseCache | None = None, log=print) -> RetrieverRun:
    """Drive ``spec`` over ``ds`` (already split) under the as-of ``protocol`` (strict | all); the run, with the
    live counters, latency percentiles and warnings in ``info``. LiveError (one line) when the run had to stop."""
    scoped = next((d for d in ds.documents if audience(d) is not None), None)
    if scoped is not None:  # a live system holds one store per group: it cannot hide a note from the other queries
        raise LiveError(f"system {spec.name}: dataset {ds.name!r} has scoped notes (metadata {VISIBLE_TO}, e.g. "
                        f"{scoped.id!r}: an `evalkit poison --isolate` planting) that a live system cannot hide from "
                        f"the other queries of its group; plant a shared store for it (without --isolate)")
    cache = cache or ResponseCache()
    t0 = time.perf_counter()
    drv = Driver(spec, ds, protocol, cache, refresh=refresh, log=log)
    before = dict(cache.stats)
    outcomes = drv.run()
    mapper = HitMapper(ds)
    results: dict[str, QueryResult] = {}
    totals = {"unmapped": 0, "duplicate": 0, "future": 0, "id": 0, "text": 0, "normalised": 0}
    future_queries = 0
    for q in ds.queries:
        o = outcomes.get(q.id)
        if o is None or o.answer is None:
            results[q.id] = QueryResult([], [], False, {"chunks": 0, "chars": 0, "tokens": 0}, "")
            continue
        m = map_answer(mapper, q, o.answer)
        for k_, v in m.counts.items():
            totals[k_] += v
        future_queries += m.counts["future"] > 0
        results[q.id] = QueryResult(m.ranked, m.injected, False,
                                    {"chunks": len(m.injected), "chars": len(m.block), "tokens": count_tokens(m.block)},
                                    m.block)
    s = drv.stats
    lat = [o.ms / 1000.0 for o in outcomes.values() if o.answer is not None and math.isfinite(o.ms)]
    ingest_docs = s.ingested or s.ingest_cached_docs
    ingest_s = s.ingest_seconds if s.ingested else s.ingest_cached_seconds
    refused = len(s.refused)
    faults = sum(s.faults.values()) + refused
    info: dict[str, Any] = {
        "live_queries": float(s.queries), "live_asked": float(s.asked), "live_cached": float(s.cached),
        "live_faults": float(faults), "live_retries": float(s.retries), "live_ingested_docs": float(s.ingested),
        "live_notes_sent": float(ingest_docs), "live_notes_accepted": float(ingest_docs - refused),
        "live_unmapped_hits": float(totals["unmapped"]), "live_duplicate_hits": float(totals["duplicate"]),
        "live_future_hits": float(totals["future"]),
        "live_mapped_by_text": float(totals["text"] + totals["normalised"]),
        **{f"live_fault_{k}": float(v) for k, v in sorted(s.faults.items())},
        **({"live_fault_note_refused": float(refused)} if refused else {}),
    }
    if ingest_docs and ingest_s > 0:
        info["ingest_docs_per_s"] = ingest_docs / ingest_s
    for k_, v in percentiles(lat).items():
        if k_ in LATENCY_KEYS:  # end to end (query text in, hits out): the presets' latency_with_embedding_*
            info[f"latency_with_embedding_{k_}"] = v
    warns = []
    who = f"system {spec.name}"
    if refused:
        first = next(iter(s.refused.items()))
        ids = ", ".join(list(s.refused)[:5]) + (" …" if refused > 5 else "")
        warns.append(warning("live_refused_notes", f"{who}: {refused} of {ingest_docs} notes refused by the system: "
                                                   f"{ids} (first: {first[0]}: {first[1]}); its answers were "
                                                   f"scored as they are, without them", spec.name, refused))
    if s.faults:
        n, kinds = sum(s.faults.values()), ", ".join(f"{k} {v}" for k, v in sorted(s.faults.items()))
        again = "run again to re-ask them" if any(k in TRANSIENT for k in s.faults) else \
            "they are asked again on the next run"
        warns.append(warning("live_faults", f"{who}: {n} of {s.queries} queries failed ({kinds}; last: "
                                            f"{s.last_fault}); scored as empty lists — {again}", spec.name, n))
    if s.unreachable:
        warns.append(warning("live_unreachable", f"{who}: not reachable ({s.unreachable}); every answer came from "
                                                 f"the cache (version {s.version or 'none'}, as last reported)",
                             spec.name, s.cached))
    if s.cached and s.version is None and s.code is None:
        dates = sorted(d for d in s.cached_on if d != "?")
        when = (dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}") if dates else "an earlier run"
        if dates and "?" in s.cached_on:
            when += " and earlier"
        warns.append(warning("live_cached_unversioned", f"{who} reports no version: {s.cached} of {s.queries} "
                                                        f"answers cached on {when}; `--refresh` to ask again",
                             spec.name, s.cached))
    if totals["unmapped"]:
        warns.append(warning("live_unmapped_hits", f"{who}: {totals['unmapped']} hit(s) match no document of the "
                                                   f"dataset (by id, text or normalised text); each keeps its rank "
                                                   f"as a non-relevant hit", spec.name, totals["unmapped"]))
    if totals["duplicate"]:
        warns.append(warning("live_duplicate_hits", f"{who}: {totals['duplicate']} hit(s) repeat a document "
                                                    f"already listed for the query; each keeps its rank as a "
                                                    f"non-relevant hit", spec.name, totals["duplicate"]))
    if totals["future"] and protocol == "strict":
        warns.append(warning("live_future_hits", f"{who}: {totals['future']} returned document(s) on "
                                                 f"{future_queries} queries were created after the query's as_of, "
                                                 f"although only earlier ones were ingested", spec.name,
                             totals["future"]))
    info["warnings"] = warns
    info["live"] = {"protocol": "preloaded" if s.preloaded else protocol,
                    "ingest": "none: the system was asked as loaded" if s.preloaded else
                    "strict: documents created by each query's as_of" if protocol == "strict"
                    else "all documents first", "version": s.version, "run_token": drv.run_token,
                    "cache": {k: cache.stats[k] - before.get(k, 0) for k in cache.stats},
                    "groups_from_cache": s.groups_skipped, "ingest_seconds": round(ingest_s, 3),
                    "ingest_docs": ingest_docs, "notes_sent": ingest_docs,
                    "notes_accepted": ingest_docs - refused, "refused": dict(list(s.refused.items())[:50]),
                    "code": s.code, "stderr_log": s.stderr_log, "latency_from": "the answering request's wall time (cached answers: "
                                                                "as measured when asked)"}
    if s.indexed and all(v is not None for v in s.indexed.values()):
        # what the system reports it indexed of what it was given (e.g. OpenClaw skips non-memory files)
        info["indexed_ids"] = sorted({i for v in s.indexed.values() for i in v})
        info["live"]["indexed"] = len(info["indexed_ids"])
    pipe = SystemPipeline(spec, s.version)
    run = RetrieverRun(spec.name, pipe, results, time.perf_counter() - t0, info)
    run.info["latency_s"] = lat
    return run


def beyond_depth(ev, spec: SystemSpec) -> dict | None:
    """Leave empty the ranking measures deeper than the ``k`` hits a system was asked for (recall@100 of a system
    answering 10 hits would repeat recall@10): removed from ``ev`` (means, per-query values, breakdowns); the run
    warning that says why, None when nothing was deeper.

    >>> from evalkit.engine.evaluate import Evaluation
    >>> ev = Evaluation("d", "s", {"recall@10": 0.5, "recall@100": 0.5, "mrr": 1.0}, {"recall@100": {"q": 0.5}})
    >>> beyond_depth(ev, SystemSpec("s", "http", {}, k=10))["text"][:57], sorted(ev.means)
    ('system s answers 10 hits per query: recall@100 left empty', ['mrr', 'recall@10'])
    """
    from evalkit.measures.catalogue import parse  # lazy: startup
    deep = []
    for name in list(ev.means):
        try:
            m = parse(name)
        except ValueError:
            continue
        if m.kind == "ranking" and m.k is not None and m.k > spec.k:
            deep.append(name)
    if not deep:
        return None
    for name in deep:
        ev.means.pop(name, None)
        ev.per_query.pop(name, None)
    ev.breakdown[:] = [r for r in ev.breakdown if r.get("metric") not in deep]
    return warning("live_depth", f"system {spec.name} answers {spec.k} hits per query: {', '.join(deep)} left empty "
                                 f"(deeper than its k; they would repeat the measure at {spec.k}) — raise `k` in the "
                                 f"system file to measure them", spec.name, len(deep))


LIVE_COUNTERS = ("live_queries", "live_asked", "live_cached", "live_faults", "live_retries", "live_ingested_docs",
                 "live_notes_sent", "live_notes_accepted",
                 "live_unmapped_hits", "live_duplicate_hits", "live_future_hits", "live_mapped_by_text",
                 "ingest_docs_per_s", *(f"latency_with_embedding_{k}" for k in LATENCY_KEYS))


def live_means(run: RetrieverRun) -> dict[str, float]:
    """The live counters and latency percentiles of ``run`` as metric rows."""
    return {k: float(v) for k, v in run.info.items()
            if (k in LIVE_COUNTERS or k.startswith("live_fault_")) and isinstance(v, (int, float))}


def summary_line(run: RetrieverRun) -> str:
    """One line: what the system was asked, what came from the cache, faults, latency."""
    i = run.info
    lat = (f"p50 {i['latency_with_embedding_p50_ms']:.1f} ms, p95 {i['latency_with_embedding_p95_ms']:.1f} ms"
           if "latency_with_embedding_p50_ms" in i else "n/a")
    ing = f"{i['ingest_docs_per_s']:.1f} docs/s" if "ingest_docs_per_s" in i else "n/a"
    c = i["live"]["cache"]
    refused = i.get("live_fault_note_refused", 0)
    sent = f"{i['live_notes_sent']:.0f} notes sent, {i['live_notes_accepted']:.0f} accepted" + (
        "" if i["live_ingested_docs"] or not i["live_notes_sent"] else " (as recorded when they were sent)")
    return (f"  system {run.name} ({i['live']['version'] or 'no version'}): {i['live_queries']:.0f} queries, "
            f"{i['live_asked']:.0f} asked, {i['live_cached']:.0f} from cache (cache hits {c['hits']}, misses "
            f"{c['misses']}, written {c['written']}), {sent}, {i['live_faults']:.0f} faults"
            f"{f' ({refused:.0f} notes refused)' if refused else ''}; latency {lat}; ingest {ing}")


__all__ = ["run_system", "beyond_depth", "ResponseCache", "HitMapper", "map_answer", "LiveError", "SystemPipeline", "live_means",
           "summary_line", "creation_order", "visible_count", "ingest_states", "normalise"]
