"""LongMemEval (Wu et al., ICLR 2025) read straight from the original ``.json.gz`` (or ``.json``).

Variants: ``s`` (``longmemeval_s_498.json.gz``: ~48 dated sessions per question) and ``oracle`` (only the evidence
sessions); ``variant`` only labels the dataset — the file decides the content.

Reading: the file is one JSON list. It is streamed — gzip is inflated with ``zlib`` in 4 MB pieces and the list
items are decoded one at a time with ``json.JSONDecoder.raw_decode`` — so the 257 MB unpacked S file is never
held as one string, each question's raw item is dropped once its documents are built, and ``limit`` /
``question_ids`` stop reading as soon as the wanted questions are in. Identical session (and turn) texts that
recur across haystacks share one string object.

Groups: one per question (``group`` = ``question_id``): a query only retrieves from its own haystack.

Documents
    ``level="session"``: id ``"{question_id}/{session_id}"``, text = the turns as ``"{role}: {content}"`` joined
    by newlines. ``level="turn"``: id ``"{question_id}/{session_id}/{turn_index}"``, text ``"{role}: {content}"``.
    Timestamp = the session's ``haystack_dates`` entry (``'2023/05/21 (Sun) 19:50'``, read as UTC).
    ``path`` = ``"{question_id}/{session_id}"``. Metadata: ``session_id``, ``session_index`` (position in the
    haystack), ``has_answer`` (session: any turn has it), ``after_question`` (dated after ``question_date``),
    and for turns ``turn_index``, ``role``; for sessions ``n_turns``.
    Duplicate slots: 13 S haystacks list the same (non-evidence) session twice, on two dates. Both slots are kept
    (they are both in the official haystack); the second occurrence's id gets ``"#2"`` appended to the session
    part (``"{question_id}/{session_id}#2"``), ``metadata.session_id`` stays the original id. Counted in
    ``info["duplicate_session_slots"]``.

Queries: id = ``question_id``, text = ``question``, ``as_of`` = ``question_date``, ``group`` = ``question_id``,
``category`` = ``question_type``, metadata ``answer``, ``answer_session_ids``, ``abstention``.

Qrels (grade 1): session level = the ``answer_session_ids`` slots; turn level = the turns with
``has_answer: true``.

Rules (also in ``info["rules"]``):

* Abstention questions (``_abs`` in the id; the official retrieval evaluation skips them) are excluded unless
  ``include_abstention=True``; ``info["abstention_excluded"]`` / ``info["abstention_included"]`` count them.
* Sessions dated after ``question_date`` (S: 76 questions, 75 evidence-session slots in 44 questions) are
  KEPT: they are part of the official haystack and the official retrieval evaluation counts them. They are
  flagged ``metadata.after_question`` and counted in ``info["sessions_after_question"]`` (slots),
  ``info["questions_with_sessions_after"]``, ``info["evidence_sessions_after_question"]`` and
  ``info["questions_with_evidence_after"]``. A session is ``created`` at its date. The dataset declares the
  ``all`` as-of visibility protocol (the official one: every session of the haystack is searchable);
  ``--as-of-visibility strict`` hides the sessions dated after the question instead. Where future sessions stay
  visible, each time stage treats the negative age as its original system does, and runs count those candidates
  (``negative_age_*`` metrics).
* Haystacks whose dates are not in order (S: 210 questions) keep the file's order;
  ``info["haystacks_out_of_order"]`` counts them. All counts are over the questions loaded.
* Splits contain the loaded questions that have qrels: ``test`` = ``all``; ``train`` / ``heldout`` = a seeded
  split by group (:func:`evalkit.data.groups.group_split`, about half the questions each): a group is a haystack,
  joined with every other haystack whose evidence sessions are the same text (S: 7 such pairs, 5 of which a split by
  question put on both sides; e.g. "Where do I initially keep my old sneakers?" / "... currently keep ..." share
  one evidence session), so no evidence is on both sides. A question without qrels (turn level: an abstention item without ``has_answer`` turns) is kept in
  ``queries`` but in no split. ``heldout`` is the dataset's **lockbox** (``info["lockbox"]``): ``evalkit tune``
  never reads it; ``evalkit tune --final`` opens it and counts the openings (:mod:`evalkit.tune.lockbox`).

Options: ``limit=N`` (first N included questions in file order), ``question_ids=[...]`` (exactly those, in
file order — abstention items named explicitly are included; unknown ids are an error). Both stop reading the
file once the wanted questions are in.
"""
from __future__ import annotations

