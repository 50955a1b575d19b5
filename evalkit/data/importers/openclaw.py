"""`evalkit import openclaw`: an OpenClaw 2026.2.26 installation → a dataset folder (BEIR layout + querylog.jsonl).

Formats read from the published package (``npm pack openclaw@2026.2.26``; nothing copied):

* **Memory index** (``--memory-db``): the SQLite file of its memory manager. Tables ``files(path, source, hash,
  mtime, size)`` (mtime in epoch milliseconds) and ``chunks(id, path, source, start_line, end_line, hash, model,
  text, embedding, updated_at)`` (plus ``meta``, ``embedding_cache``, the FTS5 table ``chunks_fts`` and the
  sqlite-vec table ``chunks_vec``, not needed here). A file without those two tables/columns is refused; so is an
  index with no chunks. When chunks of several embedding models are present, the model with most chunks is
  imported (OpenClaw searches one model) and the others are counted.
* **Workspace** (``--workspace``): the memory files chunked as OpenClaw does
  (:mod:`evalkit.data.importers.openclaw_files`); file mtimes from the file system.
* **Session transcripts** (``--sessions``): ``agents/<id>/sessions/*.jsonl``, one record per line — a header
  ``{"type": "session", "id", "timestamp"}`` then ``{"type": "message", "id", "parentId", "timestamp" (ISO),
  "message": {"role", "content", "timestamp" (ms)}}``; user content is a string or ``[{type: "text", text}]``;
  assistant content holds ``text`` blocks and ``{"type": "toolCall", "id", "name", "arguments"}`` blocks; a tool's
  output is a ``role: "toolResult"`` message with ``toolCallId``, ``toolName``, ``content`` (the JSON text) and
  ``details`` (the same payload). ``memory_search`` returns ``{"results": [{path, startLine, endLine, score,
  snippet, source, citation?}], provider, model, ...}``.

What becomes what:

* documents: one per chunk; id ``path#Lstart-Lend`` (``~2``, ``~3`` … for a repeated range, which a line longer
  than a chunk produces); metadata ``path``, ``source`` (memory / sessions), ``start_line``, ``end_line``,
  ``mtime`` (its file's), ``openclaw_id`` (OpenClaw's own chunk id), ``model``; ``timestamp`` = the date of a
  ``memory/YYYY-MM-DD.md`` path (OpenClaw's dated-file rule), else none (evergreen).
* one query event per user prompt (``event_kind: prompt``: the prompt, its time, the preceding messages as
  ``context``, the assistant's reply as ``response``) and per ``memory_search`` call (``event_kind:
  memory_search``: the tool's query; ``injected`` = the results OpenClaw returned, mapped to document ids by path
  and line range, in its order — the production ranking replay compares with; ``production_scores`` their
  scores). Results that match no document are counted (``unknown_results``) and left out of ``injected``.
* the events are both ``queries.jsonl`` (id ``<session>:<line>``, ``as_of`` = the event time, ``category`` = the
  event kind) and ``querylog.jsonl`` (the logged-query contract, for ``evalkit replay``).
* ``qrels/pseudo.tsv``: citation pseudo-labels — a returned result is relevant (grade 1) to its event when the
  reply cites it under HookClaw's citation rule (:func:`retrievers.stages.helpers.feedback.is_citation`); a
  prompt event gets the cited results of its turn's searches. **Biased toward production** (only what OpenClaw
  returned can be cited): grade with ``evalkit pool`` → ``evalkit qrels`` for unbiased labels.
* lines that are not JSON, not objects, or messages without a role are counted (``malformed_lines``, with the
  first few listed) and skipped; a folder with no transcript at all is an error.
"""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from evalkit.data.importers.common import ImportSummary, check_out, read_jsonl_objects, write_dataset
from evalkit.data.importers.openclaw_files import chunk_id, chunk_markdown, list_memory_files
from retrievers.index.corpus import dated_path_ts
from retrievers.stages.helpers.feedback import CITATION_RATIO, is_citation
from retrievers.types import DataError, Document, Query, format_time, parse_time

CHUNK_COLUMNS = ("id", "path", "source", "start_line", "end_line", "hash", "model", "text", "embedding",
                 "updated_at")
FILE_COLUMNS = ("path", "source", "hash", "mtime", "size")
CONTEXT_MESSAGES = 6
MAX_EXAMPLES = 5
SEARCH_TOOL = "memory_search"
WORKSPACE_MODEL = "workspace"  # the model part of a chunk id when chunking a folder (no embedding provider)


# ---- documents --------------------------------------------------------------------------------------------------

