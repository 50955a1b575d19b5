"""Plant attacks into a dataset: a new :class:`~retrievers.types.Dataset` with planted notes, labelled.

The rules (``evalkit poison``; :func:`plant`):

* **Targets** are judged queries (at least one relevant note in the corpus), chosen with the seed: ``targets`` =
  a number, ``"all"`` or a list of query ids (an unknown id is an error). Each target is attacked by exactly one
  attack, assigned in turn over the shuffled targets (an attack that cannot attack a target — false-fact without a
  fact to change — passes it to the next attack), so one dataset measures every attack on disjoint targets.
* **How many notes.** ``rate`` R is the planted share of a memory store (a dataset group): planted / the store's own
  notes. *Shared* (the default): every planted note sits in its target's store, seen by every query of that store
  from its date on; a store of ``n`` notes gets ``round(R·n)`` planted notes, ``per_target`` (default 1) per target, so
  ``round(R·n) // per_target`` of its queries are targets (``targets`` = N caps the total). *Isolated*
  (``isolate``): each target is attacked alone — its notes are scoped to it (document metadata ``visible_to``,
  :mod:`retrievers.index.visibility`), so the store it searches holds the store's own notes plus its own planted ones and
  nothing else planted; it gets ``per_target`` notes, or ``max(1, round(R·n))`` from the rate. This is PoisonedRAG's
  per-target protocol, and the only way a small store (memory-workspace: 181 notes, where 0.1 % is a fifth of a note)
  can be measured on many targets; the actual rate per target store is recorded.
* **When.** A planted note is dated before its target's ``as_of`` (it was written earlier): uniform (seeded, whole
  seconds) between ``as_of − max_age_days`` — or, when later, an hour after the target's newest dated relevant note
  (the attacker writes after the truth) — and an hour before ``as_of``; ``created`` = ``timestamp`` = that time, so
  under the strict as-of protocol the target sees it and no query asked before it does. A dataset whose queries carry no ``as_of`` cannot date notes
  before their targets: an error, unless ``undated`` (then notes are undated: always visible).
* **Where and how it looks.** In the target's group, shaped like the store's own auto-captured notes: the path,
  importance, source, tier and speaker of the newest dated note written before it (its ``YYYY-MM-DD`` replaced by the
  planting date; a later chunk of that day's file when the file exists), ``mtime`` = the planting time, a chat
  store's ``Name: `` prefix. Ids are neutral (``path#Ls-e`` or ``<id>+n``): nothing a retrieval stage reads names it.
* **Labels**, in document metadata only: ``poison`` (the attack), ``poison_target`` (the attacked query ids: its own
  target; for the trigger attack in a shared store every trigger target of that store asked after the note was
  written, which all carry the phrase: a note is never labelled for a query asked before it),
  ``poison_templates`` (the template set). Never in the qrels. The trigger attack appends its phrase to its targets'
  text (the attacker controls part of the question, as in AgentPoison): one phrase of the set in a shared store; in
  an isolated planting a made-up phrase per target (BM25's document frequencies are those of the whole group, hidden
  notes included, so a phrase shared by every target's notes would weaken each target's trigger).
* Deterministic for a seed: the same dataset, configuration and seed give the same planted dataset.

The dataset's ``info["poison"]`` records the configuration, the targets per attack and the actual rates.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, replace
from typing import Sequence

from evalkit.data.poison.attacks import ATTACKS, DATE_SLOT, SPEAKER, Attack, Store, Target, Templated, attack
from evalkit.data.poison.template_file import TemplateFile
from evalkit.data.poison.templates import TEMPLATE_SETS, template_set
from retrievers.errors import ConfigError
from retrievers.types import DataError, Dataset, Document, format_time
from retrievers.index.visibility import VISIBLE_TO

HOUR = 3600.0
DAY = 86400.0
FORMAT = 1
POISON, POISON_TARGET, POISON_TEMPLATES = "poison", "poison_target", "poison_templates"
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: metadata a planted note copies from the store's note it imitates
MIMIC = ("source", "tier", "lang", "session", "speaker", "category", "scope")


@dataclass(frozen=True)
class PlantConfig:
    """What to plant (see the module docstring). ``targets``: an int, ``"all"`` or query ids."""

    attacks: tuple[str, ...]
    targets: int | str | tuple[str, ...] = "all"
    per_target: int | None = None
    rate: float | None = None
    seed: int = 0
    templates: str = "evaluation"
    isolate: bool = False
    undated: bool = False
    max_age_days: float = 14.0
    #: a user's own templates (``--templates FILE``): ``attacks`` then names its families, ``templates`` is ignored
    custom: TemplateFile | None = None


def _attacks(cfg: PlantConfig) -> dict[str, Attack]:
    """The attacks of ``cfg`` by name: registered ones, or the families of the user's template file."""
    if cfg.custom is not None:
        fams = cfg.custom.families
        for a in cfg.attacks:
            if a not in fams:
                raise ConfigError(f"--attacks: {a!r} is not a family of {cfg.custom.path} (families: "
                                  f"{', '.join(fams)})")
        return {a: Templated(a, fams[a]) for a in cfg.attacks}
    ts = template_set(cfg.templates)
    out = {a: attack(a) for a in cfg.attacks}
    for a, at in out.items():
        if at.templates_attr and not getattr(ts, at.templates_attr):
            have = [n for n, t in TEMPLATE_SETS.items() if getattr(t, at.templates_attr)]
            raise ConfigError(f"attack {a!r} has no templates in the {ts.name!r} set (it is a family of "
                              f"{', '.join(have)} only); plant it from one of those, or from your own --templates FILE")
    return out