import codecs
import json
import re
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from evalkit.data.groups import GROUP_SEED, group_split, query_groups
from retrievers.types import (
    DataError,
    Dataset,
    Document,
    Qrels,
    Query,
    declare_visibility,
)

LEVELS = ("session", "turn")
CHUNK = 4 << 20
_DATE_RE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*$")
_WS = " \t\r\n"


def parse_lme_time(value: str) -> float:
    """``'2023/05/21 (Sun) 19:50'`` → epoch seconds (UTC). The weekday is ignored. DataError if malformed."""
    m = _DATE_RE.match(value) if isinstance(value, str) else None
    if not m:
        raise DataError(f"not a LongMemEval date: {value!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    try:
        return datetime(y, mo, d, h, mi, tzinfo=timezone.utc).timestamp()
    except ValueError as exc:
        raise DataError(f"not a LongMemEval date: {value!r} ({exc})") from None


def _text_chunks(path: Path) -> Iterator[str]:
    """Decoded text of a .json or .json.gz file, in pieces."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"LongMemEval file not found: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from None
    utf8 = codecs.getincrementaldecoder("utf-8")()
    with fh:
        head = fh.read(2)
        fh.seek(0)
        z = zlib.decompressobj(31) if head == b"\x1f\x8b" else None
        try:
            while True:
                raw = fh.read(CHUNK)
                if not raw:
                    break
                if z is not None:
                    data = z.decompress(raw)
                    while z.eof and z.unused_data:  # concatenated gzip members
                        rest = z.unused_data
                        z = zlib.decompressobj(31)
                        data += z.decompress(rest)
                else:
                    data = raw
                yield utf8.decode(data)
            if z is not None and not z.eof:
                raise DataError(f"{path}: truncated gzip file")
            yield utf8.decode(b"", final=True)
        except zlib.error as exc:
            raise DataError(f"{path}: corrupt gzip data ({exc})") from None
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None


def iter_json_list(path: Path) -> Iterator[Any]:
    """Yield the items of a top-level JSON list one at a time without holding the whole text."""
    dec = json.JSONDecoder()
    chunks = _text_chunks(path)
    buf, pos, eof, item_no = "", 0, False, 0

    def more() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        for piece in chunks:
            if piece:
                buf = buf[pos:] + piece
                pos = 0
                return True
        eof = True
        return False

    def skip_ws() -> str:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not more():
                return ""

    if skip_ws() != "[":
        raise DataError(f"{path}: expected a JSON list of questions")
    pos += 1
    first = True
    while True:
        c = skip_ws()
        if c == "]":
            return
        if not first:
            if c != ",":
                raise DataError(f"{path}: malformed JSON after item {item_no} (expected ',' or ']')")
            pos += 1
            c = skip_ws()
        if c == "":
            raise DataError(f"{path}: unexpected end of file after item {item_no}")
        while True:
            try:
                obj, end = dec.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                if not more():
                    raise DataError(f"{path}: malformed JSON in item {item_no + 1} ({exc.msg})") from None
        pos = end
        item_no += 1
        first = False
        yield obj


_KEYS = ("question_id", "question", "question_date", "haystack_dates", "haystack_session_ids",
         "haystack_sessions", "answer_session_ids")


def load_longmemeval(path: Path, level: str = "session", variant: str = "s", include_abstention: bool = False,
                     limit: int | None = None, question_ids: list[str] | None = None, name: str | None = None,
                     **opts: Any) -> Dataset:
    """Read LongMemEval at session or turn level (see the module docstring for every rule)."""
    if level not in LEVELS:
        raise DataError(f"LongMemEval level must be one of {', '.join(LEVELS)}, got {level!r}")
    path = Path(path)
    want = list(dict.fromkeys(str(q) for q in question_ids)) if question_ids is not None else None
    want_set = set(want) if want is not None else None
    if limit is not None and int(limit) < 1:
        raise DataError(f"limit must be >= 1, got {limit}")

    docs: list[Document] = []
    queries: list[Query] = []
    qrels: Qrels = {}
    pool: dict[str, str] = {}  # identical texts share one object
    dates: dict[str, float] = {}
    st = dict.fromkeys(("questions_read", "abstention_excluded", "abstention_included", "sessions", "turns",
                        "sessions_after_question", "questions_with_sessions_after",
                        "evidence_sessions_after_question", "questions_with_evidence_after",
                        "haystacks_out_of_order", "duplicate_session_slots"), 0)

    def when(raw: Any, where: str) -> float:
        t = dates.get(raw) if isinstance(raw, str) else None
        if t is None:
            try:
                t = dates[raw] = parse_lme_time(raw)
            except DataError as exc:
                raise DataError(f"{where}: {exc}") from None
        return t

    for item in iter_json_list(path):
        st["questions_read"] += 1
        where = f"{path}: item {st['questions_read']}"
        if not isinstance(item, dict):
            raise DataError(f"{where}: expected an object")
        missing = [k for k in _KEYS if k not in item]
        if missing:
            raise DataError(f"{where} ({item.get('question_id', '?')}): missing {', '.join(missing)}")
        qid = str(item["question_id"])
        where = f"{path}: question {qid}"
        if want_set is not None and qid not in want_set:
            continue
        is_abs = "_abs" in qid
        if is_abs and not include_abstention and want_set is None:
            st["abstention_excluded"] += 1
            continue
        st["abstention_included"] += is_abs
        sids, sdates, sessions = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
        if not (isinstance(sessions, list) and len(sids) == len(sdates) == len(sessions)):
            raise DataError(f"{where}: haystack_session_ids/dates/sessions differ in length "
                            f"({len(sids)}/{len(sdates)}/{len(sessions)})")
        as_of = when(item["question_date"], where)
        answer_ids = {str(s) for s in item["answer_session_ids"] or []}
        rel: dict[str, int] = {}
        seen: dict[str, int] = {}
        times = [when(d, where) for d in sdates]
        if any(a > b for a, b in zip(times, times[1:])):
            st["haystacks_out_of_order"] += 1
        n_after = n_ev_after = 0
        for si, (sid, ts, turns) in enumerate(zip(sids, times, sessions)):
            sid = str(sid)
            if not isinstance(turns, list):
                raise DataError(f"{where}: session {sid} is not a list of turns")
            seen[sid] = seen.get(sid, 0) + 1
            skey = sid if seen[sid] == 1 else f"{sid}#{seen[sid]}"
            st["duplicate_session_slots"] += seen[sid] > 1
            after = ts > as_of
            is_ev = sid in answer_ids
            n_after += after
            n_ev_after += after and is_ev
            spath = f"{qid}/{skey}"
            lines = []
            any_ans = False
            for ti, turn in enumerate(turns):
                if not isinstance(turn, dict) or "content" not in turn:
                    raise DataError(f"{where}: session {sid} turn {ti} has no 'content'")
                role = str(turn.get("role", ""))
                text = f"{role}: {turn['content']}"
                has = bool(turn.get("has_answer"))
                any_ans |= has
                if level == "turn":
                    did = f"{spath}/{ti}"
                    docs.append(Document(id=did, text=pool.setdefault(text, text), path=spath, timestamp=ts,
                                         created=ts, group=qid, metadata={"session_id": sid, "session_index": si,
                                                              "turn_index": ti, "role": role, "has_answer": has,
                                                              "after_question": after}))
                    if has:
                        rel[did] = 1
                else:
                    lines.append(text)
            st["turns"] += len(turns)
            st["sessions"] += 1
            if level == "session":
                text = "\n".join(lines)
                docs.append(Document(id=spath, text=pool.setdefault(text, text), path=spath, timestamp=ts,
                                     created=ts, group=qid, metadata={"session_id": sid, "session_index": si,
                                                          "n_turns": len(turns), "has_answer": any_ans,
                                                          "after_question": after}))
                if is_ev and seen[sid] == 1:
                    rel[spath] = 1
        st["sessions_after_question"] += n_after
        st["questions_with_sessions_after"] += n_after > 0
        st["evidence_sessions_after_question"] += n_ev_after
        st["questions_with_evidence_after"] += n_ev_after > 0
        queries.append(Query(id=qid, text=str(item["question"]), as_of=as_of, group=qid,
                             category=item.get("question_type"),
                             metadata={"answer": item.get("answer"), "answer_session_ids": sorted(answer_ids),
                                       "abstention": is_abs}))
        if rel:
            qrels[qid] = rel
        del item, sessions
        if want_set is not None and len(queries) == len(want_set):
            break
        if limit is not None and len(queries) >= int(limit):
            break

    if want is not None:
        missing_q = [q for q in want if q not in {x.id for x in queries}]
        if missing_q:
            raise DataError(f"{path}: no question(s) {', '.join(missing_q[:5])}"
                            f"{' ...' if len(missing_q) > 5 else ''}")
    if not queries:
        raise DataError(f"{path}: no questions loaded")
    scored = [q.id for q in queries if q.id in qrels]
    info: dict[str, Any] = {
        "source": str(path), "format": "longmemeval", "variant": variant, "level": level,
        "questions": len(queries), "include_abstention": bool(include_abstention),
        "partial": limit is not None or want is not None,
        **st,
        "queries_without_qrels": len(queries) - len(scored),
        "distinct_texts": len(pool), "split_seed": GROUP_SEED,
        "rules": [
            "abstention (_abs) questions excluded unless include_abstention=True",
            "sessions dated after question_date are kept (official haystack), flagged metadata.after_question",
            "haystack order kept even when dates are out of order",
            "a session listed twice in one haystack keeps both slots; the second id gets '#2'",
            "splits hold questions with qrels; train/heldout = whole groups (a haystack, joined with haystacks whose "
            "evidence sessions are the same text), by seeded hash; heldout is the lockbox evalkit tune never reads",
        ],
    }
    # answer runs (evalkit answer, docs/answers.md): the gold answer's metadata key; an abstention question (_abs)
    # asks about something the history never says, so the right answer is to decline
    info["answers"] = {"gold": "answer", "decline": {"metadata": "abstention"}}
    # LongMemEval's official session metrics, scored besides the default ones (evalkit.engine.evaluate reads this)
    info["extra_measures"] = ["recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10"]
    # one haystack per question: the cluster is the question itself (clustered statistics = per-query ones)
    info["clusters"] = {"by": "group", "what": "haystack"}
    info["official_measures"] = ["ndcg@10", "recall_all@5", "recall_any@5", "recall_all@10", "recall_any@10"]
    info["lockbox"] = "heldout"
    declare_visibility(info, "all", "official LongMemEval protocol: sessions dated after the question are part "
                                    "of the haystack")
    suffix = "" if level == "session" else "-turn"
    ds = Dataset(name=name or f"longmemeval-{variant}{suffix}", documents=docs, queries=queries, qrels=qrels,
                 splits={"test": scored, "all": list(scored)}, info=info, unit=level)
    groups = query_groups(ds, "group+evidence")
    ds.splits["train"], ds.splits["heldout"] = group_split(scored, groups.of)
    info["split_by"] = "group+evidence"
    return ds