def _doc(path: str, source: str, start: int, end: int, text: str, mtime_ms: float | None, oc_id: str,
         model: str, taken: dict[str, int]) -> Document:
    base = f"{path}#L{start}-L{end}"
    taken[base] = taken.get(base, 0) + 1
    did = base if taken[base] == 1 else f"{base}~{taken[base]}"
    md: dict[str, Any] = {"source": source, "start_line": start, "end_line": end, "openclaw_id": oc_id,
                          "model": model}
    if mtime_ms is not None:
        md["mtime"] = format_time(mtime_ms / 1000.0)
    return Document(id=did, text=text, path=path, timestamp=dated_path_ts(path), metadata=md)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def read_memory_db(path: Path) -> tuple[list[Document], dict[str, Any]]:
    """Documents of an OpenClaw memory index (see the module docstring) and notes for ``info``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"OpenClaw memory index not found: {path}")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise DataError(f"{path}: cannot open as SQLite ({exc})") from None
    try:
        for table, want in (("chunks", CHUNK_COLUMNS), ("files", FILE_COLUMNS)):
            have = _columns(con, table)
            missing = [c for c in want if c not in have]
            if missing:
                what = f"no table {table!r}" if not have else f"table {table!r} lacks {', '.join(missing)}"
                raise DataError(f"{path}: not an OpenClaw 2026.2.26 memory index ({what})")
        mtimes = {(p, s): m for p, s, m in con.execute("SELECT path, source, mtime FROM files")}
        models = con.execute("SELECT model, COUNT(*) FROM chunks GROUP BY model ORDER BY COUNT(*) DESC, model")\
            .fetchall()
        if not models:
            raise DataError(f"{path}: the OpenClaw memory index is empty (no chunks)")
        model = models[0][0]
        rows = con.execute("SELECT id, path, source, start_line, end_line, text FROM chunks WHERE model = ? "
                           "ORDER BY source, path, start_line, end_line, id", (model,)).fetchall()
        quick = con.execute("PRAGMA quick_check").fetchone()[0]
        if quick != "ok":
            raise DataError(f"{path}: SQLite reports the file damaged ({quick})")
    except sqlite3.DatabaseError as exc:
        raise DataError(f"{path}: unreadable SQLite file ({exc})") from None
    finally:
        con.close()
    taken: dict[str, int] = {}
    docs = [_doc(p, s, int(a), int(b), t, mtimes.get((p, s)), cid, model, taken) for cid, p, s, a, b, t in rows]
    notes = {"source": str(path), "model": model, "chunks": len(docs),
             "other_model_chunks": sum(n for _, n in models[1:])}
    return docs, notes


def chunk_workspace(workspace: Path, extra: list[str], tokens: int, overlap: int) -> tuple[list[Document], dict]:
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise DataError(f"workspace folder not found: {workspace}")
    files = list_memory_files(workspace, extra)
    if not files:
        raise DataError(f"{workspace}: no memory files (MEMORY.md, memory.md, memory/**/*.md)")
    taken: dict[str, int] = {}
    docs = []
    for f in files:
        try:
            content = f.read_text(encoding="utf-8")
            mtime_ms = os.stat(f).st_mtime_ns / 1e6
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read memory file {f}: {exc}") from None
        rel = os.path.relpath(f, workspace).replace(os.sep, "/")
        for c in chunk_markdown(content, tokens, overlap):
            docs.append(_doc(rel, "memory", c.start_line, c.end_line, c.text, mtime_ms,
                             chunk_id("memory", rel, c, WORKSPACE_MODEL), WORKSPACE_MODEL, taken))
    if not docs:
        raise DataError(f"{workspace}: the memory files hold no text to index")
    return docs, {"source": str(workspace), "files": len(files), "chunks": len(docs),
                  "chunking": {"tokens": tokens, "overlap": overlap}}


# ---- sessions ---------------------------------------------------------------------------------------------------

def session_files(folder: Path) -> list[Path]:
    """``*.jsonl`` transcripts of ``folder``: the folder itself, else ``agents/*/sessions``, else ``*/sessions``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"sessions folder not found: {folder}")
    for pattern in ("*.jsonl", "agents/*/sessions/*.jsonl", "*/sessions/*.jsonl"):
        found = sorted(p for p in folder.glob(pattern) if p.is_file())
        if found:
            return found
    raise DataError(f"{folder}: no session transcripts (*.jsonl, agents/<id>/sessions/*.jsonl)")


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content.strip() or None
    if isinstance(content, list):
        parts = [b["text"].strip() for b in content
                 if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
        parts = [p for p in parts if p]
        return "\n".join(parts) if parts else None
    return None


def _time_of(rec: dict, msg: dict) -> float | None:
    for v in (rec.get("timestamp"), msg.get("timestamp")):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v) / 1000.0 if v > 1e11 else float(v)
        if isinstance(v, str) and v:
            try:
                return parse_time(v)
            except DataError:
                continue
    return None


