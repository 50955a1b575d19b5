"""Fixtures in the real on-disk formats of OpenClaw 2026.2.26, memory-lancedb-pro and HookClaw, written by the
tests (and by ``python tests/import_fixtures.py DIR`` for a demo):

* an OpenClaw memory index: SQLite with the schema OpenClaw's memory manager creates (tables ``meta``, ``files``,
  ``chunks``, ``embedding_cache``, the FTS5 table ``chunks_fts``; the sqlite-vec table needs the extension and is
  left out, as OpenClaw does when the extension is missing), filled from a small workspace chunked the way OpenClaw
  chunks it, ids computed as OpenClaw computes them;
* session transcripts (``agents/main/sessions/*.jsonl``): header, user / assistant / toolResult messages, a
  ``memory_search`` call and its result payload, one malformed line;
* a memory-lancedb-pro table written with the real ``lancedb`` package and the column types its store creates;
* HookClaw ``logInjections`` lines as ``journalctl`` prints them (short-iso).
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evalkit.data.importers.openclaw_files import chunk_id, chunk_markdown, list_memory_files  # noqa: E402

MODEL = "text-embedding-3-small"

WORKSPACE = {
    "MEMORY.md": "# Long-term memory\n\n- Home network: IoT devices live on VLAN 10 behind the Omada router.\n"
                 "- AdGuard DNS runs on 192.168.10.2 and blocks trackers.\n- Preferred editor: Helix.\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\nFixed SQLITE_BUSY in the ledger tests by enabling WAL mode and a "
                            "busy timeout of 5 seconds.\nPriya reviewed the patch.\n",
    "memory/2026-11-09.md": "# 2026-11-09\n\nMigrated billing from SQLite to Postgres 16.\nNightly Postgres "
                            "backups run at 2am UTC and are copied to the NAS.\n",
    "memory/projects/deploy.md": "# Deploy\n\n" + "".join(
        f"Step {i}: the deploy pipeline uses GitHub Actions with a blue green strategy and smoke test {i}.\n"
        for i in range(1, 31)),
    "notes/ignored.md": "Not a memory file: OpenClaw never indexes this.\n",
}

DDL = [
    "CREATE TABLE IF NOT EXISTS meta (\n      key TEXT PRIMARY KEY,\n      value TEXT NOT NULL\n    );",
    "CREATE TABLE IF NOT EXISTS files (\n      path TEXT PRIMARY KEY,\n      source TEXT NOT NULL DEFAULT 'memory',"
    "\n      hash TEXT NOT NULL,\n      mtime INTEGER NOT NULL,\n      size INTEGER NOT NULL\n    );",
    "CREATE TABLE IF NOT EXISTS chunks (\n      id TEXT PRIMARY KEY,\n      path TEXT NOT NULL,\n      source TEXT NOT "
    "NULL DEFAULT 'memory',\n      start_line INTEGER NOT NULL,\n      end_line INTEGER NOT NULL,\n      hash TEXT "
    "NOT NULL,\n      model TEXT NOT NULL,\n      text TEXT NOT NULL,\n      embedding TEXT NOT NULL,\n      "
    "updated_at INTEGER NOT NULL\n    );",
    "CREATE TABLE IF NOT EXISTS embedding_cache (\n      provider TEXT NOT NULL,\n      model TEXT NOT NULL,\n      "
    "provider_key TEXT NOT NULL,\n      hash TEXT NOT NULL,\n      embedding TEXT NOT NULL,\n      dims INTEGER,\n"
    "      updated_at INTEGER NOT NULL,\n      PRIMARY KEY (provider, model, provider_key, hash)\n    );",
    "CREATE INDEX IF NOT EXISTS idx_embedding_cache_updated_at ON embedding_cache(updated_at);",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(\n  text,\n  id UNINDEXED,\n  path UNINDEXED,\n  "
    "source UNINDEXED,\n  model UNINDEXED,\n  start_line UNINDEXED,\n  end_line UNINDEXED\n);",
    "CREATE INDEX IF NOT EXISTS idx_chunks_path ON chunks(path);",
    "CREATE INDEX IF NOT EXISTS idx_chunks_source ON chunks(source);",
]
MTIME_MS = 1_764_000_000_000  # 2025-11-24T16:00:00Z
UPDATED_MS = 1_764_100_000_000


def write_workspace(root: Path) -> Path:
    for rel, text in WORKSPACE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def write_memory_db(db: Path, workspace: Path, model: str = MODEL) -> Path:
    """OpenClaw's memory index of ``workspace`` (schema and ids as the real manager writes them)."""
    import hashlib  # noqa: PLC0415
    con = sqlite3.connect(db)
    for stmt in DDL:
        con.execute(stmt)
    con.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                ("memory_index_meta_v1", json.dumps({"model": model, "provider": "openai", "chunkTokens": 400,
                                                     "chunkOverlap": 80, "vectorDims": 3})))
    for f in list_memory_files(workspace):
        rel = f.relative_to(workspace).as_posix()
        content = f.read_text(encoding="utf-8")
        for c in chunk_markdown(content):
            cid = chunk_id("memory", rel, c, model)
            con.execute("INSERT INTO chunks (id, path, source, start_line, end_line, hash, model, text, embedding, "
                        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (cid, rel, "memory", c.start_line, c.end_line, c.hash, model, c.text, "[0.1,0.2,0.3]",
                         UPDATED_MS))
            con.execute("INSERT INTO chunks_fts (text, id, path, source, model, start_line, end_line) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", (c.text, cid, rel, "memory", model, c.start_line, c.end_line))
        con.execute("INSERT INTO files (path, source, hash, mtime, size) VALUES (?, ?, ?, ?, ?)",
                    (rel, "memory", hashlib.sha256(content.encode()).hexdigest(), MTIME_MS, len(content.encode())))
    con.commit()
    con.close()
    return db


