"""Progress lines for long steps on a non-terminal stderr: once a step has run for the interval, a line per interval
with the count so far and an end line; nothing for a quick step, on a terminal or with EVALKIT_PROGRESS=0."""
from __future__ import annotations

import io
import re
import time

from retrievers.embed import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_step_lines_on_a_log(monkeypatch):
    monkeypatch.delenv("EVALKIT_PROGRESS", raising=False)
    monkeypatch.setenv("EVALKIT_PROGRESS_SECONDS", "0.1")
    log = io.StringIO()
    with progress.step("embedding 300 new texts", total=300, stream=log) as p:
        for _ in range(3):
            p.advance(100)
            time.sleep(0.45)
    lines = log.getvalue().splitlines()
    beats = [x for x in lines[:-1] if re.fullmatch(r"evalkit: embedding 300 new texts: \d+/300 texts \(\+\d+s\)", x)]
    assert len(beats) == len(lines) - 1 >= 3 and beats[-1].split(": ")[2].startswith(("200/300", "300/300"))
    assert re.fullmatch(r"evalkit: embedding 300 new texts: done in 1\.\ds", lines[-1])


def test_quiet_on_a_terminal_and_when_switched_off(monkeypatch):
    monkeypatch.delenv("EVALKIT_PROGRESS", raising=False)
    tty = _Tty()
    with progress.step("x", stream=tty) as p:
        p.advance()
    assert tty.getvalue() == ""
    monkeypatch.setenv("EVALKIT_PROGRESS", "0")
    log = io.StringIO()
    with progress.step("x", stream=log):
        pass
    assert log.getvalue() == ""
    monkeypatch.setenv("EVALKIT_PROGRESS", "1")
    monkeypatch.setenv("EVALKIT_PROGRESS_SECONDS", "0.1")
    with progress.step("quick", stream=tty):
        pass
    assert tty.getvalue() == ""  # shorter than the interval: nothing to say
    with progress.step("forced", stream=tty):
        time.sleep(0.25)
    assert tty.getvalue().splitlines()[0] == "evalkit: forced: still running (+0s)"


def test_a_failing_step_says_it_stopped(monkeypatch):
    monkeypatch.setenv("EVALKIT_PROGRESS", "1")
    monkeypatch.setenv("EVALKIT_PROGRESS_SECONDS", "0.1")
    log = io.StringIO()
    try:
        with progress.step("conversion", stream=log):
            time.sleep(0.25)
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert log.getvalue().splitlines()[-1].startswith("evalkit: conversion: stopped in ")
