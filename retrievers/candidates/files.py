"""The candidate JSON schema: replay any preset on candidates without an index (``evalkit score``).

Single-query form::

    {
      "query": "how did we configure the home network?",
      "as_of": "2026-02-27T00:00:00Z",              # ISO 8601 or epoch seconds; optional
      "context": ["earlier message", "..."],         # optional recent messages
      "query_embedding": [0.1, ...],                 # optional (cosine stages, rerank fallback, diversity)
      "documents": [
        {"id": "c1", "text": "...", "path": "memory/topics/network.md", "timestamp": null,
         "importance": 0.7, "start_line": 1, "end_line": 20, "source": "memory",
         "mtime": "2026-02-20T00:00:00Z", "embedding": [...]}
      ],
      "arms": {
        "vec": [{"id": "c1", "score": 0.78}, ...],   # list order = rank (1-based) unless "rank" is given
        "fts": [{"id": "c2", "score": 3.0}, ...]
      }
    }

Multi-query form: ``{"documents": [...], "queries": [{"id", "query", "as_of", "context", "query_embedding",
"arms"}, ...]}``. Arm scores are *raw*: vector = cosine similarity, lexical = BM25 score (positive, larger is
better; SQLite FTS5's rank is its negation). Only ``id`` and ``text`` are required per document.

Documents may carry ``category`` and ``scope`` (memory-lancedb-pro entries; ``filter.category``).

Embeddings are kept as given, in float64 (``corpus.raw_vectors``), for the stages that reproduce a JavaScript
cosine on stored vectors (lancedb-pro's rerank fallback and diversity, OpenClaw's JS cosine fallback); the
float32 matrix ``corpus.embeddings`` is built only when every given embedding has one size. Entries may have
other sizes than each other or than the query (the stages then do what the original does with a mismatch). An
embedding given as a *string* is stored JSON (OpenClaw keeps chunk embeddings as JSON text): it is parsed, and
text that does not parse to an array counts as an empty vector. ``null`` components count as 0 (JS ``?? 0`` /
``null * x``).

An arm can be *computed* instead of listed: ``"vec": {"compute": "openclaw_js_cosine", "limit": 24}`` scores
every document with OpenClaw's JS cosine fallback (``manager-search.ts`` ``searchVector`` without sqlite-vec,
PIPELINES.md §A.4): cosine over the first ``min(len q, len e)`` components, an empty vector (or a zero norm) → 0,
non-finite scores dropped, stable sort desc (document order on ties), first ``limit`` (default: all).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.candidates.table import ArmHits, CandidateSet
from retrievers.index.corpus import Corpus
from retrievers.types import DataError, Dataset, Document, Query, parse_time

DOC_KEYS = {"id", "text", "title", "path", "timestamp", "importance", "start_line", "end_line", "source", "mtime",
            "embedding", "group", "metadata", "contains_secret", "category", "scope"}
ARM_COMPUTE = ("openclaw_js_cosine",)
QUERY_KEYS = {"id", "query", "as_of", "context", "query_embedding", "arms", "category", "metadata", "group"}


def _fail(where: str, msg: str):
    raise DataError(f"candidate file: {where}: {msg}")


def _num(v, where):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(where, f"must be a number, got {v!r}")
    return float(v)


def load_candidate_file(path: str | Path) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read candidate file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"candidate file {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def candidates_from_json(obj: Any) -> CandidateSet:
    """Validate a candidate document (see module docstring) and build a CandidateSet."""
    if not isinstance(obj, dict):
        _fail("top level", "must be a JSON object")
    if "queries" in obj:
        qobjs = obj["queries"]
        if not isinstance(qobjs, list) or not qobjs:
            _fail("queries", "must be a non-empty list")
        extra = sorted(set(obj) - {"documents", "queries"})
        if extra:
            _fail("top level", f"unknown field(s) {', '.join(extra)}")
    else:
        qobjs = [{k: v for k, v in obj.items() if k != "documents"}]
    dobjs = obj.get("documents")
    if not isinstance(dobjs, list):
        _fail("documents", "is required and must be a list")

    docs: list[Document] = []
    embs: list = []
    seen: set[str] = set()
    for i, d in enumerate(dobjs):
        where = f"documents[{i}]"
        if not isinstance(d, dict):
            _fail(where, "must be an object")
        unknown = sorted(set(d) - DOC_KEYS)
        if unknown:
            _fail(where, f"unknown field(s) {', '.join(unknown)} (valid: {', '.join(sorted(DOC_KEYS))})")
        if not isinstance(d.get("id"), str) or not d["id"]:
            _fail(f"{where}.id", "is required and must be a non-empty string")
        if d["id"] in seen:
            _fail(f"{where}.id", f"duplicate document id {d['id']!r}")
        seen.add(d["id"])
        if not isinstance(d.get("text"), str):
            _fail(f"{where}.text", "is required and must be a string")
        try:
            ts = parse_time(d.get("timestamp"))
            mtime = parse_time(d.get("mtime"))
        except DataError as exc:
            _fail(f"{where}.timestamp", str(exc))
        meta = dict(d.get("metadata") or {})
        for k in ("start_line", "end_line", "source", "contains_secret", "category", "scope"):
            if k in d:
                meta[k] = d[k]
        if mtime is not None:
            meta["mtime"] = mtime
        docs.append(Document(id=d["id"], text=d["text"], title=d.get("title") or "", path=d.get("path"),
                             timestamp=ts, importance=_num(d.get("importance"), f"{where}.importance"),
                             group=d.get("group"), metadata=meta))
        embs.append(_vector(d.get("embedding"), f"{where}.embedding", stored_json=True))

    queries: list[Query] = []
    arm_lists: list[dict] = []
    for qi, q in enumerate(qobjs):
        where = f"queries[{qi}]" if "queries" in obj else "query"
        if not isinstance(q, dict):
            _fail(where, "must be an object")
        unknown = sorted(set(q) - QUERY_KEYS)
        if unknown:
            _fail(where, f"unknown field(s) {', '.join(unknown)} (valid: {', '.join(sorted(QUERY_KEYS))})")
        if not isinstance(q.get("query"), str):
            _fail(f"{where}.query", "is required and must be a string")
        try:
            as_of = parse_time(q.get("as_of"))
        except DataError as exc:
            _fail(f"{where}.as_of", str(exc))
        meta = dict(q.get("metadata") or {})
        if q.get("context") is not None:
            if not isinstance(q["context"], list):
                _fail(f"{where}.context", "must be a list of messages")
            meta["context"] = q["context"]
        if q.get("query_embedding") is not None:
            meta["query_embedding"] = _vector(q["query_embedding"], f"{where}.query_embedding").tolist()
        queries.append(Query(id=str(q.get("id", qi)), text=q["query"], as_of=as_of, group=q.get("group"),
                             category=q.get("category"), metadata=meta))
        arms = q.get("arms", {})
        if not isinstance(arms, dict):
            _fail(f"{where}.arms", "must be an object mapping arm name to a list of hits")
        for an, hits in arms.items():
            if isinstance(hits, dict):
                _check_compute(hits, f"{where}.arms.{an}", "query_embedding" in meta)
                continue
            if not isinstance(hits, list):
                _fail(f"{where}.arms.{an}", "must be a list of {id, score[, rank]} objects")
            for hi, h in enumerate(hits):
                hw = f"{where}.arms.{an}[{hi}]"
                if not isinstance(h, dict) or not isinstance(h.get("id"), str):
                    _fail(hw, "must be an object with a string 'id'")
                if h["id"] not in seen:
                    _fail(f"{hw}.id", f"unknown document id {h['id']!r} (not in documents)")
                _num(h.get("score"), f"{hw}.score")
                if "rank" in h and (not isinstance(h["rank"], int) or isinstance(h["rank"], bool) or h["rank"] < 1):
                    _fail(f"{hw}.rank", f"must be an integer >= 1, got {h['rank']!r}")
        arm_lists.append(arms)

    ds = Dataset(name="candidates", documents=docs, queries=queries, qrels={})
    corpus = Corpus(ds)
    if any(e is not None for e in embs):
        corpus.raw_vectors = embs
    dims = {len(e) for e in embs if e is not None and len(e)}
    if len(dims) == 1:  # one size: the float32 matrix the index-side stages use (empty/missing rows NaN)
        dim = dims.pop()
        mat = np.full((len(docs), dim), np.nan, dtype=np.float32)
        for i, e in enumerate(embs):
            if e is not None and len(e) == dim:
                mat[i] = e.astype(np.float32)
        corpus.embeddings = mat
    qemb = None
    qdims = {len(q.metadata["query_embedding"]) for q in queries if "query_embedding" in q.metadata}
    if len(qdims) == 1 and (corpus.embeddings is None or qdims == {corpus.embeddings.shape[1]}):
        dim = qdims.pop()
        qemb = np.full((len(queries), dim), np.nan, dtype=np.float32)
        for i, q in enumerate(queries):
            if "query_embedding" in q.metadata:
                qemb[i] = np.asarray(q.metadata["query_embedding"], dtype=np.float32)
    arm_lists = [{an: (_computed_arm(hits, corpus, q) if isinstance(hits, dict) else hits) for an, hits in arms.items()}
                 for arms, q in zip(arm_lists, queries)]
    return build_candidate_set(corpus, queries, arm_lists, qemb)


def _vector(v: Any, where: str, stored_json: bool = False) -> np.ndarray | None:
    """A vector as given, float64; ``null`` components → 0. A string is stored JSON (documents only): parsed,
    and anything that is not an array counts as the empty vector (OpenClaw ``parseEmbedding``)."""
    if v is None:
        return None
    if isinstance(v, str) and stored_json:
        try:
            v = json.loads(v)
        except ValueError:
            v = []
        if not isinstance(v, list):
            v = []
    if not isinstance(v, list):
        _fail(where, "must be a list of numbers")
    out = np.zeros(len(v), dtype=np.float64)
    for i, x in enumerate(v):
        if x is None:
            continue
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            _fail(f"{where}[{i}]", f"must be a number, got {x!r}")
        out[i] = float(x)
    return out


def _check_compute(spec: dict, where: str, has_qemb: bool) -> None:
    unknown = sorted(set(spec) - {"compute", "limit"})
    if unknown:
        _fail(where, f"unknown field(s) {', '.join(unknown)} (a computed arm takes compute, limit)")
    if spec.get("compute") not in ARM_COMPUTE:
        _fail(f"{where}.compute", f"must be one of: {', '.join(ARM_COMPUTE)}")
    lim = spec.get("limit")
    if lim is not None and (isinstance(lim, bool) or not isinstance(lim, int) or lim < 0):
        _fail(f"{where}.limit", f"must be an integer >= 0, got {lim!r}")
    if not has_qemb:
        _fail(where, "a computed arm needs the query's query_embedding")


def js_cosine_truncated(a: np.ndarray, b: np.ndarray) -> float:
    """OpenClaw ``cosineSimilarity`` (query-expansion.ts, the JS fallback): 0 when either vector is empty; the
    first ``min(len a, len b)`` components, summed left to right in float64; a zero norm → 0."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    dot = na = nb = 0.0
    for x, y in zip(a.tolist(), b.tolist()):
        dot += x * y
        na += x * x
        nb += y * y
    if na == 0 or nb == 0:
        return 0.0
    return dot / (na ** 0.5 * nb ** 0.5)