def _check(ds: Dataset, cfg: PlantConfig) -> None:
    if not cfg.attacks:
        raise ConfigError("no attack given (valid: " + ", ".join(ATTACKS) + ")")
    if len(set(cfg.attacks)) != len(cfg.attacks):
        raise ConfigError(f"an attack is named twice in {', '.join(cfg.attacks)}")
    _attacks(cfg)
    if cfg.rate is not None:
        if not (isinstance(cfg.rate, (int, float)) and math.isfinite(cfg.rate)) or cfg.rate <= 0:
            raise ConfigError(f"--rate {cfg.rate} is not a poisoning rate (the planted share of a store, > 0 and < 1)")
        if cfg.rate >= 1:
            raise ConfigError(f"--rate {cfg.rate:g} would replace the store: the planted notes would number "
                              f"{cfg.rate:g}x the store's own notes (the rate must be below 1)")
    if cfg.per_target is not None and cfg.per_target < 1:
        raise ConfigError(f"--per-target {cfg.per_target} must be at least 1")
    if cfg.rate is None and cfg.per_target is None:
        raise ConfigError("give --rate (the planted share of each store)" + (" or --per-target" if cfg.isolate else ""))
    if cfg.isolate and cfg.rate is not None and cfg.per_target is not None:
        raise ConfigError("with --isolate give --rate or --per-target, not both (the rate sets the notes per target)")
    if not cfg.isolate and cfg.rate is None:
        raise ConfigError("a shared store needs --rate (it sets how many of a store's queries are targets); "
                          "--per-target alone is for --isolate")
    if isinstance(cfg.targets, int) and cfg.targets < 1:
        raise ConfigError(f"--targets {cfg.targets} must be at least 1 (or 'all', or query ids)")
    if not (cfg.max_age_days * DAY > HOUR):
        raise ConfigError(f"max_age_days {cfg.max_age_days} must be more than an hour")
    if not cfg.undated and not any(q.as_of is not None for q in ds.queries):
        raise DataError(f"dataset {ds.name!r} has no timestamps (no query has an as_of): a planted note cannot be "
                        f"dated before its target under the strict as-of protocol; --undated plants undated notes "
                        f"(visible to every query of the store)")


