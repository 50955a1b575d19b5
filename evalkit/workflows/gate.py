"""CI regression gate against a committed expected-metrics file (in the spirit of Pyserini's reproducibility
matrix).

The baseline file (``reports/gate/expected.json``, or any ``--baseline FILE``; its schema, reading and re-recording:
:mod:`evalkit.workflows.gate_baseline`) holds what it needs to be re-run alone: the datasets, the retrievers, the
metrics, the embedder, and per dataset × retriever × metric the expected value, a tolerance and the baseline's
per-query values (so a drop can be tested). ``evalkit gate --baseline FILE`` alone re-runs exactly that.

**What counts as a change.** A query differs when its value now and its baseline value are further apart than the
tie tolerance (:func:`evalkit.measures.paired.tie_tolerance`): 1e-9 against a full-precision baseline, 1e-9 + 5e-7
against a rounded one (a value stored at 6 decimals is within 5e-7 of the value it stands for, so an unchanged
query can never be further off). Only such queries count: in the paired test, in "N queries differ" and in the
worst losses (:func:`evalkit.workflows.gate_baseline.baseline_decimals`, :func:`paired_test`, :func:`losses`).

Each row gets a state:

* ``OK``   — within 1e-6 of the expected value;
* ``WARN`` — moved (up, or down by no more than the tolerance, or down beyond it but not significantly while the
  test could have been);
* ``FAIL`` — dropped by more than the tolerance **and** either significant by the paired randomisation test (p <
  alpha; clustered when the dataset declares clusters), **or underpowered**: so few queries (clusters) differ that
  the exact sign-flip test could never reach alpha (its smallest p is ``2 / 2^n`` for ``n`` differing queries,
  :func:`evalkit.measures.stats.smallest_p`) — the row then says "underpowered: failing on tolerance alone": on a
  small set of one's own the tolerance is the only evidence there can be;
* ``NEW`` / ``MISSING`` — a row only in the current run / only in the baseline (MISSING fails: a retriever
  disappeared from the gate).

Besides the baseline rows, every retriever that declares a secret guard (:func:`evalkit.engine.evaluate.secret_guard`)
gets a ``secret_leak_rate`` row that must be 0 (:func:`guard_rows`): a guard that leaks FAILs the gate.

``--update`` rewrites the file deliberately and prints the diff of expected values (:func:`update_baseline`). On
FAIL the command prints each failing row's worst per-query losses (with the query text) and writes a report folder
(the run, report.md / .html, gate.md, gate.json: :func:`write_gate_report`).

The workflow: :func:`measure` runs what the baseline records (or what is given), :func:`judge` gives every row its
state, :func:`run_gate` returns a :class:`GateResult` that renders itself through :mod:`evalkit.report.gate`;
`evalkit gate` (``evalkit/commands/gate.py``) only parses the arguments.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.data.groups import declared
from evalkit.data.registry import DATASETS, locate, suite
from evalkit.engine.answer import AnswerSpec
from evalkit.engine.evaluate import secret_guard
from evalkit.engine.experiment import record, run_dataset, start_manifest
from evalkit.engine.options import RunOptions
from evalkit.engine.live.retriever import find as find_system
from evalkit.errors import CLIError
from evalkit.measures import catalogue
from evalkit.measures.stats import (
    TIE,
    can_reach,
    cluster_randomization_test,
    cluster_sums,
    differing,
    randomization_test,
    smallest_p,
    tie_tolerance,
    untie,
)
from evalkit.report import gate as render
from evalkit.report import write_reports
from evalkit.runfolder.write import RunWriter
from evalkit.workflows.answer import answer_dataset, per_query, record_answers
from evalkit.workflows.bench import runnable_presets
from evalkit.workflows.gate_baseline import (
    DEFAULT_TOLERANCE,
    baseline_decimals,
    changed_sources,
    precision_note,
    resolve_source,
    source_of,
    updated,
)
from retrievers.pipeline import Pipeline, load_preset
from retrievers.types import DataError

GATE_DATASETS = suite("gate")
GATE_METRICS = catalogue.names("gate")
ANSWER_METRICS = tuple(catalogue.names("answer"))  # per-question answer measures: gated when the run answers
UNDERPOWERED = "underpowered: failing on tolerance alone"


@dataclass
class GateRow:
    dataset: str
    retriever: str
    metric: str
    expected: float | None
    actual: float | None
    tolerance: float
    p_value: float | None
    state: str
    note: str = ""       # why a row is what it is ("underpowered: failing on tolerance alone", …)
    units: int = 0       # non-zero per-query (or per-cluster) differences the test had

    @property
    def delta(self) -> float | None:
        if self.expected is None or self.actual is None:
            return None
        return self.actual - self.expected


def paired_test(a: dict[str, float], b: dict[str, float], clusters: dict[str, str] | None = None,
                n_perm: int = 10000, seed: int = 0, tie_tol: float = TIE) -> tuple[float, int]:
    """(two-sided paired randomisation p, number of differences it had) on b − a over the common queries; a
    difference within ``tie_tol`` (:func:`evalkit.measures.paired.tie_tolerance` of the baseline's precision) is a
    tie, not a change. With ``clusters`` (query → cluster) whole clusters flip sign together and the count is of
    clusters whose summed difference is not a tie."""
    qs = sorted(set(a) & set(b))
    d = untie([b[q] - a[q] for q in qs], tie_tol)
    if not np.any(d):
        return 1.0, 0
    if clustered(clusters, a, b):
        groups = [clusters.get(q, q) for q in qs]
        return (float(cluster_randomization_test(d, groups, n_permutations=n_perm, seed=seed)),
                differing(cluster_sums(d, groups)[0]))
    return float(randomization_test(d, n_permutations=n_perm, seed=seed)), differing(d)


def clustered(clusters: dict[str, str] | None, a: dict, b: dict) -> bool:
    """Whether :func:`paired_test` resamples clusters for these values: clusters are declared and the common
    queries fall into at least two of them, fewer than the queries (else the test is per query, and so is its
    count of differences)."""
    if not clusters:
        return False
    qs = set(a) & set(b)
    return 2 <= len({clusters.get(q, q) for q in qs}) < len(qs)


def paired_p(a: dict[str, float], b: dict[str, float], n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomisation (sign-flip) test on the per-query differences b − a (common queries)."""
    return paired_test(a, b, None, n_perm, seed)[0]


def judge(expected: dict, current: dict[tuple[str, str, str], tuple[float, dict[str, float]]],
          alpha: float = 0.05, tolerance: float | None = None,
          clusters: dict[str, dict[str, str]] | None = None) -> list[GateRow]:
    """A state per row (see the module docstring). ``tolerance``: overrides every row's own (``--tolerance``);
    ``clusters``: per dataset, query → cluster, for datasets whose queries are not independent."""
    rows: list[GateRow] = []
    ties = tie_tolerance(baseline_decimals(expected))  # the run in memory is at full precision
    exp_rows = {(r["dataset"], r["retriever"], r["metric"]): r for r in expected.get("rows", [])}
    for key in sorted(set(exp_rows) | set(current)):
        ds, ret, m = key
        e = exp_rows.get(key)
        c = current.get(key)
        own = float(e.get("tolerance", DEFAULT_TOLERANCE)) if e else DEFAULT_TOLERANCE
        tol = own if tolerance is None else float(tolerance)
        if e is None:
            rows.append(GateRow(ds, ret, m, None, c[0], tol, None, "NEW"))
            continue
        if c is None:
            rows.append(GateRow(ds, ret, m, e["expected"], None, tol, None, "MISSING"))
            continue
        exp_v, act_v = float(e["expected"]), float(c[0])
        delta = act_v - exp_v
        p, note, units = None, "", 0
        if abs(delta) <= 1e-6 or (math.isnan(exp_v) and math.isnan(act_v)):
            state = "OK"
        elif delta < -tol:
            p, units = paired_test(e.get("per_query", {}), c[1], (clusters or {}).get(ds), tie_tol=ties)
            if p < alpha:
                state = "FAIL"
            elif not can_reach(units, alpha):
                what = "clusters" if clustered((clusters or {}).get(ds), e.get("per_query", {}), c[1]) else "queries"
                state, note = "FAIL", (f"{UNDERPOWERED} ({units} {what} differ: the smallest possible p is "
                                       f"{smallest_p(units):.3g} >= {alpha:g})")
            else:
                state, note = "WARN", f"drop beyond the tolerance, not significant (p {p:.3g} >= {alpha:g})"
        else:
            state = "WARN"
        rows.append(GateRow(ds, ret, m, exp_v, act_v, tol, p, state, note, units))
    return rows


def guard_rows(leaks: dict[tuple[str, str], tuple[float, str]]) -> list[GateRow]:
    """``secret_leak_rate`` held at 0 for every retriever that declares a secret guard: ``leaks`` maps
    (dataset, retriever) → (its secret_leak_rate, the guard stage). Any leak FAILs, whatever the baseline says;
    n/a (the dataset has no secret labels) is OK."""
    rows = []
    for (ds, ret), (v, _stage) in sorted(leaks.items()):
        state = "OK" if math.isnan(v) or v == 0 else "FAIL"
        rows.append(GateRow(ds, ret, "secret_leak_rate", 0.0, v, 0.0, None, state))
    return rows


def failed(rows: list[GateRow]) -> bool:
    return any(r.state in ("FAIL", "MISSING") for r in rows)


def gate_backend(expected: dict | None, embedder: str | None, backend: str | None, env) -> str | None:
    """The embedding backend the gate runs: the one asked for (``--embed-backend``, or an ``--embedder`` /
    ``$EVALKIT_EMBEDDER`` / ``$EVALKIT_EMBED_BACKEND`` choice, left to the embedder), else the backend that made the
    baseline — its numbers belong to that backend, not to this machine's default (bf16 where the CPU has it) — and
    for a new baseline ``torch`` float32, the reference: the default ``openvino`` runs in bfloat16 only on a CPU with
    native bfloat16, so its baseline would not reproduce on another CPU (docs/ci.md).

    >>> gate_backend(None, None, None, {})
    'torch'
    >>> gate_backend({"embedder": {"backend": "openvino"}}, None, None, {}), gate_backend(None, None, "bf16", {})
    ('openvino', 'bf16')
    """
    if backend or embedder or env.get("EVALKIT_EMBEDDER") or env.get("EVALKIT_EMBED_BACKEND"):
        return backend
    return (expected or {}).get("embedder", {}).get("backend") or "torch"


def backend_note(expected: dict | None, run: dict) -> str | None:
    """One line when this run embeds with another model or backend than the one that made the baseline (its rows
    then move by that difference: WARN rows, not a regression of the code), else None."""
    made = (expected or {}).get("embedder")
    if not made:
        return None
    keys = ("model", "backend", "max_length")
    if all(made.get(k) == run.get(k) for k in keys):
        return None
    was = ", ".join(f"{k} {made.get(k)}" for k in keys)
    now = ", ".join(f"{k} {run.get(k)}" for k in keys)
    return (f"gate: the baseline was made with {was}; this run embeds with {now}, so vector-based rows may move "
            f"by that difference (expect WARN rows)")


@dataclass
class Loss:
    """One query that lost on a gate row: its expected per-query value, the value now and its text."""

    query_id: str
    expected: float
    actual: float
    text: str

    @property
    def delta(self) -> float:
        return self.actual - self.expected


def losses(row: GateRow, expected: dict, current: dict, texts: dict[str, str]) -> list[Loss]:
    """Every query that lost on a row (expected per-query value → now) by more than the tie tolerance of the
    baseline's precision (a `-0.000` is rounding, not a loss), worst first, with the query text: what to look at
    when a row FAILs (:func:`evalkit.report.gate.loss_lines` prints the worst ten)."""
    exp = next((r.get("per_query") or {} for r in expected.get("rows", [])
                if (r["dataset"], r["retriever"], r["metric"]) == (row.dataset, row.retriever, row.metric)), {})
    cur = current.get((row.dataset, row.retriever, row.metric), (None, {}))[1]
    qs = sorted(set(exp) & set(cur))
    d = untie([cur[q] - exp[q] for q in qs], tie_tolerance(baseline_decimals(expected)))
    drops = sorted((x, q) for x, q in zip(d.tolist(), qs) if x < 0)
    return [Loss(q, exp[q], cur[q], str(texts.get(q, ""))) for _, q in drops]


# ---- the gate as a workflow (`evalkit gate`) ---------------------------------------------------------------------

@dataclass
class GateResult:
    """A gate run: every row's state, each failing row's losses (worst first), and what the report folder needs.
    ``failed`` is what `evalkit gate` turns into exit 1.

    Usage::

        result = evalkit.gate("reports/gate/expected.json")
        print(result.to_text()); sys.exit(1 if result.failed else 0)
    """

    baseline: str                  # the baseline file as given
    rows: list[GateRow]
    losses: dict[tuple[str, str, str], list[Loss]] = field(default_factory=dict)  # FAIL rows (quality metrics)
    notes: list[str] = field(default_factory=list)
    runs: list = field(default_factory=list, repr=False)   # the DatasetRuns measured (for the report folder)

    @property
    def failed(self) -> bool:
        return failed(self.rows)

    # -- its forms, rendered by evalkit.report.gate ----------------------------------------------------------------
    def to_text(self) -> str:
        """The state table and, for each failing row, its worst per-query losses."""
        return render.render_text(self)

    def to_markdown(self) -> str:
        return render.render_markdown(self)

    def to_json(self) -> str:
        return render.render_json(self)


@dataclass
class Measured:
    """What one gate run measured: the current value and per-query values per (dataset, retriever, metric)."""

    current: dict[tuple[str, str, str], tuple[float, dict[str, float]]]
    leaks: dict[tuple[str, str], tuple[float, str]]
    clusters: dict[str, dict[str, str]]
    texts: dict[str, str]
    runs: list
    datasets: list[dict]           # what a baseline records of each dataset (name, source, hash, split, queries)
    retrievers: list[dict]         # and of each retriever (name, source, hash)
    retriever_set: str | None
    embedder: object
    answer: object = None          # the AnswerSpec the run answered with (None: a retrieval-only gate)


def gated_datasets(given: list[str] | None, expected: dict | None, base_dir: Path,
                   log=print) -> list[tuple[str, str | None]]:
    """(name or path to load, split) per dataset to gate: ``given`` (``--datasets``), else the baseline's, else
    the gate suite; a registered dataset missing from the data directory is skipped with a note."""
    recorded = (expected or {}).get("datasets") if not given else None
    if recorded:
        wanted = [(resolve_source(x["source"], x["source"] in DATASETS, base_dir), x.get("split")) for x in recorded]
    else:
        wanted = [(n, None) for n in (given or GATE_DATASETS)]
    out = []
    for n, split in wanted:
        if n in DATASETS and locate(n) is None:
            log(f"gate: dataset {n} not in the data directory, skipped")
            continue
        out.append((n, split))
    if not out:
        raise CLIError("gate: no dataset available to gate on")
    return out


def load_retriever(src: str):
    """A preset, or a live system when ``src`` names a system file (:mod:`evalkit.engine.live`)."""
    return find_system(src) or load_preset(src)


def gated_pipelines(given: list[str] | None, expected: dict | None, base_dir: Path, update: bool,
                    log=print) -> tuple[list, list[str], str | None]:
    """(retrievers — presets and live systems —, their sources as given, retriever_set) of what to gate: ``given``
    (``--retrievers``), else the baseline's (every runnable preset again when it gated them all and ``update``),
    else every runnable preset."""
    if given:
        return [load_retriever(r) for r in given], given, None
    recorded = (expected or {}).get("retrievers")
    every = (expected or {}).get("retriever_set") == "presets"
    if recorded and not (update and every):
        srcs = [resolve_source(x["source"], not is_path(x["source"]), base_dir) for x in recorded]
        return [load_retriever(s) for s in srcs], srcs, (expected or {}).get("retriever_set")
    if expected and not update:  # a schema-1 baseline: the retrievers of its rows
        wanted = sorted({r["retriever"] for r in expected["rows"]})
        pipes, _ = runnable_presets(wanted, log=lambda *a: None)
        return pipes, [p.name for p in pipes], "presets"
    pipes, _ = runnable_presets(None, log=log)
    return pipes, [p.name for p in pipes], "presets"


def is_path(src: str) -> bool:
    """A preset given as a file (recorded relative to the baseline), not by name."""
    return src.endswith(".toml") or "/" in src or os.sep in src


def gate_answers(expected: dict | None, given=None, log=print, **endpoint):
    """The answer spec a gate runs: the one given (``--reader`` …), else the one the baseline records (its reader,
    judges and prompts, :meth:`evalkit.engine.answer.AnswerSpec.from_record`), else None. A prompt or model that
    differs from the baseline's record is one line: its rows test the change (a changed prompt has another hash, so
    its calls are asked again, not read from the cache)."""
    rec = (expected or {}).get("answers")
    spec = given
    if spec is None and rec:
        try:
            spec = AnswerSpec.from_record(rec, **endpoint)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"gate baseline: its 'answers' record is unreadable ({exc})") from None
    if spec is not None and rec:
        for line in spec.changed(rec):
            log(f"gate: answers: {line} since the baseline: its rows test the change")
    return spec