def _msg(ts_iso: str, ms: int, message: dict, mid: str, parent: str | None) -> str:
    message = dict(message, timestamp=ms)
    return json.dumps({"type": "message", "id": mid, "parentId": parent, "timestamp": ts_iso, "message": message})


def _search_result(call_id: str, results: list[dict], ms: int, ts: str, mid: str, parent: str) -> str:
    payload = {"results": results, "provider": "openai", "model": MODEL, "citations": "auto", "mode": "hybrid"}
    return _msg(ts, ms, {"role": "toolResult", "toolCallId": call_id, "toolName": "memory_search",
                         "content": [{"type": "text", "text": json.dumps(payload, indent=2)}], "details": payload,
                         "isError": False}, mid, parent)


def _hit(path: str, start: int, end: int, score: float, snippet: str) -> dict:
    return {"path": path, "startLine": start, "endLine": end, "score": score, "snippet": snippet,
            "source": "memory", "citation": f"{path}#L{start}-L{end}"}


def write_sessions(state: Path) -> Path:
    """``state/agents/main/sessions/*.jsonl``: two transcripts; the first has a malformed line."""
    sess = state / "agents" / "main" / "sessions"
    sess.mkdir(parents=True, exist_ok=True)
    s1 = [
        json.dumps({"type": "session", "version": 3, "id": "sess-a", "timestamp": "2026-11-12T09:00:00.000Z",
                    "cwd": "/home/u/.openclaw/workspace"}),
        _msg("2026-11-12T09:00:05.000Z", 1762938005000,
             {"role": "user", "content": [{"type": "text", "text": "How did I fix the SQLITE_BUSY errors?"}]},
             "m1", None),
        _msg("2026-11-12T09:00:06.000Z", 1762938006000,
             {"role": "assistant", "content": [{"type": "toolCall", "id": "call_1", "name": "memory_search",
                                                "arguments": {"query": "SQLITE_BUSY fix ledger tests"}}],
              "api": "openai-responses", "provider": "openai", "model": "gpt-5", "stopReason": "toolUse"},
             "m2", "m1"),
        _search_result("call_1", [
            _hit("memory/2026-11-02.md", 1, 5, 0.71, "Fixed SQLITE_BUSY in the ledger tests by enabling WAL"),
            _hit("MEMORY.md", 1, 6, 0.32, "Home network: IoT devices live on VLAN 10"),
            _hit("memory/gone.md", 1, 3, 0.30, "a file deleted since")],
            1762938006500, "2026-11-12T09:00:06.500Z", "m3", "m2"),
        '{"type": "message", "id": "m4", "message": {"role": "assistant", "content": [',  # truncated write
        _msg("2026-11-12T09:00:09.000Z", 1762938009000,
             {"role": "assistant", "content": [{"type": "text", "text":
                                                "You fixed SQLITE_BUSY in the ledger tests by enabling WAL mode "
                                                "with a busy timeout of 5 seconds; Priya reviewed the patch."}],
              "stopReason": "stop"}, "m5", "m3"),
        _msg("2026-11-12T09:05:00.000Z", 1762938300000,
             {"role": "user", "content": "thanks!"}, "m6", "m5"),
    ]
    s2 = [
        json.dumps({"type": "session", "version": 3, "id": "sess-b", "timestamp": "2026-11-20T18:00:00.000Z",
                    "cwd": "/home/u/.openclaw/workspace"}),
        _msg("2026-11-20T18:00:02.000Z", 1763661602000,
             {"role": "user", "content": "When do the Postgres backups run, and where do they go?"}, "n1", None),
        _msg("2026-11-20T18:00:03.000Z", 1763661603000,
             {"role": "assistant", "content": [
                 {"type": "text", "text": "Let me check my notes."},
                 {"type": "toolCall", "id": "call_9", "name": "memory_search",
                  "arguments": {"query": "postgres backups schedule", "maxResults": 5}}]}, "n2", "n1"),
        _search_result("call_9", [
            _hit("memory/2026-11-09.md", 1, 5, 0.66, "Nightly Postgres backups run at 2am UTC"),
            _hit("memory/2026-11-02.md", 1, 5, 0.41, "Fixed SQLITE_BUSY")],
            1763661603400, "2026-11-20T18:00:03.400Z", "n3", "n2"),
        _msg("2026-11-20T18:00:06.000Z", 1763661606000,
             {"role": "assistant", "content": [{"type": "text", "text":
                                                "Nightly Postgres backups run at 2am UTC and are copied to the "
                                                "NAS (since you migrated billing to Postgres 16)."}]}, "n4", "n3"),
        _msg("2026-11-21T08:00:00.000Z", 1763712000000,
             {"role": "user", "content": "Which VLAN are the IoT devices on?"}, "n5", "n4"),
        _msg("2026-11-21T08:00:02.000Z", 1763712002000,
             {"role": "assistant", "content": [{"type": "text", "text": "VLAN 10, behind the Omada router."}]},
             "n6", "n5"),
    ]
    (sess / "2026-11-12T09-00-00-000Z_sess-a.jsonl").write_text("\n".join(s1) + "\n", encoding="utf-8")
    (sess / "2026-11-20T18-00-00-000Z_sess-b.jsonl").write_text("\n".join(s2) + "\n", encoding="utf-8")
    return state


