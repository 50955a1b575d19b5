"""From note-level targets to chunk-level graded qrels, and the paraphrase word-overlap check.

Label rules (also written in the dataset card):

1. A query names target notes with grades (2 = answers it, 1 = related, 0 = judged wrong, e.g. a stale fact).
2. A note that *restates* a target (a topic brief or ``MEMORY.md`` line summarising a daily note) gets the
   target's grade, unless the query grades it explicitly.
3. Near-duplicates (the same event written down twice, ``dup`` group): when one copy is a grade-2 target,
   the other copies get grade 1 — they answer, but add nothing once the first copy is in the prompt. This is
   what lets MMR / diversity stages show up in nDCG.
4. A chunk's grade is the maximum over the notes it holds: a note wholly inside the chunk gives its grade,
   a note cut by the chunk boundary gives at most 1.
5. Exact-identifier queries: every other chunk that contains the identifier verbatim gets grade 1 (related).
6. Junk chunks and chunks holding a secret never appear in qrels (a target inside one is an error).
7. As of the query (:meth:`Labeler.resolve` with ``as_of``): only notes written before the ``as_of`` day label a
   chunk, and only chunks in the store at ``as_of`` are labelled — a daily file of an earlier day, the version of
   an evergreen file that stood at ``as_of`` (``workspace_generator.revisions``). Without ``as_of``: the files as
   at the end (the category checks read those).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from evalkit.data.workspace_generator.content import Note

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing done down during each even ever every few for from further get gets got
had has have having he her here hers him his how i if in into is it its itself just let me more most much my
myself no nor not now of off on once one only go goes went or other our ours out over own same she should so some still such
than that the their theirs them then there these they this those through to too under until up upon us very was
we were what when where which while who whom why will with would you your yours yourself
i'm i've it's what's where's don't didn't isn't wasn't
""".split())

_WORD = re.compile(r"[a-z0-9]+")


def _stem(w: str) -> str:
    """A deliberately crude suffix stripper: it only has to make the overlap check stricter, not pretty."""
    for suf, rep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: len(w) - len(suf)] + rep
    return w


def content_words(text: str) -> set[str]:
    """Lower-cased ASCII word stems of ``text`` minus stop words and one-character tokens."""
    words = _WORD.findall(text.lower())
    return {_stem(w) for w in words if len(w) > 1 and w not in STOP_WORDS}


def shared_content_words(query: str, passage: str) -> set[str]:
    return content_words(query) & content_words(passage)


@dataclass
class DocRef:
    id: str
    path: str
    start: int
    end: int
    tier: str
    secret: bool
    text: str
    file: str = ""  # the file version it was cut from: its path, ``<path>@<day>`` for an older version
    created: str | None = None  # ISO 8601: in the store from (None: a daily file's day, or always)
    retired: str | None = None  # ISO 8601: replaced by a later version at (None: never)

    def current(self) -> bool:
        """A chunk of the folder as at the end (not an older version)."""
        return self.retired is None

    def visible(self, as_of: str) -> bool:
        """In the store at ``as_of`` (ISO 8601 in one format: times compare as strings)."""
        day = day_of_path(self.path)
        if day is not None:
            return day < as_of[:10]
        return (self.created is None or self.created <= as_of) and (self.retired is None or as_of < self.retired)


