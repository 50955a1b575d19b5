"""The query log of the memory-workspace benchmark (logged-query contract, DESIGN.md §4).

One JSON object per prompt the developer sent to the agent over the six months, in time order::

    {"ts", "session", "query", "context"?, "injected"?, "response"?, "latency_ms"?, "event_kind", "cited"?}

* ``event_kind`` (an extra key; the contract keeps unknown keys) says how the event was made: ``skip``
  (greeting, ack, slash command, heartbeat — nothing to retrieve), ``labelled`` (the text of a labelled query
  asked after its ``as_of``), ``near-repeat`` (an earlier prompt re-asked with small changes), ``follow-up``
  (only makes sense with ``context``, the recent messages of the session), ``task`` (a work request) and
  ``recall`` (a question about recent notes).
* ``injected``: what a plausible *production* policy chose — a keyword-overlap ranker over the chunks that
  existed at ``ts`` (daily notes up to that day, junk files from their mtime, each evergreen file as it stood), top 3
  with an IDF-weighted overlap of at least ``MIN_SCORE``, behind a small skip gate. It has no junk filter and
  no secret guard, as in the workspace's own history (note of 2026-08-04), so the log contains the failures a
  better pipeline should avoid. Events before ``LOGGING_FROM`` carry no ``injected``/``latency_ms`` (logging
  was switched on later).
* ``response`` restates lines of some injected chunks, so that HookClaw's citation rule (words longer than 3
  characters of the chunk found as substrings of the lower-cased response, ratio ≥ 0.3) finds those chunks
  and not the others; ``cited`` records which injected chunks pass that rule. Responses never contain a
  secret value.
"""
from __future__ import annotations

import math
import random
import re
from datetime import date, datetime, timedelta

from evalkit.data.workspace_generator.content import AREAS, PEOPLE, PROJECTS
from evalkit.data.workspace_generator.labels import STOP_WORDS
from evalkit.data.workspace_generator.model import END, START, VACATION, days_between, rng_for

LOGGING_FROM = "2026-03-09"
MIN_SCORE = 5.0
TOP_K = 3
CITE_RATIO = 0.3

SKIP_PROMPTS = ("hi", "hello", "hey", "good morning", "morning!", "ok", "ok.", "okay", "thanks", "thanks!",
                "thank you", "thx", "cool", "nice", "great", "perfect", "👍", "yes", "no", "yep", "sure",
                "go ahead", "continue", "next", "/new", "/status", "/compact", "/reset", "/model", "HEARTBEAT_OK",
                "[cron:daily-notes] flush memory", "好的", "继续", "vale", "got it", "done", "lol")
SKIP_REPLIES = {"/new": "Started a new session.", "/status": "Gateway up, memory index healthy.",
                "/compact": "Compacted the conversation.", "/reset": "Session reset.",
                "/model": "Current model: default."}
TASKS = ("fix the failing test in {project}", "write a migration that adds an index to the invoices table",
         "review this diff for {project} before I merge it", "draft an email to {person} about next week",
         "explain this stack trace from {project}", "refactor {area} so it is easier to test",
         "write a bash one-liner to find files larger than 100 MB", "suggest names for a new {project} module",
         "turn these bullet points into a short status update for {person}",
         "what's a good way to structure the README for {project}?",
         "generate test data for {area}", "help me estimate the work left on {project}")
FOLLOW_UPS = ("and how did I fix it?", "why?", "when was that?", "who did that?", "what was the error code again?",
              "ok, and where is that configured?", "can you show the exact command?", "and before that?",
              "is that still true?", "which file was it in?")
RECALL = ("remind me what I noted about {project} recently", "what did I write down about {person} lately?",
          "anything new on {project} this week?", "what's still open for {project}?")
_SKIP_GATE = re.compile(r"^(/|hi\b|hello\b|hey\b|ok\b|okay\b|thanks\b|thank you\b|thx\b|yes\b|no\b|yep\b|sure\b|"
                        r"cool\b|nice\b|great\b|perfect\b|got it\b|done\b|lol\b|go ahead\b|continue\b|next\b|"
                        r"morning\b|good morning\b|heartbeat|\[cron:)", re.IGNORECASE)
