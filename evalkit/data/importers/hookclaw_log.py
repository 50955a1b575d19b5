"""`evalkit import hookclaw-log FILE`: HookClaw's ``logInjections`` journal lines → events + a query log.

Line formats read from the plugin's code (public repository ``jduar005/hookclaw``, ``src/hook-handler.js`` and
``index.js``; its README's examples differ), after the ``hookclaw: `` prefix, ``#N`` = the handler's call counter:

* ``#N skip — prompt too short (L chars)`` / ``#N skip — matches skip pattern`` → ``skipped``
* ``#N cache hit — no results (0ms)`` → ``cache_hit``, 0 injected;
  ``#N cache hit — injecting K memories (0ms, top score: S)`` → ``cache_hit``, K injected
* ``#N no relevant memories found (Tms)`` / ``#N R results filtered out (top score: S) (Tms)`` → ``no_relevant``
* ``#N memories found but formatting produced empty context`` → ``empty_context``
* ``#N injecting K memories (Tms, top score: S[, fts: F boosted])`` → ``injected``, K, latency T
* with ``debugLogging``: ``[debug] #N prompt: "P"`` (P cut at 120 characters + ``...``), ``[debug] #N result[i]:
  path:start-end | score: S ...`` → the prompt and the injected results of call N
* ``registered before_agent_start hook (v…)`` → the gateway (re)started: call numbers start again at 1

Journal prefixes accepted (``journalctl -o short | short-precise | short-iso | short-iso-precise``):
``Nov 20 14:03:11[.ffffff] host unit[pid]: …`` (no year: ``--year`` is required) and
``2026-11-20T14:03:11[.ffffff]+00:00 host unit[pid]: …``. After it comes OpenClaw's console line for the plugin
logger (subsystem ``plugins``; read from the package's ``formatConsoleLine``): ``[plugins] hookclaw: …`` with an
optional time prefix and ANSI colours (stripped), or, with ``consoleStyle: "json"``, a JSON object whose
``message`` holds the text. Lines without ``hookclaw:`` are ignored; a ``hookclaw:`` line that matches no known
format is counted (``unparsed``) and listed.

Output folder: ``events.jsonl`` (every call: ts, call, outcome, injected_count, latency_ms, top_score, prompt,
prompt_truncated, results), ``querylog.jsonl`` (the calls whose prompt was logged, in the logged-query contract:
``injected`` = the logged results mapped to ``--dataset`` document ids by path and line range when given, ``[]``
for a call that injected nothing; plus ``outcome`` and ``injected_count``), ``summary.json`` (production rates over
every call: skip / injection / cache-hit / no-relevant rates, latency percentiles).
"""
from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.data.importers.common import ImportSummary, check_out, jsonl_line, write_folder
from retrievers.types import DataError, format_time

MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                      "Dec"), 1)}
SHORT = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?) \S+ [^:]+: ")
ISO = re.compile(r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) \S+ [^:]+: ")
DASH = r"(?:—|–|--?)"
CALL = re.compile(r"hookclaw: (?P<debug>\[debug\] )?#(?P<n>\d+) (?P<rest>.*)$")
REGISTERED = re.compile(r"hookclaw: registered before_agent_start hook")
FORMATS = [
    ("skipped", re.compile(rf"^skip {DASH} prompt too short \((?P<chars>\d+) chars\)$")),
    ("skipped", re.compile(rf"^skip {DASH} matches skip pattern$")),
    ("cache_hit", re.compile(rf"^cache hit {DASH} no results \((?P<ms>\d+)ms\)$")),
    ("cache_hit", re.compile(rf"^cache hit {DASH} injecting (?P<k>\d+) memories \((?P<ms>\d+)ms, "
                             rf"top score: (?P<top>[\d.?]+)\)$")),
    ("no_relevant", re.compile(r"^no relevant memories found \((?P<ms>\d+)ms\)$")),
    ("no_relevant", re.compile(r"^(?P<raw>\d+) results filtered out \(top score: (?P<top>[\d.?]+)\) "
                               r"\((?P<ms>\d+)ms\)$")),
    ("empty_context", re.compile(r"^memories found but formatting produced empty context$")),
    ("injected", re.compile(r"^injecting (?P<k>\d+) memories \((?P<ms>\d+)ms, top score: (?P<top>[\d.?]+)"
                            r"(?:, fts: (?P<fts>\d+) boosted)?\)$")),
]
PROMPT = re.compile(r'^prompt: "(?P<p>.*)"(?P<none> → no injection)?$')
RESULT = re.compile(r"^result\[(?P<i>\d+)\]: (?P<path>.+):(?P<a>\d+|\?)-(?P<b>\d+|\?) \| score: (?P<s>[\d.]+)")
SNIPPET = re.compile(r'^result\[\d+\]: ".*$')
PREVIEW = 120
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _console_message(msg: str) -> str:
    """The plugin's text from OpenClaw's console line (ANSI colours stripped; JSON console style unwrapped)."""
    msg = ANSI.sub("", msg)
    if msg.lstrip().startswith("{"):
        try:
            obj = json.loads(msg)
        except ValueError:
            return msg
        if isinstance(obj, dict) and isinstance(obj.get("message"), str):
            return obj["message"]
    return msg


