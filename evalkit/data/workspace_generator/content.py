"""The text material of the memory-workspace benchmark: a small note language, filler, fake secrets.

Notes are written in a light Markdown dialect so the material stays readable as prose (see
``workspace_notes_spring.py``, ``workspace_notes_summer.py`` and ``workspace_evergreen.py``):

* ``@2026-03-04 lang=es`` starts a daily file (daily material only); ``lang`` is the default language of its
  notes (``en`` if absent).
* A bullet line (``- ...``) starts a note. ``{key opt=value flag}`` right after the bullet marker (or at the
  start of a paragraph line) gives the note a key that queries refer to, plus options:
  ``kind`` (``note``, ``decision``, ``incident``, ``config``), ``lang``, ``dup`` (near-duplicate group: the
  same event written down twice), ``restates`` (comma-separated keys of notes whose fact this line repeats,
  e.g. a topic brief summarising a daily note), ``since`` (date from which an evergreen line is true) and the
  flag ``secret`` (the note contains a secret value). The braces are removed from the written file.
* Indented lines continue the current note; ``## ...`` headings and blank lines stand alone.
* ``<<NAME>>`` placeholders are replaced by deterministic fake secret values (:func:`fake_secrets`).

Nothing here reads the clock or the environment: every value derives from the generator's seed.
"""
from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field
from datetime import date

LANGS = ("en", "es", "zh", "ja", "ko")
KINDS = ("note", "decision", "incident", "config", "filler", "todo", "heading")


@dataclass
class Note:
    """One unit of text in a file; ``key`` is set when queries can point at it."""

    key: str | None
    lines: list[str]
    lang: str = "en"
    kind: str = "note"
    dup: str | None = None
    restates: tuple[str, ...] = ()
    since: str | None = None  # ISO date
    secret: bool = False
    # filled in when the file is laid out:
    path: str = ""
    first_line: int = 0  # 1-based line numbers in the file
    last_line: int = 0
    day: str | None = None  # ISO date of the daily file holding it

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


Body = list  # list[Note | None]; None = a blank line

_SPEC = re.compile(r"^(?P<lead>\s*(?:[-*]|\d+\.)\s+)?\{(?P<spec>[^{}]*)\}\s?")
_BULLET = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")
_DAY = re.compile(r"^@(?P<date>\d{4}-\d{2}-\d{2})(?P<opts>(?:\s+\w+=\S+)*)\s*$")


def _parse_spec(spec: str, default_lang: str) -> dict:
    parts = spec.split()
    if not parts:
        raise ValueError("empty note spec {}")
    out: dict = {"key": None, "lang": default_lang, "kind": "note", "dup": None, "restates": (),
                 "since": None, "secret": False}
    for i, p in enumerate(parts):
        if "=" in p:
            k, v = p.split("=", 1)
            if k == "restates":
                out["restates"] = tuple(x for x in v.split(",") if x)
            elif k in ("lang", "kind", "dup", "since"):
                out[k] = v
            else:
                raise ValueError(f"unknown note option {k!r} in {{{spec}}}")
        elif p == "secret":
            out["secret"] = True
        elif i == 0:
            out["key"] = p
        else:
            raise ValueError(f"bad note spec {{{spec}}}")
    if out["lang"] not in LANGS or out["kind"] not in KINDS:
        raise ValueError(f"bad lang/kind in {{{spec}}}")
    return out


def parse_body(text: str, default_lang: str = "en", default_since: str | None = None) -> Body:
    """Parse a block of note material (see module docstring) into notes and blank lines."""
    body: Body = []
    current: Note | None = None
    for raw in text.strip("\n").split("\n"):
        line = raw.rstrip()
        if not line.strip():
            body.append(None)
            current = None
            continue
        m = _SPEC.match(line)
        if m:
            opts = _parse_spec(m.group("spec"), default_lang)
            rest = line[m.end():]
            lead = m.group("lead") or ""
            current = Note(lines=[lead + rest], since=opts.pop("since") or default_since, **opts)
            body.append(current)
        elif line.startswith("#"):
            body.append(Note(key=None, lines=[line], lang=default_lang, kind="heading"))
            current = None
        elif _BULLET.match(line) or current is None or not raw[:1].isspace():
            current = Note(key=None, lines=[line], lang=default_lang, since=default_since)
            body.append(current)
        else:
            current.lines.append(line)
    return body