_TOKEN = re.compile(r"\w+")
_CITE_SPLIT = re.compile(r"[\s/\-_.,:;!?()]+")


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in STOP_WORDS}


def citation_ratio(chunk_text: str, response: str) -> float:
    """HookClaw's citation test: share of the chunk's words (> 3 chars, duplicates kept) found in the response."""
    words = [w for w in _CITE_SPLIT.split(chunk_text.lower()) if len(w) > 3]
    if not words:
        return 0.0
    low = response.lower()
    return sum(1 for w in words if w in low) / len(words)


class Production:
    """The deterministic 'production' retriever whose choices fill ``injected``."""

    def __init__(self, docs: list[dict]):
        self.docs = docs
        self.toks = [tokens(d["text"]) for d in docs]
        df: dict[str, int] = {}
        current = [ts for ts, d in zip(self.toks, docs) if d["metadata"].get("retired") is None]
        for ts in current:  # term statistics of the folder as at the end (older versions add no document)
            for t in ts:
                df[t] = df.get(t, 0) + 1
        n = len(current)
        self.idf = {t: math.log(1 + n / c) for t, c in df.items()}
        self.idf_unseen = math.log(1 + n)
        # in the store from (daily: its day; a version or junk: ``created``) until ``retired`` ("~" = never)
        self.visible_from = [d["metadata"]["timestamp"] if d["metadata"]["tier"] == "daily"
                             else d["metadata"].get("created") or "" for d in docs]
        self.gone_at = [d["metadata"].get("retired") or "~" for d in docs]

    def skip(self, prompt: str) -> bool:
        p = prompt.strip()
        return len(p) < 12 or bool(_SKIP_GATE.match(p))

    def search(self, prompt: str, ts: str) -> list[int]:
        """The chunks it injects for ``prompt`` at ``ts`` (ISO 8601): the store as it stood then."""
        q = tokens(prompt)
        scored = []
        for i, dt in enumerate(self.toks):
            if self.visible_from[i] > ts or self.gone_at[i] <= ts:
                continue
            s = sum(self.idf.get(t, self.idf_unseen) for t in q & dt)
            if s >= MIN_SCORE:
                scored.append((-s, self.docs[i]["_id"], i))
        scored.sort()
        return [i for _, _, i in scored[:TOP_K]]


def _clean_line(line: str) -> str:
    line = re.sub(r"^\s*(?:[-*]|\d+\.)\s+(\[[ x]\]\s+)?", "", line).strip()
    return line.lstrip("#").strip()


def compose_response(rng: random.Random, prompt: str, cited: list[dict], secrets: list[str]) -> str:
    """A reply that restates lines of the ``cited`` chunks until each passes the citation rule."""
    if not cited:
        return rng.choice(("I couldn't find anything about that in your notes.",
                           "Nothing in memory on that; here is a general answer instead.",
                           "No notes match, so this is from general knowledge."))
    parts = [rng.choice(("From your notes:", "Here's what your notes say:", "Based on memory:",
                         "You wrote this down before:"))]
    q = tokens(prompt)
    for d in cited:
        lines = [(_clean_line(x), x) for x in d["text"].split("\n")]
        lines = [(c, x) for c, x in lines if c and not any(s in x for s in secrets)]
        lines.sort(key=lambda cx: -len(q & tokens(cx[0])))
        where = d["metadata"]["path"]
        chosen = []
        for c, _ in lines:
            chosen.append(c)
            if citation_ratio(d["text"], " ".join(chosen)) >= CITE_RATIO + 0.05:
                break
        parts.append(f"({where}) " + " ".join(chosen))
    parts.append(rng.choice(("Want me to dig further?", "", "Anything else?", "")))
    return " ".join(p for p in parts if p).strip()


def _near_repeat(rng: random.Random, text: str) -> str:
    ops = [lambda t: t.lower(), lambda t: t.rstrip("?") + " again?", lambda t: "remind me: " + t,
           lambda t: t.replace("I ", "we ").replace(" my ", " our "), lambda t: t.rstrip("?!. "),
           lambda t: "quick q - " + t]
    out = rng.choice(ops)(text)
    return out if out != text else "again: " + text


