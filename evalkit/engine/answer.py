"""Answers, not just notes: per question, the question + exactly the block a retriever injects → a reader model → an
answer → the judge(s) → correct / incorrect / abstained, with the measures that need no judge and the attribution
of every wrong answer (docs/answers.md has every rule).

**The block.** What the retriever's budget packer rendered for the prompt (``QueryResult.block``: its own format
and budget; a live system's own block). A retriever that renders none (no formatting budget stage) gives its
injected notes' texts, one ``- `` line each, in injected order. An empty block is sent as ``(no notes)``.

**Verdicts** (``verdict``):

* a question the dataset declares as one to decline (:func:`expects_decline`: its loader's ``info["answers"]``
  rule) is ``correct`` exactly when the reader declined (:func:`evalkit.measures.answers.declined`), else
  ``incorrect``; no judge is asked;
* otherwise a reader that declined has ``abstained`` (counted as not correct); no judge is asked;
* otherwise each judge grades the answer against the gold answer (CORRECT / WRONG; a reply with neither word counts
  as WRONG and is counted as ``unparsed``); the *first* judge's grade is the verdict of record
  (``answer_correct``), every judge has its own column, and ``judge_agreement`` = all judges agree;
* a call that failed after its retries makes the question ``fault`` (scored not correct, one warning; a rerun asks
  it again, everything else comes from the cache).

**Attribution** of a question that is not correct: ``judge dispute`` (two or more judges and they disagree),
else ``retrieval miss`` (no judged-relevant note in the block), else ``reader miss`` (the evidence was in the block,
or the question was one to decline and the reader answered); ``fault`` for a fault.

Usage::

    spec = AnswerSpec(reader=Endpoint(url, "smollm2-135m-instruct"), judges=[Endpoint(url, "smollm2-135m-instruct")])
    rows = answer_questions(dataset, run, spec)       # one dict per question
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data.groups import declared
from evalkit.engine.llm import Endpoint, LLMFault
from evalkit.measures import answers as am
from evalkit.measures import catalogue
from retrievers.types import DataError, Dataset, Query

PROMPTS = Path(__file__).with_name("prompts")
READER_TOKENS = 24
JUDGE_TOKENS = 4
SEPARATOR = "=== user ==="


@dataclass(frozen=True)
class Prompt:
    """A versioned prompt file (``evalkit/engine/prompts/<name>.txt``): a system part, the line ``=== user ===``,
    a user part with ``{placeholders}``; ``hash`` = sha256 of the file's bytes (first 12 hex digits)."""

    name: str
    system: str
    user: str
    hash: str
    source: str = ""   # as given to :meth:`load` (a shipped name, or a .txt path): what a record reloads

    @classmethod
    def load(cls, name: str) -> "Prompt":
        p = Path(name) if name.endswith(".txt") else PROMPTS / f"{name}.txt"
        if not p.is_file():
            have = ", ".join(sorted(f.stem for f in PROMPTS.glob("*.txt")))
            raise DataError(f"prompt {name!r} not found (shipped: {have}; or a .txt path)")
        raw = p.read_bytes()
        text = raw.decode("utf-8")
        if SEPARATOR not in text:
            raise DataError(f"prompt {p}: no line {SEPARATOR!r} between the system and the user part")
        system, user = text.split(SEPARATOR, 1)
        return cls(p.stem, system.strip(), user.strip(), hashlib.sha256(raw).hexdigest()[:12], name)

    def messages(self, **values) -> list[dict]:
        user = re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))), self.user)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


@dataclass
class Judge:
    endpoint: Endpoint
    prompt: Prompt

    @property
    def label(self) -> str:
        return f"{self.endpoint.model}/{self.prompt.name}"