def measure(baseline: Path, expected: dict | None, datasets: list[str] | None, retrievers: list[str] | None,
            metrics: list[str], update: bool, settings, make_embedder, load_opts: dict | None = None,
            log=print, answer=None) -> Measured:
    """Run the gated retrievers on the gated datasets (as the baseline records them, or as given) and collect the
    gated metrics' values. ``answer`` (an :class:`evalkit.engine.answer.AnswerSpec`): the run also answers every
    question (:func:`evalkit.workflows.answer.answer_dataset`: from the answer cache when nothing changed, so a
    re-gate asks the model nothing), and the answer measures of ``metrics`` (``answer_correct``, ``answer_f1``, …)
    are gated per question exactly like a retrieval measure (paired test, clusters, underpowered rule). ``make_embedder(expected)`` builds the embedder (with :func:`gate_backend`: the backend
    that made the baseline unless one is asked for); a dataset or preset that changed since the baseline is one
    line on ``log``."""
    base_dir = Path(baseline).resolve().parent
    wanted = gated_datasets(datasets, expected, base_dir, log)
    gated, sources, retriever_set = gated_pipelines(retrievers, expected, base_dir, update, log)
    pipes = [p for p in gated if isinstance(p, Pipeline)]
    systems = [p for p in gated if not isinstance(p, Pipeline)]  # live systems: asked live, answers cached
    embedder = make_embedder(expected)
    for note in (backend_note(expected, embedder.describe()), None if update else precision_note(expected)):
        if note:
            log(note)
    wants_answers = [m for m in metrics if m in ANSWER_METRICS]
    if wants_answers and answer is None:
        raise CLIError(f"--metrics {','.join(wants_answers)}: answer measures need a reader (--reader URL "
                       f"--reader-model NAME, recorded in the baseline by --update)")
    current, leaks, clusters, texts, runs, ds_records = {}, {}, {}, {}, [], []
    guards = {p.name: secret_guard(p) for p in pipes}
    for d, split in wanted:
        dr = run_dataset(d, pipes, RunOptions(settings=settings, split=split, load_opts=load_opts, systems=systems),
                         embedder, log=log)
        runs.append(dr)
        ds = dr.dataset
        ds_records.append({"name": ds.name, "source": source_of(d, d in DATASETS, base_dir), "hash": ds.content_hash(),
                           "split": ds.info.get("split"), "queries": len(ds.queries)})
        texts.update({q.id: q.text for q in ds.queries})
        cl = declared(ds, "clusters")  # an exported folder keeps its loader's clusters (evalkit.json)
        if cl:
            clusters[ds.name] = {q.id: str(getattr(q, cl.get("by", "group")) or q.id) for q in ds.queries}
        answered = answer_dataset(dr, answer, log, warn=log)[0] if answer is not None else {}
        for name, ev in dr.evals.items():
            for m in wants_answers:
                rows = answered.get(name) or []
                pq = per_query(rows, m)
                current[(ds.name, name, m)] = (float(np.mean(list(pq.values()))) if pq else math.nan, pq)
            for m in metrics:
                if m in ANSWER_METRICS:
                    continue
                if m not in ev.means:
                    raise CLIError(f"--metrics: {m!r} is not a measure of this run "
                                    f"(e.g. {', '.join(sorted(ev.per_query)[:6])})")
                current[(ds.name, name, m)] = (ev.means[m], ev.per_query.get(m, {}))
            if guards.get(name):
                leaks[(ds.name, name)] = (ev.means.get("secret_leak_rate", float("nan")), guards[name])
    ret_records = [{"name": p.name, "source": src if not is_path(src) else source_of(src, False, base_dir),
                    "hash": p.hash} for p, src in zip(gated, sources)]
    if expected is not None:
        for line in changed_sources(expected, {d["name"]: d["hash"] for d in ds_records},
                                    {p.name: p.hash for p in gated}):
            log(line)
    return Measured(current, leaks, clusters, texts, runs, ds_records, ret_records, retriever_set, embedder, answer)


