"""Line-based Markdown chunking in the manner of OpenClaw's memory indexer.

OpenClaw's memory-core splits every memory file into chunks of about ``tokens`` tokens (default 400) with
``overlap`` tokens (default 80) carried from the end of one chunk into the start of the next, estimating
one token as four characters. Lines are never merged or re-wrapped, so every chunk keeps its 1-based
``start_line``/``end_line`` range in the file; only a single line longer than the chunk size is cut into
pieces (each piece still reports the line it came from).

Algorithm (``max_chars = max(32, 4·tokens)``, ``overlap_chars = max(0, 4·overlap)``):

1. Split the text on ``\\n`` (a final empty line after the last newline is not a line).
2. Walk the lines (pieces of at most ``max_chars`` characters). A piece costs ``len(piece) + 1`` characters.
   If adding it would exceed ``max_chars`` and the current chunk is not empty, emit the current chunk, then
   keep its tail lines — walking back from the last line and stopping as soon as the kept lines reach
   ``overlap_chars`` — as the start of the next chunk.
3. Emit what remains. Chunks whose text is only whitespace are dropped.

This is this project's own implementation of the behaviour described in ``spec/PIPELINES.md`` (chunk 400 /
overlap 80); it is not a byte-exact port, and the dataset card says so.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    text: str


def chunk_markdown(text: str, tokens: int = 400, overlap: int = 80) -> list[Chunk]:
    """Chunks of ``text`` (see the module docstring for the exact rule)."""
    max_chars = max(32, 4 * tokens)
    overlap_chars = max(0, 4 * overlap)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []  # (piece, line number)
    size = 0

    def emit() -> None:
        if current:
            body = "\n".join(p for p, _ in current)
            if body.strip():
                chunks.append(Chunk(current[0][1], current[-1][1], body))

    def carry() -> None:
        nonlocal current, size
        kept: list[tuple[str, int]] = []
        acc = 0
        if overlap_chars > 0:
            for piece, no in reversed(current):
                acc += len(piece) + 1
                kept.insert(0, (piece, no))
                if acc >= overlap_chars:
                    break
        current = kept
        size = sum(len(p) + 1 for p, _ in kept)

    for no, line in enumerate(lines, 1):
        pieces = [line[i:i + max_chars] for i in range(0, len(line), max_chars)] or [""]
        for piece in pieces:
            cost = len(piece) + 1
            if current and size + cost > max_chars:
                emit()
                carry()
            current.append((piece, no))
            size += cost
    emit()
    return chunks
