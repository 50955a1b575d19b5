"""Progress lines for the long steps (model load, conversion, embedding, MaxP splitting, index builds) when stderr is
not a terminal: a step still running after ``EVALKIT_PROGRESS_SECONDS`` (default 10) gets a line saying what it is,
then one every interval (with its count so far when it has one) and one when it ends — so a CI log never sits
silent for longer than the interval, and quick steps (cached, tiny) print nothing. On a terminal the steps stay
quiet (embedding shows its own progress bar there); ``EVALKIT_PROGRESS=0`` silences them everywhere,
``EVALKIT_PROGRESS=1`` forces them on a terminal too.

Usage::

    from retrievers.embed import progress
    with progress.step("embedding 5,183 texts of scifact", total=5183) as p:
        for part in parts:
            ...
            p.advance(len(part))
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager



def enabled(stream=None) -> bool:
    """Whether progress lines are written to ``stream`` (stderr): off on a terminal unless EVALKIT_PROGRESS=1."""
    flag = os.environ.get("EVALKIT_PROGRESS", "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    if flag in ("1", "true", "yes", "on"):
        return True
    stream = stream or sys.stderr
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def interval() -> float:
    try:
        return max(0.05, float(os.environ.get("EVALKIT_PROGRESS_SECONDS", "10")))
    except ValueError:
        return 10.0


class Step:
    """One running step: ``advance(n)`` counts work done (shown in the heartbeat lines against ``total``)."""

    def __init__(self, what: str, total: int | None, unit: str, stream):
        self.what, self.total, self.unit, self.stream = what, total, unit, stream
        self.done = 0
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.spoke = False  # whether any line was written (then the end gets one too)

    def advance(self, n: int = 1) -> None:
        self.done += n

    def _count(self) -> str:
        if self.total:
            return f" {self.done:,}/{self.total:,} {self.unit}"
        return f" {self.done:,} {self.unit}" if self.done else " still running"

    def _say(self, text: str) -> None:
        try:
            print(f"evalkit: {text}", file=self.stream, flush=True)
        except (ValueError, OSError):  # the stream went away: progress is never worth an error
            pass

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            self.spoke = True
            self._say(f"{self.what}:{self._count()} (+{time.perf_counter() - self.t0:.0f}s)")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat, args=(interval(),), daemon=True,
                                        name="evalkit-progress")
        self._thread.start()

    def stop(self, ok: bool) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        took = time.perf_counter() - self.t0
        if self.spoke:
            self._say(f"{self.what}: {'done' if ok else 'stopped'} in {took:.1f}s")


class _Quiet:
    done = 0

    def advance(self, n: int = 1) -> None:
        pass


@contextmanager
def step(what: str, total: int | None = None, unit: str = "texts", stream=None):
    """A long step announced on a non-terminal stderr (see the module docstring); yields an object with
    ``advance(n)``."""
    stream = stream or sys.stderr
    if not enabled(stream):
        yield _Quiet()
        return
    s = Step(what, total, unit, stream)
    s.start()
    ok = False
    try:
        yield s
        ok = True
    finally:
        s.stop(ok)
