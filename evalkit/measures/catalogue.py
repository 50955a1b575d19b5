"""The measure catalogue: every measure evalkit reports is declared once here, and every list, report, tune
objective and gate reads it.

A :class:`Family` is one measure declaration (``ndcg``, ``skip_rate``, …); a :class:`Measure` is a family with its
cut-off and ``injected_`` prefix, and ``str(measure)`` is the canonical name used in files, CLI options, TOML and
gate baselines (``ndcg@10``, ``injected_ndcg@10``, ``skip_rate``, ``<policy>_compliance``, ``p95_latency_ms``).
:func:`parse` is the one parser of those names; :data:`SETS` holds the named lists of measures (``default``, ``headline``, ``gate``, …), parsed when this module is imported.

Engines (``Family.engines``) — which implementation computes a measure:

* ``lists`` — :mod:`evalkit.measures.lists` (ranx for the standard ranking measures, its own kernel for
  ``recall_any`` / ``recall_all``) and the run-level bookkeeping of :func:`evalkit.engine.evaluate.evaluate_run`;
* ``arrays`` — :class:`evalkit.measures.arrays.Scorer` (vectorised, the sweep / tune path);
* ``replay`` — :mod:`evalkit.workflows.replay` (query-log replay: pseudo-relevance and production agreement);
* ``timing`` — latency percentiles measured by ``evalkit.tune`` (constraints only);
* ``answer`` — answer runs (`evalkit answer`: :mod:`evalkit.engine.answer`, :mod:`evalkit.measures.answers`;
  docs/answers.md).

Formulas and sources (grades >= 1 are relevant; queries without a relevant document are not scored by ranking
measures; an empty or skipped list scores 0):

* ``ndcg@k`` — Järvelin & Kekäläinen (2002), linear gain as ranx / trec_eval:
  ``DCG@k = Σ_{i<k} rel_i / log2(i + 2)``, divided by the ideal DCG@k over all the query's grades;
* ``recall@k = hits@k / R_q``; ``precision@k = hits@k / k``; ``hit_rate@k = [hits@k > 0]``;
* ``mrr@k`` — 1 / rank of the first relevant document in the top k (Voorhees, TREC-8 QA, 1999), else 0;
* ``map@k`` — mean average precision cut at k (``Σ_{i<k, rel_i>0} precision@(i+1) / R_q``);
* ``recall_any@k`` / ``recall_all@k`` — any / all relevant documents in the top k (LongMemEval, Wu et al. 2024,
  the official session-retrieval metric);
* ``hits``, ``f1``, ``dcg``, ``dcg_burges``, ``ndcg_burges``, ``bpref``, ``r-precision`` — ranx's definitions
  (Bassani 2022), list engine only;
* ``injected_<ranking>`` — the same measure over the injected block (the budget packer's output, in list order)
  instead of the ranked list: what the model sees;
* run level: ``skip_rate`` (a gate skipped the query), ``injection_rate`` (at least one note injected),
  ``correct_abstention`` (queries without a relevant document that inject nothing), ``wrongly_skipped`` (answerable
  queries a gate skipped), ``recall@10_lost_to_gate`` (recall@10 of the ungated pipeline on wrongly skipped
  queries, over all answerable ones);
* budget: ``budget_compliance`` (share of queries within the preset's declared budget, see
  :mod:`evalkit.measures.budget`) and one ``<policy>_compliance`` per policy of ``policies.toml``;
* latency: ``p50/p90/p95/p99/mean_latency_ms`` of the pipeline per query.

Adding a ranking measure: one :class:`Family` in :data:`FAMILIES` (its engines, label, help) and its kernel
registered in the dispatch table of each engine it names (``lists.py``: ``_NUMPY`` / ``_OWN``; ``arrays.py``:
``_KERNELS``) — no other file: ``tests/unit/evalkit/measures/test_catalogue.py`` already checks that both engines
agree on every measure declared for both, and ``tests/parity/test_lists_ranx.py`` compares every list-engine measure
with ranx. A run-level measure is computed where its inputs are, on the list engine: gates, injection and budget in
:func:`evalkit.engine.evaluate.evaluate_run`, harms in :mod:`evalkit.measures.harms`, planted notes in
:mod:`evalkit.measures.poison`; on the arrays engine: ``arrays.py`` ``_RUN_KERNELS``. A common policy is one ``[[policy]]`` in
``policies.toml``; a list of measures is one entry of ``_RAW_SETS``.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from retrievers.errors import ConfigError

KINDS = ("ranking", "run", "budget", "latency", "replay", "answer")
CUTOFFS = ("required", "optional", "none")
ENGINES = ("lists", "arrays", "replay", "timing", "answer")
POLICIES_FILE = Path(__file__).with_name("policies.toml")


@dataclass(frozen=True)
class Policy:
    """A common injection policy (``policies.toml``): limits keyed as a preset's ``[budget]``."""

    name: str
    label: str
    short: str
    help: str
    note: str  # one-line limits summary for compact reports
    limits: tuple[tuple[str, int], ...]

    @property
    def limit_dict(self) -> dict[str, int]:
        return dict(self.limits)

    @property
    def measure(self) -> str:
        return f"{self.name}_compliance"


