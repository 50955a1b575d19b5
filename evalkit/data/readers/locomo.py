"""LoCoMo (Maharana et al., ACL 2024) read from the original ``locomo10.json``.

Ten long two-person conversations; each is its own memory store (``group`` = ``sample_id``: a query may only
retrieve from its own conversation).

Documents
    ``level="turn"`` (registry ``locomo``): one document per dialogue turn, id ``"{sample_id}:{dia_id}"``
    (e.g. ``conv-26:D1:3``), text ``"{speaker}: {text}"``; a turn that shares an image gets
    ``" [shares {blip_caption}]"`` appended (the caption is the only text of the image).
    ``level="session"`` (registry ``locomo-session``): one document per session, id ``"{sample_id}:S{N}"``,
    text = its turns formatted as above, joined by newlines.
    Timestamp = the session's ``session_N_date_time`` (``"1:56 pm on 8 May, 2023"``), read as UTC; every turn of a
    session carries its session's time, and is ``created`` then. ``path`` = ``"{sample_id}/session_{N}"``.
    Metadata: ``session``, ``date_time`` (raw string), and for turns ``dia_id``, ``turn`` (0-based position in
    the session), ``speaker``, ``blip_caption`` (image turns); for sessions ``n_turns``.
    Sessions that have a date key but no turns (conv-26 sessions 20–35) produce no documents.

Queries
    One per QA item, id ``"{sample_id}:q{i}"`` (``i`` = 0-based position in the item's ``qa`` list), text =
    question, ``group`` = ``sample_id``, ``category`` = the official evaluation code's name for the code
    (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial — the paper's numbered list is in a
    different order), metadata ``answer`` (``answer``, or ``adversarial_answer`` when there is no ``answer``; both
    are kept when both exist, as in two conv-26 items), ``category_code``, ``evidence`` (repaired dia_ids).
    ``as_of`` = the date of the conversation's last session *that has turns* + 1 day (conv-26's empty dated
    sessions 20–35 are ignored: the conversation as recorded ends at session 19). The dataset declares the
    ``strict`` as-of visibility protocol, which here hides nothing: every session is held before ``as_of``.

Qrels (grade 1)
    Turn level: the evidence turns. Session level: each session containing at least one evidence turn.

Evidence repairs (``info["evidence_repairs"]``, one entry per raw evidence string that is not a dia_id as
written: ``{sample_id, question_index, query_id, raw, action, result}``; counts in ``info["repaired"]``,
``info["dropped"]``). The rules, applied to every evidence string:

* ``split``: a string holding several ids is split on ``;``, ``,`` and whitespace —
  ``'D8:6; D9:17'`` (conv-26) and the three space-joined lists of conv-49 (``'D9:1 D4:4 D4:6'``, ...).
* ``normalised``: leading zeros removed — ``'D30:05'`` → ``D30:5`` (conv-50).
* ``repaired``: a stray colon after the ``D`` removed — ``'D:11:26'`` → ``D11:26`` (conv-43; that turn exists and
  is about "The Alchemist", which answers the question "What authors has Tim read books from?").
* ``dropped``: not a dia_id at all — ``'D'`` (conv-42) — or naming a turn that does not exist — ``D10:19``
  (conv-42; session 10 has 16 turns) and ``D4:36`` (conv-47; session 4 has 25 turns).

Scoring policy (differs from the official code): this project indexes ALL sessions (the official code indexed
only sessions 1–19) and scores only QA items that have evidence (the official code scored items without
evidence as recall 1). The 4 items whose raw evidence list is empty (and any item whose every evidence id is
dropped — none in this release) are kept in ``dataset.queries`` with no qrels and are in **no split**, so they
are never scored; their count is ``info["queries_without_evidence"]``.

Splits: ``test`` = ``all`` = every query with evidence (LoCoMo has no train split); ``train`` / ``heldout`` = a
deterministic split **by conversation** (five conversations each, by seeded hash of the sample id:
:func:`evalkit.data.groups.group_split`), so no conversation — and no evidence turn — is on both sides. (A split
by question put all ten conversations in both halves: 365 of 991 held-out questions had exactly the evidence set
of a train question.) With ten conversations, ``evalkit tune`` estimates by leave-one-conversation-out
cross-validation instead (:mod:`evalkit.tune.protocol`).

Options: ``conversations=[sample_id, ...]`` or ``limit=N`` (first N conversations) load a slice.
``protocol="paper"`` (registry ``locomo-paper``, turn level) reproduces the paper's retrieval setting for a
protocol-matched comparison with its DRAGON figures (``docs/protocols.md``): only sessions 1–19 are indexed and a
turn's text is ``(<session date_time>) <speaker> said, "<text>"`` (+ `` [shares <caption>]``), as the paper's
``task_eval/dpr_qa.py`` embeds it; evidence turns of later sessions stay in the qrels, unreachable (a miss, as in the
paper's recall). The paper also scores the 4 evidence-less items as recall 1; they stay unscored here (no qrels),
and the figure over all 1,986 items is ``(1,982 · mean + 4) / 1,986``.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from evalkit.data.groups import GROUP_SEED, group_split
from retrievers.errors import json_error
from retrievers.types import (
    DataError,
    Dataset,
    Document,
    Qrels,
    Query,
    declare_visibility,
)

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LEVELS = ("turn", "session")
PROTOCOLS = ("evalkit", "paper")
PAPER_SESSIONS = 19  # the paper's retrieval code indexes sessions 1..19 (`for i in range(1, 20)`)

_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], 1)}
_DATE_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_SESSION_RE = re.compile(r"^session_(\d+)$")
_DIA_RE = re.compile(r"^D:?(\d+):(\d+)$")
_SEP_RE = re.compile(r"[;,\s]+")


def parse_locomo_time(value: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` → epoch seconds (UTC). Locale-independent. DataError if malformed."""
    m = _DATE_RE.match(value) if isinstance(value, str) else None
    if not m or m.group(5).lower() not in _MONTHS:
        raise DataError(f"not a LoCoMo date: {value!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    try:
        dt = datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=timezone.utc)
    except ValueError as exc:
        raise DataError(f"not a LoCoMo date: {value!r} ({exc})") from None
    return dt.timestamp()


