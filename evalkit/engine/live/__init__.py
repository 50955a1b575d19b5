"""Drive a live memory system over a dataset: ingest as the memory was, ask every query, cache, count faults.

A system (:mod:`retrievers.systems`: a system file or an object) becomes one more retriever of a run — the same
measures, per-query rows, harms, significance tests and report as a preset. :func:`~evalkit.engine.live.retriever.run_system` returns a
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


One module per job, lowest first: :mod:`~evalkit.engine.live.cache` (the response cache and its keys),
:mod:`~evalkit.engine.live.mapping` (hits → dataset ids, the injected block), :mod:`~evalkit.engine.live.driver`
(the schedule and the async driver: ingest, ask, retry, count faults), :mod:`~evalkit.engine.live.text` (what a live
run says: its warnings, its summary line, its counters as metric rows), :mod:`~evalkit.engine.live.retriever` (a
name → a system file, and the system as one more retriever of a run: ``run_system``). A run that had to stop raises
:class:`evalkit.errors.LiveError` (one line, exit 2).
"""
