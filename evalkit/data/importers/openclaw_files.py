"""OpenClaw 2026.2.26's memory files and chunks, re-implemented from reading the published package (``npm pack
openclaw@2026.2.26``: ``listMemoryFiles``, ``chunkMarkdown`` and the chunk id of its memory manager).

File selection (``listMemoryFiles``): ``MEMORY.md`` and ``memory.md`` at the workspace root, every ``*.md`` under
``memory/`` (recursively, symlinks skipped), then each extra path (a folder → its ``*.md`` recursively; a file →
itself when it ends in ``.md``); duplicates by real path dropped, first one kept. Paths are stored relative to the
workspace with ``/``.

Chunking (``chunkMarkdown``, ``tokens`` 400 / ``overlap`` 80 by default, one token = four characters, characters
counted in UTF-16 code units as JavaScript does):

* ``max_chars = max(32, 4·tokens)``, ``overlap_chars = max(0, 4·overlap)``; the text is split on ``\\n`` — every
  piece is a line, including the empty one after a final newline.
* a line longer than ``max_chars`` is cut into ``max_chars`` pieces (an empty line is one empty piece); a piece
  costs ``len + 1``. When adding it would pass ``max_chars`` and the chunk is not empty, the chunk is emitted and
  its tail lines — walking back until their cost reaches ``overlap_chars`` — start the next one.
* chunks whose text is only whitespace are dropped (the manager's filter, JavaScript ``trim``).

Chunk id: ``sha256("{source}:{path}:{start_line}:{end_line}:{sha256(text)}:{model}")`` (hex).

This differs from the memory-workspace generator's chunker (``evalkit/data/workspace_generator/chunk.py``), which drops
the final empty line and counts code points: that one builds the project's own dataset and must not move its
numbers; this one must give the lines OpenClaw gives on real files.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from retrievers.text import js_trim, utf16_len


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    text: str

    @property
    def hash(self) -> str:
        return sha256_hex(self.text)


def sha256_hex(text: str) -> str:
    """sha256 of the UTF-8 bytes Node hashes: a lone surrogate (a long line cut inside an astral character)
    becomes U+FFFD, as ``crypto.createHash().update(string)`` encodes it."""
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(source: str, path: str, chunk: Chunk, model: str) -> str:
    """OpenClaw's chunk id (see the module docstring)."""
    return sha256_hex(f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}:{model}")


def _utf16_pieces(line: str, size: int) -> list[str]:
    if not line:
        return [""]
    units = line.encode("utf-16-le", "surrogatepass")
    step = 2 * size
    return [units[i:i + step].decode("utf-16-le", "surrogatepass") for i in range(0, len(units), step)]


def chunk_markdown(content: str, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """OpenClaw's chunks of ``content`` (see the module docstring), whitespace-only chunks dropped."""
    max_chars = max(32, tokens * 4)
    overlap_chars = max(0, overlap * 4)
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []
    size = 0

    def flush() -> None:
        if current:
            chunks.append(Chunk(current[0][1], current[-1][1], "\n".join(p for p, _ in current)))

    for no, line in enumerate(content.split("\n"), 1):
        for piece in _utf16_pieces(line, max_chars):
            cost = utf16_len(piece) + 1
            if size + cost > max_chars and current:
                flush()
                kept: list[tuple[str, int]] = []
                acc = 0
                if overlap_chars > 0:
                    for entry in reversed(current):
                        acc += utf16_len(entry[0]) + 1
                        kept.insert(0, entry)
                        if acc >= overlap_chars:
                            break
                current = kept
                size = sum(utf16_len(p) + 1 for p, _ in kept)
            current.append((piece, no))
            size += cost
    flush()
    return [c for c in chunks if js_trim(c.text)]


def _walk(folder: Path, out: list[Path]) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        if e.is_symlink():
            continue
        if e.is_dir(follow_symlinks=False):
            _walk(Path(e.path), out)
        elif e.is_file(follow_symlinks=False) and e.name.endswith(".md"):
            out.append(Path(e.path))


def list_memory_files(workspace: Path, extra_paths: list[str] | None = None) -> list[Path]:
    """OpenClaw's memory files of ``workspace`` (see the module docstring), in its order.

    One difference: OpenClaw lists a folder in the order the file system returns; this sorts by name so two runs
    give the same dataset."""
    workspace = Path(workspace)
    result: list[Path] = []
    for name in ("MEMORY.md", "memory.md"):
        p = workspace / name
        if p.is_file() and not p.is_symlink():
            result.append(p)
    mem = workspace / "memory"
    if mem.is_dir() and not mem.is_symlink():
        _walk(mem, result)
    extras = []
    for raw in extra_paths or []:
        raw = raw.strip()
        if raw:
            p = Path(raw) if os.path.isabs(raw) else workspace / raw
            p = Path(os.path.abspath(p))
            if p not in extras:
                extras.append(p)
    for p in extras:
        if p.is_symlink():
            continue
        if p.is_dir():
            _walk(p, result)
        elif p.is_file() and p.name.endswith(".md"):
            result.append(p)
    seen: set[str] = set()
    out = []
    for p in result:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