def _search_payload(msg: dict) -> dict | None:
    det = msg.get("details")
    if isinstance(det, dict) and "results" in det:
        return det
    txt = _text(msg.get("content"))
    if txt:
        try:
            obj = json.loads(txt)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None
    return None


def _arguments(block: dict) -> dict:
    args = block.get("arguments", block.get("input"))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


class _Session:
    """One transcript → events (see the module docstring)."""

    def __init__(self, path: Path, lookup: dict[tuple[str, int, int], str], stats: dict):
        self.path, self.lookup, self.stats = path, lookup, stats
        self.session = path.stem
        self.history: list[dict] = []
        self.events: list[dict] = []
        self.turn: list[dict] = []  # events of the current user turn (reply fills their response)
        self.calls: dict[str, dict] = {}  # toolCallId → its memory_search event

    def malformed(self, line: int, why: str) -> None:
        self.stats["malformed_lines"] += 1
        ex = self.stats["malformed_examples"]
        if len(ex) < MAX_EXAMPLES:
            ex.append(f"{self.path.name}:{line}: {why}")

    def event(self, kind: str, line: int, ts: float | None, query: str) -> dict | None:
        if ts is None:
            self.malformed(line, f"{kind} without a timestamp")
            return None
        ev = {"ts": format_time(ts), "query": query, "session": self.session,
              "context": [dict(m) for m in self.history[-CONTEXT_MESSAGES:]], "event_kind": kind,
              "line": line, "transcript": self.path.name}
        self.events.append(ev)
        self.turn.append(ev)
        return ev

    def feed(self, line: int, rec: dict) -> None:
        kind = rec.get("type")
        if kind == "session":
            if isinstance(rec.get("id"), str) and rec["id"]:
                self.session = rec["id"]
            return
        if kind != "message":
            return
        msg = rec.get("message")
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            self.malformed(line, "message without a role")
            return
        role, ts = msg["role"], _time_of(rec, msg)
        if role == "user":
            text = _text(msg.get("content"))
            if text:
                self.turn = []
                self.event("prompt", line, ts, text)
                self.history.append({"role": "user", "content": text})
        elif role == "assistant":
            content = msg.get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") in ("toolCall", "toolUse") and b.get("name") == SEARCH_TOOL:
                    q = _arguments(b).get("query")
                    if isinstance(q, str) and q.strip():
                        ev = self.event(SEARCH_TOOL, line, ts, q.strip())
                        if ev is not None and isinstance(b.get("id"), str):
                            self.calls[b["id"]] = ev
            text = _text(content)
            if text:
                for ev in self.turn:
                    ev["response"] = (ev["response"] + "\n" + text) if ev.get("response") else text
                self.history.append({"role": "assistant", "content": text})
        elif role == "toolResult" and msg.get("toolName") == SEARCH_TOOL:
            ev = self.calls.get(msg.get("toolCallId"))
            payload = _search_payload(msg)
            if ev is None or payload is None or not isinstance(payload.get("results"), list):
                self.malformed(line, "memory_search result without its call or results")
                return
            ids, scores, snippets = [], [], {}
            for r in payload["results"]:
                if not isinstance(r, dict):
                    continue
                try:
                    key = (str(r["path"]), int(r["startLine"]), int(r["endLine"]))
                except (KeyError, TypeError, ValueError):
                    self.stats["unknown_results"] += 1
                    continue
                did = self.lookup.get(key)
                if did is None:
                    self.stats["unknown_results"] += 1
                    continue
                ids.append(did)
                scores.append(r.get("score"))
                snippets[did] = r.get("snippet") or ""
            ev["injected"] = ids
            ev["production_scores"] = scores
            ev["_snippets"] = snippets
            self.stats["search_results"] += len(ids)


