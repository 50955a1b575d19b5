"""CI regression gate against a committed expected-metrics file (in the spirit of Pyserini's reproducibility
matrix).

The file (``reports/gate/expected.json``) holds, per dataset × retriever × metric, the expected value, a
tolerance, and the baseline's per-query values (so a drop can be tested for significance). Each row gets a state:

* ``OK``   — within 1e-6 of the expected value;
* ``WARN`` — moved (up, or down by no more than the tolerance, or down beyond it but not significantly);
* ``FAIL`` — dropped by more than the tolerance **and** significant by the paired randomisation test (p < alpha);
* ``NEW`` / ``MISSING`` — a row only in the current run / only in the baseline (MISSING fails: a retriever
  disappeared from the gate).

Besides the baseline rows, every retriever that declares a secret guard (:func:`evalkit.engine.evaluate.secret_guard`)
gets a ``secret_leak_rate`` row that must be 0 (:func:`guard_rows`): a guard that leaks FAILs the gate.

``--update`` rewrites the file deliberately and prints the diff of expected values.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.measures import catalogue
from evalkit.measures.stats import randomization_test
from retrievers.types import DataError

GATE_FILE = Path("reports/gate/expected.json")
GATE_METRICS = catalogue.names("gate")
DEFAULT_TOLERANCE = 0.005
SCHEMA = 1


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
    if data.get("schema") != SCHEMA:
        raise DataError(f"gate baseline {path}: schema {data.get('schema')!r} is not supported (expects {SCHEMA})")
    return data


def paired_p(a: dict[str, float], b: dict[str, float], n_perm: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomisation (sign-flip) test on the per-query differences b − a (common queries)."""
    qs = sorted(set(a) & set(b))
    if not qs:
        return 1.0
    d = np.array([b[q] - a[q] for q in qs])
    if not np.any(d):
        return 1.0
    return float(randomization_test(d, n_permutations=n_perm, seed=seed))


def compare(expected: dict, current: dict[tuple[str, str, str], tuple[float, dict[str, float]]],
            alpha: float = 0.05) -> list[GateRow]:
    rows: list[GateRow] = []
    exp_rows = {(r["dataset"], r["retriever"], r["metric"]): r for r in expected.get("rows", [])}
    for key in sorted(set(exp_rows) | set(current)):
        ds, ret, m = key
        e = exp_rows.get(key)
        c = current.get(key)
        tol = float(e.get("tolerance", DEFAULT_TOLERANCE)) if e else DEFAULT_TOLERANCE
        if e is None:
            rows.append(GateRow(ds, ret, m, None, c[0], tol, None, "NEW"))
            continue
        if c is None:
            rows.append(GateRow(ds, ret, m, e["expected"], None, tol, None, "MISSING"))
            continue
        exp_v, act_v = float(e["expected"]), float(c[0])
        delta = act_v - exp_v
        p = None
        if abs(delta) <= 1e-6 or (math.isnan(exp_v) and math.isnan(act_v)):
            state = "OK"
        elif delta < -tol:
            p = paired_p(e.get("per_query", {}), c[1])
            state = "FAIL" if p < alpha else "WARN"
        else:
            state = "WARN"
        rows.append(GateRow(ds, ret, m, exp_v, act_v, tol, p, state))
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
                     f"{f(r.actual):>9} {f(r.delta):>8} {f(r.tolerance, 3):>6} {f(r.p_value, 3):>7}")
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


def updated(current: dict, previous: dict | None, embedder: dict | None = None,
            tolerance: float = DEFAULT_TOLERANCE) -> tuple[dict, list[str]]:
    """The new baseline and a human diff of expected values against the previous file. ``embedder`` (the run's
    ``Embedder.describe()``) is recorded: `evalkit gate` runs that backend again by default."""
    prev = {(r["dataset"], r["retriever"], r["metric"]): r for r in (previous or {}).get("rows", [])}
    rows, diff = [], []
    for key in sorted(current):
        ds, ret, m = key
        v, pq = current[key]
        tol = float(prev[key].get("tolerance", tolerance)) if key in prev else tolerance
        rows.append({"dataset": ds, "retriever": ret, "metric": m, "expected": round(float(v), 6),
                     "tolerance": tol, "per_query": {q: round(float(x), 6) for q, x in sorted(pq.items())}})
        if key not in prev:
            diff.append(f"+ {ds} {ret} {m}: {v:.4f}")
        elif abs(float(prev[key]["expected"]) - v) > 1e-6:
            diff.append(f"~ {ds} {ret} {m}: {float(prev[key]['expected']):.4f} -> {v:.4f}")
    for key in sorted(set(prev) - set(current)):
        diff.append(f"- {' '.join(key)}")
    new = {"schema": SCHEMA, "metrics": sorted({k[2] for k in current}), "rows": rows}
    if embedder:
        new["embedder"] = {k: embedder.get(k) for k in ("model", "backend", "max_length")}
        if (previous or {}).get("embedder") != new["embedder"]:
            diff.append(f"~ embedder: {(previous or {}).get('embedder')} -> {new['embedder']}")
    return new, diff
