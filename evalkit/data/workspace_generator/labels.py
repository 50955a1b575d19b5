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


class Labeler:
    """Maps note keys to chunk ids and resolves a query's targets into graded qrels."""

    def __init__(self, notes: list[Note], docs: list[DocRef]):
        self.notes = {n.key: n for n in notes if n.key}
        self.docs = docs
        self.by_path: dict[str, list[DocRef]] = {}
        for d in docs:
            self.by_path.setdefault(d.path, []).append(d)
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
        """Chunks overlapping the note, with ``True`` when the note lies wholly inside the chunk."""
        n = self.note(key)
        out = []
        for d in self.by_path.get(n.path, []):
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

    def resolve(self, targets: dict[str, int], restate_cap: int = 2) -> tuple[dict[str, int], dict[str, int]]:
        """``(chunk qrels, note grades)`` for one query (rules 1–4 and 6)."""
        note_grades = self.expand(targets, restate_cap)
        qrels: dict[str, int] = {}
        for key, g in sorted(note_grades.items()):
            for d, whole in self.chunks_of(key):
                cg = g if whole else min(g, 1)
                if d.tier == "junk" or d.secret:
                    if key in targets and g > 0:
                        raise ValueError(f"target note {key} sits in a junk/secret chunk {d.id}")
                    continue
                qrels[d.id] = max(qrels.get(d.id, cg), cg)
        return qrels, note_grades

    def mentions(self, ident: str, before_day: str) -> list[str]:
        """Rule 5: judgeable chunks containing ``ident`` that existed before ``before_day`` (evergreen always)."""
        out = []
        for d in self.docs:
            day = day_of_path(d.path)
            if (d.tier != "junk" and not d.secret and ident in d.text
                    and (day is None or day < before_day)):
                out.append(d.id)
        return out

    def covering_chunks(self, keys: list[str]) -> list[str]:
        """Chunks that alone contain (a statement of) every one of ``keys`` — a multi-hop query must have none."""
        cover: dict[str, set[str]] = {}
        for key in keys:
            for k in [key] + self.restated_by.get(key, []):
                for d, whole in self.chunks_of(k):
                    if whole:
                        cover.setdefault(d.id, set()).add(key)
        return sorted(c for c, ks in cover.items() if ks >= set(keys))


def day_of_path(path: str) -> str | None:
    """The date of a dated daily file ``memory/YYYY-MM-DD.md``, else None (evergreen or junk)."""
    m = re.match(r"^memory/(\d{4}-\d{2}-\d{2})\.md$", path)
    return m.group(1) if m else None