def _eligible(ds: Dataset, cfg: PlantConfig, stores: dict[str, Store]) -> tuple[list, dict]:
    """Judged queries that can be targets, and for the others why not (for explicit ids)."""
    idx = ds.doc_index
    ok, why = [], {}
    for q in ds.queries:
        rel = sorted(((g, d) for d, g in (ds.qrels.get(q.id) or {}).items() if int(g) >= 1 and d in idx),
                     key=lambda x: -x[0])
        if not q.text.strip():
            why[q.id] = "its text is empty"
        elif not rel:
            why[q.id] = "it has no relevant note (targets are judged queries)"
        elif (q.group or "") not in stores:
            why[q.id] = "its group holds no note"
        elif q.as_of is None and not cfg.undated:
            why[q.id] = "it has no as_of (strict protocol; --undated plants undated notes)"
        else:
            ok.append(Target(q, stores[q.group or ""], [ds.documents[idx[d]] for _, d in rel]))
    return ok, why


def _choose(ds: Dataset, cfg: PlantConfig, eligible: list[Target], why: dict, rng: random.Random,
            warnings: list[str]) -> list[Target]:
    by_id = {t.query.id: t for t in eligible}
    if isinstance(cfg.targets, tuple):
        known = {q.id for q in ds.queries}
        for qid in cfg.targets:
            if qid not in known:
                raise DataError(f"--targets: query {qid!r} does not exist in {ds.name!r} "
                                f"({len(known)} queries, e.g. {', '.join(sorted(known)[:3])})")
            if qid not in by_id:
                raise DataError(f"--targets: query {qid!r} cannot be a target: {why[qid]}")
        chosen = [by_id[q] for q in dict.fromkeys(cfg.targets)]
        if not cfg.isolate:  # the rate still bounds each shared store
            _fits(chosen, cfg)
        return chosen
    pool = list(eligible)
    rng.shuffle(pool)
    if not cfg.isolate:
        by_group: dict[str, list[Target]] = {}
        for t in pool:
            by_group.setdefault(t.store.group, []).append(t)
        pool = []
        for g in sorted(by_group):
            n = len(by_group[g][0].store.docs)
            k = _round(cfg.rate * n) // (cfg.per_target or 1)
            pool += by_group[g][:k]
        if not pool:
            smallest = min(len(s.store.docs) for s in eligible) if eligible else 0
            raise DataError(f"--rate {cfg.rate:g} plants fewer than {cfg.per_target or 1} note(s) per target in every "
                            f"store (the largest has {max((len(t.store.docs) for t in eligible), default=0)} notes, "
                            f"the smallest {smallest}); raise --rate, or --isolate to attack each target alone")
        rng.shuffle(pool)
    if cfg.targets != "all":
        if cfg.targets > len(pool):
            warnings.append(f"--targets {cfg.targets}: only {len(pool)} queries can be targets here; using them all")
        pool = pool[:cfg.targets]
    if not pool:
        raise DataError(f"dataset {ds.name!r} has no query that can be a target (judged, in a store"
                        + ("" if cfg.undated else ", with an as_of") + ")")
    return pool


def _fits(chosen: list[Target], cfg: PlantConfig) -> None:
    count: dict[str, int] = {}
    for t in chosen:
        count[t.store.group] = count.get(t.store.group, 0) + (cfg.per_target or 1)
    for g, k in count.items():
        n = len(next(t for t in chosen if t.store.group == g).store.docs)
        if k > _round(cfg.rate * n):
            raise DataError(f"--targets: {k} planted notes in store {g!r} of {n} notes exceed --rate {cfg.rate:g} "
                            f"({_round(cfg.rate * n)} notes); raise --rate or --isolate")


def _made_up_phrase(syllables: tuple[str, ...], rng: random.Random) -> str:
    """Three made-up words of 3 syllables each: a trigger phrase no note and no query holds by chance."""
    return " ".join("".join(rng.choice(syllables) for _ in range(3)) for _ in range(3))


def _round(x: float) -> int:
    return int(math.floor(x + 0.5))


def _when(t: Target, cfg: PlantConfig, rng: random.Random) -> float | None:
    """When a planted note was written: uniform between ``as_of − max_age_days`` (or, when later, an hour after the
    target's newest dated relevant note: the attacker writes after the truth) and an hour before ``as_of``; whole
    seconds. None when undated."""
    q = t.query
    if cfg.undated or q.as_of is None:
        return None
    hi = q.as_of - HOUR
    lo = q.as_of - cfg.max_age_days * DAY
    rel = [d.created for d in t.relevant if d.created is not None and d.created <= hi - HOUR]
    if rel:
        lo = max(lo, max(rel) + HOUR)
    return float(math.floor(rng.uniform(lo, hi)))


