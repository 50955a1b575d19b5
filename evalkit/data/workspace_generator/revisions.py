"""When each note of the workspace was written, the evergreen files as they stood on each day, and the audit that
no note a query can see was written after its ``as_of``.

An agent's ``MEMORY.md`` and its topic briefs are rewritten in place: a line is added on the day its fact is
learnt, and the memory indexer re-chunks the file, dropping the old chunks. The generator records that day for
every line (:func:`note_day`): a daily note's own day; an evergreen line's ``since`` (the file's default ``since``
when the line has none), or the day of the latest daily note it ``restates`` when that is later (a summary is
written after what it summarises). :func:`revisions` turns a file into its versions — one per distinct line day,
holding the lines written by then (a heading only above a kept line; the title always), each ``created`` on its
day (``YYYY-MM-DDT00:00:00Z``, as a daily file) and ``retired`` when the next version replaced it; the last version
is the file as written at the end, never retired. The corpus keeps every version under its logical ``path``;
older versions are named ``<path>@<day>#L…`` (their line numbers are those of the file on that day). Under the
``strict`` as-of protocol a query therefore reads each evergreen file as it stood at its ``as_of``.

Junk files (``node_modules/``, ``.git/``, ``logs/``) are never revised by the agent: each is ``created`` at its
``mtime`` (a log on its day, a dependency at its install; the reflog and the last commit message at the last
commit — their earlier states are not kept, so they are hidden until then, never shown early).

:func:`late_notes` is the audit: per query, the visible documents (undated, a version, or junk) whose content was
written after the query's ``as_of`` — by the generator's own record of each line's day (junk: its ``mtime``).
``python -m evalkit.data.workspace_generator.build --stats`` prints it; it is 0 for the generated set.
"""
from __future__ import annotations

from dataclasses import replace

from evalkit.data.workspace_generator.content import Note, WorkspaceFile, layout

DAY_START = "T00:00:00Z"  # a version (like a daily file) is in the store from the start of its day


def note_day(n: Note, by_key: dict[str, Note], start: str) -> str:
    """The day ``n`` was written (see the module docstring): its daily file's day, else the later of its ``since``
    (``start`` when it has none) and the days of the notes it restates."""
    if n.day:
        return n.day
    return max([n.since or start] + [note_day(by_key[k], by_key, start) for k in n.restates if k in by_key])


def _is_title(n: Note) -> bool:
    return n.kind == "heading" and n.lines[0].startswith("# ")


def revisions(f: WorkspaceFile, day_of) -> list[WorkspaceFile]:
    """The versions of evergreen file ``f`` (oldest first; ``day_of(note)`` → the day it was written): version ``i``
    holds the lines written by its day, laid out as :func:`~evalkit.data.workspace_generator.content.layout` lays
    out the file; the last one is ``f`` itself (checked), ``created`` on its day."""
    items: list = []  # f's body again: notes in order, None for a blank line
    at = {n.first_line: n for n in f.notes}
    line = 1
    while line <= len(f.lines):
        n = at.get(line)
        items.append(n)
        line = n.last_line + 1 if n is not None else line + 1
    days = sorted({day_of(n) for n in f.notes if n.kind != "heading"})
    out: list[WorkspaceFile] = []
    for i, day in enumerate(days):
        kept: list = []
        for j, n in enumerate(items):
            if n is None or _is_title(n) or (n.kind != "heading" and day_of(n) <= day):
                kept.append(n)
            elif n.kind == "heading":  # a section heading stays above a line of its section written by then
                section = []
                for m in items[j + 1:]:
                    if m is not None and m.kind == "heading":
                        break
                    section.append(m)
                if any(m is not None and day_of(m) <= day for m in section):
                    kept.append(n)
        last = i == len(days) - 1
        v = layout(f.path, f.tier, [], [replace(n) if n is not None else None for n in kept])
        v.rev = None if last else day
        v.created = v.mtime = day + DAY_START
        v.retired = None if last else days[i + 1] + DAY_START
        out.append(v)
    if out and out[-1].lines != f.lines:
        raise ValueError(f"{f.path}: the last version is not the file as written")
    return out


def content_time(ws, doc: dict) -> str:
    """When the newest content of corpus document ``doc`` was written (ISO 8601), by the generator's record: the day
    of the newest line it holds (:func:`note_day`, from the start of the day), a junk file's ``mtime``. ``ws``: the
    :class:`~evalkit.data.workspace_generator.model.Workspace`."""
    md = doc["metadata"]
    if md["tier"] == "junk":
        return md["mtime"]
    name = doc["_id"].split("#")[0]
    f = next(v for g in ws.files if g.path == md["path"] for v in ws.versions(g) if v.name == name)
    inside = [n for n in f.notes if n.first_line <= md["end_line"] and n.last_line >= md["start_line"]]
    return max(ws.note_day(n) for n in inside) + DAY_START


def late_notes(ws, docs: list[dict], queries) -> dict[str, list[str]]:
    """The audit. Per query id (``queries``: objects with ``id`` and ``as_of``, ISO 8601): the ids of the undated,
    versioned or junk documents it can see under the strict as-of protocol whose content was written after its
    ``as_of`` (:func:`content_time`); queries with none are left out. Visible: ``created`` (else ``timestamp``;
    neither = undated) at or before ``as_of`` and not ``retired`` at or before it — ISO times in one format compare
    as strings."""
    looked = [(d, content_time(ws, d)) for d in docs if d["metadata"]["tier"] != "daily"]
    out: dict[str, list[str]] = {}
    for q in queries:
        late = []
        for d, written in looked:
            md = d["metadata"]
            created, retired = md.get("created") or md.get("timestamp"), md.get("retired")
            if (created is None or created <= q.as_of) and (retired is None or q.as_of < retired) \
                    and written > q.as_of:
                late.append(d["_id"])
        if late:
            out[q.id] = late
    return out