class Labeler:
    """Maps note keys to chunk ids and resolves a query's targets into graded qrels. ``placed``: every placement of
    a note in a file version (``(file, note copy)``; default: each note in its own file); ``day_of(note)``: the day
    it was written (rule 7)."""

    def __init__(self, notes: list[Note], docs: list[DocRef], placed: list[tuple[str, Note]] | None = None,
                 day_of=None):
        self.notes = {n.key: n for n in notes if n.key}
        self.docs = docs
        self.day_of = day_of or (lambda n: n.day or n.since or "")
        self.by_file: dict[str, list[DocRef]] = {}
        for d in docs:
            self.by_file.setdefault(d.file or d.path, []).append(d)
        self.placed: dict[str, list[tuple[str, Note]]] = {}
        for file, n in placed if placed is not None else [(n.path, n) for n in notes]:
            if n.key:
                self.placed.setdefault(n.key, []).append((file, n))
        self.restated_by: dict[str, list[str]] = {}
        self.dups: dict[str, list[str]] = {}
        for n in notes:
            if not n.key:
                continue
            for r in n.restates:
                if r not in self.notes:
                    raise ValueError(f"note {n.key} restates unknown key {r}")
                self.restated_by.setdefault(r, []).append(n.key)
            if n.dup:
                self.dups.setdefault(n.dup, []).append(n.key)

    def note(self, key: str) -> Note:
        if key not in self.notes:
            raise KeyError(f"unknown note key {key!r}")
        return self.notes[key]

    def chunks_of(self, key: str) -> list[tuple[DocRef, bool]]:
        """Chunks (of every version of its file) overlapping the note, with ``True`` when the note lies wholly
        inside the chunk."""
        self.note(key)
        out = []
        for file, n in self.placed.get(key, []):
            for d in self.by_file.get(file, []):
                if d.end < n.first_line or d.start > n.last_line:
                    continue
                out.append((d, d.start <= n.first_line and n.last_line <= d.end))
        return out

    def expand(self, targets: dict[str, int], restate_cap: int = 2) -> dict[str, int]:
        """Note-level grades after the restatement and near-duplicate rules (explicit grades win).

        ``restate_cap`` bounds the grade a restatement inherits (temporal questions ask for the dated note, so
        an undated summary of it is only related there).
        """
        grades: dict[str, int] = {}
        for key, g in targets.items():
            self.note(key)
            for r in self.restated_by.get(key, []):
                if r not in targets:
                    grades[r] = max(grades.get(r, 0), min(g, restate_cap))
        for key, g in targets.items():
            dup = self.notes[key].dup
            if g == 2 and dup:
                for m in self.dups[dup]:
                    if m != key and m not in targets:
                        grades[m] = max(grades.get(m, 1), 1)
        grades.update(targets)
        return grades

    def _judgeable(self, d: DocRef, as_of: str | None, end: bool) -> bool:
        if as_of is None or end:  # the files as at the end (daily files before the as_of day)
            day = day_of_path(d.path)
            return d.current() and (as_of is None or day is None or day < as_of[:10])
        return d.visible(as_of)

    def resolve(self, targets: dict[str, int], restate_cap: int = 2, as_of: str | None = None, end: bool = False
                ) -> tuple[dict[str, int], dict[str, int]]:
        """``(chunk qrels, note grades)`` for one query (rules 1–4, 6 and 7: as of ``as_of``; without it, or with
        ``end``, over the files as at the end — with ``as_of``, only daily files of earlier days)."""
        note_grades = self.expand(targets, restate_cap)
        qrels: dict[str, int] = {}
        for key, g in sorted(note_grades.items()):
            if as_of is not None and not end and self.day_of(self.notes[key]) >= as_of[:10]:
                continue
            for d, whole in self.chunks_of(key):
                if not self._judgeable(d, as_of, end):
                    continue
                cg = g if whole else min(g, 1)
                if d.tier == "junk" or d.secret:
                    if key in targets and g > 0:
                        raise ValueError(f"target note {key} sits in a junk/secret chunk {d.id}")
                    continue
                qrels[d.id] = max(qrels.get(d.id, cg), cg)
        return qrels, note_grades

    def mentions(self, ident: str, as_of: str, end: bool = False) -> list[str]:
        """Rule 5: judgeable chunks containing ``ident`` in the store at ``as_of`` and written before its day (a
        daily file of an earlier day; the version of an evergreen file that stood then, made on an earlier day);
        ``end``: over the files as at the end (daily files of earlier days, evergreen files always)."""
        out = []
        for d in self.docs:
            if end:
                ok = self._judgeable(d, as_of, True)
            else:
                ok = d.visible(as_of) and (d.created is None or d.created[:10] < as_of[:10])
            if d.tier != "junk" and not d.secret and ident in d.text and ok:
                out.append(d.id)
        return out

    def covering_chunks(self, keys: list[str]) -> list[str]:
        """Chunks that alone contain (a statement of) every one of ``keys`` — a multi-hop query must have none."""
        cover: dict[str, set[str]] = {}
        for key in keys:
            for k in [key] + self.restated_by.get(key, []):
                for d, whole in self.chunks_of(k):
                    if whole and d.current():
                        cover.setdefault(d.id, set()).add(key)
        return sorted(c for c, ks in cover.items() if ks >= set(keys))


def day_of_path(path: str) -> str | None:
    """The date of a dated daily file ``memory/YYYY-MM-DD.md``, else None (evergreen or junk)."""
    m = re.match(r"^memory/(\d{4}-\d{2}-\d{2})\.md$", path)
    return m.group(1) if m else None