@dataclass
class AnswerSpec:
    """The reader, the judges (the first is the verdict of record), the prompts, the concurrency and the price
    (per million tokens in and out; None = no cost column)."""

    reader: Endpoint
    judges: list[Judge]
    reader_prompt: Prompt = field(default_factory=lambda: Prompt.load("reader-v1"))
    concurrency: int = 4
    price_in: float | None = None
    price_out: float | None = None
    budgets: tuple[int, ...] = ()   # injection budgets (tokens) to sweep: :func:`budget_variants`

    def record(self) -> dict:
        """The manifest's ``answers`` entry: model ids, endpoints, prompt names + hashes, parameters (no keys)."""
        return {"reader": {"model": self.reader.model, "url": self.reader.url,
                           "prompt": self.reader_prompt.source or self.reader_prompt.name,
                           "prompt_hash": self.reader_prompt.hash, "max_tokens": READER_TOKENS},
                "judges": [{"label": j.label, "model": j.endpoint.model, "url": j.endpoint.url,
                            "prompt": j.prompt.source or j.prompt.name, "prompt_hash": j.prompt.hash,
                            "max_tokens": JUDGE_TOKENS}
                           for j in self.judges],
                "parameters": {"temperature": 0, "seed": 0}, "price_per_million": [self.price_in, self.price_out],
                **({"budgets": list(self.budgets)} if self.budgets else {})}

    @classmethod
    def from_record(cls, rec: dict, **endpoint) -> "AnswerSpec":
        """The spec a :meth:`record` describes (what `evalkit gate` re-runs from a baseline): the same endpoints,
        models and prompts (loaded again by name: a prompt whose file changed has another hash — :meth:`changed`
        says so). ``endpoint``: :class:`Endpoint` options (``timeout``, ``retries``, ``api_key_env``)."""
        rd = rec["reader"]
        reader = Endpoint(rd["url"], rd["model"], **endpoint)
        judges = [Judge(Endpoint(j["url"], j["model"], **endpoint), Prompt.load(j["prompt"])) for j in rec["judges"]]
        price = rec.get("price_per_million") or [None, None]
        return cls(reader, judges, Prompt.load(rd["prompt"]), price_in=price[0], price_out=price[1])

    def changed(self, rec: dict) -> list[str]:
        """One line per prompt whose hash differs from the record's, and per model id that differs."""
        now, out = self.record(), []
        for what, a, b in [("reader", rec["reader"], now["reader"])] + [
                (f"judge {i + 1}", x, y) for i, (x, y) in enumerate(zip(rec["judges"], now["judges"]))]:
            if a.get("prompt_hash") != b["prompt_hash"] or a.get("prompt") != b["prompt"]:
                out.append(f"{what} prompt {a.get('prompt')} ({a.get('prompt_hash')}) -> {b['prompt']} "
                           f"({b['prompt_hash']})")
            if a.get("model") != b["model"]:
                out.append(f"{what} model {a.get('model')} -> {b['model']}")
        if len(rec["judges"]) != len(now["judges"]):
            out.append(f"judges {len(rec['judges'])} -> {len(now['judges'])}")
        return out


def answer_rules(ds: Dataset) -> dict:
    """The dataset's answer declaration (its loader's ``info["answers"]``, or an exported folder's ``evalkit.json``
    ``info``): ``gold`` (the query metadata key of the
    gold answer) and ``decline`` (``{"category": [...]}`` and / or ``{"metadata": key}``: questions to decline).
    DataError when the dataset declares no gold answers."""
    rules = declared(ds, "answers")  # an exported folder keeps its loader's rules (evalkit.json)
    if not isinstance(rules, dict) or "gold" not in rules:
        raise DataError(f"{ds.name}: the dataset declares no gold answers (its loader's info['answers']), so its "
                        f"questions cannot be answered and judged")
    return rules


def expects_decline(q: Query, rules: dict) -> bool:
    d = rules.get("decline") or {}
    key = d.get("metadata")
    return (q.category in (d.get("category") or ())) or bool(key and (q.metadata or {}).get(key))


def block_of(result, texts: dict[str, str]) -> str:
    if result.block is not None:
        return result.block
    return "\n".join(f"- {texts[d]}" for d in result.injected if d in texts)


