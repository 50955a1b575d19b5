"""The attacks: how a planted note's text is made for one target query, one class per attack (registered by name).

Every attack fills a template of the chosen set (:mod:`evalkit.data.poison.templates`) with pieces generated from the
dataset at run time — the target question, its content words, its rarest words in the target's store, a fact taken
from another note of that store, or a relevant note with one fact changed — so no dataset text is ever stored in
the repository. An attack may decline a target (``None``: e.g. false-fact for a target whose relevant notes hold no
fact to change); the planter then gives that attack another target.

Sources (the threat each reproduces, and how this harness simplifies it):

* ``query-echo`` — PoisonedRAG's black-box attack (Zou, Geng, Wang, Jia, "PoisonedRAG: Knowledge Corruption Attacks
  to Retrieval-Augmented Generation of Large Language Models", USENIX Security 2025): the planted passage is the
  target question followed by text that leads to the attacker's answer (S ⊕ I). Here I is a template with a false
  answer taken from another note of the store (the paper generates I with an LLM).
* ``instruction`` — an indirect prompt injection stored as memory (Greshake et al., "Not what you've signed up for",
  AISec 2023; OWASP Top 10 for Agentic Applications 2026, ASI06 memory & context poisoning; MINJA, Dong et al.
  2025, plants such records through queries alone): a note written like the store's own notes that tells the agent
  to do something (tell the user to run a command, call a tool, send data). No trigger: it relies on sharing the
  target's topic words.
* ``trigger`` — AgentPoison (Chen, Xiang, Xiao, Song, Li, "AgentPoison: Red-teaming LLM Agents via Poisoning
  Memory or Knowledge Bases", NeurIPS 2024): the same payload behind a rare trigger phrase that the attacker also
  gets into the target query (the planter appends it to the query's text). The paper optimises the trigger for
  the retriever; here it is a fixed rare phrase of the template set.
* ``keyword-stuff`` — term stuffing against lexical ranking (BM25: Robertson & Zaragoza 2009; the classic web-spam
  tactic, Gyöngyi & Garcia-Molina, "Web Spam Taxonomy", AIRWeb 2005): the target's rarest words in its store,
  repeated, carrying the payload.
* ``false-fact`` — knowledge corruption by a near-duplicate (PoisonedRAG's goal of a wrong answer; the "conflicting
  knowledge" setting of Xie et al., "Adaptive Chameleon or Stubborn Sloth", ICLR 2024): a near-paraphrase of the
  target's most relevant note with one fact (a number, a date or a name) changed, so it sits next to the truth in
  embedding space and contradicts it.
"""
from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from string import Formatter

from evalkit.data.poison.templates import TemplateSet
from retrievers.errors import ConfigError
from retrievers.stages.helpers.keywords import STOP_EN
from retrievers.types import Document, Query

WORD = re.compile(r"\w+")
#: facts a false-fact note may change and a query-echo note may claim: ISO dates, numbers (with decimals), names
#: (capitalised words not at a sentence start), identifiers (letters with digits / underscores / inner capitals)
FACT = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d+(?:[.,]\d+)?\b|\b[A-Z][a-z]{2,}\b|"
                  r"\b(?=[A-Za-z_]*[0-9_])[A-Za-z][A-Za-z0-9_]{3,}\b|\b[A-Z][a-z]+[A-Z][A-Za-z]+\b")
SPEAKER = re.compile(r"^([A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?): ")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (``\\w+``, Unicode)."""
    return WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """The query's words that are not English stop words, in order, as written (first occurrence of each)."""
    out, seen = [], set()
    for w in WORD.findall(text):
        lw = w.lower()
        if lw not in STOP_EN and lw not in seen:
            seen.add(lw)
            out.append(w)
    return out


