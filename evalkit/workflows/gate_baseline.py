"""The gate's baseline file (``reports/gate/expected.json``, or any ``--baseline FILE``): its schema, reading it,
writing it anew with the human diff of what changed, and how it records where a dataset or a preset came from. The
gate itself — measuring, judging each row, the report — is :mod:`evalkit.workflows.gate`.

The file holds what it needs to be re-run alone (schema 3): the datasets (registered name, or folder path relative
to the baseline file, with the content hash and split), the retrievers (preset name, or preset file path relative to
the baseline file, with the preset hash), the metrics, the embedding model and backend, and per dataset × retriever ×
metric the expected value, a tolerance and the baseline's per-query values (so a drop can be tested) — every value at
full precision (JSON writes the shortest text that reads back to the same float). Older files are still read: schema
2 (the same, values rounded to 6 decimals) and schema 1 (rows only: its datasets are the gate suite, its retrievers
the rows' names; 6 decimals).

>>> source_of("locomo", True, Path(".")), resolve_source("data/mine", False, Path("reports/gate"))
('locomo', 'reports/gate/data/mine')
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from evalkit.measures.stats import tie_tolerance
from retrievers.types import DataError

GATE_FILE = Path("reports/gate/expected.json")
DEFAULT_TOLERANCE = 0.005
SCHEMA = 3
READS = (1, 2, 3)  # schema versions read (1: rows only, datasets and retrievers implied; 1 and 2: 6 decimals)
ROUNDED = {1: 6, 2: 6}  # schema → the decimals its per-query values were rounded to (3: full precision)


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


def baseline_decimals(expected: dict) -> int | None:
    """The decimals a baseline's per-query values were rounded to: None for schema 3 (full precision), 6 for the
    older schemas (:data:`ROUNDED`)."""
    return ROUNDED.get(expected.get("schema", 1))


def precision_note(expected: dict | None) -> str | None:
    """One line when the baseline's per-query values are rounded (an older schema), else None."""
    k = baseline_decimals(expected) if expected else None
    if k is None:
        return None
    return (f"gate: the baseline (schema {expected.get('schema', 1)}) keeps per-query values to {k} decimals: a "
            f"query within {tie_tolerance(k):.3g} of its value there counts as unchanged; `evalkit gate --update` "
            f"re-records it at full precision (schema {SCHEMA})")


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


def _embedder_words(e: dict | None) -> str:
    """A baseline's embedder record in words: ``all-MiniLM-L6-v2 (openvino, max 256 word pieces)``; ``none``."""
    if not e:
        return "none recorded"
    extra = ", ".join(x for x in (e.get("backend"), f"max {e['max_length']} word pieces" if e.get("max_length")
                                   else None) if x)
    return f"{e.get('model')}" + (f" ({extra})" if extra else "")


def updated(current: dict, previous: dict | None, embedder: dict | None = None,
            tolerance: float | None = None, datasets: list[dict] | None = None,
            retrievers: list[dict] | None = None, retriever_set: str | None = None,
            alpha: float = 0.05, answers: dict | None = None) -> tuple[dict, list[str]]:
    """The new baseline and a human diff against the previous file. ``embedder`` (the run's
    ``Embedder.describe()``) is recorded: `evalkit gate` runs that backend again by default. ``datasets`` /
    ``retrievers``: what the run used (``{"name", "source", "hash", …}``, sources from :func:`source_of`), so the
    file can be re-run alone; ``retriever_set = "presets"``: the run gated every runnable preset (an ``--update``
    without ``--retrievers`` does so again). ``tolerance``: every row's (``--tolerance``); None keeps each earlier
    row's own, :data:`DEFAULT_TOLERANCE` for a new one. ``answers``: the answer run's record
    (:meth:`evalkit.engine.answer.AnswerSpec.record`: reader, judges, prompt hashes), so the file re-runs its
    answers alone."""
    prev = {(r["dataset"], r["retriever"], r["metric"]): r for r in (previous or {}).get("rows", [])}
    rows, diff = [], []
    for key in sorted(current):
        ds, ret, m = key
        v, pq = current[key]
        tol = (float(tolerance) if tolerance is not None else
               float(prev[key].get("tolerance", DEFAULT_TOLERANCE)) if key in prev else DEFAULT_TOLERANCE)
        rows.append({"dataset": ds, "retriever": ret, "metric": m, "expected": float(v),  # full precision
                     "tolerance": tol, "per_query": {q: float(x) for q, x in sorted(pq.items())}})
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
        was = previous.get("schema")
        why = (["datasets and retrievers recorded: the file re-runs alone"] if was == 1 else []) + \
              (["per-query values at full precision"] if was in ROUNDED else [])
        diff.append(f"~ schema: {was} -> {SCHEMA} ({'; '.join(why)})")
    if answers is not None:
        new["answers"] = answers
        old = (previous or {}).get("answers")
        if old and old != answers:
            diff.append("~ answers: reader / judges / prompts re-recorded")
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
            diff.append(f"~ embedder: {_embedder_words((previous or {}).get('embedder'))} -> "
                        f"{_embedder_words(new['embedder'])}")
        if embedder.get("backend") == "bf16" or ":ov-bf16" in str(embedder.get("id", "")):
            diff.append(f"note: the baseline's vectors are {embedder.get('backend')} in bfloat16, which depends on the "
                        "CPU (bfloat16 only where it is native): its per-query values reproduce on a CPU like this "
                        "one, not on every machine; --embed-backend torch records the reference (float32)")
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