def grade(text: str) -> tuple[int, bool]:
    """A judge's reply → (1 correct / 0 wrong, parsed). The first of CORRECT / WRONG / INCORRECT that occurs."""
    m = re.search(r"\b(incorrect|correct|wrong)\b", text.lower())
    if m is None:
        return 0, False
    return int(m.group(1) == "correct"), True


def answer_questions(ds: Dataset, run, spec: AnswerSpec, texts: dict[str, str] | None = None) -> list[dict]:
    """One row per question of ``ds`` for the retriever run ``run`` (:class:`evalkit.engine.runner.RetrieverRun`),
    in query order; the calls run ``spec.concurrency`` at a time."""
    rules = answer_rules(ds)
    texts = texts if texts is not None else {d.id: d.text for d in ds.documents}

    def one(q: Query) -> dict:
        res = run.results[q.id]
        block = block_of(res, texts)
        gold = (q.metadata or {}).get(rules["gold"])
        decline = expects_decline(q, rules)
        rel = {d for d, g in (ds.qrels.get(q.id) or {}).items() if g > 0}
        row = {"query_id": q.id, "category": q.category, "question": q.text, "gold": None if gold is None else
               str(gold), "expects_decline": decline, "injected": len(res.injected),
               "evidence_in_context": float(bool(rel & set(res.injected))) if rel else math.nan,
               "answer_in_context": math.nan if decline or gold is None else am.answer_in_context(gold, block),
               "tokens_in": 0, "tokens_out": 0, "fault": None}
        try:
            r = spec.reader.chat(spec.reader_prompt.messages(notes=block or "(no notes)", question=q.text),
                                 template=spec.reader_prompt.hash, max_tokens=READER_TOKENS)
        except LLMFault as exc:
            return dict(row, answer=None, declined=None, verdict="fault", answer_correct=0.0, fault=f"reader: "
                        f"{exc.kind}: {exc}", answer_exact=math.nan, answer_f1=math.nan, judges={},
                        judge_agreement=math.nan, attribution="fault")
        row["tokens_in"] += r.tokens_in
        row["tokens_out"] += r.tokens_out
        ans = r.text.strip()
        dec = am.declined(ans)
        row.update(answer=ans, declined=dec,
                   answer_exact=math.nan if decline or gold is None else am.answer_exact(ans, gold),
                   answer_f1=math.nan if decline or gold is None else am.answer_f1(ans, gold), judges={},
                   unparsed=[])
        if decline or dec:
            ok = float(decline and dec)
            row.update(verdict="correct" if ok else ("abstained" if dec else "incorrect"), answer_correct=ok,
                       judge_agreement=math.nan)
        else:
            for j in spec.judges:
                try:
                    jr = j.endpoint.chat(j.prompt.messages(question=q.text, gold=gold, answer=ans),
                                         template=j.prompt.hash, max_tokens=JUDGE_TOKENS)
                except LLMFault as exc:
                    return dict(row, verdict="fault", answer_correct=0.0, fault=f"judge {j.label}: {exc.kind}: "
                                f"{exc}", judge_agreement=math.nan, attribution="fault")
                g, parsed = grade(jr.text)
                row["judges"][j.label] = g
                if not parsed:
                    row["unparsed"].append(j.label)
                row["tokens_in"] += jr.tokens_in
                row["tokens_out"] += jr.tokens_out
            vals = list(row["judges"].values())
            row.update(verdict="correct" if vals[0] else "incorrect", answer_correct=float(vals[0]),
                       judge_agreement=float(len(set(vals)) == 1) if len(vals) > 1 else math.nan)
        row["attribution"] = attribute(row)
        return row

    endpoints = {id(e): e for e in [spec.reader, *(j.endpoint for j in spec.judges)]}
    with contextlib.ExitStack() as behind:
        for ep in endpoints.values():  # cache writes off the calls' critical path, all on disk when this returns
            behind.enter_context(ep.writing_behind())
        with ThreadPoolExecutor(max_workers=max(1, spec.concurrency)) as pool:
            return list(pool.map(one, ds.queries))