def parse_days(text: str) -> dict[str, tuple[str, Body]]:
    """Daily material → ``{iso_date: (lang, body)}``."""
    days: dict[str, tuple[str, Body]] = {}
    blocks = re.split(r"(?m)^(?=@\d{4}-\d{2}-\d{2})", text)
    for block in blocks:
        if not block.strip():
            continue
        head, _, rest = block.partition("\n")
        m = _DAY.match(head.strip())
        if not m:
            raise ValueError(f"daily material must start with '@YYYY-MM-DD': {head!r}")
        iso = m.group("date")
        date.fromisoformat(iso)
        opts = dict(kv.split("=", 1) for kv in m.group("opts").split())
        lang = opts.get("lang", "en")
        if iso in days:
            raise ValueError(f"day {iso} written twice")
        days[iso] = (lang, parse_body(rest, lang, default_since=iso))
    return days


# --------------------------------------------------------------------------------------------------------
# Fake secrets. They look like the real formats but are random strings from the seeded generator.

def fake_secrets(rng: random.Random) -> dict[str, str]:
    hexd = "0123456789abcdef"
    alnum = string.ascii_letters + string.digits
    return {
        "JINA_KEY": "jina_" + "".join(rng.choice(hexd) for _ in range(32))
                    + "".join(rng.choice(alnum) for _ in range(28)),
        "GITHUB_PAT": "ghp_" + "".join(rng.choice(alnum) for _ in range(36)),
        "PG_PASSWORD": "".join(rng.choice(alnum + "!#%+") for _ in range(22)),
        "GITHUB_PAT_GITCONFIG": "ghp_" + "".join(rng.choice(alnum) for _ in range(36)),
    }