def _time(line: str, year: int | None) -> tuple[float, str] | None:
    m = ISO.match(line)
    if m:
        s = m.group("iso")
        s = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", s).replace("Z", "+00:00")
        dt = datetime.fromisoformat(s)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp(), line[m.end():]
    m = SHORT.match(line)
    if m:
        if year is None:
            raise DataError("journalctl short format lines carry no year: give --year (or export with -o short-iso)")
        h, mi, sec = m.group("hms").split(":")
        dt = datetime(year, MONTHS[m.group("mon")], int(m.group("day")), int(h), int(mi), int(float(sec)),
                      int(round((float(sec) % 1) * 1e6)), tzinfo=timezone.utc)
        return dt.timestamp(), line[m.end():]
    return None


def parse_log(text: str, year: int | None) -> tuple[list[dict], dict[str, Any]]:
    events: dict[tuple[int, int], dict] = {}
    order: list[tuple[int, int]] = []
    gen = 0
    stats: dict[str, Any] = {"lines": 0, "hookclaw_lines": 0, "unparsed": 0, "unparsed_examples": [],
                             "restarts": 0}
    for no, line in enumerate(text.splitlines(), 1):
        stats["lines"] += 1
        if "hookclaw: " not in line:
            continue
        t = _time(line, year)
        if t is None:
            stats["unparsed"] += 1
            if len(stats["unparsed_examples"]) < 5:
                stats["unparsed_examples"].append(f"line {no}: no journalctl prefix")
            continue
        ts, msg = t
        msg = _console_message(msg)
        stats["hookclaw_lines"] += 1
        if REGISTERED.search(msg):
            gen += 1
            stats["restarts"] += 1
            continue
        m = CALL.search(msg)
        if not m:
            continue  # other plugin messages (warnings, feedback hook)
        key = (gen, int(m.group("n")))
        rest = m.group("rest")
        ev = events.get(key)
        if m.group("debug"):
            pm, rm = PROMPT.match(rest), RESULT.match(rest)
            if ev is None:
                ev = events[key] = {"ts": format_time(ts), "call": key[1], "restart": gen, "outcome": None}
                order.append(key)
            if pm:
                p = pm.group("p")
                ev["prompt_truncated"] = len(p) == PREVIEW + 3 and p.endswith("...")
                ev["prompt"] = p[:PREVIEW] if ev["prompt_truncated"] else p
            elif rm:
                ev.setdefault("results", []).append(
                    {"path": rm.group("path"), "start_line": None if rm.group("a") == "?" else int(rm.group("a")),
                     "end_line": None if rm.group("b") == "?" else int(rm.group("b")), "score": float(rm.group("s"))})
            elif not SNIPPET.match(rest):
                stats["unparsed"] += 1
            continue
        for outcome, rx in FORMATS:
            fm = rx.match(rest)
            if fm:
                break
        else:
            stats["unparsed"] += 1
            if len(stats["unparsed_examples"]) < 5:
                stats["unparsed_examples"].append(f"line {no}: {rest[:80]}")
            continue
        if ev is None:
            ev = events[key] = {"ts": format_time(ts), "call": key[1], "restart": gen}
            order.append(key)
        g = fm.groupdict()
        ev["outcome"] = outcome
        ev["injected_count"] = int(g["k"]) if g.get("k") else 0
        if g.get("ms") is not None:
            ev["latency_ms"] = float(g["ms"])
        if g.get("top") and g["top"] != "?":
            ev["top_score"] = float(g["top"])
        if g.get("chars"):
            ev["prompt_chars"] = int(g["chars"])
    return [events[k] for k in order], stats