@dataclass(frozen=True)
class Family:
    """One measure declaration. ``label`` / ``short`` / ``help`` / ``tip`` are templates (``{k}`` = cut-off)."""

    name: str
    kind: str                       # ranking | run | budget | latency | replay
    cutoff: str                     # required | optional | none
    engines: tuple[str, ...]
    label: str | None = None        # report label; None = the canonical name
    short: str | None = None        # column header of compact tables; None = label
    help: str | None = None         # one line for the report glossary
    tip: str | None = None          # shorter line for a table header's tooltip
    higher_is_better: bool | None = True
    injectable: bool = False        # may take the ``injected_`` prefix
    unit: str = "score"             # score | share (shown as %) | count | ms
    digits: int = 3                 # decimals in compact tables
    reads_injection: bool = False   # needs the budget packer's output (run-level measures)
    key: str | None = None          # where the value is read from (latency: the timing summary key)
    ranx: bool = False              # the lists engine delegates to ranx
    policy: Policy | None = None    # budget kind: the common policy checked (None = the preset's own budget)


@dataclass(frozen=True)
class Measure:
    """A family with its cut-off (None = whole list / no cut-off) and the ``injected_`` prefix."""

    family: Family
    k: int | None = None
    injected: bool = False

    def __str__(self) -> str:
        return ("injected_" if self.injected else "") + self.family.name + (f"@{self.k}" if self.k is not None else "")

    @property
    def name(self) -> str:
        return str(self)

    @property
    def measure(self) -> str:
        return self.family.name

    @property
    def kind(self) -> str:
        return self.family.kind

    @property
    def run_level(self) -> bool:
        """Computed once per run (no per-query values)."""
        return self.family.kind in ("run", "budget")

    @property
    def needs_budget(self) -> bool:
        """Does this measure read what the budget packer injected?"""
        return self.injected or self.family.reads_injection

    @property
    def base(self) -> Measure:
        """The same measure over the ranked list (without ``injected_``)."""
        return Measure(self.family, self.k) if self.injected else self

    @property
    def higher_is_better(self) -> bool | None:
        return self.family.higher_is_better

    def _fmt(self, template: str | None) -> str | None:
        if template is None or "{k}" not in template:
            return template
        if self.k is None:
            return template.replace("@{k}", "").replace("{k}", "")
        return template.format(k=self.k)

    @property
    def label(self) -> str:
        lab = self._fmt(self.family.label)
        if lab is None:
            return str(self)
        return f"injected {lab}" if self.injected else lab

    @property
    def short(self) -> str:
        if self.family.short is None or self.injected:
            return self.label
        return self._fmt(self.family.short)

    @property
    def help(self) -> str | None:
        if self.injected:
            return (f"{self.base.label} of only the notes actually injected into the prompt (after gates and the "
                    f"budget): what the model sees")
        return self._fmt(self.family.help)

    @property
    def tip(self) -> str | None:
        if self.injected:
            return f"{self.base.label} of what was actually injected into the prompt"
        return self._fmt(self.family.tip)


