"""The async driver of a live run (see :mod:`evalkit.engine.live`: "Ingest as the memory was", "Refused notes",
"Faults cost one line"): the schedule (:func:`creation_order`, :func:`visible_count`) and :class:`Driver`, which
answers what the response cache holds, ingests each group as of its queries, asks the rest with at most
``limits.concurrency`` requests in flight, retries, counts faults and stops with one
:class:`~evalkit.errors.LiveError` line."""
from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

import anyio

from evalkit.engine.live.cache import ResponseCache, cache_key, ingest_states
from evalkit.errors import LiveError
from retrievers.embed.model import cache_root
from retrievers.systems.file import SystemSpec
from retrievers.systems.protocol import Answer, SystemDown, SystemFault
from retrievers.types import Dataset, Document, Query


def creation_order(docs: list[Document], strict: bool = True) -> list[Document]:
    """Undated documents first (corpus order), then the dated ones by ``created`` (ties in corpus order). Under the
    strict protocol a retired version of a revised note (``retired`` set) is left out: the ingest protocol has no
    delete, so a system receives each revised note once, in its last version, from that version's creation on — it
    never holds a later text early, and lacks the note before its last revision (presets search the version of the
    day). Under ``all`` (no time rule, as for presets) every version goes in."""
    if strict:
        docs = [d for d in docs if d.retired is None]
    undated = [d for d in docs if d.created is None]
    dated = sorted((d for d in docs if d.created is not None), key=lambda d: d.created)
    return undated + dated


def visible_count(order: list[Document], as_of: float | None, protocol: str) -> int:
    """How many documents of ``order`` (creation order) are in the memory when a query at ``as_of`` is asked."""
    if protocol != "strict" or as_of is None or not math.isfinite(as_of):
        return len(order)
    return sum(1 for d in order if d.created is None or d.created <= as_of)



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
        if adapter.logs_stderr:
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
        return cache_key("answer", self.spec.hash, self.stats.version, g, q.text, q.as_of, q.context, self.spec.k, state,
                    *code)

    def _ikey(self, g: str, state: str, n: int) -> str:
        code = [self.stats.code] if self.stats.code else []
        return cache_key("ingest", self.spec.hash, self.stats.version, g, state, n, *code)

    def _vkey(self) -> str:
        return cache_key("version", self.spec.hash, self.stats.code)

    def _plan(self, adapter, g: str, queries: list[Query], docs: list[Document]) -> _Plan:
        """Answer what the cache holds; the rest is what this group must still ingest and ask."""
        ingest = adapter.can_ingest
        protocol = self.protocol if ingest else "preloaded"
        self.stats.preloaded = not ingest
        order = creation_order(docs, protocol == "strict") if ingest else []
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



__all__ = ["Driver", "Outcome", "LiveStats", "TRANSIENT", "creation_order", "visible_count"]