def _computed_arm(spec: dict, corpus: Corpus, q: Query) -> list[dict]:
    """The hit list of a computed arm (see the module docstring)."""
    qv = np.asarray(q.metadata["query_embedding"], dtype=np.float64)
    raw = getattr(corpus, "raw_vectors", None) or [None] * corpus.n
    empty = np.zeros(0)
    scored = []
    for i in range(corpus.n):
        s = js_cosine_truncated(qv, raw[i] if raw[i] is not None else empty)
        if np.isfinite(s):
            scored.append((i, s))
    scored.sort(key=lambda t: -t[1])  # stable: document order on ties
    lim = spec.get("limit")
    if lim is not None:
        scored = scored[:lim]
    return [{"id": corpus.ids[i], "score": s} for i, s in scored]


def build_candidate_set(corpus: Corpus, queries: list[Query], arm_lists: list[dict[str, list[dict]]],
                        qemb: np.ndarray | None = None) -> CandidateSet:
    """CandidateSet from per-query arm hit lists ``{arm: [{"id", "score"[, "rank"]}]}``.

    Columns: per query, the union of all arms' documents in first-seen order (arms in the given order).
    A duplicate id inside one arm keeps the first row's position and the later row's values (as OpenClaw's
    Map insertion does).
    """
    Q = len(queries)
    all_arms: list[str] = []
    for arms in arm_lists:
        for a in arms:
            if a not in all_arms:
                all_arms.append(a)
    cols: list[list[int]] = []
    for arms in arm_lists:
        order: dict[int, None] = {}
        for a in arms:
            for h in arms[a]:
                order.setdefault(corpus.index[h["id"]], None)
        cols.append(list(order))
    C = max((len(c) for c in cols), default=0)
    doc = np.full((Q, C), -1, dtype=np.int64)
    for q, c in enumerate(cols):
        doc[q, :len(c)] = c
    hits: dict[str, ArmHits] = {}
    for a in all_arms:
        score = np.full((Q, C), np.nan)
        rank = np.zeros((Q, C), dtype=np.int32)
        for q, arms in enumerate(arm_lists):
            pos = {d: i for i, d in enumerate(cols[q])}
            for r, h in enumerate(arms.get(a, []), start=1):
                c = pos[corpus.index[h["id"]]]
                if rank[q, c] == 0:
                    rank[q, c] = int(h.get("rank", r))
                s = h.get("score")
                score[q, c] = np.nan if s is None else float(s)
        hits[a] = ArmHits(score=score, rank=rank)
    return CandidateSet(corpus, queries, doc, hits, qemb=qemb)