def _template_doc(store: Store, at: float | None) -> Document:
    """The store's newest dated note written at or before ``at`` (else its newest dated note, else its first)."""
    dated = [d for d in store.docs if d.created is not None]
    before = [d for d in dated if at is not None and d.created <= at]
    pick = before or dated
    return max(pick, key=lambda d: (d.created, d.id)) if pick else store.docs[0]


class _Ids:
    """Neutral, unique ids and line ranges for planted notes."""

    def __init__(self, ds: Dataset):
        self.taken = set(ds.doc_index)
        self.end_line: dict[str, int] = {}
        for d in ds.documents:
            e = d.metadata.get("end_line")
            if d.path and isinstance(e, int):
                self.end_line[d.path] = max(self.end_line.get(d.path, 0), e)

    def make(self, like: Document, path: str | None, lines: int) -> tuple[str, dict]:
        md = {}
        s, e = like.metadata.get("start_line"), like.metadata.get("end_line")
        if path and isinstance(s, int) and isinstance(e, int):
            start = self.end_line.get(path, -1) + 2
            md = {"start_line": start, "end_line": start + lines - 1}
            self.end_line[path] = start + lines - 1
            shape = next((f for f in ("{p}#L{s}-L{e}", "{p}#L{s}-{e}") if like.id == f.format(p=like.path, s=s, e=e)),
                         None)
            if shape:
                pid = shape.format(p=path, s=start, e=start + lines - 1)
                if pid not in self.taken:
                    self.taken.add(pid)
                    return pid, md
        n = 1
        while f"{like.id}+{n}" in self.taken:
            n += 1
        self.taken.add(f"{like.id}+{n}")
        return f"{like.id}+{n}", md