def read_sessions(folder: Path, documents: list[Document]) -> tuple[list[dict], dict]:
    lookup: dict[tuple[str, int, int], str] = {}
    for d in documents:
        key = (d.path or "", int(d.metadata["start_line"]), int(d.metadata["end_line"]))
        lookup.setdefault(key, d.id)
    stats: dict[str, Any] = {"transcripts": 0, "malformed_lines": 0, "malformed_examples": [],
                             "unknown_results": 0, "search_results": 0}
    events: list[dict] = []
    for f in session_files(folder):
        stats["transcripts"] += 1
        s = _Session(f, lookup, stats)
        good, bad = read_jsonl_objects(f)
        for no, why in bad:
            s.malformed(no, why)
        for no, rec in good:
            s.feed(no, rec)
        events.extend(s.events)
    return events, stats


def pseudo_qrels(events: list[dict], texts: dict[str, str]) -> dict[str, dict[str, int]]:
    """Citation pseudo-labels per event id (see the module docstring)."""
    qrels: dict[str, dict[str, int]] = {}
    by_turn: dict[tuple[str, str], list[dict]] = {}
    for ev in events:
        by_turn.setdefault((ev["session"], ev.get("response") or ""), []).append(ev)
    for ev in events:
        resp = ev.get("response")
        if not resp:
            continue
        pool: list[str] = []
        if ev["event_kind"] == SEARCH_TOOL:
            pool = ev.get("injected") or []
        else:
            for other in by_turn[(ev["session"], resp)]:
                pool += [d for d in other.get("injected") or [] if d not in pool]
        cited = {d: 1 for d in pool if is_citation(texts[d], resp, CITATION_RATIO)}
        if cited:
            qrels[ev["_id"]] = cited
    return qrels


def import_openclaw(args) -> ImportSummary:
    out = check_out(Path(args.out), args.overwrite)
    if bool(args.memory_db) == bool(args.workspace):
        raise DataError("give exactly one of --memory-db (OpenClaw's index) or --workspace (a folder to chunk)")
    if args.chunk_tokens < 1 or args.chunk_overlap < 0:
        raise DataError("--chunk-tokens must be >= 1 and --chunk-overlap >= 0")
    if args.memory_db:
        docs, doc_info = read_memory_db(Path(args.memory_db))
    else:
        docs, doc_info = chunk_workspace(Path(args.workspace), args.extra_path, args.chunk_tokens,
                                         args.chunk_overlap)
    if not args.sessions:
        raise DataError("give --sessions: the prompts and memory_search calls become the dataset's queries")
    events, stats = read_sessions(Path(args.sessions), docs)
    if not events:
        raise DataError(f"{args.sessions}: no user prompt or memory_search call in {stats['transcripts']} "
                        f"transcript(s) ({stats['malformed_lines']} malformed lines)")
    seen: dict[str, int] = {}
    queries = []
    for ev in events:
        qid = f"{ev['session']}:{ev['line']}"
        seen[qid] = seen.get(qid, 0) + 1
        ev["_id"] = qid if seen[qid] == 1 else f"{qid}.{seen[qid]}"
        md = {"session": ev["session"], "context": ev["context"]}
        if ev["event_kind"] == SEARCH_TOOL:
            md["production"] = ev.get("injected", [])
        queries.append(Query(id=ev["_id"], text=ev["query"], as_of=parse_time(ev["ts"]),
                             category=ev["event_kind"], metadata=md))
    qrels = pseudo_qrels(events, {d.id: d.text for d in docs})
    for ev in events:
        ev.pop("_snippets", None)
        ev["query_id"] = ev.pop("_id")
    info = {"source": "OpenClaw 2026.2.26 import", "documents_from": doc_info,
            "sessions": {k: v for k, v in stats.items()},
            "pseudo_qrels": "qrels/pseudo.tsv: returned results the reply cites (HookClaw citation rule, "
                            f"ratio {CITATION_RATIO}); biased toward production"}
    splits = {"pseudo": [q for q in qrels]} if qrels else {}
    counts = write_dataset(out, out.name, docs, queries, qrels, info, events=events, overwrite=args.overwrite,
                           splits=splits)
    summary = ImportSummary(out, {"documents": counts["documents"], "queries": counts["queries"],
                                  "prompts": sum(e["event_kind"] == "prompt" for e in events),
                                  "memory_search_calls": sum(e["event_kind"] == SEARCH_TOOL for e in events),
                                  "pseudo_qrels_rows": counts["qrels_rows"],
                                  "transcripts": stats["transcripts"],
                                  "malformed_lines": stats["malformed_lines"],
                                  "unknown_results": stats["unknown_results"]})
    summary.notes += stats["malformed_examples"]
    if doc_info.get("other_model_chunks"):
        summary.notes.append(f"{doc_info['other_model_chunks']} chunks of other embedding models left out "
                             f"(imported model: {doc_info['model']})")
    return summary