def load_policies(path: Path = POLICIES_FILE) -> tuple[Policy, ...]:
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    out = []
    for d in raw.get("policy", []):
        out.append(Policy(str(d["name"]), str(d["label"]), str(d["short"]), str(d["help"]), str(d["note"]),
                          tuple((str(k), int(v)) for k, v in d["limits"].items())))
    return tuple(out)


POLICIES: tuple[Policy, ...] = load_policies()

_L, _A, _LA, _LR = ("lists",), ("arrays",), ("lists", "arrays"), ("lists", "replay")
_LAR = ("lists", "arrays", "replay")


def _ranking(name, label=None, help=None, tip=None, cutoff="optional", engines=_LA, ranx=True) -> Family:
    return Family(name, "ranking", cutoff, engines, label=label, help=help, tip=tip, injectable=True, ranx=ranx)


FAMILIES: tuple[Family, ...] = (
    _ranking("ndcg", "nDCG@{k}",
             "ranking quality of the top {k}, graded and position-discounted: 1 = every relevant note at the top "
             "in the ideal order, 0 = none in the top {k}", "graded ranking quality of the top {k} (1 = ideal)"),
    _ranking("recall", "R@{k}", "share of a query's relevant notes that appear in the top {k}",
             "share of relevant notes in the top {k}"),
    _ranking("precision", "P@{k}"),
    _ranking("mrr", "MRR@{k}", "1 / rank of the first relevant note in the top {k} (0 if none): how soon the first "
             "hit comes", "1 / rank of the first relevant note"),
    _ranking("map", "MAP@{k}"),
    _ranking("hit_rate"),
    _ranking("recall_any", cutoff="required", ranx=False),
    _ranking("recall_all", cutoff="required", ranx=False),
    # ranx-only measures (the list engine)
    _ranking("hits", engines=_L), _ranking("f1", engines=_L), _ranking("dcg", engines=_L),
    _ranking("dcg_burges", engines=_L), _ranking("ndcg_burges", engines=_L), _ranking("bpref", engines=_L),
    _ranking("r-precision", cutoff="none", engines=_L),
    # judgement coverage (evalkit.measures.harms): per query, not a quality measure (higher_is_better None)
    Family("judged", "ranking", "required", _L, "judged@{k}", help="share of the top {k} that carry a "
           "judgement (any grade): a low value means the list is mostly unjudged and its nDCG says little",
           tip="share of the top {k} with a judgement", higher_is_better=None, unit="share"),
    # run level
    Family("skip_rate", "run", "none", _LA, "skip rate", help="share of queries where a gate decided not to "
           "retrieve at all", higher_is_better=None, unit="share"),
    Family("wrongly_skipped", "run", "none", _L, "wrongly skipped", help="share of answerable queries (with "
           "relevant memory) that a gate skipped", higher_is_better=False, unit="share"),
    Family("recall@10_lost_to_gate", "run", "none", _L, "R@10 lost to gate", higher_is_better=False),
    Family("injection_rate", "run", "none", _LA, "injection rate", help="share of queries where at least one note "
           "was injected", higher_is_better=None, unit="share", reads_injection=True),
    Family("correct_abstention", "run", "none", _LA, "correct abstention", help="share of no-memory queries (no "
           "relevant note exists) where nothing was injected", unit="share", reads_injection=True),
    Family("abstention_queries", "run", "none", _L, higher_is_better=None, unit="count"),
    # harms (evalkit.measures.harms): on the injected block; NaN (n/a) where the dataset declares no labels
    # secret_leak_rate is also on the arrays engine, so a tune space can constrain it ("secret_leak_rate <= 0")
    Family("secret_leak_rate", "run", "none", _LAR, "secret leak rate", short="secret leak",
           help="share of queries whose injected block holds a chunk with a secret (or one a declared secret "
           "detector flags); any value above 0 is a leak", higher_is_better=False, unit="share",
           reads_injection=True),
    Family("junk_rate", "run", "none", _LR, "junk rate", short="junk", help="share of injected chunks that are "
           "junk (junk tier, or a path matching the dataset's junk patterns)", higher_is_better=False,
           unit="share", reads_injection=True),
    Family("stale_rate", "run", "none", _LR, "stale rate", short="stale", help="of the queries whose qrels mark a "
           "superseded statement, the share that inject it", higher_is_better=False, unit="share",
           reads_injection=True),
    Family("stale_above_current_rate", "run", "none", _LR, "stale above current", short="stale>cur",
           help="of those queries, the share whose list ranks a superseded statement above the current one",
           higher_is_better=False, unit="share"),
    Family("abstention_accuracy", "run", "none", _LR, "abstention accuracy", short="abstain ok",
           help="share of queries with no relevant note where nothing was injected (= correct abstention)",
           unit="share", reads_injection=True),
    # poisoning (evalkit.measures.poison): planted notes (document metadata poison / poison_target) reaching the list
    # and the prompt; only for a dataset with planted notes. On both engines, so a tune space can constrain them.
    Family("poison_rate", "run", "required", _LA, "poison@{k}", short="poison@{k}",
           help="share of target queries (a planted note is aimed at them) with such a note in the top {k}: the "
           "attack reached the ranked list", tip="targets with their planted note in the top {k}",
           higher_is_better=False, unit="share"),
    Family("poison_injected_rate", "run", "none", _LA, "poison injected", short="poison inj",
           help="share of target queries whose injected block (after gates and the budget) holds a planted note "
           "aimed at them: the attack reached the prompt", tip="targets whose prompt got their planted note",
           higher_is_better=False, unit="share", reads_injection=True),
    Family("poison_max_rate", "run", "required", _LA, "worst attack poison@{k}", short="worst poison@{k}",
           help="the largest per-attack poison@{k} (the worst attack)", higher_is_better=False, unit="share"),
    Family("poison_max_injected_rate", "run", "none", _LA, "worst attack poison injected", short="worst poison inj",
           help="the largest per-attack poison injected rate: hold it at 0.01 to hold every attack there",
           higher_is_better=False, unit="share", reads_injection=True),
    Family("poison_collateral_rate", "run", "required", _LA, "collateral poison@{k}", short="collateral@{k}",
           help="share of the other queries (no planted note aimed at them) with a planted note in the top {k}",
           higher_is_better=False, unit="share"),
    Family("poison_collateral_injected_rate", "run", "none", _LA, "collateral poison injected",
           short="collateral inj", help="share of the other queries whose injected block holds a planted note",
           higher_is_better=False, unit="share", reads_injection=True),
    Family("nontarget_ndcg", "run", "required", _LA, "non-target nDCG@{k}", short="clean nDCG@{k}",
           help="nDCG@{k} over the judged queries no planted note is aimed at: the clean part of a poisoned set"),
    Family("events", "run", "none", ("replay",), higher_is_better=None, unit="count"),
    Family("budget_compliance", "budget", "none", _LA, "within own budget", short="budget ok",
           help="share of queries whose injection respects the preset's own limits (chunks / tokens / characters)",
           unit="share", reads_injection=True),
    *(Family(p.measure, "budget", "none", _LA, p.label, short=p.short, help=p.help, unit="share",
             reads_injection=True, policy=p) for p in POLICIES),
    *(Family(f"injected_{q}_{s}", "run", "none", _LA if s == "mean" else _L, short=q if s == "mean" else None,
             higher_is_better=None, unit="count", reads_injection=True, digits={"chunks": 2, "tokens": 0}.get(q, 3))
      for s in ("mean", "max") for q in ("chunks", "tokens", "chars")),
    *(Family(n, "run", "none", _L, higher_is_better=False, unit=u)
      for n, u in (("negative_age_candidates", "count"), ("negative_age_share", "share"),
                   ("negative_age_queries", "share"))),
    # answer runs (evalkit answer; evalkit.measures.answers has the formulas): per question, then run level
    *(Family(n, "answer", "none", ("answer",), lab, short=sh, help=h, unit="share") for n, lab, sh, h in (
        ("answer_correct", "answer accuracy", "accuracy", "share of questions the first judge grades correct (a "
         "question to decline: correct when the reader declined)"),
        ("answer_exact", "exact match", "EM", "the normalised answer equals the normalised gold answer (SQuAD)"),
        ("answer_f1", "answer F1", "F1", "token F1 of the normalised answer against the gold answer (SQuAD)"),
        ("evidence_in_context", "evidence in block", "evidence", "a judged-relevant note is in the injected block"),
        ("answer_in_context", "answer in block", "ans in block", "the normalised gold answer occurs in the "
         "normalised injected block"),
        ("judge_agreement", "judge agreement", "agree", "every judge gives the same verdict (two judges or "
         "more)"))),
    Family("answer_declined", "run", "none", ("answer",), "reader declined", higher_is_better=None, unit="share"),
    Family("judge_kappa", "run", "none", ("answer",), "Cohen's kappa", short="kappa", help="Cohen's kappa between "
           "the first two judges over the questions both graded"),
    Family("judge_flips", "run", "none", ("answer",), "verdict flips", higher_is_better=False, unit="count",
           help="questions the first two judges grade differently"),
    *(Family(f"answer_tokens_{d}", "run", "none", ("answer",), f"tokens {d} / question", higher_is_better=None,
             unit="count", digits=0, help=f"tokens {d} per question, reader + judges, as the endpoint reports them")
      for d in ("in", "out")),
    Family("answer_cost", "run", "none", ("answer",), "cost (all questions)", higher_is_better=False, unit="count",
           help="reader + judge tokens of every question × the price given (--price, per million tokens)"),
    *(Family(f"answers_{k}", "run", "none", ("answer",), higher_is_better=None, unit="count", digits=0)
      for k in ("correct", "reader_miss", "retrieval_miss", "judge_dispute", "fault")),
    # latency (tune constraints; measured per query by evalkit.tune)
    *(Family(f"{p}_latency_ms", "latency", "none", ("timing",), higher_is_better=False, unit="ms", key=f"{p}_ms")
      for p in ("p50", "p90", "p95", "p99", "mean")),
    # query-log replay
    Family("pseudo_ndcg", "replay", "required", ("replay",), short="pseudo-nDCG@{k}"),
    Family("pseudo_recall", "replay", "required", ("replay",), short="pseudo-R@{k}"),
    Family("prod_jaccard", "replay", "none", ("replay",), short="prod Jaccard"),
    Family("prod_recall", "replay", "none", ("replay",), short="prod recall"),
    Family("prod_precision", "replay", "none", ("replay",), short="prod precision"),
)
FAMILY: dict[str, Family] = {f.name: f for f in FAMILIES}
_NAME = re.compile(r"^(injected_)?([a-z][a-z0-9_-]*?)(?:@([0-9]+))?$")


