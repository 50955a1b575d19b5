"""Importers from fixtures in the real formats (tests/import_fixtures.py): OpenClaw's memory index, workspace
chunking and session transcripts; bad inputs → one line, exit 2, nothing written."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.data.beir import load_beir
from evalkit.data.importers.openclaw_files import chunk_markdown
from evalkit.data.querylog import load_querylog
from tests.import_fixtures import write_memory_db, write_sessions, write_workspace


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("oc")
    ws = write_workspace(root / "workspace")
    write_memory_db(root / "memory.sqlite", ws)
    write_sessions(root / "state")
    return root


def _fails(capsys, argv: list[str], out: Path, needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalkit: error:") and needle in err[0], err
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]  # no temp left behind


# ---- OpenClaw chunking ------------------------------------------------------------------------------------------

def test_chunker_keeps_the_final_empty_line_and_line_ranges():
    # "a\nb\n" is three lines for OpenClaw (the empty one after the final newline counts and is kept)
    (c,) = chunk_markdown("a\nb\n")
    assert (c.start_line, c.end_line, c.text) == (1, 3, "a\nb\n")


def test_chunker_overlap_closed_form():
    # tokens=8 → max 32 chars, overlap=2 → 8 chars. Lines of 9 chars cost 10: three fit (30), the fourth flushes;
    # walking back, the last line alone (10) reaches 8 → one line carried.
    text = "\n".join(f"line-{i:03d}" for i in range(1, 6))
    chunks = chunk_markdown(text, tokens=8, overlap=2)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 3), (3, 5)]


def test_chunker_counts_utf16_units_like_javascript():
    # an astral character is 2 UTF-16 units: 16 of them = 32 units fill a 32-char chunk exactly (+1 newline cost
    # passes it), so a long line of them is cut every 32 units = 16 characters
    line = "😀" * 20
    chunks = chunk_markdown(line, tokens=8, overlap=0)
    assert [c.text for c in chunks] == ["😀" * 16, "😀" * 4]
    assert all((c.start_line, c.end_line) == (1, 1) for c in chunks)


# ---- import openclaw ----------------------------------------------------------------------------------------------

def test_import_openclaw_index_and_sessions(fx, tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "malformed_lines: 1" in printed and "unknown_results: 1" in printed
    ds = load_beir(out)
    ids = [d.id for d in ds.documents]
    assert "memory/projects/deploy.md#L15-L30" in ids and not any(i.startswith("notes/") for i in ids)
    by_id = {d.id: d for d in ds.documents}
    dated = by_id["memory/2026-11-09.md#L1-L5"]
    assert dated.timestamp is not None and by_id["MEMORY.md#L1-L6"].timestamp is None  # evergreen
    assert dated.metadata["mtime"] == "2025-11-24T16:00:00Z" and len(dated.metadata["openclaw_id"]) == 64
    cats = sorted(q.category for q in ds.queries)
    assert cats == ["memory_search"] * 2 + ["prompt"] * 4
    # pseudo-labels: the search result the reply cites; the uncited MEMORY.md hit is not relevant
    assert ds.qrels["sess-a:3"] == {"memory/2026-11-02.md#L1-L5": 1}
    log = load_querylog(out / "querylog.jsonl")
    assert not log.skipped
    search = [e for e in log.events if e.extra.get("event_kind") == "memory_search"]
    assert search[0].injected == ["memory/2026-11-02.md#L1-L5", "MEMORY.md#L1-L6"]  # OpenClaw's order
    assert search[0].context == [{"role": "user", "content": "How did I fix the SQLITE_BUSY errors?"}]
    assert "busy timeout" in search[0].response


def test_workspace_chunking_gives_the_index_documents(fx, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(fx / "state"),
                 "--out", str(a)]) == 0
    assert main(["import", "openclaw", "--workspace", str(fx / "workspace"), "--sessions", str(fx / "state"),
                 "--out", str(b)]) == 0
    da, db = load_beir(a), load_beir(b)
    assert [(d.id, d.text) for d in da.documents] == [(d.id, d.text) for d in db.documents]


def test_openclaw_bad_inputs(fx, tmp_path, capsys):
    out = tmp_path / "never"
    sess = ["--sessions", str(fx / "state"), "--out", str(out)]
    wrong = tmp_path / "wrong.sqlite"
    con = sqlite3.connect(wrong)
    con.execute("CREATE TABLE chunks (id TEXT, body TEXT)")
    con.commit()
    con.close()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(wrong), *sess], out, "lacks")
    truncated = tmp_path / "truncated.sqlite"
    data = (fx / "memory.sqlite").read_bytes()
    truncated.write_bytes(data[: len(data) // 3])
    _fails(capsys, ["import", "openclaw", "--memory-db", str(truncated), *sess], out, "truncated.sqlite")
    empty = tmp_path / "empty.sqlite"
    ws = write_workspace(tmp_path / "ws-empty")
    write_memory_db(empty, ws)
    con = sqlite3.connect(empty)
    con.execute("DELETE FROM chunks")
    con.commit()
    con.close()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(empty), *sess], out, "empty")
    nosess = tmp_path / "nosess"
    nosess.mkdir()
    _fails(capsys, ["import", "openclaw", "--memory-db", str(fx / "memory.sqlite"), "--sessions", str(nosess),
                    "--out", str(out)], out, "no session transcripts")