def plant(ds: Dataset, cfg: PlantConfig, name: str | None = None) -> tuple[Dataset, list[str]]:
    """The poisoned dataset (named ``name``, default ``<dataset>-poisoned``) and its warnings (one line each).
    ConfigError / DataError (one line) for bad input; ``ds`` is not modified."""
    _check(ds, cfg)
    by_name = _attacks(cfg)
    ts = None if cfg.custom is not None else template_set(cfg.templates)
    set_name = cfg.custom.name if cfg.custom is not None else ts.name
    rng = random.Random(f"evalkit-poison:{cfg.seed}")
    trigger = rng.choice(ts.triggers) if ts is not None else ""
    warnings: list[str] = []
    by_group: dict[str, list[Document]] = {}
    for d in ds.documents:
        by_group.setdefault(d.group or "", []).append(d)
    stores = {g: Store.build(g, docs) for g, docs in by_group.items()}
    eligible, why = _eligible(ds, cfg, stores)
    chosen = _choose(ds, cfg, eligible, why, rng, warnings)

    # attacks in turn over the shuffled targets; a declining attack passes its target on
    attacks = [by_name[a] for a in cfg.attacks]
    notes: list[tuple[Target, str, list[str]]] = []  # (target, attack, texts)
    declined: dict[str, int] = {}
    own_trigger: dict[str, str] = {}
    for i, t in enumerate(chosen):
        n_notes = cfg.per_target or 1
        if cfg.isolate and cfg.per_target is None:
            n_notes = max(1, _round(cfg.rate * len(t.store.docs)))
        if cfg.isolate and ts is not None:  # each isolated target its own phrase: its store holds no other target's trigger notes, so
            # BM25's statistics (kept over the whole group) must not count them either
            own_trigger[t.query.id] = _made_up_phrase(ts.syllables, rng)
        for j in range(len(attacks)):
            a = attacks[(i + j) % len(attacks)]
            texts = [a.note(t, ts, rng, own_trigger.get(t.query.id, trigger)) for _ in range(n_notes)]
            if all(x is not None for x in texts):
                notes.append((t, a.name, texts))
                break
            declined[a.name] = declined.get(a.name, 0) + 1
    if cfg.isolate and cfg.per_target is None:
        small = sorted({(len(s.docs), g) for g, s in stores.items() if _round(cfg.rate * len(s.docs)) < 1})
        for n, g in small[:3]:
            warnings.append(f"store {g!r} ({n} notes) cannot be poisoned at {cfg.rate:.2%}: one note per target "
                            f"planted ({1 / n:.2%} of it)")
        if len(small) > 3:
            warnings.append(f"... and {len(small) - 3} more stores below one note at {cfg.rate:.2%}")

    trigger_targets: dict[str, list[str]] = {}
    as_of = {t.query.id: t.query.as_of for t, _, _ in notes}
    for t, a, _ in notes:
        if a == "trigger":
            trigger_targets.setdefault(t.store.group, []).append(t.query.id)
    ids = _Ids(ds)
    planted: list[Document] = []
    rewritten: dict[str, str] = {}
    for t, a, texts in notes:
        q = t.query
        for text in texts:
            at = _when(t, cfg, rng)
            when = at if at is not None else q.as_of
            text = text.replace(DATE_SLOT, format_time(when)[:10] if when is not None else "recently")
            like = _template_doc(t.store, at)
            path = like.path
            if path and at is not None:
                path = DATE.sub(format_time(at)[:10], path)
            if like.text.lstrip().startswith("- ") and not text.startswith("- "):
                text = "- " + text
            if t.store.speaker and (who := SPEAKER.match(like.text)):  # said by the imitated note's speaker
                text = who.group(0) + SPEAKER.sub("", text, count=1)
            pid, lines = ids.make(like, path, text.count("\n") + 1)
            md = {k: like.metadata[k] for k in MIMIC if k in like.metadata}
            md.update(lines)
            if "mtime" in like.metadata and at is not None:
                md["mtime"] = format_time(at)
            aimed = [q.id]
            if not cfg.isolate and a == "trigger":  # every trigger target of the store asked after it was written
                aimed = [x for x in trigger_targets[t.store.group]
                         if x == q.id or at is None or as_of[x] is None or at < as_of[x]]
            md.update({POISON: a, POISON_TARGET: aimed, POISON_TEMPLATES: set_name})
            if cfg.isolate:
                md[VISIBLE_TO] = [q.id]
            planted.append(Document(pid, text, "", path, at, like.importance, q.group, md, at))
        if by_name[a].rewrites_query:
            rewritten[q.id] = by_name[a].query_text(q, own_trigger.get(q.id, trigger))

    queries = [replace(q, text=rewritten[q.id]) if q.id in rewritten else q for q in ds.queries]
    targets: dict[str, list[str]] = {}
    for t, a, _ in notes:
        targets.setdefault(a, []).append(t.query.id)
    rates = []
    for t, a, texts in notes:
        n = len(t.store.docs)
        rates.append(len(texts) / n if cfg.isolate else
                     sum(1 for d in planted if d.group == t.store.group) / n)
    record = {
        "format": FORMAT,
        "source": {"name": ds.name, "hash": ds.content_hash(), "documents": len(ds.documents)},
        "attacks": list(cfg.attacks), "templates": set_name, "mode": "isolated" if cfg.isolate else "shared",
        "rate": cfg.rate, "per_target": cfg.per_target, "seed": cfg.seed, "undated": cfg.undated,
        "max_age_days": cfg.max_age_days,
        "trigger": (None if "trigger" not in targets else "one made-up phrase per target" if cfg.isolate else trigger),
        "planted": len(planted), "targets": targets, "declined": declined,
        "store_rate": {"min": min(rates), "median": sorted(rates)[len(rates) // 2], "max": max(rates)} if rates else None,
    }
    if cfg.custom is not None:
        record["template_file"] = cfg.custom.record()
    info = {k: v for k, v in ds.info.items() if k not in ("split", "poison")}
    info["poison"] = record
    out = Dataset(name or f"{ds.name}-poisoned", list(ds.documents) + planted, queries,
                  {q: dict(r) for q, r in ds.qrels.items()}, {k: list(v) for k, v in ds.splits.items()}, info, ds.unit)
    return out, warnings


__all__ = ["FORMAT", "POISON", "POISON_TARGET", "POISON_TEMPLATES", "PlantConfig", "plant"]