def gated_rows(expected: dict, measured: Measured, retrievers_given: bool) -> dict:
    """The baseline without the rows of datasets that did not run, and (when ``--retrievers`` narrows the gate)
    of retrievers not gated."""
    ran = {k[0] for k in measured.current}
    gated = {r["name"] for r in measured.retrievers}
    return dict(expected, rows=[r for r in expected["rows"] if r["dataset"] in ran
                                and (not retrievers_given or r["retriever"] in gated)])


def run_gate(baseline: Path, expected: dict, measured: Measured, alpha: float = 0.05,
             tolerance: float | None = None, retrievers_given: bool = False) -> GateResult:
    """Judge every row of ``measured`` against the baseline ``expected`` (:func:`gated_rows`), add the secret-guard
    rows, and collect each failing row's losses."""
    expected = gated_rows(expected, measured, retrievers_given)
    rows = judge(expected, measured.current, alpha=alpha, tolerance=tolerance, clusters=measured.clusters) \
        + guard_rows(measured.leaks)
    lost = {(r.dataset, r.retriever, r.metric): losses(r, expected, measured.current, measured.texts)
            for r in rows if r.state == "FAIL" and r.metric != "secret_leak_rate"}
    return GateResult(str(baseline), rows, lost, runs=measured.runs)


