"""CI regression gate against a committed expected-metrics file (in the spirit of Pyserini's reproducibility
matrix).

The file (``reports/gate/expected.json``, or any ``--baseline FILE``) holds what it needs to be re-run alone
(schema 2): the datasets (registered name, or folder path relative to the baseline file, with the content hash and
split), the retrievers (preset name, or preset file path relative to the baseline file, with the preset hash), the
metrics, the embedding model and backend, and per dataset × retriever × metric the expected value, a tolerance and
the baseline's per-query values (so a drop can be tested). ``evalkit gate --baseline FILE`` alone re-runs exactly
that. A schema-1 file (rows only) is still read: its datasets are the gate suite, its retrievers the rows' names.

Each row gets a state:

* ``OK``   — within 1e-6 of the expected value;
* ``WARN`` — moved (up, or down by no more than the tolerance, or down beyond it but not significantly while the
  test could have been);
* ``FAIL`` — dropped by more than the tolerance **and** either significant by the paired randomisation test (p <
  alpha; clustered when the dataset declares clusters), **or underpowered**: so few queries (clusters) differ that
  the exact sign-flip test could never reach alpha (its smallest p is ``2 / 2^n`` for ``n`` non-zero differences,
  :func:`evalkit.measures.stats.smallest_p`) — the row then says "underpowered: failing on tolerance alone": on a
  small set of one's own the tolerance is the only evidence there can be;
* ``NEW`` / ``MISSING`` — a row only in the current run / only in the baseline (MISSING fails: a retriever
  disappeared from the gate).

Besides the baseline rows, every retriever that declares a secret guard (:func:`evalkit.engine.evaluate.secret_guard`)
gets a ``secret_leak_rate`` row that must be 0 (:func:`guard_rows`): a guard that leaks FAILs the gate.

``--update`` rewrites the file deliberately and prints the diff of expected values. On FAIL the command prints each
failing row's worst per-query losses (with the query text) and writes a report folder (the run, report.md / .html,
gate.md): :func:`losses`, :func:`render_markdown`.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.measures import catalogue
from evalkit.measures.stats import can_reach, cluster_randomization_test, randomization_test, smallest_p
from retrievers.types import DataError

GATE_FILE = Path("reports/gate/expected.json")
GATE_METRICS = catalogue.names("gate")
DEFAULT_TOLERANCE = 0.005
SCHEMA = 2
READS = (1, 2)  # schema versions read (1: rows only, datasets and retrievers implied)
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


def load_expected(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DataError(f"gate baseline {path} not found (create it with `evalkit gate --update`)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"gate baseline {path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("schema") not in READS:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise DataError(f"gate baseline {path}: schema {got!r} is not supported (reads {', '.join(map(str, READS))})")
    if not isinstance(data.get("rows"), list):
        raise DataError(f"gate baseline {path}: no 'rows' list")
    return data


def paired_test(a: dict[str, float], b: dict[str, float], clusters: dict[str, str] | None = None,
                n_perm: int = 10000, seed: int = 0) -> tuple[float, int]:
    """(two-sided paired randomisation p, number of non-zero differences it had) on b − a over the common queries;
    with ``clusters`` (query → cluster) whole clusters flip sign together and the count is of clusters whose summed
    difference is not 0."""
    qs = sorted(set(a) & set(b))
    if not qs:
        return 1.0, 0
    d = np.array([b[q] - a[q] for q in qs])
    if not np.any(d):
        return 1.0, 0
    if clusters:
        groups = [clusters.get(q, q) for q in qs]
        sums: dict[str, float] = {}
        for g, x in zip(groups, d):
            sums[g] = sums.get(g, 0.0) + x
        if 2 <= len(sums) < len(qs):
            return (float(cluster_randomization_test(d, groups, n_permutations=n_perm, seed=seed)),
                    sum(1 for v in sums.values() if v != 0))
    return float(randomization_test(d, n_permutations=n_perm, seed=seed)), int(np.count_nonzero(d))


def paired_p(a: dict[str, float], b: dict[str, float], n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomisation (sign-flip) test on the per-query differences b − a (common queries)."""
    return paired_test(a, b, None, n_perm, seed)[0]


