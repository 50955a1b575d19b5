"""Counts tables and the dataset card (``datasets/memory-workspace/README.md``) of the memory-workspace set.

The tables are computed from the generated data, and the card is written by the generator, so the numbers in
the card cannot drift from the files next to it. ``python -m evalkit.data.workspace_generator.build --stats`` prints the
same tables.
"""
from __future__ import annotations

from collections import Counter

from evalkit.data.workspace_generator import queries as QM
from evalkit.data.workspace_generator.log import LOGGING_FROM
from evalkit.data.workspace_generator.model import CATEGORIES, END, START
from evalkit.data.workspace_generator.revisions import late_notes

TIERS = ("curated", "topic", "daily", "junk")
LANG_ORDER = ("en", "es", "zh", "ja", "ko")


def _table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _late(bench) -> str:
    late = late_notes(bench.ws, bench.docs, bench.queries)
    return f"{len(late)} ({sum(map(len, late.values()))})"


def stats_markdown(bench) -> str:

    docs, queries, splits, log = bench.docs, bench.queries, bench.splits, bench.log
    parts = []

    files = Counter(f.tier for f in bench.ws.files)
    chunks = Counter(d["metadata"]["tier"] for d in docs)
    chars = {t: [len(d["text"]) for d in docs if d["metadata"]["tier"] == t] for t in TIERS}
    rows = []
    for t in TIERS:
        c = chars[t]
        rows.append([t, files[t], chunks[t], round(sum(c) / len(c)) if c else 0, max(c) if c else 0])
    rows.append(["**total**", sum(files.values()), len(docs), round(sum(map(len, (d["text"] for d in docs))) / len(docs)),
                 max(len(d["text"]) for d in docs)])
    parts.append("### Files and chunks per tier\n\n" + _table(
        ["tier", "files", "chunks", "mean chunk chars", "max chunk chars"], rows))

    lang = Counter((d["metadata"]["tier"], d["metadata"]["lang"]) for d in docs)
    rows = [[t] + [lang[(t, lg)] for lg in LANG_ORDER] for t in TIERS]
    parts.append("### Chunk language per tier\n\n" + _table(["tier", *LANG_ORDER], rows))

    daily = sorted(f.day for f in bench.ws.files if f.tier == "daily")
    secret = [d["_id"] for d in docs if d["metadata"]["contains_secret"]]
    dups = Counter(d["metadata"]["dup_group"] for d in docs if d["metadata"]["dup_group"])
    parts.append("### Workspace facts\n\n" + _table(["what", "value"], [
        ["daily files", f"{len(daily)} ({daily[0]} … {daily[-1]})"],
        ["chunks holding a secret", f"{len(secret)}: " + ", ".join(f"`{s}`" for s in secret)],
        ["near-duplicate groups (chunks)", f"{len(dups)} ({sum(dups.values())})"],
        ["facts that change over time", str(len(QM.FACTS))],
        ["evergreen files as they stood (versions, chunks)",
         f"{sum(len(bench.ws.versions(f)) for f in bench.ws.files if f.tier in ('curated', 'topic'))} "
         f"({sum(1 for d in docs if d['metadata']['tier'] in ('curated', 'topic'))})"],
        ["queries that can see a note written after their as_of (notes)", _late(bench)],
    ]))

    rows = []
    tot = Counter()
    for cat in CATEGORIES:
        qs = [q for q in queries if q.category == cat]
        tr = sum(1 for q in qs if splits[q.id] == "train")
        te = len(qs) - tr
        fu = sum(1 for q in qs if q.context)
        g = Counter(v for q in qs for v in q.qrels.values())
        rows.append([cat, tr, te, len(qs), fu, g[2], g[1], g[0]])
        tot.update({"tr": tr, "te": te, "n": len(qs), "fu": fu, "g2": g[2], "g1": g[1], "g0": g[0]})
    rows.append(["**total**", tot["tr"], tot["te"], tot["n"], tot["fu"], tot["g2"], tot["g1"], tot["g0"]])
    parts.append("### Queries per category and split, qrels rows per grade\n\n" + _table(
        ["category", "train", "test", "total", "follow-ups (with context)", "grade 2", "grade 1", "grade 0"], rows))

    ql = Counter(q.lang for q in queries)
    parts.append("### Query language\n\n" + _table(["lang", "queries"], [[lg, ql[lg]] for lg in LANG_ORDER]))

    dropped = Counter(d.category for d in bench.dropped)
    parts.append("### Authored queries dropped by the generator's checks\n\n" + _table(
        ["category", "dropped", "rule"],
        [["paraphrase", dropped["paraphrase"], "shares a content word with a grade-2 chunk"],
         ["multi-hop", dropped["multi-hop"], "a single chunk answers every hop"]]))

    byid = {d["_id"]: d for d in docs}
    kinds = Counter(e["event_kind"] for e in log)
    with_inj = [e for e in log if e.get("injected")]
    inj_ids = [i for e in with_inj for i in e["injected"]]
    rows = [
        ["events", len(log)],
        ["sessions", len({e["session"] for e in log})],
        ["period", f"{log[0]['ts'][:10]} … {log[-1]['ts'][:10]}"],
        *[[f"event_kind = {k}", kinds[k]] for k in ("skip", "labelled", "near-repeat", "follow-up", "task", "recall")],
        ["events with `context`", sum(1 for e in log if "context" in e)],
        ["events with an `injected` field", sum(1 for e in log if "injected" in e)],
        ["… of which non-empty", len(with_inj)],
        ["injected chunks in total", len(inj_ids)],
        ["… junk chunks injected", sum(1 for i in inj_ids if byid[i]["metadata"]["tier"] == "junk")],
        ["… secret chunks injected", sum(1 for i in inj_ids if byid[i]["metadata"]["contains_secret"])],
        ["events with a `response`", sum(1 for e in log if "response" in e)],
        ["injected chunks cited by the response (30% rule)", sum(len(e.get("cited", [])) for e in log)],
        ["distinct prompts", len({e["query"] for e in log})],
    ]
    parts.append("### Query log\n\n" + _table(["what", "count"], rows))
    return "\n".join(parts)