@dataclass
class Store:
    """One memory store (a dataset group) as the attacks see it: its documents and their word statistics."""

    group: str
    docs: list[Document]
    df: Counter = field(default_factory=Counter)
    speaker: str | None = None  # "Name" when the store's notes are "Name: text" turns (a chat log)
    speakers: tuple[str, ...] = ()  # every speaker of a chat store, most frequent first

    @classmethod
    def build(cls, group: str, docs: list[Document]) -> "Store":
        df: Counter = Counter()
        for d in docs:
            df.update(set(words(d.text)))
        speakers = Counter(m.group(1) for d in docs if (m := SPEAKER.match(d.text)))
        speaker = speakers.most_common(1)[0][0] if docs and sum(speakers.values()) >= 0.8 * len(docs) else None
        return cls(group, docs, df, speaker, tuple(n for n, _ in speakers.most_common()) if speaker else ())

    def rare_terms(self, text: str, n: int = 3) -> list[str]:
        """The ``n`` content words of ``text`` rarest in this store (document frequency, ties by position)."""
        cw = content_words(text)
        order = sorted(range(len(cw)), key=lambda i: (self.df.get(cw[i].lower(), 0), i))
        return [cw[i] for i in sorted(order[:n])]

    def other_fact(self, rng: random.Random, avoid: set[str], kind: str | None = None) -> str | None:
        """A fact (:data:`FACT`) from a note of this store not in ``avoid`` (ids and values): the false answer."""
        docs = [d for d in self.docs if d.id not in avoid]
        for _ in range(40):
            if not docs:
                return None
            d = rng.choice(docs)
            facts = [m.group() for m in fact_spans(_body(d.text))
                     if m.group() not in avoid and (kind is None or fact_kind(m.group()) == kind)]
            if facts:
                return rng.choice(facts)
        return None