def compare(expected: dict, current: dict[tuple[str, str, str], tuple[float, dict[str, float]]],
            alpha: float = 0.05, tolerance: float | None = None,
            clusters: dict[str, dict[str, str]] | None = None) -> list[GateRow]:
    """A state per row (see the module docstring). ``tolerance``: overrides every row's own (``--tolerance``);
    ``clusters``: per dataset, query → cluster, for datasets whose queries are not independent."""
    rows: list[GateRow] = []
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
            p, units = paired_test(e.get("per_query", {}), c[1], (clusters or {}).get(ds))
            if p < alpha:
                state = "FAIL"
            elif not can_reach(units, alpha):
                what = "clusters" if (clusters or {}).get(ds) else "queries"
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


def table(rows: list[GateRow]) -> str:
    w = max([len(r.retriever) for r in rows] + [9])
    dw = max([len(r.dataset) for r in rows] + [7])
    lines = [f"{'state':<7} {'dataset':<{dw}} {'retriever':<{w}} {'metric':<10} {'expected':>9} {'actual':>9} "
             f"{'delta':>8} {'tol':>6} {'p':>7}"]
    for r in rows:
        f = lambda v, n=4: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{n}f}"  # noqa
        lines.append(f"{r.state:<7} {r.dataset:<{dw}} {r.retriever:<{w}} {r.metric:<10} {f(r.expected):>9} "
                     f"{f(r.actual):>9} {f(r.delta):>8} {f(r.tolerance, 3):>6} {f(r.p_value, 3):>7}"
                     + (f"  {r.note}" if r.note else ""))
    counts = {s: sum(1 for r in rows if r.state == s) for s in ("OK", "WARN", "FAIL", "NEW", "MISSING")}
    lines.append("gate: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    return "\n".join(lines)


def failed(rows: list[GateRow]) -> bool:
    return any(r.state in ("FAIL", "MISSING") for r in rows)


def gate_backend(expected: dict | None, embedder: str | None, backend: str | None, env) -> str | None:
    """The embedding backend the gate runs: the one asked for (``--embed-backend``, or an ``--embedder`` /
    ``$EVALKIT_EMBEDDER`` / ``$EVALKIT_EMBED_BACKEND`` choice, left to the embedder), else the backend that made the
    baseline — its numbers belong to that backend, not to this machine's default (bf16 where the CPU has it)."""
    if backend or embedder or env.get("EVALKIT_EMBEDDER") or env.get("EVALKIT_EMBED_BACKEND"):
        return backend
    return (expected or {}).get("embedder", {}).get("backend")


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


def source_of(given: str, registered: bool, base_dir: Path) -> str:
    """How a baseline records a dataset or a preset: a registered name as it is; a path relative to the baseline
    file's folder (so the file and the data can move together, and CI can run from any directory)."""
    if registered:
        return given
    return os.path.relpath(Path(given).resolve(), Path(base_dir).resolve())


def resolve_source(src: str, registered: bool, base_dir: Path) -> str:
    """The reverse of :func:`source_of`: a name as is, a relative path from the baseline file's folder."""
    if registered or Path(src).is_absolute():
        return src
    return str(Path(base_dir) / src)


def updated(current: dict, previous: dict | None, embedder: dict | None = None,
            tolerance: float | None = None, datasets: list[dict] | None = None,
            retrievers: list[dict] | None = None, retriever_set: str | None = None,
            alpha: float = 0.05) -> tuple[dict, list[str]]:
    """The new baseline and a human diff against the previous file. ``embedder`` (the run's
    ``Embedder.describe()``) is recorded: `evalkit gate` runs that backend again by default. ``datasets`` /
    ``retrievers``: what the run used (``{"name", "source", "hash", …}``, sources from :func:`source_of`), so the
    file can be re-run alone; ``retriever_set = "presets"``: the run gated every runnable preset (an ``--update``
    without ``--retrievers`` does so again). ``tolerance``: every row's (``--tolerance``); None keeps each earlier
    row's own, :data:`DEFAULT_TOLERANCE` for a new one."""
    prev = {(r["dataset"], r["retriever"], r["metric"]): r for r in (previous or {}).get("rows", [])}
    rows, diff = [], []
    for key in sorted(current):
        ds, ret, m = key
        v, pq = current[key]
        tol = (float(tolerance) if tolerance is not None else
               float(prev[key].get("tolerance", DEFAULT_TOLERANCE)) if key in prev else DEFAULT_TOLERANCE)
        rows.append({"dataset": ds, "retriever": ret, "metric": m, "expected": round(float(v), 6),
                     "tolerance": tol, "per_query": {q: round(float(x), 6) for q, x in sorted(pq.items())}})
        if key not in prev:
            diff.append(f"+ {ds} {ret} {m}: {v:.4f}")
        elif abs(float(prev[key]["expected"]) - v) > 1e-6:
            diff.append(f"~ {ds} {ret} {m}: {float(prev[key]['expected']):.4f} -> {v:.4f}")
        elif abs(float(prev[key].get("tolerance", DEFAULT_TOLERANCE)) - tol) > 1e-12:
            diff.append(f"~ {ds} {ret} {m}: tolerance {float(prev[key].get('tolerance', DEFAULT_TOLERANCE)):g} "
                        f"-> {tol:g}")
    for key in sorted(set(prev) - set(current)):
        diff.append(f"- {' '.join(key)}")
    new = {"schema": SCHEMA, "alpha": alpha, "metrics": sorted({k[2] for k in current}), "rows": rows}
    if datasets is not None:
        new["datasets"] = datasets
    if retrievers is not None:
        new["retrievers"] = retrievers
        if retriever_set:
            new["retriever_set"] = retriever_set
    if previous and previous.get("schema") != SCHEMA:
        diff.append(f"~ schema: {(previous or {}).get('schema')} -> {SCHEMA} (datasets and retrievers recorded: the "
                    f"file re-runs alone)")
    for what in ("datasets", "retrievers"):
        was = {x["name"]: x for x in (previous or {}).get(what) or []}
        for x in new.get(what) or []:
            old = was.get(x["name"])
            if old and (old.get("hash"), old.get("source")) != (x.get("hash"), x.get("source")):
                diff.append(f"~ {what[:-1]} {x['name']}: {old.get('source')} {old.get('hash')} -> "
                            f"{x.get('source')} {x.get('hash')}")
    if embedder:
        new["embedder"] = {k: embedder.get(k) for k in ("model", "backend", "max_length")}
        if (previous or {}).get("embedder") != new["embedder"]:
            diff.append(f"~ embedder: {(previous or {}).get('embedder')} -> {new['embedder']}")
    return new, diff


def changed_sources(expected: dict, datasets: dict[str, str], retrievers: dict[str, str]) -> list[str]:
    """One line per dataset whose content or preset whose configuration differs from what the baseline recorded
    (``datasets`` / ``retrievers``: name → current hash). A changed preset is what the gate is there to test; a
    changed dataset means the rows compare different data."""
    out = []
    for x in expected.get("datasets") or []:
        now = datasets.get(x["name"])
        if now and x.get("hash") and now != x["hash"]:
            out.append(f"gate: dataset {x['name']} ({x.get('source')}) changed since the baseline (hash {x['hash']} -> "
                       f"{now}): its rows compare different data; `evalkit gate --update` re-records it")
    for x in expected.get("retrievers") or []:
        now = retrievers.get(x["name"])
        if now and x.get("hash") and now != x["hash"]:
            out.append(f"gate: preset {x['name']} ({x.get('source')}) changed since the baseline (hash {x['hash']} -> "
                       f"{now}): its rows test the change")
    return out


def losses(row: GateRow, expected: dict, current: dict, texts: dict[str, str], n: int = 10) -> list[str]:
    """The ``n`` queries that lost the most on a row (expected per-query value → now), worst first, with the query
    text: what to look at when a row FAILs."""
    exp = next((r.get("per_query") or {} for r in expected.get("rows", [])
                if (r["dataset"], r["retriever"], r["metric"]) == (row.dataset, row.retriever, row.metric)), {})
    cur = current.get((row.dataset, row.retriever, row.metric), (None, {}))[1]
    drops = sorted(((cur[q] - exp[q], q) for q in set(exp) & set(cur) if cur[q] < exp[q]), key=lambda x: (x[0], x[1]))
    out = []
    for d, q in drops[:n]:
        text = " ".join(str(texts.get(q, "")).split())
        text = text if len(text) <= 100 else text[:99] + "…"
        out.append(f"  {d:+.3f}  {q} ({exp[q]:.3f} -> {cur[q]:.3f}): {text}")
    if len(drops) > n:
        out.append(f"  … {len(drops) - n} more queries lost")
    return out


def render_markdown(rows: list[GateRow], loss_lines: dict[tuple[str, str, str], list[str]], baseline: str,
                    notes: list[str]) -> str:
    """gate.md of a failing gate's report folder: the table, the notes, each failing row's worst losses."""
    out = ["# evalkit gate", "", f"Baseline: `{baseline}`", "", "```", table(rows), "```", ""]
    out += [f"- {n}" for n in notes] + ([""] if notes else [])
    for key, lines in loss_lines.items():
        out += [f"## {' · '.join(key)}: worst per-query losses", "", "```", *lines, "```", ""]
    return "\n".join(out)
