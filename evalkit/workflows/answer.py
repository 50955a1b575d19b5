"""`evalkit answer` (= `evalkit run --answer`): a run whose retrievers' injected blocks are also answered by a reader
model and judged (:mod:`evalkit.engine.answer`), written into the same run folder.

What it adds to the folder (docs/answers.md):

* ``answers/<dataset>/<retriever>.jsonl`` — one line per question: the answer, the verdicts, every measure, the
  attribution, tokens; ``answers.csv`` — the same, flat; ``answers-<dataset>.md`` + ``answers-funnel-<dataset>.png``
  + ``answers-budget-<dataset>.png`` (accuracy against the mean injected tokens: a curve per retriever through its
  ``--budgets`` variants, :func:`evalkit.engine.answer.budget_variants`);
* rows of ``metrics.json`` / ``per_query.csv`` for the answer measures, so `evalkit compare` and `evalkit gate`
  read them like any other (``answer_correct``, ``answer_f1``, …);
* the manifest's ``answers``: reader and judge model ids, endpoints, prompt names and hashes, parameters.

Nothing in the folder depends on how many answers came from the cache: a rerun writes the same bytes (the call
counts go to the terminal only). :func:`answer_folder` answers a saved run folder's recorded blocks
(`evalkit answer RUN_FOLDER`) without running a retriever; :func:`answer_dataset` is what `evalkit gate` measures
answers with.

Usage::

    spec = AnswerSpec(Endpoint(url, "smollm2-135m-instruct"), [Judge(Endpoint(url, "smollm2-135m-instruct"),
                                                                   Prompt.load("judge-v1"))])
    record_answers(writer, dataset_run, spec)
"""
from __future__ import annotations

import csv
import io
import json
import math

from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data.registry import load_dataset
from evalkit.engine.answer import AnswerSpec, answer_questions, summary
from evalkit.engine.runner import QueryResult
from evalkit.measures import catalogue
from evalkit.report.answers import answers_markdown, budget_png, budget_points, funnel_png
from evalkit.runfolder.read import read_results, safe
from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter, value_text
from retrievers.types import DataError

#: per-question columns written as per_query.csv measures (compare / gate read them)
PER_QUERY = tuple(catalogue.names("answer"))
FAULT_THRESHOLD = 0.05