def build_query_log(ws, docs: list[dict], queries, seed: int) -> list[dict]:

    rng = rng_for(seed, "querylog")
    prod = Production(docs)
    secrets = sorted(ws.secrets.values())
    labelled = [q for q in queries if q.category != "no-memory" and not q.context]
    events: list[dict] = []
    history: list[str] = []
    for iso in days_between(START, END):
        if VACATION[0] <= iso <= VACATION[1]:
            continue
        d = date.fromisoformat(iso)
        n_sessions = rng.choice((1, 1, 2, 2, 2, 3)) if d.weekday() < 5 else rng.choice((0, 0, 1))
        hours = sorted(rng.sample(range(8, 22), n_sessions))
        t = datetime(d.year, d.month, d.day, 0, 0, 0)
        for s_no, hour in enumerate(hours, 1):  # sessions of a day never overlap
            t = max(t + timedelta(minutes=rng.randint(10, 90)),
                    datetime(d.year, d.month, d.day, hour, rng.randint(0, 50), rng.randint(0, 59)))
            session = f"s{iso.replace('-', '')}-{s_no}"
            convo: list[tuple[str, str]] = []
            last_real: str | None = None
            for _ in range(rng.randint(3, 9)):
                t += timedelta(seconds=rng.randint(20, 720))
                kind = rng.choices(("skip", "labelled", "near-repeat", "follow-up", "task", "recall"),
                                   (15, 25, 10, 15, 25, 10))[0]
                asked_before = [q for q in labelled if q.as_of[:10] <= iso]
                if kind == "labelled" and not asked_before:
                    kind = "task"
                if kind == "near-repeat" and not history:
                    kind = "task"
                if kind == "follow-up" and last_real is None:
                    kind = "skip"
                if kind == "skip":
                    prompt = rng.choice(SKIP_PROMPTS)
                elif kind == "labelled":
                    prompt = rng.choice(asked_before).text
                elif kind == "near-repeat":
                    prompt = _near_repeat(rng, rng.choice(history[-40:]))
                elif kind == "follow-up":
                    prompt = rng.choice(FOLLOW_UPS)
                else:
                    pool = TASKS if kind == "task" else RECALL
                    prompt = rng.choice(pool).format(
                        project=rng.choice([p.name for p in PROJECTS if p.since <= iso]),
                        person=rng.choice([p.name for p in PEOPLE if p.since <= iso]), area=rng.choice(AREAS))
                ev: dict = {"ts": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "session": session, "query": prompt}
                if kind == "follow-up":
                    ev["context"] = [{"role": r, "content": c} for r, c in convo[-4:]]
                injected: list[int] = []
                if not prod.skip(prompt):
                    injected = prod.search(prompt, ev["ts"])  # it sees the prompt only, never the context
                if iso >= LOGGING_FROM:
                    ev["injected"] = [docs[i]["_id"] for i in injected]
                if kind == "skip":
                    reply = SKIP_REPLIES.get(prompt, rng.choice(("👍", "Sure.", "Hi! What are we working on?",
                                                                  "Noted.", "Okay.", "")))
                else:
                    ok = [docs[i] for i in injected if not docs[i]["metadata"]["contains_secret"]
                          and docs[i]["metadata"]["tier"] != "junk"]
                    cite = [x for x in ok if rng.random() < 0.6]
                    reply = compose_response(rng, prompt, cite, secrets)
                if reply and rng.random() < 0.93:
                    ev["response"] = reply
                if iso >= LOGGING_FROM:
                    ev["latency_ms"] = rng.randint(1, 4) if prod.skip(prompt) else int(60 + rng.expovariate(1 / 150))
                ev["event_kind"] = kind
                if ev.get("injected") and "response" in ev:
                    ev["cited"] = [docs[i]["_id"] for i in injected
                                   if citation_ratio(docs[i]["text"], ev["response"]) >= CITE_RATIO]
                events.append(ev)
                convo += [("user", prompt)] + ([("assistant", reply[:300])] if reply else [])
                if kind not in ("skip", "follow-up"):
                    last_real = prompt
                if kind in ("labelled", "task", "recall"):
                    history.append(prompt)
    for ev in events:
        for s in secrets:
            if s in ev.get("response", ""):
                raise ValueError("a response leaked a secret")
    return events
