"""The run report's sections, declared once: title, note, builders and order. report.md and report.html both
iterate :data:`SECTIONS`; each renderer only knows how a heading, a note, a table, a plot and a list are drawn in
its format.

Adding a section = one :class:`Section` entry here (at its place in the list) + its builder in
:mod:`evalkit.report.sections` (a table, and/or a plot for report.html).

Example::

    >>> [s.key for s in SECTIONS][:3]
    ['harms', 'robustness', 'bars']
    >>> title(by_key("harms"), None)
    'Harms: what reached the prompt that must not'
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evalkit.measures import catalogue, stats
from evalkit.report import sections
from evalkit.report.analysis import DatasetSummary, category_matrix, label
from evalkit.report.tables import Table
from evalkit.runfolder.view import RunData

Text = str | Callable[[RunData, DatasetSummary], str] | None

# -- report-level text: the "How to read this report" box ------------------------------------------------------
# one line per measure, shown in the report's "how to read" box (and the Markdown glossary)
METRIC_HELP = catalogue.glossary()
STATS_HELP = (f"Significance: paired randomisation test (sign flips of the per-query differences; exact when "
              f"there are few differing queries, else {stats.N_PERMUTATIONS:,} random flips, seed {stats.SEED}), "
              f"Holm-corrected over every retriever × metric in the table; ▲ / ▼ = significantly better / worse "
              f"than the reference at Holm-adjusted p < {stats.ALPHA}. CI (Holm) = the interval of the mean "
              f"per-query difference that this same test does not reject, at the level Holm decided the comparison "
              f"at (1 − α·p/p_Holm, e.g. 1 − α/m for the smallest p of m): it excludes 0 exactly when the row is "
              f"marked ▲ / ▼ (unbounded = too few differing queries to reject any difference at that level). "
              f"The error bars of the mean plot are per-retriever 95% bootstrap intervals ({stats.N_BOOTSTRAP:,} "
              f"resamples), not tests. W/T/L = queries won / tied / lost. Underpowered = so few queries (or "
              f"clusters) that even all of them agreeing could not reach p < {stats.ALPHA} (the smallest p of the "
              f"exact sign-flip test of n is 2/2^n, times m after Holm over m comparisons).")

# -- the notes, each next to its section below --------------------------------------------------------------------
HARMS_NOTE = ("Computed on what was injected (after gates and the budget packer): secret leak = share of queries "
              "whose block holds a chunk with a secret; junk = share of injected chunks that are junk; stale = of "
              "the queries whose qrels mark a superseded statement, the share that inject it (stale above current: "
              "that rank it above the current one); abstention accuracy = no-memory queries with nothing injected; "
              "judged@10 = share of the top 10 that carry a judgement (low = nDCG says little). n/a = the dataset "
              "has no such labels (not 0).")

BUDGET_CURVE_NOTE = ("Every retriever's final ranked list packed in rank order under the same token budget (whole "
                     "chunks, cl100k tokens of the chunk text, stop at the first that does not fit): nDCG@10 of the "
                     "packed list against the mean tokens it puts in the prompt. Up and to the left = quality "
                     "bought cheaply; a line that stops early keeps few notes whatever the budget. These are what "
                     "each list WOULD inject at each budget, not what the retriever injects under its own budget "
                     "(that is the table 'What gets injected').")


def gates_note() -> str:
    """The note of the gates / abstention / budget table: what each compliance column measures (the common
    policies' labels and limits come from the catalogue, so a new policy explains itself)."""
    pols = "; ".join(f"{p.label} = share of queries whose injected block fits {p.help.split(': ', 1)[-1]}"
                     for p in catalogue.POLICIES)
    return ("Rates over the queries of this dataset. Bold = best where higher is better. A skip is only right when "
            "the query has no relevant memory (correct abstention). Within own budget = share of queries whose "
            "injected block fits the preset's own [budget]" + (f"; {pols} — one yardstick for every retriever"
                                                               if pols else "") + ".")


ANSWERS_NOTE = ("Each question with exactly the block the retriever injects went to the reader model, and its answer "
                "to the judge(s) (models and prompt hashes in the header; every rule in docs/answers.md). Accuracy "
                "= share the first judge grades correct (a question to decline is correct only when the reader "
                "declines); exact match and F1 need no judge; evidence in block = a judged-relevant note was "
                "injected. Every question not correct is attributed: reader miss (the evidence was in the block), "
                "retrieval miss (it was not), judge dispute (the judges disagree), fault (a call that failed). "
                "Tokens are per question (reader + judges), cost at the price given (--price). The per-question "
                "table is answers-{dataset}.md; the measures are in per_query.csv, so `evalkit compare` tests "
                "them like any other.")


FUNNEL_NOTE = ("Share of each query's relevant notes still present after each step (mean over answerable "
               "queries): among the arms' candidates, then after every stage among the first K rows by the stage's "
               "score (K = the retriever's final cut-off), then in the injected block. Red bar / bold = the step "
               "that loses the most. Stages marked (off) are disabled in the preset.")
THRESHOLD_NOTE = ("Each score-floor filter re-run with its threshold at quantiles (5 %…95 %) of the scores that "
                  "reach it, and at the as-shipped value (dashed). Scores come from the local embedding model "
                  "{model}; a threshold tuned for another model can sit far out in this distribution.")


@dataclass(frozen=True)
class Section:
    """One section of a dataset's part of the report, in :data:`SECTIONS` order.

    ``title`` / ``note`` are a string or ``f(run, summary) -> str`` (``note`` None = no note); ``html_title`` /
    ``html_note`` override them in report.html where that page words it differently (None = the same text).
    ``table(run, s)`` and ``plot(run, s)`` (a base64 PNG, report.html only) are the builders. report.md shows the
    section when the table is there; report.html when ``html_when`` holds: "auto" = the plot is there (the table,
    for a section without a plot), "either" = the plot or the table, or a predicate ``f(run, s)``.
    ``html_layout`` orders the parts on the page: "plot-table", "table-plot" or "plot-details" (the table folded
    under the plot). ``items(s)`` is a list of (name, text) shown under the table (``item_verb``: the Markdown
    words between them). ``composite``: the section draws itself (several tables; :mod:`evalkit.report.robustness`)."""

    key: str
    title: Text
    note: Text = None
    table: Callable[[RunData, DatasetSummary], Table | None] | None = None
    plot: Callable[[RunData, DatasetSummary], str | None] | None = None
    plot_alt: str = ""
    html_title: Text = None
    html_note: Text = None
    html_when: str | Callable[[RunData, DatasetSummary], bool] = "auto"
    html_layout: str = "plot-table"
    items: Callable[[DatasetSummary], list[tuple[str, str]]] | None = None
    item_verb: str = ""
    formats: tuple[str, ...] = ("md", "html")
    composite: bool = False


def _text(t: Text, run: RunData, s: DatasetSummary) -> str | None:
    return t(run, s) if callable(t) else t


def title(sec: Section, run: RunData | None, s: DatasetSummary | None = None, fmt: str = "md") -> str:
    """The section's heading in format ``fmt`` ("md" or "html", unescaped)."""
    return _text(sec.html_title if fmt == "html" and sec.html_title is not None else sec.title, run, s)


def note(sec: Section, run: RunData, s: DatasetSummary, fmt: str = "md") -> str | None:
    """The section's note in format ``fmt`` ("md" or "html", unescaped; None = no note)."""
    return _text(sec.html_note if fmt == "html" and sec.html_note is not None else sec.note, run, s)


def html_shown(sec: Section, run: RunData, s: DatasetSummary, table: Table | None, plot: str | None) -> bool:
    """Whether report.html draws the section (see :class:`Section`)."""
    if callable(sec.html_when):
        return sec.html_when(run, s)
    if sec.html_when == "either" or sec.plot is None:
        return bool(plot) or table is not None
    return bool(plot)


def by_key(key: str) -> Section:
    return next(s for s in SECTIONS if s.key == key)


def _breakdown(bd: str, head: str, md_note: str, html_note: str) -> Section:
    return Section(bd, title=lambda run, s: f"{label(s.primary)} {head}", note=md_note, html_note=html_note,
                   table=lambda run, s: sections.breakdown_table(run, s, bd),
                   plot=lambda run, s: sections.breakdown_plot(run, s, bd, head), plot_alt=head,
                   html_when=lambda run, s: category_matrix(run, s, bd) is not None, html_layout="plot-details")


SECTIONS: list[Section] = [
    Section("harms", "Harms: what reached the prompt that must not", HARMS_NOTE,
            table=lambda run, s: sections.harms_table(s)),
    Section("robustness", "Robustness: planted notes that reach the prompt", composite=True),
    Section("bars", "Means with 95% confidence intervals", formats=("html",),
            note=lambda run, s: ("Black whiskers: 95% bootstrap interval of each mean over the scored queries; "
                                 "overlapping whiskers do not prove equality (the paired tests in the table are more "
                                 "sensitive). " + (f"Red bar: the reference ({s.reference})." if s.reference else "")),
            plot=sections.bars_plot, plot_alt="mean nDCG@10 and recall@10 with 95% confidence intervals"),
    Section("recall_curves", "Recall@k", formats=("html",),
            note="How many of the relevant notes each retriever finds as the kept list grows (k = 5, 10, 50, 100). "
                 "A flat line means the retriever cuts its list short (gates, score floors, small top-k).",
            plot=sections.recall_plot, plot_alt="recall at k"),
    Section("answers", "Answers: what the reader made of each block",
            lambda run, s: ANSWERS_NOTE.format(dataset=s.name), table=sections.answers_table,
            plot=sections.answers_plot, plot_alt="answer attribution funnel", html_when="either"),
    Section("fixed", "As shipped vs fixed",
            "Each fixed preset against the preset it repairs, query by query (Δ = fixed − shipped; "
            "Holm over all pairs × metrics).",
            html_note="Each fixed preset against the preset it repairs, query by query: Δ = fixed − shipped, "
                      "▲ / ▼ = significant after Holm over all pairs × metrics. Hover a fixed preset for the bug it "
                      "fixes.",
            table=lambda run, s: sections.fixed_table(s), items=sections.fixes_list, item_verb=" fixes"),
    _breakdown("category", "by query category",
               "Mean per category (n = scored queries); bold = best in column. No-memory queries have no "
               "relevant note and appear under abstention below.",
               "Mean per query category (n = scored queries in the category). No-memory queries have no relevant "
               "note: they are measured as abstention in the next table."),
    _breakdown("evidence_age", "by evidence age",
               "Age of the newest relevant note at the query's own \"now\" (undated = evergreen notes).",
               "Age of the newest relevant note at the query's own \"now\" (undated = evergreen notes). Shows whether "
               "a retriever loses old memories (time decay) or fresh ones."),
    Section("budget_curve", "Quality at a token budget", BUDGET_CURVE_NOTE, table=sections.budget_curve_table,
            plot=sections.budget_curve_plot, plot_alt="nDCG@10 against injected tokens"),
    Section("funnel", "Where each retriever loses its relevant notes", FUNNEL_NOTE, table=sections.funnel_table,
            plot=sections.funnel_plot, plot_alt="recall funnels"),
    Section("threshold", "Threshold sensitivity",
            lambda run, s: THRESHOLD_NOTE.format(model=run.manifest.get("embedding_model") or "?"),
            table=sections.threshold_table, plot=sections.threshold_plot, plot_alt="threshold sensitivity"),
    Section("gates", "Gates, abstention and budget", lambda run, s: gates_note(),
            html_title="Gates, abstention and budget compliance", table=lambda run, s: sections.gates_table(s)),
    Section("injected", "What gets injected (per query)", html_title="What gets injected into the prompt",
            html_note="Per query: chunks, LLM tokens and characters injected after the gates and the budget packer "
                      "(tokens counted with the run's BPE tokenizer). In the plot each row is a histogram over the "
                      "queries (taller = more queries with that amount); the red tick is the preset's own limit.",
            table=sections.budget_table, plot=sections.injected_plot, plot_alt="injected amounts per query",
            html_when="either", html_layout="table-plot"),
    Section("latency", "Latency per stage",
            html_note="Wall time per query and stage from the latency run, in milliseconds on a log axis (cached "
                      "candidates are not used there: every stage is timed for real). Dot = median, thick bar = "
                      "25th–75th percentile, thin line = 5th–95th percentile.",
            table=sections.latency_section_table, plot=sections.latency_plot, plot_alt="latency",
            html_when=lambda run, s: bool(run.latency and s.name in run.latency)),
]