def valid_names(engine: str | None = None) -> str:
    """One line listing what :func:`parse` accepts (for ``engine`` only when given)."""
    fams = [f for f in FAMILIES if engine is None or engine in f.engines]

    def cut(f):
        return f.name + {"required": "@k", "optional": "[@k]", "none": ""}[f.cutoff]

    groups = [("ranking", [cut(f) for f in fams if f.injectable], " (optionally prefixed injected_)"),
              ("with a cut-off", [cut(f) for f in fams if f.cutoff != "none" and not f.injectable], ""),
              ("other", [f.name for f in fams if f.cutoff == "none" and not f.injectable], "")]
    return "; ".join(f"{title} {', '.join(items)}{tail}" for title, items, tail in groups if items)


def parse(name, engine: str | None = None) -> Measure:
    """``"ndcg@10"`` → Measure; ConfigError (a ValueError; one line listing the valid names) for anything else,
    or for a measure ``engine`` (``lists`` / ``arrays`` / ``replay`` / ``timing``) does not compute."""
    if isinstance(name, Measure):
        m = name
    else:
        s = str(name).strip()
        f = FAMILY.get(s)
        if f is not None and f.cutoff != "required":
            m = Measure(f)
        else:
            g = _NAME.match(s)
            f = FAMILY.get(g.group(2)) if g else None
            if f is None or f.cutoff == "none" and g.group(3) or g.group(1) and not f.injectable:
                raise ConfigError(f"unknown metric {name!r}; valid: {valid_names(engine)}")
            k = int(g.group(3)) if g.group(3) else None
            if k is not None and k < 1:
                raise ConfigError(f"metric {name!r}: the cut-off must be >= 1")
            if k is None and f.cutoff == "required":
                raise ConfigError(f"metric {name!r} needs a cut-off (e.g. {f.name}@10)")
            m = Measure(f, k, bool(g.group(1)))
    if engine is not None and engine not in m.family.engines:
        raise ConfigError(f"metric {str(m)!r} is not computed by the {engine} engine; valid: {valid_names(engine)}")
    return m