MEMORIES = [
    ("preference", "global", 0.7, "User prefers Helix as the editor and dark themes everywhere."),
    ("fact", "global", 0.8, "Nightly Postgres backups run at 2am UTC and are copied to the NAS."),
    ("decision", "project:ledger", 0.9, "Decided to fix SQLITE_BUSY with WAL mode and a 5 second busy timeout."),
    ("entity", "global", 0.5, "Priya is the reviewer for the ledger service."),
    ("fact", "global", 0.6, "IoT devices live on VLAN 10 behind the Omada router."),
    ("other", "global", 0.3, "Dinner plans: lasagna on Friday, tacos on Saturday."),
]
LANCE_QUERIES = [("q1", "which editor does the user like", ["mem-0"]),
                 ("q2", "when are database backups taken", ["mem-1"]),
                 ("q3", "how was the database locked error fixed", ["mem-2"]),
                 ("q4", "what network are smart home devices on", ["mem-4"])]


def write_lancedb_store(db: Path, dim: int = 8, rows: list | None = None, table: str = "memories",
                        vectors: list[list[float]] | None = None) -> Path:
    """A memory-lancedb-pro table with the column types its store.ts creates, written with the real lancedb
    (``vectors``: one per row, else a fixed pattern)."""
    import pyarrow as pa  # noqa: PLC0415

    from evalkit.data.importers.lancedb_pro import lancedb_api  # noqa: PLC0415
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), dim)),
                        ("category", pa.string()), ("scope", pa.string()), ("importance", pa.float64()),
                        ("timestamp", pa.float64()), ("metadata", pa.string())])
    rows = MEMORIES if rows is None else rows
    data = [{"id": f"mem-{i}", "text": t, "category": c,
             "vector": vectors[i] if vectors else [float((i + j) % 5) / 5 for j in range(dim)],
             "scope": sc, "importance": imp, "timestamp": 1_762_000_000_000.0 + i * 86_400_000.0,
             "metadata": json.dumps({"source": "auto-capture"})} for i, (c, sc, imp, t) in enumerate(rows)]
    with lancedb_api() as lancedb:
        conn = lancedb.connect(str(db))
        tbl = conn.create_table(table, data=[{"id": "__schema__", "text": "", "vector": [0.0] * dim,
                                              "category": "other", "scope": "global", "importance": 0.0,
                                              "timestamp": 0.0, "metadata": "{}"}], schema=schema)
        tbl.delete("id = '__schema__'")  # (store.ts writes the predicate with double quotes)
        if data:
            tbl.add(data)
    return db