def _clean(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def answer_dataset(dr, spec: AnswerSpec, log=print, warn=None) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """Answer every retriever of the dataset run ``dr``: (retriever → per-question rows, retriever → run-level
    measures). DataError (one line) when more than 5 % of a retriever's questions faulted: the answered ones are
    cached, so running again resumes. `evalkit gate` measures answer runs through this too."""
    ds = dr.dataset
    texts = {d.id: d.text for d in ds.documents}
    by_ret: dict[str, list[dict]] = {}
    means: dict[str, dict[str, float]] = {}
    eps = [spec.reader] + [j.endpoint for j in spec.judges]
    before = [(e.asked, e.cache_hits) for e in eps]
    for name, run in dr.runs.items():
        if name.endswith("~ungated") or name not in dr.evals:
            continue
        rows = answer_questions(ds, run, spec, texts)
        faulted = [r for r in rows if r["verdict"] == "fault"]
        if faulted:
            msg = (f"{ds.name}: {name}: {len(faulted)} of {len(rows)} questions faulted (last: {faulted[-1]['fault']})"
                   f"; scored as not correct — run again to ask them again (the rest is cached)")
            if len(faulted) > FAULT_THRESHOLD * len(rows):
                raise DataError(msg.replace("; scored as not correct — run again to ask them again",
                                            f", more than the {FAULT_THRESHOLD:.0%} allowed; run again to resume"))
            (warn or log)(f"evalkit: warning: {msg}")
        unparsed = sum(len(r.get("unparsed") or ()) for r in rows)
        if unparsed:
            (warn or log)(f"evalkit: warning: {ds.name}: {name}: {unparsed} judge replies named neither CORRECT nor "
                          f"WRONG; counted as WRONG")
        by_ret[name] = rows
        means[name] = summary(rows, spec)
    asked = sum(e.asked - a for e, (a, _) in zip(eps, before))
    hits = sum(e.cache_hits - h for e, (_, h) in zip(eps, before))
    log(f"  {ds.name}: answers: {len(ds.queries)} questions × {len(by_ret)} retrievers; "
        f"calls asked {asked}, from cache {hits}")
    return by_ret, means


def per_query(rows: list[dict], measure: str) -> dict[str, float]:
    """query id → a per-question answer measure (questions where it is empty left out)."""
    return {r["query_id"]: float(r[measure]) for r in rows if _clean(r.get(measure)) is not None}


def record_answers(writer: RunWriter, dr, spec: AnswerSpec, log=print, warn=None) -> dict[str, list[dict]]:
    """Answer every retriever of the dataset run ``dr`` (:func:`answer_dataset`) and record it in ``writer``;
    returns retriever → rows. DataError (one line, no folder) when more than 5 % of the questions faulted."""
    ds = dr.dataset
    by_ret, means = answer_dataset(dr, spec, log, warn)
    for name, rows in by_ret.items():
        for m, v in means[name].items():
            writer.add_metric(ds.name, name, m, v)
        for r in rows:
            for m in PER_QUERY:
                if _clean(r.get(m)) is not None:
                    writer.per_query.append({"dataset": ds.name, "retriever": name, "query_id": r["query_id"],
                                             "category": r["category"], "metric": m, "value": r[m]})
        writer.extra_files[f"answers/{safe(ds.name)}/{safe(name)}.jsonl"] = "".join(
            json.dumps({k: _clean(v) for k, v in r.items()}, ensure_ascii=False, sort_keys=True) + "\n"
            for r in rows)
    rec = spec.record()
    writer.manifest.setdefault("answers", {})[ds.name] = rec
    writer.extra_files["answers.csv"] = writer.extra_files.get("answers.csv", "") + _csv(ds.name, by_ret, rec,
                                                                                         "answers.csv" not in
                                                                                         writer.extra_files)
    writer.extra_files[f"answers-{safe(ds.name)}.md"] = answers_markdown(ds.name, by_ret, means, rec)
    writer.extra_files[f"answers-funnel-{safe(ds.name)}.png"] = funnel_png(by_ret, f"{ds.name}: answers")
    tokens = {(r["retriever"], r["metric"]): r["value"] for r in writer.metrics if r["dataset"] == ds.name}
    writer.extra_files[f"answers-budget-{safe(ds.name)}.png"] = budget_png(budget_points(
        list(by_ret), {n: tokens.get((n, "injected_tokens_mean")) for n in by_ret},
        {n: means[n]["answer_correct"] for n in by_ret}), f"{ds.name}: accuracy against the injection budget")
    return by_ret


def _csv(dataset: str, by_ret: dict[str, list[dict]], rec: dict, header: bool) -> str:
    judges = [j["label"] for j in rec["judges"]]
    cols = ["dataset", "retriever", "query_id", "category", "verdict", "attribution", "answer_correct",
            *[f"judge:{j}" for j in judges], "judge_agreement", "answer_exact", "answer_f1", "evidence_in_context",
            "answer_in_context", "declined", "expects_decline", "tokens_in", "tokens_out", "gold", "answer", "fault"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(cols)
    for name, rows in by_ret.items():
        for r in rows:
            vals = {**r, "dataset": dataset, "retriever": name, **{f"judge:{j}": r.get("judges", {}).get(j)
                                                                     for j in judges}}
            w.writerow([value_text(v) if isinstance(v, float) else ("" if v is None else v)
                        for v in (vals.get(c) for c in cols)])
    return buf.getvalue()


# ---- answering a saved run folder (`evalkit answer RUN_FOLDER`) -------------------------------------------------

@dataclass
class SavedRun:
    """One retriever of a saved run folder as the answer workflow reads it: query id → QueryResult (injected ids
    and, when the run rendered one, the exact block — ``results[].injected_block``)."""

    results: dict[str, QueryResult]


@dataclass
class SavedDatasetRun:
    """A saved run folder's dataset as :func:`answer_dataset` reads a live one: the dataset (the run's queries
    only), its retrievers' saved results, and their names (``evals``)."""

    dataset: object
    runs: dict[str, SavedRun]
    evals: dict[str, bool] = field(default_factory=dict)


def saved_runs(folder: Path, dataset: str | None = None, retrievers: list[str] | None = None,
               load_opts: dict | None = None, log=print) -> tuple[RunData, list[SavedDatasetRun]]:
    """The datasets and retrievers of a saved run folder, ready to answer without running any retriever: each
    dataset loaded again by its recorded name (or ``dataset``, a name or folder path, for a folder-path dataset),
    refused when its content hash differs from the one the run recorded (the injected ids would point at other
    texts), cut to the run's queries; each retriever's blocks as the run injected them (a folder written before
    blocks were recorded answers from the injected notes' texts: one line says so). DataError for anything
    missing."""
    data = RunData.from_folder(Path(folder))  # RunFolderError (one line) for a damaged or foreign folder
    if not data.manifest.get("injected_blocks"):
        log(f"evalkit: warning: {folder}: written before run folders kept the rendered blocks; a retriever's block "
            f"is rebuilt from its injected notes (one '- ' line each), as for a retriever that renders none")
    out = []
    for name in data.datasets():
        info = data.dataset_info(name)
        src = dataset or info.get("base_dataset") or name
        try:
            ds = load_dataset(str(src), **(load_opts or {}))
        except DataError as exc:
            raise DataError(f"{folder}: its dataset {name} does not load ({exc}); give --dataset NAME_OR_PATH") \
                from None
        if ds.name != name:
            continue
        names = data.retrievers(name)
        wanted = [r for r in names if not r.endswith("~ungated")] if not retrievers else retrievers
        missing = [r for r in wanted if r not in names]
        if missing:
            raise DataError(f"{folder}: no retriever {', '.join(missing)} for {name} (it has {', '.join(names)})")
        runs = {}
        for r in wanted:
            rows = read_results(Path(folder), name, r)
            runs[r] = SavedRun({x["query_id"]: QueryResult([tuple(h) for h in x.get("ranked") or []],
                                                           list(x.get("injected") or []), bool(x.get("skipped")),
                                                           x.get("budget") or {}, x.get("injected_block"))
                                for x in rows})
        qids = set().union(*(set(r.results) for r in runs.values())) if runs else set()
        ds = ds.subset([q.id for q in ds.queries if q.id in qids])
        if len(ds.queries) != len(qids):
            raise DataError(f"{folder}: {len(qids) - len(ds.queries)} of the run's queries are not in dataset {name}")
        if info.get("hash") and ds.content_hash() != info["hash"]:  # the run recorded its queries' dataset
            raise DataError(f"{folder}: dataset {name} changed since the run (hash {info['hash']} -> "
                            f"{ds.content_hash()}): its injected ids would point at other texts; run it again")
        out.append(SavedDatasetRun(ds, runs, {r: True for r in runs}))
    if not out:
        raise DataError(f"{folder}: none of its datasets ({', '.join(data.datasets)}) loaded as "
                        f"{dataset or 'its recorded name'}: give --dataset NAME_OR_PATH")
    return data, out


def answer_folder(folder: Path, spec: AnswerSpec, out: Path, dataset: str | None = None,
                  retrievers: list[str] | None = None, load_opts: dict | None = None, log=print,
                  argv: list[str] | None = None) -> RunWriter:
    """`evalkit answer RUN_FOLDER`: answer the blocks a saved run injected (no retriever runs again) into a new
    folder ``out``: the saved run's metrics and per-query rows for the answered retrievers, plus everything an
    answer run adds (:func:`record_answers`), the manifest copied with ``answered_from`` and the answers record."""
    writer = RunWriter(out)   # claimed before any work
    data, runs = saved_runs(folder, dataset, retrievers, load_opts, log)
    writer.manifest.update({k: v for k, v in data.manifest.items() if k != "answers"})
    writer.manifest["answered_from"] = {"folder": str(folder), "command": data.manifest.get("command")}
    if argv is not None:
        writer.manifest["command"] = argv
    for dr in runs:
        ds = dr.dataset.name
        cats = data.categories(ds)
        for ret in dr.runs:   # the saved run's own numbers, without any answers it carried (answered again here)
            for m, v in data.means[ds][ret].items():
                if not _answer_measure(m):
                    writer.add_metric(ds, ret, m, v)
            for m in data.per_query_metrics(ds, ret):
                if not _answer_measure(m):
                    writer.per_query += [{"dataset": ds, "retriever": ret, "query_id": q, "category": cats.get(q),
                                          "metric": m, "value": v} for q, v in data.per_query(ds, ret, m).items()]
        record_answers(writer, dr, spec, log=log)
    return writer


def _answer_measure(name: str) -> bool:
    """A measure an answer run writes (per question or run level): left out when a saved run is answered again."""
    return name in PER_QUERY or name.startswith(("answer_", "answers_", "judge_"))
