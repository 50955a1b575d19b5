"""Generate the ``memory-workspace`` benchmark: an OpenClaw-style memory folder, its chunks, labelled queries
and a query log, written in the BEIR layout (DESIGN.md §4).

Usage::

    python -m evalkit.data.workspace_gen [--out datasets/memory-workspace] [--stats] [--materialize DIR]

Everything derives from ``SEED`` through ``random.Random`` instances with fixed string seeds, iteration is
over sorted keys, nothing reads the clock, JSON is written with sorted-free fixed key order,
``ensure_ascii=False`` and ``\\n`` line endings — so the output is byte-identical on every run.

Module map: ``workspace_content`` (note syntax, filler, fake secrets), ``workspace_notes_spring`` /
``workspace_notes_summer`` (daily notes), ``workspace_evergreen`` (``MEMORY.md`` and topic briefs),
``workspace_junk`` (``node_modules/``, ``.git/``, ``logs/``), ``workspace_chunk`` (the chunker),
``workspace_labels`` (targets → qrels), ``workspace_queries`` (query material), ``workspace_log``
(the query log), ``workspace_card`` (counts and the dataset card).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from evalkit.data import workspace_queries as QM
from evalkit.data.workspace_chunk import chunk_markdown
from evalkit.data.workspace_content import (Note, WorkspaceFile, fake_secrets, fill_placeholders, filler_notes,
                                            layout, parse_body, parse_days, todo_notes)
from evalkit.data.workspace_evergreen import MEMORY_MD, TOPICS
from evalkit.data.workspace_junk import junk_files
from evalkit.data.workspace_labels import DocRef, Labeler, day_of_path, shared_content_words
from evalkit.data.workspace_notes_spring import DAYS_SPRING
from evalkit.data.workspace_notes_summer import DAYS_SUMMER

SEED = 20260302
START, END = "2026-03-02", "2026-08-31"
N_DAILY = 150  # total daily files: the written days plus filler-only days
VACATION = ("2026-07-14", "2026-07-26")  # no notes written
CHUNK_TOKENS, CHUNK_OVERLAP = 400, 80
GROUP = "workspace"
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "datasets" / "memory-workspace"

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
    files: list[WorkspaceFile]
    secrets: dict[str, str]
    notes: list[Note] = field(default_factory=list)

    def daily(self) -> list[WorkspaceFile]:
        return [f for f in self.files if f.tier == "daily"]


def _fill_notes(body: list, secrets: dict[str, str]) -> list:
    for item in body:
        if item is not None:
            item.lines = [fill_placeholders(line, secrets) for line in item.lines]
    return body


def build_workspace(seed: int = SEED) -> Workspace:
    secrets = fake_secrets(rng_for(seed, "secrets"))
    material = parse_days(DAYS_SPRING)
    for iso, v in parse_days(DAYS_SUMMER).items():
        if iso in material:
            raise ValueError(f"day {iso} written in both note modules")
        material[iso] = v
    rng = rng_for(seed, "calendar")
    free = [d for d in days_between(START, END) if d not in material and not (VACATION[0] <= d <= VACATION[1])]
    weekdays = [d for d in free if date.fromisoformat(d).weekday() < 5]
    weekends = [d for d in free if date.fromisoformat(d).weekday() >= 5]
    n_weekend = N_DAILY - len(material) - len(weekdays)
    if n_weekend < 0 or n_weekend > len(weekends):
        raise ValueError(f"cannot make {N_DAILY} daily files from {len(material)} written days")
    extra = sorted(weekdays + rng.sample(weekends, n_weekend))

    files: list[WorkspaceFile] = []
    for iso in sorted(set(material) | set(extra)):
        frng = rng_for(seed, f"filler:{iso}")  # one stream per day: editing one day leaves the others alone
        mrng = rng_for(seed, f"mtime:{iso}")
        lang, body = material.get(iso, ("en", []))
        body = _fill_notes(list(body), secrets)
        if lang == "en":
            k = frng.choice((0, 1, 1, 2, 2, 3)) if iso in material else frng.randint(2, 4)
            head = next((i for i, n in enumerate(body) if n is not None and n.kind == "heading"), len(body))
            for note in filler_notes(frng, iso, k):  # filler goes among the day's first bullets
                body.insert(frng.randint(0, head), note)
                head += 1
            todo = todo_notes(frng, iso, frng.choice((0, 1, 2, 2, 3)))
            if todo:
                body += [None] + todo
        d = date.fromisoformat(iso)
        header = [f"# {iso} ({WEEKDAYS[lang][d.weekday()]})", ""]
        f = layout(f"memory/{iso}.md", "daily", header, body, day=iso)
        f.mtime = iso_time(d, mrng.randint(18, 23), mrng.randint(0, 59), mrng.randint(0, 59))
        files.append(f)

    mem = layout("MEMORY.md", "curated", [], _fill_notes(parse_body(MEMORY_MD, "en", START), secrets))
    mem.mtime = "2026-08-28T17:42:10Z"
    files.append(mem)
    for path in sorted(TOPICS):
        mtime, since, text = TOPICS[path]
        f = layout(path, "topic", [], _fill_notes(parse_body(text, TOPIC_LANG.get(path, "en"), since), secrets))
        f.mtime = mtime
        files.append(f)
    jrng = rng_for(seed, "junk")
    for path, text, mtime in junk_files(jrng, [f.day for f in files if f.day]):
        text = fill_placeholders(text, secrets)
        lines = text.rstrip("\n").split("\n")
        files.append(WorkspaceFile(path=path, tier="junk", lines=lines, notes=[], mtime=mtime))
    files.sort(key=lambda f: f.path)
    notes = [n for f in files for n in f.notes]
    keys = [n.key for n in notes if n.key]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"note keys used twice: {dupes}")
    return Workspace(files=files, secrets=secrets, notes=notes)


def materialize(ws: Workspace, out: Path) -> None:
    """Write the raw workspace folder (Markdown files, junk included) under ``out``."""
    for f in ws.files:
        p = out / f.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.text, encoding="utf-8", newline="\n")


# ------------------------------------------------------------------------------------------------ corpus

def _chunk_lang(f: WorkspaceFile, start: int, end: int) -> str:
    weight: dict[str, int] = {}
    for n in f.notes:
        lo, hi = max(start, n.first_line), min(end, n.last_line)
        if lo <= hi:
            weight[n.lang] = weight.get(n.lang, 0) + sum(len(x) for x in n.lines[lo - n.first_line: hi - n.first_line + 1])
    if not weight:
        return "en"
    return max(sorted(weight), key=lambda k: weight[k])


def build_corpus(ws: Workspace) -> list[dict]:
    """Chunk every file; one BEIR document per chunk, metadata as in the dataset card."""
    secret_values = sorted(ws.secrets.values())
    docs = []
    for f in ws.files:
        for c in chunk_markdown(f.text, CHUNK_TOKENS, CHUNK_OVERLAP):
            inside = [n for n in f.notes if n.first_line <= c.end_line and n.last_line >= c.start_line]
            if f.tier in IMPORTANCE:
                imp = IMPORTANCE[f.tier]
            else:
                imp = max([KIND_IMPORTANCE[n.kind] for n in inside] or [0.3])
            secret = any(s in c.text for s in secret_values)
            dup = sorted({n.dup for n in inside if n.dup})
            docs.append({
                "_id": f"{f.path}#L{c.start_line}-L{c.end_line}",
                "title": "",
                "text": c.text,
                "metadata": {
                    "path": f.path,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "timestamp": f"{f.day}T00:00:00Z" if f.day else None,
                    "mtime": f.mtime,
                    "importance": imp,
                    "group": GROUP,
                    "source": "memory",
                    "tier": f.tier,
                    "lang": _chunk_lang(f, c.start_line, c.end_line),
                    "contains_secret": secret,
                    "dup_group": dup[0] if dup else None,
                },
            })
    ids = [d["_id"] for d in docs]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate chunk ids")
    return docs


def doc_refs(docs: list[dict]) -> list[DocRef]:
    return [DocRef(d["_id"], d["metadata"]["path"], d["metadata"]["start_line"], d["metadata"]["end_line"],
                   d["metadata"]["tier"], d["metadata"]["contains_secret"], d["text"]) for d in docs]


# ------------------------------------------------------------------------------------------------ queries

@dataclass
class Q:
    category: str
    text: str
    targets: dict[str, int]
    lang: str = "en"
    ident: str | None = None
    context: list[tuple[str, str]] | None = None
    extra: dict = field(default_factory=dict)
    as_of: str | None = None  # fixed as_of (temporal questions); else computed from the targets
    qrels: dict[str, int] = field(default_factory=dict)
    id: str = ""


PROJECT_OF_PREFIX = {"ll": "Ledgerline", "pg": "Ledgerline", "obs": "Ledgerline", "host": "Ledgerline",
                     "tp": "Tidepool", "lucia": "Tidepool", "keiko": "Tidepool", "sp": "Sprout",
                     "sprout": "Sprout", "minjun": "Sprout", "hl": "the homelab", "bk": "the homelab",
                     "oc": "the agent setup", "ci": "CI"}
TEMPORAL_PHRASES = (("yesterday", 1), ("the day before yesterday", 2), ("two days ago", 2), ("2 days ago", 2),
                    ("three days ago", 3), ("3 days ago", 3), ("four days ago", 4), ("5 days ago", 5),
                    ("a week ago", 7))
TEMPORAL_TEMPLATES = {
    "any": ("what did I do {p}?", "what was I working on {p}?", "summarise my notes from {p}",
            "anything worth remembering from {p}?", "what happened {p}?"),
    "incident": ("what broke {p}?", "which error did I run into {p}?", "what did I have to fix {p}?"),
    "decision": ("what did I decide {p}?", "which decision did I make {p}?"),
    "project": ("what happened with {P} {p}?", "any {P} news from {p}?", "what did I note about {P} {p}?"),
}
N_TEMPORAL = 60
N_TEMPORAL_FOLLOWUPS = 6


def project_of(key: str) -> str | None:
    return PROJECT_OF_PREFIX.get(key.split("-", 1)[0])


def temporal_queries(ws: Workspace, seed: int) -> list[Q]:
    """Relative-time questions whose phrase resolves, against ``as_of``, to one daily file (or a week)."""
    rng = rng_for(seed, "temporal")
    daily = {f.day: f for f in ws.daily()}
    ok_days = sorted(d for d, f in daily.items() if not any(n.secret for n in f.notes)
                     and any(n.key for n in f.notes))
    cands = []
    for d in ok_days:
        f = daily[d]
        cands.append((d, "any", None))
        if any(n.kind == "incident" and n.key for n in f.notes):
            cands.append((d, "incident", None))
        if any(n.kind == "decision" and n.key for n in f.notes):
            cands.append((d, "decision", None))
        for p in sorted({project_of(n.key) for n in f.notes if n.key and project_of(n.key)}):
            cands.append((d, "project", p))
    rng.shuffle(cands)
    out: list[Q] = []
    used_days: dict[str, int] = {}
    n_follow = 0
    for d, kind, proj in cands:
        if len(out) >= N_TEMPORAL:
            break
        if used_days.get(d, 0) >= 2:
            continue
        day = date.fromisoformat(d)
        if kind == "project" and rng.random() < 0.4:
            phrase, offset = "last week", rng.randint(1, 6)
        else:
            phrase, offset = rng.choice(TEMPORAL_PHRASES)
        asof_day = day + timedelta(days=offset)
        if asof_day.isoformat() > END:
            continue
        if phrase == "last week":
            window = [(asof_day - timedelta(days=k)).isoformat() for k in range(1, 8)]
        else:
            window = [d]
        targets: dict[str, int] = {}
        for w in window:
            f = daily.get(w)
            if f is None or any(n.secret for n in f.notes):
                continue
            for n in f.notes:
                if not n.key:
                    continue
                if (kind == "any" or (kind == "incident" and n.kind == "incident")
                        or (kind == "decision" and n.kind == "decision")
                        or (kind == "project" and project_of(n.key) == proj)):
                    targets[n.key] = 2
        if not targets:
            continue
        tmpl = rng.choice(TEMPORAL_TEMPLATES[kind])
        text = tmpl.format(p=phrase, P=proj or "")
        as_of = iso_time(asof_day, rng.randint(8, 21), rng.randint(0, 59))
        resolved = sorted({ws_note_day(ws, k) for k in targets})
        q = Q("temporal-relative", text, targets, as_of=as_of,
              extra={"phrase": phrase, "resolves_to": resolved, "whole_day": kind == "any"})
        out.append(q)
        used_days[d] = used_days.get(d, 0) + 1
        # a follow-up that only makes sense after the first answer
        if kind == "any" and offset <= 2 and phrase != "last week" and n_follow < N_TEMPORAL_FOLLOWUPS:
            prev = (day - timedelta(days=1)).isoformat()
            pf = daily.get(prev)
            if pf is not None and not any(n.secret for n in pf.notes) and any(n.key for n in pf.notes):
                first = next(n for n in daily[d].notes if n.key)
                ctx = [("user", text), ("assistant", f"On {d} you wrote: " + first.lines[0].lstrip("- ").strip())]
                t2 = {n.key: 2 for n in pf.notes if n.key}
                n_follow += 1
                out.append(Q("temporal-relative", "and the day before that?", t2, context=ctx,
                             as_of=iso_time(asof_day, int(as_of[11:13]), min(59, int(as_of[14:16]) + 1)),
                             extra={"phrase": "the day before that", "resolves_to": [prev], "whole_day": True}))
    return out


def ws_note_day(ws: Workspace, key: str) -> str:
    for n in ws.notes:
        if n.key == key:
            return n.day or ""
    raise KeyError(key)


def authored_queries() -> list[Q]:
    qs: list[Q] = []
    for text, ident, targets in QM.EXACT:
        qs.append(Q("exact-identifier", text, dict(targets), ident=ident, extra={"identifier": ident}))
    for text, targets in QM.PARAPHRASE:
        qs.append(Q("paraphrase", text, dict(targets)))
    for fact in QM.FACTS:
        targets = {**fact.get("related", {}), **fact["old"], **fact["new"]}
        for text in fact["queries"]:
            lang = "es" if text.startswith("¿") else "en"
            qs.append(Q("knowledge-update", text, dict(targets), lang=lang,
                        extra={"fact": fact["fact"], "fact_since": fact["since"],
                               "current": sorted(fact["new"]), "superseded": sorted(fact["old"])}))
    for text, targets in QM.MULTI_HOP:
        qs.append(Q("multi-hop", text, dict(targets)))
    for text, lang, targets in QM.MULTILINGUAL:
        qs.append(Q("multilingual", text, dict(targets), lang=lang))
    for text in QM.NO_MEMORY:
        qs.append(Q("no-memory", text, {}, lang=_guess_lang(text)))
    for ctx, text in QM.NO_MEMORY_FOLLOWUPS:
        qs.append(Q("no-memory", text, {}, context=ctx))
    for text, lang, targets in QM.SECRET_BAIT:
        qs.append(Q("secret-bait", text, dict(targets), lang=lang))
    for cat, ctx, text, targets, ident in QM.FOLLOWUPS:
        extra = {"identifier": ident} if ident else {}
        if cat == "knowledge-update":
            fact = next(f for f in QM.FACTS if set(f["new"]) & {k for k, g in targets.items() if g == 2})
            extra = {"fact": fact["fact"], "fact_since": fact["since"], "current": sorted(fact["new"]),
                     "superseded": sorted(fact["old"])}
        qs.append(Q(cat, text, dict(targets), ident=ident, context=ctx, extra=extra))
    return qs


def _guess_lang(text: str) -> str:
    if any("\uac00" <= ch <= "\ud7af" for ch in text):
        return "ko"
    if any("\u3040" <= ch <= "\u30ff" for ch in text):
        return "ja"
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return "zh"
    if any(ch in "¿¡ñá" for ch in text) or text.startswith("vale"):
        return "es"
    return "en"


@dataclass
class Dropped:
    query: str
    category: str
    reason: str


def label_queries(ws: Workspace, docs: list[dict], seed: int) -> tuple[list[Q], list[Dropped]]:
    """Resolve targets to qrels, enforce the category rules, set ``as_of``, ids and splits."""
    labeler = Labeler(ws.notes, doc_refs(docs))
    text_of = {d["_id"]: d["text"] for d in docs}
    arng = rng_for(seed, "as_of")
    kept: list[Q] = []
    dropped: list[Dropped] = []
    for q in authored_queries() + temporal_queries(ws, seed):
        if q.category == "no-memory":
            q.qrels = {}
        else:
            cap = 1 if q.category == "temporal-relative" else 2
            q.qrels, note_grades = labeler.resolve(q.targets, restate_cap=cap)
            if not any(g > 0 for g in q.qrels.values()):
                raise ValueError(f"query {q.text!r} has no relevant chunk")
            if q.category == "paraphrase":
                clash = sorted(set().union(*[shared_content_words(q.text, text_of[d])
                                             for d, g in q.qrels.items() if g == 2]))
                if clash:
                    dropped.append(Dropped(q.text, q.category, "shares words with its answer: " + ", ".join(clash)))
                    continue
            if q.category == "multi-hop":
                keys = [k for k, g in q.targets.items() if g == 2]
                cover = labeler.covering_chunks(keys)
                if cover:
                    dropped.append(Dropped(q.text, q.category, "one chunk answers every hop: " + cover[0]))
                    continue
            if q.category == "multilingual":
                q.extra["note_lang"] = sorted({labeler.note(k).lang for k, g in q.targets.items() if g == 2})
            if q.as_of is None:
                since = [_note_date(labeler.note(k)) for k, g in note_grades.items() if g > 0]
                since += [q.extra["fact_since"]] if "fact_since" in q.extra else []
                lower = date.fromisoformat(max(since))
                d = min(lower + timedelta(days=arng.randint(1, 24)), date.fromisoformat(END))
                q.as_of = iso_time(d, arng.randint(7, 22), arng.randint(0, 59))
            # nothing written on or after the as_of day can be judged (propagated labels are dropped;
            # an explicit target there is an authoring error)
            for k, g in q.targets.items():
                if g > 0 and _note_date(labeler.note(k)) >= q.as_of[:10]:
                    raise ValueError(f"query {q.text!r}: target {k} is not older than as_of {q.as_of}")
            q.qrels = {d: g for d, g in q.qrels.items() if (day_of_path(d.split("#")[0]) or "") < q.as_of[:10]}
            if q.ident:
                for k, g in q.targets.items():
                    if g == 2 and q.ident not in labeler.note(k).text:
                        raise ValueError(f"identifier {q.ident!r} not in target note {k}")
                # the answer to an exact-identifier question is a chunk that contains the identifier;
                # restatements and duplicates without it are only related; other mentions are related
                q.qrels = {d: (1 if g == 2 and q.ident not in text_of[d] else g) for d, g in q.qrels.items()}
                for d in labeler.mentions(q.ident, q.as_of[:10]):
                    q.qrels.setdefault(d, 1)
        if q.as_of is None:
            d = date.fromisoformat(START) + timedelta(days=arng.randint(1, 181))
            q.as_of = iso_time(d, arng.randint(7, 23), arng.randint(0, 59))
        kept.append(q)
    counters: dict[str, int] = {}
    for q in sorted(kept, key=lambda q: CATEGORIES.index(q.category)):
        counters[q.category] = counters.get(q.category, 0) + 1
        q.id = f"ws-{ABBR[q.category]}-{counters[q.category]:03d}"
    kept.sort(key=lambda q: q.id)
    return kept, dropped


def _note_date(n: Note) -> str:
    return n.day or n.since or START


def assign_splits(queries: list[Q], seed: int) -> dict[str, str]:
    """~50/50 per category: ids ranked by SHA-256 of ``seed:id``, alternating train/test."""
    split: dict[str, str] = {}
    for cat in CATEGORIES:
        ids = sorted((q.id for q in queries if q.category == cat),
                     key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
        for n, qid in enumerate(ids):
            split[qid] = "train" if n % 2 == 0 else "test"
    return split


def query_record(q: Q, split: str) -> dict:
    md: dict = {"as_of": q.as_of, "category": q.category, "group": GROUP, "split": split, "lang": q.lang}
    if q.context:
        md["context"] = [{"role": r, "content": t} for r, t in q.context]
        md["followup"] = True
    for k in sorted(q.extra):
        if k != "fact_since":
            md[k] = q.extra[k]
    return {"_id": q.id, "text": q.text, "metadata": md}


# ------------------------------------------------------------------------------------------------ output

def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(dumps(r) + "\n" for r in rows), encoding="utf-8", newline="\n")


@dataclass
class Bench:
    ws: Workspace
    docs: list[dict]
    queries: list[Q]
    splits: dict[str, str]
    dropped: list[Dropped]
    log: list[dict]


def generate(seed: int = SEED) -> Bench:
    from evalkit.data.workspace_log import build_query_log

    ws = build_workspace(seed)
    docs = build_corpus(ws)
    queries, dropped = label_queries(ws, docs, seed)
    splits = assign_splits(queries, seed)
    log = build_query_log(ws, docs, queries, seed)
    return Bench(ws, docs, queries, splits, dropped, log)


def write(bench: Bench, out: Path) -> list[Path]:
    from evalkit.data.workspace_card import render_card

    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    write_jsonl(out / "corpus.jsonl", bench.docs)
    write_jsonl(out / "queries.jsonl", [query_record(q, bench.splits[q.id]) for q in bench.queries])
    for s in ("train", "test"):
        rows = ["query-id\tcorpus-id\tscore"]
        for q in bench.queries:
            if bench.splits[q.id] == s:
                rows += [f"{q.id}\t{d}\t{g}" for d, g in sorted(q.qrels.items())]
        (out / "qrels" / f"{s}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8", newline="\n")
    write_jsonl(out / "querylog.jsonl", bench.log)
    (out / "README.md").write_text(render_card(bench), encoding="utf-8", newline="\n")
    return [out / p for p in OUTPUT_FILES]


OUTPUT_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv", "querylog.jsonl", "README.md")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evalkit.data.workspace_gen", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: datasets/memory-workspace)")
    ap.add_argument("--stats", action="store_true", help="print the counts tables (as in the card) and exit")
    ap.add_argument("--materialize", type=Path, metavar="DIR", help="also write the raw workspace folder to DIR")
    ap.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    bench = generate(args.seed)
    if args.stats:
        from evalkit.data.workspace_card import stats_markdown
        sys.stdout.write(stats_markdown(bench))
        return 0
    paths = write(bench, args.out)
    if args.materialize:
        materialize(bench.ws, args.materialize)
        print(f"workspace written to {args.materialize}", file=sys.stderr)
    print(f"wrote {len(paths)} files to {args.out} ({len(bench.docs)} chunks, {len(bench.queries)} queries, "
          f"{len(bench.log)} log events)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