def attribute(row: dict) -> str:
    """Why a question is not correct (docs/answers.md): judge dispute, retrieval miss, reader miss; '' if correct."""
    if row["verdict"] == "fault":
        return "fault"
    if row["answer_correct"] == 1.0:
        return ""
    if len(row["judges"]) > 1 and len(set(row["judges"].values())) > 1:
        return "judge dispute"
    if not row["expects_decline"] and row["evidence_in_context"] != 1.0:
        return "retrieval miss"
    return "reader miss"


FUNNEL = ("correct", "reader miss", "retrieval miss", "judge dispute", "fault")
BUDGET_MARK = "@"   # a budget variant's name: <retriever>@<tokens>


def budget_variants(pipelines: list, budgets) -> list:
    """Each pipeline, then one variant per injection budget ``B`` (tokens) named ``<name>@<B>``: the pipeline's own
    packer (every ``budget.pack`` stage: its format, policy, chunk and character limits kept) with ``max_tokens =
    B`` — the same retriever re-truncated by its own rule at that budget, so accuracy against the budget is one
    curve per retriever. A pipeline without a packer gets a plain ``budget.pack`` (``max_tokens = B``) at the end.

    >>> from retrievers import load_preset
    >>> [p.name for p in budget_variants([load_preset("bm25")], [300, 600])]
    ['bm25', 'bm25@300', 'bm25@600']
    """
    out = list(pipelines)
    for p in pipelines:
        packs = [s for s in p.stages if s.name == "budget.pack"]
        for b in sorted({int(x) for x in budgets}):
            name = f"{p.name}{BUDGET_MARK}{b}"
            v = (p.with_params({"budget.pack": {"max_tokens": b}}, name=name) if packs else
                 p.with_stage({"type": "budget.pack", "max_tokens": b}, name=name))
            v.budget = dict(p.budget, max_tokens=b)
            out.append(v)
    return out


def budget_of(name: str, names) -> tuple[str, int | None]:
    """(the retriever, its budget) of a run's retriever name: ``("bm25", 600)`` for ``bm25@600`` when ``bm25`` is
    among ``names`` too, else ``(name, None)`` (its own budget)."""
    base, _, b = name.rpartition(BUDGET_MARK)
    if base and b.isdigit() and base in names:
        return base, int(b)
    return name, None


def summary(rows: list[dict], spec: AnswerSpec) -> dict[str, float]:
    """Run-level answer measures of one retriever: means of the per-question columns, Cohen's κ and flips between
    the first two judges (over the questions both graded), the attribution counts, tokens and cost."""
    def mean(k):
        v = [r[k] for r in rows if r.get(k) is not None and not (isinstance(r[k], float) and math.isnan(r[k]))]
        return sum(v) / len(v) if v else math.nan
    out = {k: mean(k) for k in catalogue.names("answer")}
    out["answer_declined"] = mean("declined")
    out["answer_tokens_in"] = mean("tokens_in")
    out["answer_tokens_out"] = mean("tokens_out")
    if spec.price_in is not None:
        out["answer_cost"] = sum(r["tokens_in"] * spec.price_in + r["tokens_out"] * (spec.price_out or 0.0)
                                 for r in rows) / 1e6
    labels = [j.label for j in spec.judges]
    if len(labels) > 1:
        both = [r for r in rows if labels[0] in r.get("judges", {}) and labels[1] in r["judges"]]
        a, b = [r["judges"][labels[0]] for r in both], [r["judges"][labels[1]] for r in both]
        out["judge_kappa"] = am.cohen_kappa(a, b)
        out["judge_flips"] = float(sum(x != y for x, y in zip(a, b)))
    for name in FUNNEL:
        out[f"answers_{name.replace(' ', '_')}"] = float(sum(
            (r["attribution"] or "correct") == name for r in rows))
    return out