def update_baseline(path: Path, expected: dict | None, measured: Measured, tolerance: float | None = None,
                    alpha: float = 0.05, retrievers_given: bool = False) -> tuple[dict, list[str]]:
    """Rewrite the baseline file from this run (atomically) and return (the new baseline, the diff lines)."""
    if expected is not None:
        expected = gated_rows(expected, measured, retrievers_given)
    new, diff = updated(measured.current, expected, measured.embedder.describe(), tolerance, measured.datasets,
                        measured.retrievers, measured.retriever_set, alpha,
                        measured.answer.record() if measured.answer is not None else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return new, diff


def write_gate_report(result: GateResult, out: Path, settings, embedder, baseline: str, alpha: float,
                      tolerance: float | None, argv: list[str], answer=None) -> Path:
    """A failing gate's report folder: the run (metrics, per-query rows, report.md / .html, and its answers when
    ``answer`` is given — from the answer cache, asked nothing new), gate.md, gate.json."""
    writer = RunWriter(out)
    start_manifest(writer, argv, settings, embedder)
    writer.manifest["gate"] = {"baseline": baseline, "alpha": alpha, "tolerance": tolerance}
    for dr in result.runs:
        record(writer, dr)
        if answer is not None:
            record_answers(writer, dr, answer, log=lambda *a: None)
    writer.extra_files["gate.md"] = result.to_markdown()
    writer.extra_files["gate.json"] = result.to_json()
    write_reports(writer)
    return writer.write()
