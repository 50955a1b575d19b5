"""Writing a run folder (the layout in :mod:`evalkit.runfolder`): :class:`RunWriter` accumulates a run's rows in
memory and writes the folder atomically through its claim (:mod:`evalkit.runfolder.claim`).

Metrics files contain no timings, so the same run twice gives byte-identical metrics files. The whole folder is
written to a temporary sibling and renamed into place (the claim also marks it as evalkit's with
``.evalkit-output.json``): an interrupted or failed run leaves nothing half-written, and an existing path is
replaced only when it is this command's own earlier output.

Usage::

    w = RunWriter(Path("out"))                 # claims the path before any work
    w.add_metric("scifact", "bm25", "ndcg@10", 0.67)
    w.write()
"""
from __future__ import annotations

import contextlib
import csv
import heapq
import json
import math
import os
import platform
import shutil
import sys
from importlib.metadata import PackageNotFoundError, version
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.runfolder.claim import FolderClaim, claim_folder
from evalkit.runfolder.read import (PER_QUERY_DECIMALS, PER_QUERY_HEADER, SCHEMA_VERSION, RunFolderError,
                                   per_query_rows, safe)


def trec_score_texts(ranked: list) -> list[str]:
    """The score column of a TREC run file for one query's ranked ``[(doc, score), …]``, written so that trec_eval
    ranks the lines exactly as the harness did. trec_eval ignores the rank column: it sorts by the score compared
    as a C ``float`` (single precision), ties by document id *descending*, while the harness breaks ties its own
    way (each pipeline's rule, usually document id ascending) — so equal scores (RRF's 1/61 + 1/62 = 1/62 + 1/61)
    or scores equal after rounding would be re-ordered and ``trec_eval -c`` on the file would disagree with the
    run's metrics. Each score is written at 6 decimals; where that is not strictly below the previous line's in
    single precision, the line gets the single-precision number one step below it (9 significant digits, which
    read back exactly as a float): the scores strictly decrease down the file, so trec_eval, ranx, ir_measures or
    PyTerrier — whatever their tie rule — rank it as the harness did, and every measure is the run's. The exact
    scores stay in ``results/…jsonl``. Checked against trec_eval's own code in
    tests/parity/test_trec_runs_pytrec_eval.py.

    >>> trec_score_texts([("a", 0.5), ("b", 0.5), ("c", 0.25)])
    ['0.500000', '0.49999997', '0.250000']
    """
    out: list[str] = []
    prev: np.float32 | None = None
    for _doc, score in ranked:
        text = f"{score:.6f}"
        v = np.float32(float(text))
        if prev is not None and not v < prev:
            v = np.nextafter(prev, np.float32(-np.inf))
            text = f"{float(v):.9g}"
        out.append(text)
        prev = v
    return out