def write_lance_queries(path: Path, vectors: list[list[float] | None] | None = None) -> Path:
    """The LANCE_QUERIES as a --queries file; ``vectors`` (one per query, None = no 'vector' field)."""
    vecs = vectors or [None] * len(LANCE_QUERIES)
    path.write_text("".join(json.dumps({"_id": q, "text": t, "as_of": "2025-11-08T00:00:00Z", "relevant": rel,
                                        **({"vector": v} if v is not None else {})}) + "\n"
                            for (q, t, rel), v in zip(LANCE_QUERIES, vecs)), encoding="utf-8")
    return path


HOOK = [  # (time, message after "hookclaw: ") as the plugin's logger.info prints them
    ("2026-11-21T08:00:00+0000", "registered before_agent_start hook (v2.1, maxResults=5, minScore=0.3, "
                                 "timeout=2000ms, format=xml, mmr=true, fts=true)"),
    ("2026-11-21T08:01:00+0000", "#1 skip — prompt too short (3 chars)"),
    ("2026-11-21T08:02:00+0000", "#2 injecting 2 memories (143ms, top score: 0.712, fts: 1 boosted)"),
    ("2026-11-21T08:02:00+0000", '[debug] #2 prompt: "How did I fix the SQLITE_BUSY errors in the ledger tests?"'),
    ("2026-11-21T08:02:00+0000", "[debug] #2 result[0]: memory/2026-11-02.md:1-5 | score: 0.712 | fts: 0.400 | "
                                 "pre-boost: 0.612"),
    ("2026-11-21T08:02:00+0000", '[debug] #2 result[0]: "# 2026-11-02  Fixed SQLITE_BUSY in the ledger tests..."'),
    ("2026-11-21T08:02:00+0000", "[debug] #2 result[1]: MEMORY.md:1-6 | score: 0.401"),
    ("2026-11-21T08:03:00+0000", "#3 no relevant memories found (88ms)"),
    ("2026-11-21T08:03:00+0000", '[debug] #3 prompt: "write a haiku about autumn leaves" → no injection'),
    ("2026-11-21T08:04:00+0000", "#4 2 results filtered out (top score: 0.281) (97ms)"),
    ("2026-11-21T08:04:00+0000", '[debug] #4 prompt: "what should I cook this weekend?" → no injection'),
    ("2026-11-21T08:05:00+0000", "#5 cache hit — injecting 2 memories (0ms, top score: 0.712)"),
    ("2026-11-21T08:06:00+0000", "#6 skip — matches skip pattern"),
    ("2026-11-21T08:07:00+0000", "#7 injecting 1 memories (120ms, top score: 0.655)"),
    ("2026-11-21T08:07:00+0000", '[debug] #7 prompt: "When do the Postgres backups run?"'),
    ("2026-11-21T08:07:00+0000", "[debug] #7 result[0]: memory/2026-11-09.md:1-5 | score: 0.655"),
    ("2026-11-21T09:00:00+0000", "registered before_agent_start hook (v2.1, maxResults=5, minScore=0.3, "
                                 "timeout=2000ms, format=xml, mmr=true, fts=true)"),
    ("2026-11-21T09:01:00+0000", "#1 injecting 1 memories (131ms, top score: 0.590)"),
    ("2026-11-21T09:01:00+0000", '[debug] #1 prompt: "Which VLAN are the IoT devices on?"'),
    ("2026-11-21T09:01:00+0000", "[debug] #1 result[0]: MEMORY.md:1-6 | score: 0.590"),
]


def write_hookclaw_log(path: Path, lines: list | None = None) -> Path:
    """``journalctl -u openclaw-gateway -o short-iso`` output of the lines above (with an unrelated line)."""
    body = [f"{t} gw01 node[4242]: [plugins] hookclaw: {m}" for t, m in (HOOK if lines is None else lines)]
    body.insert(1, "2026-11-21T08:00:01+0000 gw01 node[4242]: [gateway] listening on ws://127.0.0.1:18789")
    path.write_text("\n".join(body) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":  # python tests/import_fixtures.py DIR → DIR/{workspace,memory.sqlite,state}
    out = Path(sys.argv[1])
    ws = write_workspace(out / "workspace")
    write_memory_db(out / "memory.sqlite", ws)
    write_sessions(out / "state")
    write_lancedb_store(out / "lancedb")
    write_lance_queries(out / "lance_queries.jsonl")
    write_hookclaw_log(out / "hookclaw.journal")
    print(out)
