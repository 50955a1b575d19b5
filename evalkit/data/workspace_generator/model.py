"""The memory-workspace generator's shared model: its seed, calendar, categories and constants, the seeded random
streams and small date helpers, :class:`Workspace` and :func:`doc_refs`. Every other generator module imports
from here; only ``build`` (the orchestrator) imports the others.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from evalkit.data.workspace_generator.content import Note, WorkspaceFile
from evalkit.data.workspace_generator.labels import DocRef
from evalkit.data.workspace_generator.revisions import note_day

SEED = 20260302
START, END = "2026-03-02", "2026-08-31"
N_DAILY = 150  # total daily files: the written days plus filler-only days
VACATION = ("2026-07-14", "2026-07-26")  # no notes written
CHUNK_TOKENS, CHUNK_OVERLAP = 400, 80
GROUP = "workspace"
DEFAULT_OUT = Path(__file__).resolve().parents[3] / "datasets" / "memory-workspace"

CATEGORIES = ("exact-identifier", "paraphrase", "temporal-relative", "knowledge-update", "multi-hop",
              "multilingual", "no-memory", "secret-bait")
ABBR = {"exact-identifier": "exact", "paraphrase": "para", "temporal-relative": "temp", "knowledge-update": "ku",
        "multi-hop": "mhop", "multilingual": "ml", "no-memory": "none", "secret-bait": "secret"}
TOPIC_LANG = {"memory/topics/i18n-ja.md": "ja", "memory/topics/bluewater.md": "es",
              "memory/topics/design-system.md": "zh"}
WEEKDAYS = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    "zh": ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"),
    "ja": ("月曜日", "火曜日", "水曜日", "木曜日", "金曜日", "土曜日", "日曜日"),
    "ko": ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일"),
}
IMPORTANCE = {"curated": 0.9, "topic": 0.8, "junk": 0.1}
KIND_IMPORTANCE = {"decision": 0.7, "incident": 0.65, "config": 0.6, "note": 0.5, "heading": 0.3, "filler": 0.3,
                   "todo": 0.3}


def rng_for(seed: int, purpose: str) -> random.Random:
    """An independent, reproducible stream per purpose (string seeds hash with SHA-512 in ``random``)."""
    return random.Random(f"{seed}:{purpose}")


def iso_time(d: date, hour: int, minute: int, second: int = 0) -> str:
    return f"{d.isoformat()}T{hour:02d}:{minute:02d}:{second:02d}Z"


def days_between(a: str, b: str) -> list[str]:
    d0, d1 = date.fromisoformat(a), date.fromisoformat(b)
    return [(d0 + timedelta(days=i)).isoformat() for i in range((d1 - d0).days + 1)]


# ------------------------------------------------------------------------------------------------ workspace

@dataclass
class Workspace:
    files: list[WorkspaceFile]  # the folder as at the end
    secrets: dict[str, str]
    notes: list[Note] = field(default_factory=list)
    revisions: dict[str, list[WorkspaceFile]] = field(default_factory=dict)  # path -> older versions, oldest first

    def daily(self) -> list[WorkspaceFile]:
        return [f for f in self.files if f.tier == "daily"]

    def note_day(self, n: Note) -> str:
        """The day ``n`` was written (:func:`~evalkit.data.workspace_generator.revisions.note_day`)."""
        by_key = self.__dict__.get("_by_key")
        if by_key is None:
            by_key = self.__dict__["_by_key"] = {m.key: m for m in self.notes if m.key}
        return note_day(n, by_key, START)

    def versions(self, f: WorkspaceFile) -> list[WorkspaceFile]:
        """``f``'s older versions (oldest first), then ``f``."""
        return self.revisions.get(f.path, []) + [f]


def doc_refs(docs: list[dict]) -> list[DocRef]:
    return [DocRef(d["_id"], d["metadata"]["path"], d["metadata"]["start_line"], d["metadata"]["end_line"],
                   d["metadata"]["tier"], d["metadata"]["contains_secret"], d["text"], d["_id"].split("#")[0],
                   d["metadata"].get("created"), d["metadata"].get("retired")) for d in docs]