def value_text(v: float) -> str:
    """A mean in the metrics files (the run folder's contract): 6 decimals, platform-independent; empty when
    missing. Not a display format (that is :mod:`evalkit.report.format`); per-query values are
    :func:`exact_text`."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6f}"


def exact_text(v: float) -> str:
    """A per-query value in ``per_query.csv``: the shortest text that reads back to the same float (``repr``), so
    a paired test of two runs sees their real differences, not rounding; empty when missing.

    >>> exact_text(0.6309297535714575), exact_text(1), exact_text(float("nan"))
    ('0.6309297535714575', '1.0', '')
    """
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return repr(float(v))


class RunWriter:
    """Accumulate a run's rows in memory and write the folder atomically on ``commit``."""

    def __init__(self, out: Path | FolderClaim | None, kind: str = "run"):
        """``out`` is claimed now, before any work (OutputPathError when it holds anything of the user's);
        ``kind`` names the command whose output it is (evalkit/runfolder/claim.py KINDS: run, replay, bench-run).
        ``out=None``: a run kept in memory (the Python API's ``evalkit.run``), claimed later by :meth:`claim_at`."""
        self.kind = kind
        self.claim = claim_folder(out, kind) if out is not None else None
        self.out = self.claim.path if self.claim is not None else None
        self.metrics: list[dict] = []
        self.by_category: list[dict] = []
        self.per_query: list[dict] = []
        # rows of results/…jsonl per (dataset, retriever): a list, or a view that makes them when read (re-iterable)
        self.results: dict[tuple[str, str], Collection[dict]] = {}
        # per_query.csv at full precision (None); a writer that takes in rounded rows says so (bench's _merge)
        self.manifest: dict[str, Any] = {"schema_version": SCHEMA_VERSION, PER_QUERY_DECIMALS: None}
        self.extra_files: dict[str, str | bytes] = {}
        self.diagnostics: dict[str, dict] = {}  # dataset -> retriever -> funnel / thresholds / budget curve
        # finished run folders whose per-query rows and results this run holds on disk (include())
        self.included: list[Path] = []

    def add_metric(self, dataset: str, retriever: str, metric: str, value: float) -> None:
        self.metrics.append({"dataset": dataset, "retriever": retriever, "metric": metric, "value": value})

    def include(self, folder: Path) -> None:
        """Hold a finished run folder's per-query rows and results (its ``per_query.csv`` and every
        ``results/…jsonl`` / ``runs/…trec``) by reference: they stay on disk, streamed into this folder when it is
        written and read when a report asks (:meth:`evalkit.runfolder.view.RunData.from_writer`), so a writer that
        gathers many runs — the bench's combined folder — never holds their rows in memory (LongMemEval-S and
        LoCoMo: ~1.1 M per-query rows, ~400 MB of results with their injected blocks). The written files are those
        the rows in memory would give: ``per_query.csv`` merged in the same order with the same value texts, the
        results and run files copied. Its metrics, breakdown rows and manifest are the caller's to add.

        Usage::

            combined.include(Path("reports/bench/datasets/scifact"))
        """
        self.included.append(Path(folder))

    def included_results(self) -> dict[tuple[str, str], Path]:
        """(dataset directory name, retriever file stem) → the run folder of :meth:`include` holding that results
        file (the first one that does; rows in :attr:`results` come before any of them)."""
        out: dict[tuple[str, str], Path] = {}
        for folder in self.included:
            for f in sorted((folder / "results").glob("*/*.jsonl")):
                out.setdefault((f.parent.name, f.stem), folder)
        return out

    def claim_at(self, out: Path | FolderClaim) -> Path:
        """Claim ``out`` for a run kept in memory (or claim another folder for the same rows); returns its path."""
        self.claim = claim_folder(out, self.kind)
        self.out = self.claim.path
        return self.out

    def write(self) -> Path:
        """Write the folder atomically where it was claimed (:mod:`evalkit.runfolder.claim`: never over anything of
        the user's)."""
        if self.claim is None:
            raise RunFolderError("this run is kept in memory: claim an output folder first (RunWriter.claim_at)")
        with self.claim.staging() as tmp:
            self._write_into(tmp)
        return self.out

    def _write_into(self, d: Path) -> None:
        rows = sorted(self.metrics, key=lambda r: (r["dataset"], r["retriever"], r["metric"]))
        (d / "metrics.json").write_text(json.dumps(
            {"schema_version": SCHEMA_VERSION,
             "rows": [dict(r, value=None if _nan(r["value"]) else round(r["value"], 6)) for r in rows]},
            indent=1, sort_keys=True) + "\n")
        _csv(d / "metrics.csv", ["dataset", "retriever", "metric", "value"],
             [[r["dataset"], r["retriever"], r["metric"], value_text(r["value"])] for r in rows])
        cat = sorted(self.by_category, key=lambda r: (r["dataset"], r["retriever"], r["breakdown"], str(r["bucket"]),
                                                      r["metric"]))
        _csv(d / "metrics_by_category.csv", ["dataset", "retriever", "breakdown", "bucket", "metric", "value", "n"],
             [[r["dataset"], r["retriever"], r["breakdown"], r["bucket"], r["metric"], value_text(r["value"]),
               r["n"]]
              for r in cat])
        key = lambda r: (r[0], r[1], r[2], r[4])  # noqa: E731 (dataset, retriever, query, metric)
        mem = ([r["dataset"], r["retriever"], r["query_id"], r.get("category") or "", r["metric"], r["value"]]
               for r in sorted(self.per_query, key=lambda r: (r["dataset"], r["retriever"], r["query_id"],
                                                              r["metric"])))
        # an included folder's file is in the same order (its writer sorted it): a merge, its rows streamed
        streams = [mem] + [per_query_rows(f) for f in self.included]
        with open(d / "per_query.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(PER_QUERY_HEADER)
            w.writerows(r[:5] + [exact_text(_value(r[5]))] for r in heapq.merge(*streams, key=key))
        written = set()
        for (ds, ret), items in sorted(self.results.items()):
            written.add((safe(ds), safe(ret)))
            rd = d / "results" / safe(ds)
            rd.mkdir(parents=True, exist_ok=True)
            with open(rd / f"{safe(ret)}.jsonl", "w", encoding="utf-8") as fh:
                for it in items:
                    fh.write(json.dumps(it, ensure_ascii=False, sort_keys=True) + "\n")
            td = d / "runs" / safe(ds)
            td.mkdir(parents=True, exist_ok=True)
            with open(td / f"{safe(ret)}.trec", "w", encoding="utf-8") as fh:
                for it in items:
                    ranked = it["ranked"]
                    for rank, ((doc, _), text) in enumerate(zip(ranked, trec_score_texts(ranked)), start=1):
                        fh.write(f"{it['query_id']} Q0 {doc} {rank} {text} {ret}\n")
        for (ds, ret), folder in sorted(self.included_results().items()):
            if (ds, ret) in written:
                continue
            for sub, ext in (("results", "jsonl"), ("runs", "trec")):
                src = folder / sub / ds / f"{ret}.{ext}"
                if src.exists():  # the files the rows would give, written by the same writer: copied as they are
                    (d / sub / ds).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, d / sub / ds / f"{ret}.{ext}")
        man = dict(self.manifest)
        if "machine" not in man:  # (not setdefault: machine() imports torch)
            man["machine"] = machine()
        (d / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True, default=str) + "\n")
        if self.diagnostics:
            (d / "diagnostics.json").write_text(json.dumps(self.diagnostics, indent=1, sort_keys=True) + "\n")
        for name, text in self.extra_files.items():
            p = d / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):  # a picture (the answer funnel PNG)
                p.write_bytes(text)
            else:
                p.write_text(text, encoding="utf-8")


def _value(v) -> float | None:
    """A per-query value of a row in memory (a float) or of an included file (its text) as a float."""
    return v if not isinstance(v, str) else (float(v) if v else None)


def _nan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def machine() -> dict:
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    torch = sys.modules.get("torch")  # only when the run used it: a lexical run never imports torch (~10 s)
    if torch is not None:
        with contextlib.suppress(Exception):
            info["torch_threads"] = torch.get_num_threads()
    return info


def package_versions() -> dict:
    out = {}
    for p in ("evalkit", "numpy", "pandas", "ranx", "chromadb", "bm25s", "PyStemmer", "torch", "sentence-transformers",
              "transformers", "bpe-openai", "scikit-learn", "matplotlib"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    return out
