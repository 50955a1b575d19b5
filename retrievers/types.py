"""The data model every loader produces and every retriever consumes.

Times are floats: seconds since the Unix epoch, UTC. ``None`` on a document timestamp means *evergreen*
(no date); ``None`` on a query ``as_of`` means "no notion of now" (time stages then do nothing).

As-of visibility. A document may say when it came into the store (``created``; ``None`` = undated, e.g. an
evergreen file, always visible). Under the ``strict`` protocol a query searches only the documents created at or
before its ``as_of`` — a memory asked something on 15 March holds only what was written before 15 March; under
``all`` every document of its group is visible (LongMemEval's official protocol keeps sessions dated after the
question in the haystack). Each dataset declares its default in ``info["as_of_visibility"]`` (with the reason in
``info["as_of_visibility_why"]``; see :meth:`Dataset.as_of_visibility`); ``--as-of-visibility`` overrides it.

Revisions. A file the memory rewrites in place (an agent's ``MEMORY.md``, a topic brief) is one document per version:
each is ``created`` when that version was written and ``retired`` when the next one replaced it (``None`` for the
current one). Under ``strict`` a retired version is out of the store from its ``retired`` time on; ``all`` has no time
rule, so every version is visible.

Qrels are graded: ``{query_id: {doc_id: grade}}`` with grade >= 1 relevant (2 = answers it, 1 = related);
grade 0 rows are kept (judged non-relevant) but never count as relevant.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from retrievers.errors import DataError  # noqa: F401  (the data model raises it; defined with the other errors)

Qrels = dict[str, dict[str, int]]


@dataclass(slots=True)  # no per-instance __dict__: ~96 bytes less a note (a 10^6-note store holds 10^6 of them)
class Document:
    id: str
    text: str
    title: str = ""
    path: str | None = None
    timestamp: float | None = None  # epoch seconds UTC; None = evergreen / unknown
    importance: float | None = None
    group: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created: float | None = None  # epoch seconds UTC: when it entered the store; None = undated (always visible)
    retired: float | None = None  # epoch seconds UTC: when a later version of it replaced it; None = never

    @property
    def full_text(self) -> str:
        """Title + " " + text (the BEIR convention for indexing)."""
        return f"{self.title} {self.text}" if self.title else self.text


@dataclass(slots=True)
class Query:
    id: str
    text: str
    as_of: float | None = None  # epoch seconds UTC
    group: str | None = None
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def context(self) -> list[str]:
        """Recent conversation messages (logged queries / follow-ups), oldest first."""
        ctx = self.metadata.get("context") or []
        return [c if isinstance(c, str) else str(c.get("content", c.get("text", ""))) for c in ctx]


VISIBILITY_PROTOCOLS = {
    "strict": "each query sees only the documents created at or before its as_of (undated ones always; a revised "
              "note as it stood then)",
    "all": "each query sees every document of its group, including those created after its as_of (and every "
           "version of a revised note)",
}
VISIBILITY_CHOICES = ("auto",) + tuple(VISIBILITY_PROTOCOLS)
DEFAULT_VISIBILITY_WHY = "a memory holds only what was written before the question"


def declare_visibility(info: dict[str, Any], protocol: str, why: str) -> None:
    """A loader's declaration of the dataset's default as-of visibility protocol (and why, in one line)."""
    if protocol not in VISIBILITY_PROTOCOLS:
        raise ValueError(f"unknown as-of visibility protocol {protocol!r}")
    info["as_of_visibility"] = protocol
    info["as_of_visibility_why"] = why


@dataclass
class Visibility:
    """The as-of visibility protocol a run uses: ``protocol`` (strict | all), where it came from (``source``:
    "dataset default" or "--as-of-visibility") and why (one line)."""

    protocol: str
    source: str
    why: str

    def record(self) -> dict[str, str]:
        return {"protocol": self.protocol, "source": self.source, "why": self.why}


@dataclass
class Dataset:
    """A corpus, its queries and graded judgements, plus named splits of the query ids."""

    name: str
    documents: list[Document]
    queries: list[Query]
    qrels: Qrels
    splits: dict[str, list[str]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # loader notes: repairs, drops, rules applied
    unit: str = "doc"  # what a document is: "turn", "session", "chunk", "doc"

    def __post_init__(self) -> None:
        self._by_id: dict[str, int] | None = None

    @property
    def doc_index(self) -> dict[str, int]:
        if self._by_id is None:
            self._by_id = {d.id: i for i, d in enumerate(self.documents)}
        return self._by_id

    def share_doc_index(self, other: "Dataset") -> None:
        """Use ``other``'s document index (same ``documents`` list): views of one corpus build it once."""
        if other.documents is not self.documents:
            raise ValueError("share_doc_index: the two datasets do not share their documents")
        self._by_id = other._by_id if other._by_id is not None else other.doc_index

    def subset(self, query_ids: list[str]) -> "Dataset":
        """A view with only the queries in ``query_ids`` (qrels and splits restricted to them; the corpus and its
        document index are shared)."""
        ks = set(query_ids)
        out = Dataset(self.name, self.documents, [q for q in self.queries if q.id in ks],
                      {q: r for q, r in self.qrels.items() if q in ks},
                      {k: [q for q in v if q in ks] for k, v in self.splits.items()}, dict(self.info), self.unit)
        out._by_id = self._by_id
        return out

    def head(self, n: int) -> "Dataset":
        """A view with the first ``n`` queries (:meth:`subset`)."""
        return self.subset([q.id for q in self.queries[:n]])

    def split(self, name: str | None) -> "Dataset":
        """A view restricted to one split's queries (the corpus is shared)."""
        if name is None or name == "all":
            return self
        if name not in self.splits:
            raise DataError(f"dataset {self.name!r} has no split {name!r} (available: {', '.join(sorted(self.splits)) or 'none'})")
        keep = set(self.splits[name])
        ds = Dataset(
            name=self.name,
            documents=self.documents,
            queries=[q for q in self.queries if q.id in keep],
            qrels={q: r for q, r in self.qrels.items() if q in keep},
            splits={name: self.splits[name]},
            info=dict(self.info, split=name),
            unit=self.unit,
        )
        ds._by_id = self._by_id
        return ds

    def as_of_visibility(self, requested: str = "auto") -> Visibility:
        """The protocol a run over this dataset uses: ``requested`` (``--as-of-visibility``) unless it is
        ``auto``, else the dataset's declared default (``info["as_of_visibility"]``), else ``strict``."""
        if requested not in VISIBILITY_CHOICES:
            raise DataError(f"unknown as-of visibility {requested!r} (valid: {', '.join(VISIBILITY_CHOICES)})")
        if requested != "auto":
            return Visibility(requested, "--as-of-visibility", VISIBILITY_PROTOCOLS[requested])
        declared = self.info.get("as_of_visibility")
        if declared in VISIBILITY_PROTOCOLS:
            return Visibility(declared, "dataset default", str(self.info.get("as_of_visibility_why") or
                                                               VISIBILITY_PROTOCOLS[declared]))
        return Visibility("strict", "harness default", DEFAULT_VISIBILITY_WHY)

    def content_hash(self) -> str:
        """Stable hash of documents, queries and qrels (names the dataset in caches and manifests)."""
        h = hashlib.sha256()
        for d in self.documents:
            row = [d.id, d.title, d.text, d.path, d.timestamp, d.importance, d.group, d.metadata]
            if d.created is not None and d.created != d.timestamp:  # (hashes stay as they were when equal)
                row.append(d.created)
            if d.retired is not None:
                row.append(["retired", d.retired])
            h.update(json.dumps(row, sort_keys=True, default=str).encode())
        for q in self.queries:
            h.update(json.dumps([q.id, q.text, q.as_of, q.group, q.category, q.metadata],
                                sort_keys=True, default=str).encode())
        h.update(json.dumps(self.qrels, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def corpus_hash(self) -> str:
        h = hashlib.sha256()
        for d in self.documents:
            h.update(json.dumps([d.id, d.title, d.text, d.group], default=str).encode())
        return h.hexdigest()[:16]


def parse_time(value: Any) -> float | None:
    """ISO 8601 (``2026-02-27``, ``2026-02-27T10:00:00Z``, with offset) or epoch seconds → epoch seconds UTC.

    Naive datetimes are taken as UTC. ``None``/empty → None. Anything else raises DataError.
    """
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(s)
        except ValueError as exc:
            raise DataError(f"not an ISO 8601 time: {value!r}") from exc
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.timestamp()
    raise DataError(f"not a time: {value!r}")


def format_time(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")