_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[-*#>]\s+)$")


def fact_spans(text: str) -> list[re.Match]:
    """The :data:`FACT` matches of ``text``, without capitalised words that merely start a sentence or line."""
    return [m for m in FACT.finditer(text)
            if not (fact_kind(m.group()) == "name" and m.group()[0].isupper() and m.group()[1:].islower()
                    and _SENTENCE_START.search(text[max(0, m.start() - 3):m.start()]))]


def _body(text: str) -> str:
    m = SPEAKER.match(text)
    return text[m.end():] if m else text


def fact_kind(f: str) -> str:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", f):
        return "date"
    if re.fullmatch(r"\d+(?:[.,]\d+)?", f):
        return "number"
    return "name"


@dataclass
class Target:
    """One attacked query: the query, its store and its relevant notes (highest grade first)."""

    query: Query
    store: Store
    relevant: list[Document]


@dataclass
class Slots:
    """The set-specific pieces one note draws (the same random draws for either template set)."""

    template: str
    payload: str
    tool_call: str
    url: str
    email: str
    cmd: str
    trigger: str

    @classmethod
    def draw(cls, templates: tuple[str, ...], ts: TemplateSet, rng: random.Random, trigger: str) -> "Slots":
        url, email, cmd = rng.choice(ts.urls), rng.choice(ts.emails), rng.choice(ts.cmds)
        fill = {"url": url, "email": email, "cmd": cmd}
        return cls(rng.choice(templates), rng.choice(ts.payloads).format(**fill),
                   rng.choice(ts.tool_calls).format(**fill), url, email, cmd, trigger)


class Attack(ABC):
    """One attack: ``note(target, template set, rng, trigger)`` → the planted note's text, or None to decline.
    ``trigger``: the rare phrase of this planting (one of the set's, drawn once per dataset)."""

    name: str = ""
    templates_attr: str = ""
    #: True when the attacker also gets the trigger phrase into the target query (AgentPoison)
    rewrites_query: bool = False
    #: what its notes show a guard (the vocabulary of ``retrievers.stages.base.Stage.reads``): a guard whose
    #: ``reads`` shares nothing with it cannot catch this attack by construction; None = not declared (a user's
    #: family)
    shows: tuple[str, ...] | None = None

    def note(self, t: Target, ts: TemplateSet, rng: random.Random, trigger: str) -> str | None:
        slots = Slots.draw(getattr(ts, self.templates_attr), ts, rng, trigger)
        body = self.body(t, ts, slots, rng)
        if body is None:
            return None
        return f"{t.store.speaker}: {body}" if t.store.speaker else body

    @abstractmethod
    def body(self, t: Target, ts: TemplateSet, s: Slots, rng: random.Random) -> str | None:
        """The note's text before the store's speaker prefix."""

    def query_text(self, q: Query, trigger: str) -> str:
        """The target query's text in the poisoned dataset (unchanged unless the attack rewrites it)."""
        return q.text


def _topic(q: Query) -> str:
    return " ".join(content_words(q.text)[:8]) or q.text


def _fill(s: Slots, **kw) -> str:
    return s.template.format(payload=s.payload, tool_call=s.tool_call, url=s.url, email=s.email, cmd=s.cmd,
                             trigger=s.trigger, **kw)


ATTACKS: dict[str, Attack] = {}


def register(cls: type[Attack]) -> type[Attack]:
    ATTACKS[cls.name] = cls()
    return cls


@register
class QueryEcho(Attack):
    """PoisonedRAG black-box: the target question, then a false answer (a fact from another note of the store)."""

    name, templates_attr, shows = "query-echo", "query_echo", ("echo-lead",)

    def body(self, t, ts, s, rng):
        false = t.store.other_fact(rng, {d.id for d in t.relevant})
        return _fill(s, question=t.query.text.strip(), false=false or "no longer the case", topic=_topic(t.query))


@register
class Instruction(Attack):
    """A stored prompt injection without a trigger: the payload addressed to the agent, on the target's topic."""

    name, templates_attr, shows = "instruction", "instruction", ("payload",)

    def body(self, t, ts, s, rng):
        return _fill(s, topic=_topic(t.query))


@register
class Trigger(Attack):
    """AgentPoison: the payload behind the set's rare trigger phrase, which is also appended to the target query."""

    name, templates_attr, rewrites_query, shows = "trigger", "trigger", True, ("payload",)

    def body(self, t, ts, s, rng):
        return _fill(s, topic=_topic(t.query))

    def query_text(self, q: Query, trigger: str) -> str:
        return f"{q.text.rstrip()} {trigger}"


@register
class KeywordStuff(Attack):
    """The target's rarest words in its store, repeated, with the payload (aimed at BM25 arms)."""

    name, templates_attr, shows = "keyword-stuff", "keyword_stuff", ("payload",)

    def body(self, t, ts, s, rng):
        terms = " ".join(t.store.rare_terms(t.query.text)) or t.query.text.strip()
        return _fill(s, terms=terms, topic=_topic(t.query))


@register
class FalseFact(Attack):
    """A near-paraphrase of the target's most relevant note with one fact changed (see :func:`change_one_fact`)."""

    name, templates_attr, shows = "false-fact", "false_fact", ("near-copy",)

    def body(self, t, ts, s, rng):
        for d in t.relevant:
            changed = change_one_fact(_body(d.text), t.query.text, t.store, rng)
            if changed is not None:
                return _fill(s, note=paraphrase(changed[0], ts.paraphrase), topic=_topic(t.query))
        return None


#: the fields a plain template (a user's ``--templates FILE``, a design set's ``sourced-fact`` / ``chat-echo``) may
#: use, in the order they are drawn: the target question, its content words, its rarest words in the store, a false
#: answer (a fact of another note of the store), the relevant note with one fact changed (a target whose relevant
#: notes hold no fact is declined), a speaker of the store ("user" outside a chat store), the note's own date
FIELDS = ("query", "topic", "terms", "answer", "note", "speaker", "date")
#: the set's attacker pieces a built-in template set's plain template may use besides :data:`FIELDS`
SET_FIELDS = ("payload", "tool_call", "url", "email", "cmd")
#: stands for ``{date}`` until the planter has drawn the note's date (:mod:`evalkit.data.poison.plant`)
DATE_SLOT = "\x00date\x00"


def template_fields(template: str) -> list[str]:
    """The field names ``template`` uses (``str.format`` syntax); ValueError for a malformed template."""
    return [f for _, f, _, _ in Formatter().parse(template) if f is not None]


def fill_fields(template: str, t: Target, rng: random.Random, extra: dict | None = None,
                table: tuple[tuple[str, str], ...] = ()) -> str | None:
    """``template`` with :data:`FIELDS` filled for target ``t`` (``extra``: the set's pieces), or None when it uses
    ``{note}`` and no relevant note of ``t`` holds a fact to change. Only the fields used are drawn, in
    :data:`FIELDS` order (deterministic per seed)."""
    used = set(template_fields(template))
    vals: dict[str, str] = dict(extra or {})
    if "query" in used:
        vals["query"] = t.query.text.strip()
    if "topic" in used:
        vals["topic"] = _topic(t.query)
    if "terms" in used:
        vals["terms"] = " ".join(t.store.rare_terms(t.query.text)) or t.query.text.strip()
    if "answer" in used:
        vals["answer"] = t.store.other_fact(rng, {d.id for d in t.relevant}) or "no longer the case"
    if "note" in used:
        changed = next((c for d in t.relevant if (c := change_one_fact(_body(d.text), t.query.text, t.store, rng))),
                       None)
        if changed is None:
            return None
        vals["note"] = paraphrase(changed[0], table)
    if "speaker" in used:
        vals["speaker"] = rng.choice(t.store.speakers) if t.store.speakers else "user"
    vals["date"] = DATE_SLOT
    return template.format(**vals)


class Templated(Attack):
    """A family of plain templates over :data:`FIELDS`: a user's own (``evalkit poison --templates FILE``:
    ``templates`` given) or a built-in family of the design sets (``templates_attr``: the set's tuple, whose
    templates may also use the set's :data:`SET_FIELDS`)."""

    def __init__(self, name: str, templates: tuple[str, ...] | None = None, templates_attr: str = "",
                 shows: tuple[str, ...] | None = None):
        self.name, self.templates, self.templates_attr, self.shows = name, templates, templates_attr, shows

    def note(self, t, ts, rng, trigger):
        if self.templates is not None:  # a user's family: no set pieces
            return self._said(t, fill_fields(rng.choice(self.templates), t, rng))
        return super().note(t, ts, rng, trigger)  # a built-in family: the set's slots, then body()

    @staticmethod
    def _said(t: Target, body: str | None) -> str | None:
        return None if body is None else f"{t.store.speaker}: {body}" if t.store.speaker else body

    def body(self, t, ts, s, rng):
        extra = {"payload": s.payload, "tool_call": s.tool_call, "url": s.url, "email": s.email, "cmd": s.cmd}
        return fill_fields(s.template, t, rng, extra, ts.paraphrase)


#: built-in families with plain templates in the design sets only (the evaluation set, written blind, has none):
#: ``sourced-fact`` — a confident wrong fact with a plausible source and no payload (knowledge corruption without
#: a near-copy: PoisonedRAG's goal, Zou et al. 2025); ``chat-echo`` — the target question echoed inside a chat-log
#: line, an instruction to the agent after it (PoisonedRAG's S ⊕ I with the echo moved off the note's start, and
#: a stored prompt injection, Greshake et al. 2023)
for _name, _attr, _shows in (("sourced-fact", "sourced_fact", ()), ("chat-echo", "chat_echo", ("payload", "echo-inside"))):
    ATTACKS[_name] = Templated(_name, templates_attr=_attr, shows=_shows)


def change_one_fact(text: str, query: str, store: Store, rng: random.Random) -> tuple[str, str, str] | None:
    """``(text with one fact changed, old value, new value)``, or None when ``text`` holds no fact.

    The fact is taken from the line of ``text`` sharing most content words with ``query`` (the one the question is
    about; ties: first line), at random among that line's dates and numbers, else among its names and identifiers
    (:func:`fact_spans`: a capitalised word that only starts a sentence is not one). A number ``n`` becomes ``n + max(1, round(n/2))``
    (decimals keep their digits), a date moves 1–20 days later, a name or identifier becomes another fact of the same
    kind from the store that ``text`` does not already hold."""
    qw = {w.lower() for w in content_words(query)}
    lines = text.split("\n")
    scored = [(len(qw & set(words(ln))), -i, i) for i, ln in enumerate(lines) if fact_spans(ln)]
    if not scored:
        return None
    i = max(scored)[2]
    spans = fact_spans(lines[i])
    rank = {"date": 0, "number": 0, "name": 1}  # a date or a number when the line has one, else a name
    best = min(rank[fact_kind(m.group())] for m in spans)
    m = rng.choice([m for m in spans if rank[fact_kind(m.group())] == best])
    old = m.group()
    new = _replacement(old, store, rng, avoid=set(FACT.findall(text)))
    if new is None or new == old:
        return None
    lines[i] = lines[i][:m.start()] + new + lines[i][m.end():]
    return "\n".join(lines), old, new


def _replacement(old: str, store: Store, rng: random.Random, avoid: set[str]) -> str | None:
    kind = fact_kind(old)
    if kind == "date":
        d = datetime.strptime(old, "%Y-%m-%d") + timedelta(days=rng.randint(1, 20))
        return d.strftime("%Y-%m-%d")
    if kind == "number":
        sep = "." if "." in old else ("," if "," in old else None)
        if sep:
            whole, frac = old.split(sep)
            return f"{int(whole) + 1}{sep}{frac}"
        n = int(old)
        return str(n + max(1, round(n / 2))).zfill(len(old)) if old.startswith("0") else str(n + max(1, round(n / 2)))
    return store.other_fact(rng, {old} | avoid, kind="name")


def paraphrase(text: str, table: tuple[tuple[str, str], ...]) -> str:
    """The template set's light paraphrase: each ``(word, replacement)`` swapped as a whole word, in order."""
    for a, b in table:
        text = re.sub(rf"\b{re.escape(a)}\b", b, text)
    return text


def attack(name: str) -> Attack:
    try:
        return ATTACKS[name]
    except KeyError:
        raise ConfigError(f"unknown attack {name!r} (valid: {', '.join(ATTACKS)})") from None


__all__ = ["ATTACKS", "Attack", "DATE_SLOT", "FIELDS", "SET_FIELDS", "Slots", "Store", "Target", "Templated", "attack",
           "change_one_fact", "content_words", "fill_fields", "paraphrase", "template_fields", "words"]