def format_turn(turn: dict) -> str:
    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
    cap = turn.get("blip_caption")
    if cap:
        text += f" [shares {cap}]"
    return text


def format_turn_paper(turn: dict, date_time: str) -> str:
    """A turn as the paper's retrieval code embeds it (task_eval/dpr_qa.py, ``get_context_embeddings``):
    ``(<session date_time>) <speaker> said, "<text>"``, then `` [shares <caption>]`` for an image turn."""
    text = f"({date_time}) {turn.get('speaker', '')} said, \"{turn.get('text', '')}\""
    cap = turn.get("blip_caption")
    if cap:
        text += f" [shares {cap}]"
    return text


def repair_evidence(raw_list: list, existing: set[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Apply the module's evidence rules. Returns (valid dia_ids in order, deduplicated; repair entries)."""
    out: list[str] = []
    repairs: list[dict[str, Any]] = []
    for raw in raw_list:
        raw_s = str(raw)
        if raw_s in existing:
            if raw_s not in out:
                out.append(raw_s)
            continue
        tokens = [t for t in _SEP_RE.split(raw_s.strip()) if t]
        results: list[str] = []
        actions: set[str] = set()
        dropped: list[str] = []
        if len(tokens) > 1:
            actions.add("split")
        for tok in tokens:
            m = _DIA_RE.match(tok)
            if not m:
                dropped.append(f"{tok!r} is not a dia_id")
                continue
            canon = f"D{int(m.group(1))}:{int(m.group(2))}"
            if tok.startswith("D:"):
                actions.add("repaired")
            elif canon != tok:
                actions.add("normalised")
            if canon not in existing:
                dropped.append(f"{canon} does not exist in the conversation")
                continue
            results.append(canon)
        if not tokens:
            dropped.append("empty evidence string")
        if results:
            action = "+".join(a for a in ("split", "repaired", "normalised") if a in actions) or "kept"
            entry: dict[str, Any] = {"raw": raw_s, "action": action,
                                     "result": results if len(results) > 1 or "split" in actions else results[0]}
            if dropped:
                entry["also_dropped"] = dropped
        else:
            entry = {"raw": raw_s, "action": "dropped", "result": None, "reason": "; ".join(dropped)}
        repairs.append(entry)
        for r in results:
            if r not in out:
                out.append(r)
    return out, repairs


def _read(path: Path) -> list:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise DataError(f"LoCoMo file not found: {path}") from None
    except IsADirectoryError:
        raise DataError(f"LoCoMo path is a folder, expected locomo10.json: {path}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: malformed JSON ({json_error(exc)})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: expected a non-empty JSON list of conversations")
    return data


def load_locomo(path: Path, level: str = "turn", conversations: list[str] | None = None,
                limit: int | None = None, name: str | None = None, protocol: str = "evalkit",
                **opts: Any) -> Dataset:
    """Read LoCoMo at turn or session level (see the module docstring for every rule)."""
    if level not in LEVELS:
        raise DataError(f"LoCoMo level must be one of {', '.join(LEVELS)}, got {level!r}")
    if protocol not in PROTOCOLS or (protocol == "paper" and level != "turn"):
        raise DataError(f"LoCoMo protocol must be one of {', '.join(PROTOCOLS)} ('paper' at turn level only), "
                        f"got {protocol!r} at {level} level")
    paper = protocol == "paper"
    path = Path(path)
    data = _read(path)
    if conversations is not None:
        want = set(conversations)
        data = [s for s in data if isinstance(s, dict) and s.get("sample_id") in want]
        missing = want - {s.get("sample_id") for s in data}
        if missing:
            raise DataError(f"{path}: no conversation(s) {', '.join(sorted(missing))}")
    if limit is not None:
        data = data[: int(limit)]

    docs: list[Document] = []
    queries: list[Query] = []
    qrels: Qrels = {}
    repairs: list[dict[str, Any]] = []
    no_evidence: list[str] = []
    empty_sessions: list[str] = []
    n_turns = n_sessions = 0

    for ci, sample in enumerate(data):
        where = f"{path}: conversation #{ci}"
        if not isinstance(sample, dict) or "sample_id" not in sample or not isinstance(sample.get("conversation"), dict):
            raise DataError(f"{where}: expected an object with 'sample_id' and 'conversation'")
        sid = str(sample["sample_id"])
        conv = sample["conversation"]
        where = f"{path}: {sid}"
        sessions: list[tuple[int, str, float, list]] = []
        for key, turns in conv.items():
            m = _SESSION_RE.match(key)
            if not m:
                continue
            n = int(m.group(1))
            raw_dt = conv.get(f"{key}_date_time")
            if raw_dt is None:
                raise DataError(f"{where}: {key} has no {key}_date_time")
            try:
                ts = parse_locomo_time(raw_dt)
            except DataError as exc:
                raise DataError(f"{where}: {key}_date_time: {exc}") from None
            if not isinstance(turns, list):
                raise DataError(f"{where}: {key} must be a list of turns")
            sessions.append((n, raw_dt, ts, turns))
        sessions.sort(key=lambda s: s[0])
        for key in conv:  # dated sessions with no turns key at all
            m = re.match(r"^session_(\d+)_date_time$", key)
            if m and f"session_{m.group(1)}" not in conv:
                empty_sessions.append(f"{sid}:S{m.group(1)}")
        dia_session: dict[str, int] = {}
        last_ts: float | None = None
        for n, raw_dt, ts, turns in sessions:
            if not turns:
                empty_sessions.append(f"{sid}:S{n}")
                continue
            n_sessions += 1
            last_ts = ts if last_ts is None else max(last_ts, ts)
            spath = f"{sid}/session_{n}"
            lines = []
            for ti, turn in enumerate(turns):
                if not isinstance(turn, dict) or "dia_id" not in turn or "text" not in turn:
                    raise DataError(f"{where}: session_{n} turn {ti} lacks 'dia_id' or 'text'")
                dia = str(turn["dia_id"])
                if dia in dia_session:
                    raise DataError(f"{where}: duplicate dia_id {dia}")
                dia_session[dia] = n
                text = format_turn_paper(turn, raw_dt) if paper else format_turn(turn)
                lines.append(text)
                n_turns += 1
                if level == "turn" and not (paper and n > PAPER_SESSIONS):
                    md: dict[str, Any] = {"session": n, "dia_id": dia, "turn": ti,
                                          "speaker": turn.get("speaker"), "date_time": raw_dt}
                    if turn.get("blip_caption"):
                        md["blip_caption"] = turn["blip_caption"]
                    docs.append(Document(id=f"{sid}:{dia}", text=text, path=spath, timestamp=ts, created=ts,
                                         group=sid, metadata=md))
            if level == "session":
                docs.append(Document(id=f"{sid}:S{n}", text="\n".join(lines), path=spath, timestamp=ts,
                                     created=ts, group=sid, metadata={"session": n, "n_turns": len(turns),
                                                          "date_time": raw_dt}))
        if last_ts is None:
            raise DataError(f"{where}: conversation has no turns")
        as_of = last_ts + timedelta(days=1).total_seconds()

        qa = sample.get("qa") or []
        if not isinstance(qa, list):
            raise DataError(f"{where}: 'qa' must be a list")
        existing = set(dia_session)
        for qi, item in enumerate(qa):
            if not isinstance(item, dict) or "question" not in item:
                raise DataError(f"{where}: qa[{qi}] has no 'question'")
            qid = f"{sid}:q{qi}"
            code = item.get("category")
            try:
                code = int(code) if code is not None else None
            except (TypeError, ValueError):
                raise DataError(f"{where}: qa[{qi}] category {code!r} is not an integer") from None
            raw_ev = item.get("evidence") or []
            if isinstance(raw_ev, str):
                raw_ev = [raw_ev]
            evidence, reps = repair_evidence(raw_ev, existing)
            for r in reps:
                repairs.append({"sample_id": sid, "question_index": qi, "query_id": qid, **r})
            md = {"answer": item["answer"] if "answer" in item else item.get("adversarial_answer"),
                  "category_code": code, "evidence": evidence}
            if "adversarial_answer" in item:
                md["adversarial_answer"] = item["adversarial_answer"]
            queries.append(Query(id=qid, text=str(item["question"]), as_of=as_of, group=sid,
                                 category=CATEGORIES.get(code, None if code is None else str(code)), metadata=md))
            if not evidence:
                no_evidence.append(qid)
                continue
            if level == "turn":
                qrels[qid] = {f"{sid}:{e}": 1 for e in evidence}
            else:
                qrels[qid] = {f"{sid}:S{dia_session[e]}": 1 for e in evidence}

    scored = [q.id for q in queries if q.id in qrels]
    train, heldout = group_split(scored, {q.id: q.group for q in queries if q.id in qrels})
    splits = {"test": scored, "all": list(scored), "train": train, "heldout": heldout}
    info: dict[str, Any] = {
        "source": str(path), "format": "locomo", "level": level,
        "conversations": len(data), "sessions": n_sessions, "turns": n_turns,
        "empty_sessions": sorted(set(empty_sessions)),
        "qa_items": len(queries), "queries_with_evidence": len(scored),
        "queries_without_evidence": len(no_evidence), "queries_without_evidence_ids": no_evidence,
        "evidence_repairs": repairs,
        "repaired": sum(1 for r in repairs if r["action"] != "dropped"),
        "dropped": sum(1 for r in repairs if r["action"] == "dropped") + sum(len(r.get("also_dropped", []))
                                                                              for r in repairs),
        "split_seed": GROUP_SEED,
        "protocol": protocol,
        "rules": [
            (f"the paper's protocol: sessions 1-{PAPER_SESSIONS} indexed, turns formatted as its retrieval code "
             f"does; evidence in later sessions stays in the qrels (a miss, as in the paper's recall)") if paper else
            "all sessions indexed (official code: sessions 1-19 only)",
            "only QA items with evidence are scored; items without evidence are in no split",
            "as_of = last session with turns + 1 day",
            "evidence repaired per locomo.py docstring (split, normalised, repaired, dropped)",
            "train/heldout = whole conversations (seeded hash of the sample id), never a conversation on both sides",
        ],
    }
    # questions about one conversation are not independent: statistics resample whole conversations
    info["clusters"] = {"by": "group", "what": "conversation"}
    # the paper's retrieval figures (recall accuracy R@k, Table 3) and the harness's headline
    info["official_measures"] = ["recall@5", "recall@10", "recall@25", "recall@50", "ndcg@10"]
    info["split_by"] = "group"
    # answer runs (evalkit answer, docs/answers.md): the gold answer's metadata key; an adversarial question asks
    # about something the conversation never says, so the right answer is to decline
    info["answers"] = {"gold": "answer", "decline": {"category": ["adversarial"]}}
    if paper:  # the paper's Table 3 cut-offs, scored by every run of this protocol
        info["extra_measures"] = ["recall@5", "recall@25", "recall@50"]
    declare_visibility(info, "strict", "a conversation's memory holds the sessions held before the question "
                                       "(as_of follows the last session, so every session is visible)")
    default_name = "locomo-paper" if paper else ("locomo" if level == "turn" else "locomo-session")
    return Dataset(name=name or default_name, documents=docs,
                   queries=queries, qrels=qrels, splits=splits, info=info, unit=level)
