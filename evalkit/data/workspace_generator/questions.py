"""Labelled queries of the memory-workspace benchmark: the authored material of ``workspace_queries`` plus
generated temporal questions, resolved to graded chunk qrels (rules in ``workspace_labels``), checked per
category, dated (``as_of``), numbered and split.

Checks that drop an authored query (reported in the card): a paraphrase that shares a content word with a
grade-2 chunk, a multi-hop question that one chunk answers alone. Checks that stop the generator (authoring
errors): a query with no relevant chunk, an identifier missing from its target note, a target inside a junk
or secret chunk, a target not older than the query's ``as_of``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from evalkit.data.groups import GROUP_SEED, group_split, groups_of_sets
from evalkit.data.workspace_generator import queries as QM
from evalkit.data.workspace_generator.labels import Labeler, shared_content_words
from evalkit.data.workspace_generator.model import (
    ABBR,
    CATEGORIES,
    END,
    GROUP,
    START,
    Workspace,
    doc_refs,
    iso_time,
    rng_for,
)


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
    evidence: dict[str, int] = field(default_factory=dict)  # the qrels over the files as at the end (the split's)
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
                        extra={"fact": fact["fact"], "fact_since": fact["since"]}))
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
            extra = {"fact": fact["fact"], "fact_since": fact["since"]}
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
    """Resolve targets to qrels, enforce the category rules, set ``as_of`` and number the queries."""
    labeler = Labeler(ws.notes, doc_refs(docs), placed=[(v.name, n) for f in ws.files for v in ws.versions(f)
                                                        for n in v.notes], day_of=ws.note_day)
    text_of = {d["_id"]: d["text"] for d in docs}
    arng = rng_for(seed, "as_of")
    kept: list[Q] = []
    dropped: list[Dropped] = []
    for q in authored_queries() + temporal_queries(ws, seed):
        if q.category == "no-memory":
            q.qrels = {}
        else:
            cap = 1 if q.category == "temporal-relative" else 2
            # as at the end (the checks below read the files as they end up), then as of the query
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
                since = [ws.note_day(labeler.note(k)) for k, g in note_grades.items() if g > 0]
                since += [q.extra["fact_since"]] if "fact_since" in q.extra else []
                lower = date.fromisoformat(max(since))
                d = min(lower + timedelta(days=arng.randint(1, 24)), date.fromisoformat(END))
                q.as_of = iso_time(d, arng.randint(7, 22), arng.randint(0, 59))
            # nothing written on or after the as_of day can be judged (propagated labels are dropped;
            # an explicit target there is an authoring error), and only what the store held at as_of: an evergreen
            # file as it stood then (labels rule 7)
            for k, g in q.targets.items():
                if g > 0 and ws.note_day(labeler.note(k)) >= q.as_of[:10]:
                    raise ValueError(f"query {q.text!r}: target {k} is not older than as_of {q.as_of}")
            if q.ident:
                for k, g in q.targets.items():
                    if g == 2 and q.ident not in labeler.note(k).text:
                        raise ValueError(f"identifier {q.ident!r} not in target note {k}")
            q.qrels = _judged(labeler, q, cap, text_of, end=False)
            q.evidence = _judged(labeler, q, cap, text_of, end=True)
            if not any(g > 0 for g in q.qrels.values()):
                raise ValueError(f"query {q.text!r} has no relevant chunk before its as_of")
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


def _judged(labeler: Labeler, q: Q, cap: int, text_of: dict[str, str], end: bool) -> dict[str, int]:
    """``q``'s qrels as of its ``as_of`` (labels rule 7), or — ``end`` — over the files as at the end (daily files
    before its day, evergreen files as they end up: the evidence the split groups by, one chunk set per note
    whatever version a query reads)."""
    qrels, _ = labeler.resolve(q.targets, restate_cap=cap, as_of=q.as_of, end=end)
    if q.ident:
        # the answer to an exact-identifier question is a chunk that contains the identifier;
        # restatements and duplicates without it are only related; other mentions are related
        qrels = {d: (1 if g == 2 and q.ident not in text_of[d] else g) for d, g in qrels.items()}
        for d in labeler.mentions(q.ident, q.as_of, end=end):
            qrels.setdefault(d, 1)
    return qrels


def _root(parent: dict[str, str], q: str) -> str:
    while parent.get(q, q) != q:
        q = parent[q]
    return q


def assign_splits(queries: list[Q], seed: int, docs: list[dict]) -> dict[str, str]:
    """Train / test by **evidence group**, about 50/50 per category: queries whose relevant chunks (grade > 0) are
    the same text — over the files as at the end, or as of the queries (a version of an evergreen file) — are one
    group and land on one side (:func:`evalkit.data.groups.group_split`, groups in seeded
    hash order, each to the side whose share of its category is lower). A split by query put 108 of 182 judged test
    queries beside a train query with exactly the same relevant chunks."""
    text_of = {d["_id"]: d["text"] for d in docs}
    sets = {view: {q.id: frozenset(text_of[d] for d, g in getattr(q, view).items() if g > 0) for q in queries}
            for view in ("evidence", "qrels")}
    train, test = group_split([q.id for q in queries], groups_of_sets(sets["evidence"]), 0.5,
                              seed=f"{GROUP_SEED}:{seed}", strata={q.id: q.category for q in queries})
    side = {**{q: "train" for q in train}, **{q: "test" for q in test}}
    # queries that read the same chunks of an older version (different notes at the end, one chunk then) join one
    # group too: a group split across the sides goes whole to the side holding most of it (ties: its first query's)
    of: dict[str, str] = {}
    for view in ("evidence", "qrels"):
        for q, label in sorted(groups_of_sets(sets[view]).items()):
            a, b = _root(of, q), _root(of, label[2:])
            if a != b:
                of[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for q in sorted(side):
        members.setdefault(_root(of, q), []).append(q)
    for root, qs in sorted(members.items()):
        n_train = sum(side[q] == "train" for q in qs)
        if 0 < n_train < len(qs):
            to = "train" if 2 * n_train > len(qs) else "test" if 2 * n_train < len(qs) else side[root]
            for q in qs:
                side[q] = to
    return side


def query_record(q: Q, split: str) -> dict:
    md: dict = {"as_of": q.as_of, "category": q.category, "group": GROUP, "split": split, "lang": q.lang}
    if q.context:
        md["context"] = [{"role": r, "content": t} for r, t in q.context]
        md["followup"] = True
    for k in sorted(q.extra):
        md["changed_on" if k == "fact_since" else k] = q.extra[k]
    return {"_id": q.id, "text": q.text, "metadata": md}