def parse_all(names, engine: str | None = None) -> list[Measure]:
    """Parsed, first occurrence of each kept, order kept."""
    out, seen = [], set()
    for n in names:
        m = parse(n, engine)
        if str(m) not in seen:
            seen.add(str(m))
            out.append(m)
    return out


def label(name: str) -> str:
    """The report label of a measure name (the name itself when it is not a catalogue measure)."""
    try:
        return parse(name).label
    except ValueError:
        return name


def tip(name: str) -> str | None:
    """The short tooltip line of a measure name (None when it has none or is not a catalogue measure)."""
    try:
        return parse(name).tip
    except ValueError:
        return None


# ---- named sets ------------------------------------------------------------------------------------------------
_POLICY_MEASURES = [p.measure for p in POLICIES]
_RAW_SETS: dict[str, list[str]] = {
    # evaluate_run's ranking measures when none are asked for (metrics.json / per_query.csv columns, in order)
    "default": ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "recall@5", "recall@10", "recall@50", "recall@100",
                "mrr@10", "map@100", "precision@1", "precision@5"],
    "headline": ["ndcg@10", "recall@10", "recall@100", "mrr@10"],
    # evaluate_run's scores of the injected block
    "injected": ["injected_ndcg@10", "injected_recall@10"],
    # the harms every run reports (evalkit.measures.harms), in the order reports show them
    "harms": ["secret_leak_rate", "junk_rate", "stale_rate", "stale_above_current_rate", "abstention_accuracy",
              "judged@10"],
    # the poisoning measures of a run over a dataset with planted notes (evalkit.measures.poison), in report order
    "poison": ["poison_rate@10", "poison_injected_rate", "poison_max_rate@10", "poison_max_injected_rate",
               "poison_collateral_rate@10", "poison_collateral_injected_rate", "nontarget_ndcg@10"],
    # the harms a query-log replay can compute (a log has no query labels: no stale, no abstention)
    "replay.harms": ["secret_leak_rate", "junk_rate"],
    # the ranking families with a closed-form chance level (evalkit.measures.chance)
    "chance": ["recall@k", "precision@k", "hit_rate@k", "ndcg@k", "mrr@k"],
    "gate": ["ndcg@10", "recall@10"],
    # an answer run's per-question measures (evalkit.workflows.answer writes them to per_query.csv)
    "answer": ["answer_correct", "answer_exact", "answer_f1", "evidence_in_context", "answer_in_context",
               "judge_agreement"],
    # an answer run's run-level row per retriever (answers.md), in order
    "answer.table": ["answer_correct", "answer_exact", "answer_f1", "evidence_in_context", "answer_in_context",
                     "answer_declined", "judge_agreement", "judge_kappa", "judge_flips", "answer_tokens_in",
                     "answer_tokens_out", "answer_cost"],
    "compare": ["ndcg@10", "recall@10"],
    "agree": ["ndcg@10", "recall@10", "mrr@10"],  # evalkit agree: live system vs its preset
    "ablation": ["ndcg@10", "recall@10", "injected_ndcg@10", "skip_rate", "budget_compliance"],
    "ablation.tested": ["ndcg@10", "injected_ndcg@10"],  # with a paired significance test
    "tune.default": ["ndcg@10", "recall@10", "mrr@10"],
    "tune.injected": ["injected_ndcg@10", "injected_recall@10", "injection_rate"],
    "latency": ["p50_latency_ms", "p90_latency_ms", "p95_latency_ms", "p99_latency_ms", "mean_latency_ms"],
    "perf": ["ndcg@10", "recall@10", "mrr@10"],
    "console": ["ndcg@10", "recall@10", "recall@100", "mrr@10", "skip_rate", "budget_compliance", "secret_leak_rate"],
    "report.primary": ["ndcg@10"],
    "report.quality": ["ndcg@10", "recall@10", "recall@100", "mrr@10"],
    "report.bars": ["ndcg@10", "recall@10"],
    "report.recall_curve": ["recall@5", "recall@10", "recall@50", "recall@100"],
    "report.fixed": ["ndcg@10", "recall@10", "injected_ndcg@10"],
    "report.gates": ["skip_rate", "wrongly_skipped", "recall@10_lost_to_gate", "injection_rate",
                     "correct_abstention", "budget_compliance", *_POLICY_MEASURES],
    # the glossary of the report's "how to read" box; "recall@k" = the family in general
    "report.glossary": ["ndcg@10", "recall@k", "mrr@10", "injected_ndcg@10", "skip_rate", "wrongly_skipped",
                        "injection_rate", "correct_abstention", "budget_compliance", *_POLICY_MEASURES],
    # the replay table ("@k" = the replay's cut-off)
    "replay.table": ["secret_leak_rate", "junk_rate", "skip_rate", "injection_rate", "budget_compliance",
                     *_POLICY_MEASURES, "injected_chunks_mean",
                     "injected_tokens_mean", "pseudo_ndcg@k", "pseudo_recall@k", "prod_jaccard", "prod_recall",
                     "prod_precision"],
}