def production_rates(events: list[dict]) -> dict[str, Any]:
    n = len(events)
    out: dict[str, Any] = {"events": n}
    for outcome in ("skipped", "injected", "cache_hit", "no_relevant", "empty_context"):
        out[f"{outcome}_rate"] = sum(e.get("outcome") == outcome for e in events) / n
    out["injection_rate"] = sum((e.get("injected_count") or 0) > 0 for e in events) / n
    lat = np.array([e["latency_ms"] for e in events if e.get("outcome") in ("injected", "no_relevant")
                    and "latency_ms" in e], dtype=np.float64)
    out["latency_events"] = int(len(lat))
    if len(lat):
        for pc in (50, 90, 95, 99):
            out[f"latency_ms_p{pc}"] = float(np.percentile(lat, pc))
    out["with_prompt"] = sum("prompt" in e for e in events)
    return out


def _lookup(dataset: str | None) -> dict[tuple[str, int, int], str] | None:
    if not dataset:
        return None
    from evalkit.data.registry import load_dataset  # lazy: startup
    ds = load_dataset(dataset)
    out: dict[tuple[str, int, int], str] = {}
    for d in ds.documents:
        a, b = d.metadata.get("start_line"), d.metadata.get("end_line")
        if d.path and isinstance(a, int) and isinstance(b, int):
            out.setdefault((d.path, a, b), d.id)
    return out


def import_hookclaw_log(args) -> ImportSummary:
    out = check_out(Path(args.out), args.overwrite)
    path = Path(args.file)
    try:
        raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8", errors="replace")
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    events, stats = parse_log(text, args.year)
    if not events:
        raise DataError(f"{path}: no HookClaw call lines ('hookclaw: #N …') in {stats['lines']} lines")
    lookup = _lookup(args.dataset)
    unknown = 0
    qlog = []
    for ev in events:
        if "prompt" not in ev:
            continue
        q = {"ts": ev["ts"], "query": ev["prompt"], "outcome": ev.get("outcome"),
             "injected_count": ev.get("injected_count"), "call": ev["call"],
             "prompt_truncated": ev.get("prompt_truncated", False)}
        if "latency_ms" in ev:
            q["latency_ms"] = ev["latency_ms"]
        if not ev.get("injected_count"):
            q["injected"] = []
        elif lookup is not None and ev.get("results"):
            ids = [lookup.get((r["path"], r["start_line"], r["end_line"])) for r in ev["results"]]
            unknown += sum(i is None for i in ids)
            q["injected"] = [i for i in ids if i is not None]
        qlog.append(q)
    rates = production_rates(events)
    summary = {"source": str(path), "production": rates, "parse": stats, "unknown_results": unknown}
    write_folder(out, {"events.jsonl": "".join(jsonl_line(e) for e in events),
                       "querylog.jsonl": "".join(jsonl_line(q) for q in qlog),
                       "summary.json": json.dumps(summary, indent=1) + "\n"}, overwrite=args.overwrite)
    s = ImportSummary(out, {"calls": len(events), "with_prompt (replayable)": len(qlog),
                            "restarts": stats["restarts"], "unparsed": stats["unparsed"],
                            "unknown_results": unknown})
    s.counts.update({k: round(v, 3) if isinstance(v, float) else v for k, v in rates.items()
                     if k.endswith("_rate") or k.startswith("latency_ms")})
    s.notes += stats["unparsed_examples"]
    if not qlog:
        s.notes.append("no prompt logged (HookClaw prints prompts only with debugLogging): nothing to replay")
    return s