def _facts_table(bench) -> str:
    path = {n.key: n.path for n in bench.ws.notes if n.key}

    def where(keys) -> str:
        return ", ".join(f"`{p}`" for p in sorted({path[k] for k in keys}))

    rows = [[f["fact"], f["since"], where(f["new"]), where(f["old"]), len(f["queries"])] for f in QM.FACTS]
    return _table(["fact", "changed on", "current statement in (grade 2)", "superseded statement in (grade 0)",
                   "queries"], rows)


CARD = """\
# memory-workspace: evalkit's own agent-memory benchmark

A labelled benchmark for the things the public datasets (SciFact, LoCoMo, LongMemEval) cannot exercise: an
OpenClaw-style memory *folder* with tiers (`MEMORY.md`, `memory/YYYY-MM-DD.md`, `memory/topics/`), evergreen
versus dated notes, exact identifiers, junk paths, secrets, prompts that should retrieve nothing, facts that
change over time, and a query log. It needs no external data, which makes it the default dataset of
`make bench`. Everything here was written by this project and is generated by a seeded script in the repository;
the generated files are committed.

## Regenerate (byte for byte)

```
python -m evalkit.data.workspace_generator.build --out datasets/memory-workspace  # rewrites every file in this folder
python -m evalkit.data.workspace_generator.build --stats                          # prints the counts tables below
python -m evalkit.data.workspace_generator.build --materialize DIR                # the raw Markdown workspace, junk
                                                                                  # included
```

The generator uses fixed string seeds for `random.Random`, sorted iteration, no clock, fixed JSON key order
with `ensure_ascii=False` and `\\n` line endings. `tests/unit/evalkit/data/test_workspace_generator.py`
regenerates into a temporary folder and compares every file byte for byte with the committed one. The raw
workspace is not committed (git refuses paths with a `.git` component); the committed artefact is the chunked
corpus, where junk chunks keep their original paths (`.git/config`, `node_modules/left-pad/README.md`,
`logs/...log`).

| file | content |
|---|---|
| `corpus.jsonl` | one chunk per line: `_id` = `<path>#L<start>-L<end>` (`<path>@<day>#L…` for an evergreen file as it stood on an earlier day), `title` (empty), `text`, `metadata` |
| `queries.jsonl` | `_id`, `text`, `metadata` (`as_of`, `category`, `group`, `split`, `lang`, per-category extras, `context` for follow-ups) |
| `qrels/train.tsv`, `qrels/test.tsv` | `query-id<TAB>corpus-id<TAB>score`, graded 2/1/0 |
| `querylog.jsonl` | {n_events} logged prompts in the logged-query contract |
| `README.md` | this card (written by the generator) |

Load it with `evalkit.data.registry.load_dataset("memory-workspace")` (or `evalkit.data.readers.memory_workspace.load_workspace`),
which returns the chunks, queries, qrels, the `train`/`test`/`all` splits and `info` with the counts below.

## The workspace

One fictional developer, Alex Moreau (freelancer in Lisbon), working with an OpenClaw agent from
{start} to {end}: {n_daily} daily logs (not every day; nothing during a July holiday), a curated
`MEMORY.md`, {n_topics} topic briefs and junk. Recurring storylines:

* **Ledgerline**, a multi-tenant .NET invoicing API for Nordlicht GmbH (Jonas Keller; Priya Nair owns the
  billing-worker): invoice numbering, PDFs, nullable warnings, a SQLite → Postgres 16 migration with its
  incidents (`SQLITE_BUSY`, `23505`, `40P01`), hosting moved from Azure App Service to Fly.io, logging moved
  from Serilog/Seq to OpenTelemetry, XRechnung e-invoicing (`BR-DE-15`).
* **Tidepool**, a buoy-data dashboard for Bluewater Trust (Lucía Ferrer, Madrid — notes in Spanish), with
  Japanese localisation by Keiko Tanaka (notes in Japanese) and design reviews by Wen Li (notes in Chinese):
  `EADDRINUSE` on port 5173, npm → pnpm, `ERR_MODULE_NOT_FOUND`, `ENOSPC` file watchers.
* **Sprout**, a Flutter companion app by Min-jun Park (his summaries are kept in Korean).
* **The homelab** (a ZFS server with a failing disk; rsync backups replaced by restic) and **the agent's
  own setup** (memory-search weights, embedding provider change, gateway `EADDRINUSE`, junk in the index).

Daily logs mix keyed story notes with unremarkable filler and open to-do items, so most daily chunks are
short. Three daily notes and `.git/config` contain fake secrets (a `jina_…` key, two `ghp_…` tokens, a
database password; random strings, not valid credentials); the following daily notes say where the secret
lives now and that it was rotated. Near-duplicates: the same event written down twice in different words
in two daily files a few days apart at most (`dup_group` in the metadata). Curated files rot: `MEMORY.md` still says CI is Jenkins
and Ledgerline runs on Azure, and the Ledgerline brief still says Serilog, while dated notes say otherwise.

Facts that change over time (knowledge-update queries are asked after the change):

{facts_table}
## Chunking

Like OpenClaw's memory indexer: about 400 tokens (1,600 characters) per chunk with 80 tokens (320
characters) of overlap, cut only at line boundaries, keeping 1-based line ranges
(`evalkit/data/workspace_generator/chunk.py` states the exact rule; it is this project's implementation, not a
byte-exact port). Daily logs are mostly one short chunk each.

## Document metadata

| key | meaning |
|---|---|
| `path`, `start_line`, `end_line` | file in the workspace and the chunk's line range |
| `timestamp` | `YYYY-MM-DDT00:00:00Z` from a dated path `memory/YYYY-MM-DD.md`; `null` for evergreen (`MEMORY.md`, `memory/topics/*`) and junk |
| `created`, `retired` | when the chunk's file (this version of it) entered the store and when a later version replaced it (`null`: a daily file is in the store from its `timestamp`; never replaced). `MEMORY.md` and each topic brief are kept as they stood on every day a line was added: one version per such day, `created` at the start of that day, `retired` when the next version is created; the last one (named by its plain path) is never retired. A junk file is `created` at its `mtime`. No chunk is undated |
| `mtime` | the file's last modification time (every file has one; an evergreen version's is its `created`) |
| `importance` | curated 0.9, topic 0.8, daily 0.3–0.7 by note kind (decision 0.7, incident 0.65, config 0.6, note 0.5, filler/to-do 0.3), junk 0.1 |
| `group`, `source` | `workspace`, `memory` |
| `tier` | `curated` (`MEMORY.md`), `topic`, `daily`, `junk` |
| `lang` | dominant language of the chunk's lines: en, es, zh, ja, ko |
| `contains_secret` | true only for chunks containing a secret value |
| `dup_group` | near-duplicate group of a note in the chunk, else `null` |

## Query categories

Every query has `as_of` (ISO time inside the timeline, after the notes it asks about), `category`, `group`,
`split` and `lang`; follow-ups also carry `context` (recent messages, `{{"role", "content"}}`) and
`followup: true`.

| category | what it tests | seed stage it targets |
|---|---|---|
| `exact-identifier` | error codes, file paths, config keys, ticket ids; the answer chunk contains the string verbatim (`identifier` in metadata) | lexical arm: BM25, OpenClaw's FTS5 AND query, HookClaw v2.1 FTS boost, Phase-3 mode B (exact-first) |
| `paraphrase` | no content word shared with any grade-2 chunk (checked by the generator after lower-casing, stop-word removal and crude stemming) | vector arm, hybrid weights; FTS-only modes should fail |
| `temporal-relative` | "yesterday", "three days ago", "a week ago", "last week" resolved against `as_of` to one daily file (or a week); `resolves_to` lists the dates | HookClaw temporal parsing and window filter, recency boost and time decay |
| `knowledge-update` | a fact that changed: the current statement is grade 2, the superseded one grade 0 (`fact`, `changed_on` in metadata) | time decay / recency, the evergreen exemption (stale curated lines never decay), tier boosts, importance |
| `multi-hop` | needs two notes in different chunks (checked) | candidate depth, final K (HookClaw keeps ≤ 3, ≤ 2 when the top score is high), MMR |
| `multilingual` | query language ≠ note language in both directions, plus same-language Chinese, Japanese and Korean (`note_lang`) | OpenClaw keyword extraction (CJK bigrams, stop words), ASCII-only MMR / tokenisers, limits of an English embedding model |
| `no-memory` | greetings, acks, slash commands, "write a poem", "format this JSON": nothing is relevant, the right output is no injection; **no qrels rows** | skip gates: lancedb-pro `shouldSkipRetrieval`, HookClaw length and skip patterns, intent gates, adaptive thresholds |
| `secret-bait` | "what is the jina api key?": qrels point at the notes saying where the secret lives / how it is rotated, never at the secret | secret guard / sensitive-tier exclusion; report leakage (any `contains_secret` chunk returned) |

Near-duplicates serve the MMR / diversity stages and junk chunks the exclusion globs (Phase-3
`**/node_modules/**`, `**/.git/**`, `**/logs/**`, `**/*.log`); neither is a category of its own but both
compete with the answers of the queries above.

## Label rules

* Grades: **2** answers the query, **1** related, **0** judged wrong (kept so that retrieving it is visible).
* Queries name target *notes*; a chunk's grade is the highest grade of the notes it holds; a note cut by a
  chunk boundary gives at most 1.
* A topic-brief or `MEMORY.md` line that restates a target note gets the same grade (also a stale one).
* Near-duplicates: when one copy is a grade-2 target, the other copies get grade 1 — they answer, but add
  nothing once the first copy is in the prompt, so a ranking that spends two slots on one event scores lower.
* Exact-identifier: a grade-2 chunk contains the identifier verbatim (a restatement without it is only 1),
  and every other chunk containing the identifier (written before `as_of`) is grade 1.
* Knowledge-update: current statement 2, superseded statement 0 — injecting a stale fact is harmful (the
  agent would act on it), so it is judged non-relevant, but the row is kept so that stale retrieval shows up
  in per-query results; background notes about the change are 1.
* Temporal: all keyed notes of the resolved day (or, for topic/incident/decision questions, the matching
  notes of that day or week) are 2, so "what did I do that day" grades every chunk holding one of them;
  a brief (an evergreen file) restating such a note is only 1 (the question asks for the dated note).
* Nothing written on or after the `as_of` day is judged: labels that the rules above would propagate to a
  later note are dropped. Only chunks in the store at `as_of` are judged: an evergreen file's lines are judged in
  the version that stood then (a line's day is its `since`, or the day of the latest daily note it restates when
  that is later).
* Junk chunks and chunks with a secret never appear in qrels, at any grade. No-memory queries have no rows.
* Every labelled query has at least one chunk of grade ≥ 1; an oracle that returns the qrels in grade order
  scores nDCG@10 = 1 (tested with ranx).

## Split

By **evidence group**, about 50/50 per category: queries whose relevant chunks (grade ≥ 1) are the same text are
one group, and a group is never on both sides, so no test query has exactly the relevant chunks of a train query
(a split by query had 108 of 182 judged test queries in that case). Groups are taken in the order of SHA-256 of
`seed:group` and each goes to the side with the lower share of its category; a category is balanced up to the size
of its largest group. A query without a relevant chunk (no-memory) is a group of its own. Queries without
judgements cannot appear in a qrels file, so every query also records its split in `metadata.split` (the BEIR
loader honours it). `test` is the dataset's **lockbox**: `evalkit tune` never reads it (it estimates by
cross-validation over `train`, by evidence group); `evalkit tune --final` opens it and counts the openings.

## Query log

`querylog.jsonl` follows the logged-query contract: `ts`, `session`, `query`, and optionally `context`,
`injected` (chunk ids from `corpus.jsonl`), `response`, `latency_ms`. Two extra keys: `event_kind` (how the
event was generated) and `cited` (the injected chunks that pass HookClaw's 30% citation rule against the
response). The "production" policy that chose `injected` is a keyword-overlap ranker over the chunks that
existed at `ts`, top 3, behind a small skip gate, with no junk filter and no secret guard — its failures are
part of the log on purpose. It sees only the prompt, never the context, so follow-ups rarely get the right
chunks. Events before {logging_from} have no `injected`/`latency_ms` (logging was switched on later). Skip-worthy
prompts are {skip_pct}% of the events; repeated prompts come from labelled queries asked again after
their `as_of` and from near-repeats (lower-cased, "again?", "remind me: …").

## Counts

{stats}
## Caveats

* The evergreen files are kept as they stood on each day a line was added (their lines only grow: the set
  records no deleted or reworded line, so a stale line stays until the end, as the Jenkins line of `MEMORY.md`).
  Under the strict as-of protocol no query can see a line written after its `as_of` (the generator's audit:
  "queries that can see a note written after their as_of" in the counts above). Under strict a live system
  receives each evergreen file once, in its last version, from that version's day (the ingest protocol has no
  delete). The
  query log's production policy injects each evergreen file as it stood at `ts`. The reflog and the last commit
  message (`.git/`) enter the store at the last commit: their earlier states are not kept.
* The corpus is small (a few hundred short chunks) so that embedding it cold takes seconds; differences of a
  few queries matter, so compare systems with the paired tests of the harness, not by eye.
* The story, the Spanish, Chinese, Japanese and Korean notes and all queries were written by this project;
  the non-English text is careful but not native. Filler bullets and to-do items come from templates.
* nDCG does not see secrets or junk (they are never judged): report secret leakage and junk rate next to it.
"""


def render_card(bench) -> str:

    return CARD.format(
        n_events=len(bench.log), start=START, end=END,
        n_daily=sum(1 for f in bench.ws.files if f.tier == "daily"),
        n_topics=sum(1 for f in bench.ws.files if f.tier == "topic"),
        facts_table=_facts_table(bench), stats=stats_markdown(bench), logging_from=LOGGING_FROM,
        skip_pct=round(100 * sum(1 for e in bench.log if e["event_kind"] == "skip") / len(bench.log)))