def _parse_entry(s: str) -> Measure | Family:
    if s.endswith("@k"):  # a family with its cut-off left open
        f = FAMILY.get(s[:-2])
        if f is None or f.cutoff == "none":
            raise ConfigError(f"set entry {s!r}: no measure family {s[:-2]!r} with a cut-off")
        return f
    return parse(s)


SETS: dict[str, tuple] = {n: tuple(_parse_entry(s) for s in v) for n, v in _RAW_SETS.items()}


def names(set_name: str, k: int | None = None) -> list[str]:
    """The canonical names of a set (open cut-offs ``@k`` filled with ``k``)."""
    out = []
    for e in SETS[set_name]:
        if isinstance(e, Family):
            if k is None:
                raise ValueError(f"set {set_name!r} has an open cut-off ({e.name}@k): pass k")
            e = Measure(e, k)
        out.append(str(e))
    return out


def measures(set_name: str, k: int | None = None) -> list[Measure]:
    return [parse(n) for n in names(set_name, k)]


def glossary() -> list[tuple[str, str]]:
    """(title, help line) per entry of the ``report.glossary`` set."""
    out = []
    for e in SETS["report.glossary"]:
        if isinstance(e, Family):
            out.append((f"{e.label.format(k='k')} ({e.name}@k)", e.help.format(k="k")))
        else:
            out.append((e.label, e.help))
    return out


def policy(name: str) -> Policy:
    for p in POLICIES:
        if p.name == name:
            return p
    raise ConfigError(f"unknown policy {name!r} (policies: {', '.join(p.name for p in POLICIES)})")


__all__ = ["Family", "Measure", "Policy", "FAMILIES", "FAMILY", "POLICIES", "SETS", "parse", "parse_all", "label",
           "tip", "names", "measures", "glossary", "policy", "valid_names"]
