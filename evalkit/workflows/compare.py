"""Compare saved run folders query by query: `evalkit compare RUN_A RUN_B [RUN_C …]`.

Systems are (run folder, dataset, retriever). A retriever name that occurs in more than one folder is labelled
``<folder>:<retriever>``; otherwise its plain name is its label. Which systems are compared:

* ``--baseline FOLDER`` (a run folder path or folder label): every other folder's (dataset, retriever) against the
  same (dataset, retriever) in the baseline folder;
* ``--baseline SYSTEM`` (a retriever name or ``folder:retriever`` label): every other system of the same dataset
  against it;
* no baseline: the same (dataset, retriever) across every pair of folders (first given = A); when the folders share
  no retriever at all (or only one folder is given), every pair of systems within each dataset.

For every pair and metric: mean A, mean B, Δ = B − A, the paired randomisation p, the paired t-test p, the
Holm-adjusted p over every pair × metric in the comparison, a significance mark (▲ / ▼ when p Holm < ``alpha``:
0.05 unless ``--alpha`` says otherwise), the interval of the mean per-query difference at the level Holm decided
the row at for that alpha (the sign-flip test inverted, :func:`evalkit.measures.stats.holm_adjusted_intervals`: it
excludes 0 exactly when the row is marked), wins / ties / losses and Cohen's d_z (all from evalkit.measures.stats;
the unadjusted 95% bootstrap interval stays in the JSON / CSV as ``ci_low`` / ``ci_high``). Queries are paired by
id: only queries scored in both runs count (a note says when the sets differ). A per-query difference within the
tie tolerance is no change in any of them — the tests, the intervals, W/T/L, the examples and the tie groups
(:data:`evalkit.measures.stats.TIE`, 1e-9, or ``--tie-tolerance``; plus 5e-7 for each side read from a run folder
written before per-query values were kept at full precision, which holds them to 6 decimals:
:func:`pair_tolerance`). Then, per pair, the queries with the
biggest wins and losses on the first metric, with the query text and each side's top document. The ranking's tie
groups are decided at the same alpha.

:func:`compare` computes a :class:`Comparison`; it renders itself (``to_text`` / ``to_markdown`` / ``to_html`` /
``to_json`` / ``to_csv``) through :mod:`evalkit.report.compare`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evalkit.data.registry import load_dataset
from evalkit.measures import catalogue, stats
from evalkit.report import compare as render
from evalkit.report.analysis import label
from evalkit.runfolder.claim import claim_folder
from evalkit.runfolder.history import resolve_run_folder
from evalkit.runfolder.read import RunFolderError
from evalkit.runfolder.view import RunData
from evalkit.errors import CompareError
from retrievers.types import DataError, Dataset

DEFAULT_METRICS = catalogue.names("compare")
HARMS = [m for m in catalogue.names("harms") if catalogue.parse(m).kind == "run"]


@dataclass
class Run:
    label: str
    path: Path
    data: RunData


@dataclass(frozen=True)
class System:
    run: str        # folder label
    dataset: str
    retriever: str
    label: str


@dataclass
class Row:
    dataset: str
    a: System
    b: System
    metric: str
    result: stats.PairedResult
    only_a: int = 0   # queries scored only in A (left out of the pairing)
    only_b: int = 0


@dataclass
class Example:
    dataset: str
    a: str
    b: str
    metric: str
    query_id: str
    value_a: float
    value_b: float
    query: str | None
    top_a: tuple[str, str | None, bool | None] | None   # (doc id, text, relevant?)
    top_b: tuple[str, str | None, bool | None] | None

    @property
    def delta(self) -> float:
        return self.value_b - self.value_a


@dataclass
class Comparison:
    """Paired comparisons of runs (what :func:`compare` / ``evalkit.compare`` returns): ``rows`` (one per pair ×
    metric, with the statistics), ``examples`` (the biggest per-query wins and losses), ``notes``, ``alpha`` (the
    significance level its marks, Holm intervals and tie groups were decided at, stated in every form); it renders
    itself (``to_text`` / ``to_markdown`` / ``to_html`` / ``to_json`` / ``to_csv``), ``table`` is a DataFrame,
    ``save`` writes the files.

    Usage::

        cmp = evalkit.compare(["reports/runs/scifact/latest", run], baseline="bm25")
        print(cmp.to_text()); cmp.save("out/compare"); cmp.table.query("p_holm < 0.05")
    """
    runs: list[Run]
    metrics: list[str]
    baseline: str | None
    alpha: float = stats.ALPHA
    rows: list[Row] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    harms: list[tuple[System, dict[str, float]]] = field(default_factory=list)  # run-level harms per system
    # tie groups per (dataset, metric): (system, mean, rank range), best mean first
    ranking: dict[tuple[str, str], list[tuple[System, float, tuple[int, int]]]] = field(default_factory=dict)
    # how each (dataset, metric)'s tie groups were decided (evalkit.measures.stats.standing): the family Holm ran
    # over, and where no test can separate any pair, the note and the clusters the best wins against each
    standings: dict[tuple[str, str], stats.Standing] = field(default_factory=dict)

    # -- its forms, rendered by evalkit.report.compare --------------------------------------------------------------
    def to_text(self) -> str:
        """The terminal form: harms, the table, tie groups, the biggest per-query differences, notes."""
        return render.render_text(self)

    def to_markdown(self) -> str:
        return render.render_markdown(self)

    def to_html(self) -> str:
        """A self-contained page (the table, a forest plot of the Holm-level intervals, examples)."""
        return render.render_html(self)

    def to_dict(self) -> dict:
        """Every row, example, harm and rank range, JSON-ready (None for a missing value)."""
        return render.render_dict(self)

    def to_json(self) -> str:
        return render.render_json(self)

    def to_csv(self) -> str:
        """One line per compared pair × metric (the JSON rows' numbers to 6 decimals)."""
        return render.render_csv(self)

    @property
    def table(self):
        """The compared pairs × metrics as a pandas DataFrame (the JSON rows: dataset, a, b, metric, n, mean_a,
        mean_b, delta, p_randomization, p_holm, mark, wins / ties / losses, the intervals …)."""
        import pandas as pd  # lazy: startup

        return pd.DataFrame(render.render_dict(self)["rows"])

    def save(self, out, formats: list[str] | None = None) -> list[Path]:
        """compare.md / .html / .csv / .json into the folder ``out`` (:func:`write_outputs`)."""
        return write_outputs(self, out, formats)


# --- loading ------------------------------------------------------------------------------------------------

IN_MEMORY = Path("<in memory>")  # the path shown for a run the Python API kept in memory (evalkit.api.Run)


def load_runs(paths: list[str | Path | RunData]) -> list[Run]:
    """Run folders (a path, or ``reports/runs/<dataset>`` for its latest run) or runs already in memory
    (:class:`RunData`, labelled ``run1``, ``run2`` … by position unless they were read from a folder)."""
    runs = []
    for p in paths:
        if isinstance(p, RunData):
            runs.append(Run("", p.path or IN_MEMORY, p))
            continue
        path = resolve_run_folder(Path(p))  # reports/runs/<dataset>: its latest run
        runs.append(Run("", path, RunData.from_folder(path)))
    names = [r.path.resolve().name if r.path != IN_MEMORY else f"run{i + 1}" for i, r in enumerate(runs)]
    for i, r in enumerate(runs):
        lab = names[i]
        if names.count(lab) > 1:
            parent = r.path.resolve().parent.name
            lab = f"{parent}/{lab}" if parent else lab
        base, k = lab, 2
        while lab in [x.label for x in runs[:i]]:
            lab = f"{base}#{k}"
            k += 1
        r.label = lab
    return runs


def systems(runs: list[Run]) -> list[System]:
    count: dict[str, set[str]] = {}
    for r in runs:
        for ds in r.data.datasets():
            for ret in r.data.retrievers(ds):
                count.setdefault(ret, set()).add(r.label)
    out = []
    for r in runs:
        for ds in r.data.datasets():
            for ret in r.data.retrievers(ds):
                lab = f"{r.label}:{ret}" if len(count[ret]) > 1 else ret
                out.append(System(r.label, ds, ret, lab))
    return out


def plan(runs: list[Run], syss: list[System], baseline: str | None) -> tuple[list[tuple[System, System]], list[str]]:
    """(A, B) pairs to compare and notes about systems left out."""
    notes: list[str] = []
    pairs: list[tuple[System, System]] = []
    by_key = {(s.run, s.dataset, s.retriever): s for s in syss}
    if baseline is not None:
        folder = _match_folder(runs, baseline)
        if folder is not None:
            for s in syss:
                if s.run == folder.label:
                    continue
                a = by_key.get((folder.label, s.dataset, s.retriever))
                if a is None:
                    notes.append(f"{s.label} ({s.dataset}) not compared: {folder.label} has no {s.retriever} "
                                 f"on {s.dataset}")
                else:
                    pairs.append((a, s))
            return pairs, notes
        matches = [s for s in syss if baseline in (s.label, s.retriever, f"{s.run}:{s.retriever}")]
        if not matches:
            raise CompareError(f"--baseline {baseline!r} is neither a run folder given nor a retriever in them "
                               f"(folders: {', '.join(r.label for r in runs)}; retrievers: "
                               f"{', '.join(sorted({s.label for s in syss}))})")
        per_ds: dict[str, list[System]] = {}
        for s in matches:
            per_ds.setdefault(s.dataset, []).append(s)
        for ds, lst in per_ds.items():
            if len(lst) > 1:
                raise CompareError(f"--baseline {baseline!r} is ambiguous on {ds} "
                                   f"({', '.join(s.label for s in lst)}): give the folder:retriever label")
            a = lst[0]
            pairs += [(a, s) for s in syss if s.dataset == ds and s != a]
        for ds in sorted({s.dataset for s in syss} - set(per_ds)):
            notes.append(f"{ds} not compared: no {baseline} there")
        return pairs, notes
    shared = [k for k in {(s.dataset, s.retriever) for s in syss}
              if len({s.run for s in syss if (s.dataset, s.retriever) == k}) > 1]
    if len(runs) > 1 and shared:
        order = {r.label: i for i, r in enumerate(runs)}
        for s in syss:
            same = sorted((x for x in syss if (x.dataset, x.retriever) == (s.dataset, s.retriever)),
                          key=lambda x: order[x.run])
            if len(same) == 1:
                notes.append(f"{s.label} ({s.dataset}) not compared: only in {s.run} (use --baseline to compare "
                             f"it with another retriever)")
            for t in same:
                if order[t.run] > order[s.run]:
                    pairs.append((s, t))
        return pairs, notes
    for ds in dict.fromkeys(s.dataset for s in syss):
        lst = [s for s in syss if s.dataset == ds]
        pairs += [(lst[i], lst[j]) for i in range(len(lst)) for j in range(i + 1, len(lst))]
    return pairs, notes


def _match_folder(runs: list[Run], value: str) -> Run | None:
    for r in runs:
        if value == r.label or value == r.path.name:
            return r
        if r.path == IN_MEMORY:
            continue
        try:
            if Path(value).resolve() == r.path.resolve():
                return r
        except OSError:
            pass
    return None


# --- comparing ----------------------------------------------------------------------------------------------

def compare(paths: list[str | Path | RunData], metrics: list[str] | None = None, baseline: str | None = None,
            n_examples: int = 5, tie_tol: float = stats.TIE, with_examples: bool = True,
            alpha: float = stats.ALPHA) -> Comparison:
    """Compare the runs ``paths`` (see the module docstring for which systems are paired) at significance level
    ``alpha`` (0 < alpha < 1): the ▲ / ▼ marks, the Holm-adjusted intervals and the ranking's tie groups.
    ``tie_tol``: per-query differences within it are ties (widened per pair by :func:`pair_tolerance`)."""
    if not 0 < alpha < 1:
        raise CompareError(f"alpha must be between 0 and 1, got {alpha}")
    runs = load_runs(paths)
    metrics = list(metrics or DEFAULT_METRICS)
    syss = systems(runs)
    if not syss:
        raise CompareError("the run folders contain no metric rows")
    data = {r.label: r.data for r in runs}
    for m in metrics:
        if not any(data[s.run].per_query(s.dataset, s.retriever, m) for s in syss):
            avail = sorted({k for s in syss for k in data[s.run].per_query_metrics(s.dataset, s.retriever)})
            raise CompareError(f"metric {m!r} has no per-query values in these runs (available: "
                               f"{', '.join(avail) or 'none'})")
    pairs, notes = plan(runs, syss, baseline)
    cmp = Comparison(runs, metrics, baseline, alpha, notes=notes)
    if not pairs:
        cmp.notes.append("nothing to compare")
        return cmp
    _hash_notes(cmp, runs)
    cmp.harms = [(x, {m: data[x.run].mean(x.dataset, x.retriever, m) for m in HARMS}) for x in syss]
    cmp.harms = [(x, v) for x, v in cmp.harms if any(not math.isnan(y) for y in v.values())]
    keys, inputs, groups, tols = [], [], [], []
    for a, b in pairs:
        cl = data[a.run].clusters(a.dataset)
        for m in metrics:
            va = data[a.run].per_query(a.dataset, a.retriever, m)
            vb = data[b.run].per_query(b.dataset, b.retriever, m)
            common, xa, xb = _paired(data, a, b, m)
            keys.append((a, b, m, len(set(va) - set(vb)), len(set(vb) - set(va))))
            inputs.append((xa, xb))
            tols.append(pair_tolerance(data, a, b, tie_tol))
            groups.append([cl[1].get(q, q) for q in common] if cl else None)
            if cl:
                cmp.notes.append(f"{a.dataset}: tests and intervals resample {cl[0]}s (queries of one {cl[0]} are "
                                 f"not independent)")
    for (a, b, m, oa, ob), res in zip(keys, stats.compare_pairs_adjusted(inputs, tie_tol=tols, groups=groups,
                                                                          alpha=alpha)):
        cmp.rows.append(Row(a.dataset, a, b, m, res, oa, ob))
        if oa or ob:
            cmp.notes.append(f"{a.label} vs {b.label} on {a.dataset} ({label(m)}): paired on {res.n} common "
                             f"queries ({oa} only in A, {ob} only in B)")
    cmp.notes = list(dict.fromkeys(cmp.notes))
    cmp.ranking = ranking(pairs, metrics, data, alpha, tie_tol, cmp.standings)
    if with_examples and n_examples > 0:
        _examples(cmp, pairs, data, n_examples, tie_tol)
    return cmp


def pair_tolerance(data: dict[str, RunData], a: System, b: System, tie: float = stats.TIE) -> float:
    """The tie tolerance between two systems' per-query values: ``tie`` plus half a unit of the last decimal of each
    side whose run folder stores them rounded (:func:`evalkit.measures.stats.tie_tolerance`)."""
    return stats.tie_tolerance(data[a.run].per_query_decimals, data[b.run].per_query_decimals, tie=tie)


def _paired(data: dict[str, RunData], a: System, b: System, m: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    va = data[a.run].per_query(a.dataset, a.retriever, m)
    vb = data[b.run].per_query(b.dataset, b.retriever, m)
    common = sorted(q for q in set(va) & set(vb) if math.isfinite(va[q]) and math.isfinite(vb[q]))
    return common, np.array([va[q] for q in common]), np.array([vb[q] for q in common])


def ranking(pairs: list[tuple[System, System]], metrics: list[str], data: dict[str, RunData],
            alpha: float = stats.ALPHA, tie_tol: float = stats.TIE, standings: dict | None = None) -> dict:
    """Tie groups as on the run report's leaderboard (:func:`evalkit.measures.stats.standing`): per dataset
    and metric, every pair of the compared systems is tested (on their common queries, resampling the dataset's
    declared clusters; a query whose two values are within :func:`pair_tolerance` is given the same value, a tie;
    significant = Holm-adjusted p < ``alpha``) and each system gets a rank range; best mean first. Where the
    clusters are too few for every pair to reach ``alpha``, each system is tested against the best only, or, when
    not even that can, ranked by the mean (``standings``, filled in place, says which)."""
    out: dict[tuple[str, str], list[tuple[System, float, tuple[int, int]]]] = {}
    for ds in dict.fromkeys(a.dataset for a, _ in pairs):
        syss = list(dict.fromkeys(s for a, b in pairs if a.dataset == ds for s in (a, b)))
        cl = next((c for c in (data[s.run].clusters(ds) for s in syss) if c), None)
        for m in metrics:
            means = {s: float(np.mean(v)) if (v := [x for x in data[s.run].per_query(ds, s.retriever, m).values()
                                                    if math.isfinite(x)]) else math.nan for s in syss}
            scored = sorted((s for s in syss if math.isfinite(means[s])), key=lambda s: -means[s])
            if len(scored) < 2:
                continue
            tests = {}
            for i, a in enumerate(scored):
                for b in scored[i + 1:]:
                    qs, xa, xb = _paired(data, a, b, m)
                    xb = np.where(stats.untie(xb - xa, pair_tolerance(data, a, b, tie_tol)) == 0, xa, xb)  # ties
                    tests[(a.label, b.label)] = (xa, xb, [cl[1].get(q, q) for q in qs] if cl else None)
            st = stats.standing([s.label for s in scored], tests, alpha, unit=cl[0] if cl else "cluster",
                                what="systems")
            if standings is not None:
                standings[(ds, m)] = st
            out[(ds, m)] = [(s, means[s], st.ranks[s.label]) for s in scored]
    return out


def _hash_notes(cmp: Comparison, runs: list[Run]) -> None:
    hashes: dict[str, set[str]] = {}
    for r in runs:
        for ds, info in (r.data.manifest.get("datasets") or {}).items():
            if isinstance(info, dict) and info.get("hash"):
                hashes.setdefault(ds, set()).add(info["hash"])
    for ds, hs in sorted(hashes.items()):
        if len(hs) > 1:
            cmp.notes.append(f"{ds}: the runs used different dataset versions (hashes {', '.join(sorted(hs))}); "
                             f"queries are paired by id")


class _Texts:
    """Query and document texts for examples: results JSONL ``query`` field first, else the dataset by name.

    Relevance flags come from the dataset's qrels only when the loaded dataset is the version the run used
    (same content hash); otherwise they are left out and a note says so.
    """

    def __init__(self):
        self._ds: dict[str, object] = {}
        self._same: dict[tuple[str, str], bool] = {}
        self.notes: list[str] = []

    def dataset(self, run: RunData, name: str):
        if name in self._ds:
            return self._ds[name]
        info = run.dataset_info(name)
        cands = [info.get("base_dataset"), name, (info.get("loader_info") or {}).get("source")]
        ds = None
        err = None
        for c in [c for c in cands if c]:
            try:
                ds = load_dataset(str(c))
                break
            except (DataError, OSError, ValueError) as exc:
                err = exc
        if ds is None:
            self.notes.append(f"{name}: query and document texts unavailable ({err})")
        self._ds[name] = ds
        return ds

    def same_version(self, run_label: str, run: RunData, name: str, ds, query_ids: set[str]) -> bool:
        key = (run_label, name)
        if key not in self._same:
            want = run.dataset_info(name).get("hash")
            same = False
            if ds is not None and want and not run.dataset_info(name).get("base_dataset"):
                try:
                    view = ds.split(run.dataset_info(name).get("split"))
                    if len(view.queries) != len(query_ids):
                        view = _restrict(view, query_ids)
                    same = view.content_hash() == want
                except ValueError:
                    same = False
            if ds is not None and not same:
                self.notes.append(f"{name}: texts come from the dataset as it is now, which is not the version "
                                  f"{run_label} used (hash {want}); relevance marks are left out")
            self._same[key] = same
        return self._same[key]


def _restrict(ds, query_ids: set[str]):
    out = Dataset(ds.name, ds.documents, [q for q in ds.queries if q.id in query_ids],
                  {q: r for q, r in ds.qrels.items() if q in query_ids},
                  {k: [q for q in v if q in query_ids] for k, v in ds.splits.items()}, dict(ds.info), ds.unit)
    return out


def _examples(cmp: Comparison, pairs, data: dict[str, RunData], n: int, tol: float) -> None:
    m = cmp.metrics[0]
    texts = _Texts()
    results_cache: dict[tuple[str, str, str], dict[str, dict]] = {}

    def results(s: System) -> dict[str, dict]:
        key = (s.run, s.dataset, s.retriever)
        if key not in results_cache:
            try:
                results_cache[key] = {it["query_id"]: it for it in data[s.run].results(s.dataset, s.retriever)}
            except RunFolderError as exc:
                texts.notes.append(str(exc))
                results_cache[key] = {}
        return results_cache[key]

    for a, b in pairs:
        va = data[a.run].per_query(a.dataset, a.retriever, m)
        vb = data[b.run].per_query(b.dataset, b.retriever, m)
        common = [q for q in set(va) & set(vb) if math.isfinite(va[q]) and math.isfinite(vb[q])]
        changes = stats.untie([vb[q] - va[q] for q in common], pair_tolerance(data, a, b, tol))
        diffs = sorted(zip(changes.tolist(), common), key=lambda x: (-x[0], x[1]))
        wins = [q for d, q in diffs if d > 0][:n]
        losses = [q for d, q in reversed(diffs) if d < 0][:n]
        if not wins and not losses:
            continue
        ra, rb = results(a), results(b)
        ds = texts.dataset(data[b.run], b.dataset)  # document texts (and query texts unless results carry them)
        qtext = {q.id: q.text for q in ds.queries} if ds is not None else {}
        docs = ds.doc_index if ds is not None else {}
        same = all(texts.same_version(s.run, data[s.run], s.dataset, ds, set(res))
                   for s, res in ((a, ra), (b, rb)))
        rel = ds.qrels if ds is not None and same else None

        def top(res: dict, q: str):
            it = res.get(q)
            if not it or not it.get("ranked"):
                return None if it is None else ("(nothing retrieved)", None, None)
            doc = it["ranked"][0][0]
            text = ds.documents[docs[doc]].full_text if ds is not None and doc in docs else None
            good = (rel.get(q, {}).get(doc, 0) >= 1) if rel is not None else None
            return doc, text, good

        for q in wins + losses:
            query = (ra.get(q) or {}).get("query") or (rb.get(q) or {}).get("query") or qtext.get(q)
            cmp.examples.append(Example(b.dataset, a.label, b.label, m, q, va[q], vb[q], query, top(ra, q),
                                        top(rb, q)))
    cmp.notes += texts.notes


def write_outputs(cmp: Comparison, out, formats: list[str] | None = None) -> list[Path]:
    """compare.<format> files into the folder ``out`` (a path or the command's early claim), written as one
    folder atomically; an existing ``out`` is replaced only when it is an earlier compare output
    (evalkit/runfolder/claim.py)."""
    claim = claim_folder(out, "compare")
    formats = formats or ["md", "html", "csv", "json"]
    forms = {"md": cmp.to_markdown, "html": cmp.to_html, "csv": cmp.to_csv, "json": cmp.to_json}
    with claim.staging() as tmp:
        for f in formats:
            (tmp / f"compare.{f}").write_text(forms[f](), encoding="utf-8")
    return [claim.path / f"compare.{f}" for f in formats]