def fill_placeholders(text: str, values: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in values:
            raise KeyError(f"unknown placeholder <<{m.group(1)}>>")
        return values[m.group(1)]
    return re.sub(r"<<([A-Z_]+)>>", sub, text)


# --------------------------------------------------------------------------------------------------------
# Filler: the small, unremarkable bullets that make a daily log look like a daily log. They never carry a
# key, so no query is labelled with them except the "what did I do that day" temporal questions.

@dataclass(frozen=True)
class Since:
    name: str
    since: str  # ISO date from which the name can appear in notes


PEOPLE = (Since("Priya", "2026-03-02"), Since("Jonas", "2026-03-02"), Since("Lucía", "2026-03-04"),
          Since("Wen", "2026-03-12"), Since("Keiko", "2026-03-18"), Since("Min-jun", "2026-03-25"))
PROJECTS = (Since("Ledgerline", "2026-03-02"), Since("Tidepool", "2026-03-05"),
            Since("Sprout", "2026-03-25"), Since("the homelab", "2026-03-02"))
AREAS = ("the invoice totals code", "the tenant settings page", "the buoy list view", "the PDF footer",
         "the date helpers", "the API error mapping", "the map legend", "the reminder emails",
         "the CSV parser", "the auth middleware")
READING = ("SQLite internals", "CRDTs for offline apps", "pricing freelance work", "accessible colour palettes",
           "OpenTelemetry sampling", "Rust error handling", "German e-invoicing rules", "map tile caching",
           "ZFS scrubs", "writing better commit messages")
DISHES = ("bacalhau à Brás", "a big pot of lentil soup", "ramen", "bibimbap", "paella (too much rice)",
          "mapo tofu", "shakshuka")

FILLER_TEMPLATES = (
    "- Inbox and Slack catch-up, nothing urgent.",
    "- Reviewed {n} pull requests on {project}.",
    "- Deep-work block on {project}: {n} pomodoros.",
    "- Lunch walk along the river.",
    "- Gym at 18:30.",
    "- Routine dependency bumps on {project}; tests green.",
    "- Wrote a few unit tests around {area}.",
    "- Tidied the {project} backlog, closed {n} stale issues.",
    "- Read a long article on {reading}.",
    "- Paired with {person} for an hour on {project}.",
    "- Short day, errands in the afternoon.",
    "- Answered {person}'s questions about {project} by email.",
    "- Renamed a few confusing variables in {area}.",
    "- Cooked {dish} for dinner.",
    "- Called Marco (accountant) about the quarterly VAT return.",
    "- Cleaned up my desktop and downloads folder, finally.",
    "- Sketched ideas for {area} on paper before touching code.",
    "- Quiet afternoon; mostly reading code in {project}.",
    "- Back-to-back calls until 16:00, little coding.",
    "- Replied to a recruiter: not looking, thanks.",
    "- Ran the full test suite of {project} twice to chase a flaky test; could not reproduce.",
    "- Spent an hour on {area}; ended up reverting most of it.",
    "- {person} out sick; moved our sync to next week.",
    "- Watered the balcony plants, finally.",
    "- Wrote the weekly summary for {person}.",
    "- Slow internet all morning; tethered from the phone.",
    "- Went through {project}'s open PRs and left comments.",
    "- Time tracking catch-up: logged the hours of the last three days.",
    "- Looked at error reports for {project}; nothing new.",
    "- Migrated my dotfiles to a new repo, small cleanup.",
    "- Evening run, 6 km.",
    "- Cleared the notification backlog on GitHub.",
    "- Forty-minute call with {person}, mostly planning.",
    "- Sorted receipts for the accountant.",
    "- Refactored {area} into smaller functions.",
)


def _pick(rng: random.Random, pool: tuple[Since, ...], iso: str) -> str:
    avail = [p.name for p in pool if p.since <= iso]
    return rng.choice(avail)


def filler_notes(rng: random.Random, iso: str, count: int) -> list[Note]:
    """``count`` distinct filler bullets for day ``iso`` (people/projects only once they exist)."""
    picks = rng.sample(range(len(FILLER_TEMPLATES)), count)
    notes = []
    for i in picks:
        text = FILLER_TEMPLATES[i].format(
            n=rng.randint(2, 6), project=_pick(rng, PROJECTS, iso), person=_pick(rng, PEOPLE, iso),
            area=rng.choice(AREAS), reading=rng.choice(READING), dish=rng.choice(DISHES))
        notes.append(Note(key=None, lines=[text], kind="filler", since=iso))
    return notes


# Open tasks: (first day, last day, text). A daily file shows a few of the tasks open on its day.
TASKS = (
    ("2026-03-02", "2026-03-15", "LED-142: agree the numbering format with Jonas"),
    ("2026-03-03", "2026-03-31", "write integration tests for invoice finalisation"),
    ("2026-03-17", "2026-04-01", "LED-157: pick a PDF library"),
    ("2026-03-26", "2026-04-10", "clean up the remaining nullable warnings in tests/"),
    ("2026-04-21", "2026-05-18", "LED-171: list every raw SQL query that assumes SQLite"),
    ("2026-05-04", "2026-05-18", "book a maintenance window with Jonas for the database cutover"),
    ("2026-05-22", "2026-06-10", "LED-176: test two concurrent finalisations"),
    ("2026-05-28", "2026-06-14", "LED-188: read the XRechnung spec, list the mandatory fields"),
    ("2026-06-01", "2026-06-09", "compare Fly.io and Hetzner Cloud prices for Ledgerline"),
    ("2026-06-11", "2026-06-15", "delete the Azure resource group after the overlap week"),
    ("2026-06-17", "2026-06-22", "try OpenTelemetry logging in a branch"),
    ("2026-07-01", "2026-07-10", "LED-203: export job"),
    ("2026-08-01", "2026-08-25", "LED-214: go-live checklist with Jonas"),
    ("2026-08-18", "2026-08-31", "collect invoice PDF samples for Wen's portal designs"),
    ("2026-03-05", "2026-03-20", "Tidepool: buoy detail panel"),
    ("2026-03-12", "2026-03-27", "apply Wen's colour feedback to the map"),
    ("2026-04-06", "2026-04-20", "Tidepool: export with semicolons and decimal commas"),
    ("2026-04-06", "2026-04-19", "prepare the map demo for Bluewater's board"),
    ("2026-05-07", "2026-06-07", "temperature alerts: email first, Telegram second"),
    ("2026-06-25", "2026-07-10", "swell chart: default to the last 48 hours"),
    ("2026-07-27", "2026-08-11", "Tidepool 1.0 launch checklist"),
    ("2026-08-13", "2026-08-31", "write the maintenance scope for Lucía"),
    ("2026-03-25", "2026-04-15", "Sprout: draft the clean-up API contract with Min-jun"),
    ("2026-05-18", "2026-06-10", "ask Min-jun about the Android 12 permission crash"),
    ("2026-06-11", "2026-07-01", "photo upload endpoint for clean-ups"),
    ("2026-03-13", "2026-04-02", "install the replacement disk in atlas"),
    ("2026-05-06", "2026-05-14", "restic: first full backup, then check"),
    ("2026-05-15", "2026-07-27", "decide a retention policy for the backups"),
    ("2026-06-12", "2026-06-30", "pin container names in the homelab compose file"),
    ("2026-08-14", "2026-08-31", "test the exit node from a café"),
    ("2026-03-02", "2026-03-19", "tune memory search weights"),
    ("2026-04-17", "2026-05-01", "write down how to restart the gateway cleanly"),
    ("2026-08-04", "2026-08-24", "find out whether the memory indexer can skip folders"),
    ("2026-03-25", "2026-04-30", "quarterly VAT return with Marco"),
    ("2026-06-20", "2026-07-10", "book holiday flights"),
    ("2026-07-01", "2026-07-31", "renew the domain of my website"),
    ("2026-08-01", "2026-08-31", "update the portfolio page with Tidepool screenshots"),
)


def todo_notes(rng: random.Random, iso: str, count: int) -> list[Note]:
    """A ``## Todo`` heading and up to ``count`` tasks open on day ``iso`` (empty if none is open)."""
    open_tasks = [t for a, b, t in TASKS if a <= iso <= b]
    if not open_tasks or count <= 0:
        return []
    picks = rng.sample(open_tasks, min(count, len(open_tasks)))
    notes = [Note(key=None, lines=["## Todo"], kind="heading", since=iso)]
    notes += [Note(key=None, lines=[f"- [ ] {t}"], kind="todo", since=iso) for t in picks]
    return notes


@dataclass
class WorkspaceFile:
    """One file of the workspace as it is written to disk."""

    path: str
    tier: str  # curated | topic | daily | junk
    lines: list[str]
    notes: list[Note] = field(default_factory=list)
    mtime: str = ""  # ISO 8601 UTC
    day: str | None = None  # ISO date for daily files
    # when the file (this version of it) entered the store and when a later version replaced it (ISO 8601 UTC;
    # None: a daily file is in the store from its day; never replaced) — workspace_generator.revisions
    created: str | None = None
    retired: str | None = None
    rev: str | None = None  # an older version of an evergreen file: the day it was written (None: as at the end)

    @property
    def name(self) -> str:
        """How its chunks are named: the path, with ``@<day>`` for an older version."""
        return self.path if self.rev is None else f"{self.path}@{self.rev}"

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def layout(path: str, tier: str, header: list[str], body: Body, day: str | None = None) -> WorkspaceFile:
    """Lay out ``header`` + ``body`` as lines, recording each note's line range."""
    lines = list(header)
    notes: list[Note] = []
    for item in body:
        if item is None:
            if lines and lines[-1] != "":
                lines.append("")
            continue
        item.path = path
        item.day = day
        item.first_line = len(lines) + 1
        lines.extend(item.lines)
        item.last_line = len(lines)
        notes.append(item)
    while lines and lines[-1] == "":
        lines.pop()
    return WorkspaceFile(path=path, tier=tier, lines=lines, notes=notes, day=day)
