"""Shared helpers of `evalkit perf`: the machine line, tables, load-robust timers, dataset readiness.

Every figure is printed next to the load average it was measured under (``/proc/loadavg``): on a shared machine
wall-clock numbers are pessimistic, so the sections prefer best-of-N timings, per-query minima over repeats and
CPU time (``time.process_time``, which counts work, not waiting) where they make sense.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from evalkit.data.registry import DEFAULT, REPO_ROOT, load_dataset, locate
from evalkit.report.perf import text_section, text_table
from retrievers import cachefile
from retrievers.embed.model import cache_root
from retrievers.index.shared import split_pieces, units_path, user_lines

# ---- the machine -----------------------------------------------------------------------------------------------

def loadavg() -> str:
    """The 1/5/15-minute load averages, e.g. ``"8.41 8.72 7.90"`` (``"n/a"`` off Linux)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(pkg: str) -> str:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return "-"


def machine() -> dict[str, Any]:
    import psutil  # lazy: optional-dep
    import torch  # lazy: startup
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
            "chromadb": _version("chromadb"), "bm25s": _version("bm25s"), "ranx": _version("ranx"),
            "sentence_transformers": _version("sentence-transformers"), "torch_threads": torch.get_num_threads()}


def machine_line(m: dict | None = None) -> str:
    m = m or machine()
    return (f"machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM | python {m['python']} numpy {m['numpy']} "
            f"torch {m['torch']} chromadb {m['chromadb']} bm25s {m['bm25s']} ranx {m['ranx']} | "
            f"torch threads {m['torch_threads']} | load average {loadavg()}")


# ---- output ----------------------------------------------------------------------------------------------------

@dataclass
class Table:
    """A printed table: ``columns`` and rows of already formatted cells (numbers right-aligned)."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells) -> None:
        self.rows.append(list(cells))

    def render(self) -> str:
        return text_table(self.title, self.columns, self.rows, self.notes)

    def as_json(self) -> dict:
        return {"title": self.title, "columns": self.columns, "rows": [[_plain(c) for c in r] for r in self.rows],
                "notes": self.notes}


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


class Section:
    """One printed section: a heading, the machine line at the moment it was measured, tables, notes."""

    def __init__(self, number: int, title: str, log: Callable[[str], None] = print):
        self.number, self.title, self.log = number, title, log
        self.tables: list[Table] = []
        self.notes: list[str] = []
        self.t0 = time.perf_counter()
        self.load_start = loadavg()

    def table(self, t: Table) -> Table:
        self.tables.append(t)
        return t

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        return text_section(self.number, self.title, machine_line() + f" (at start {self.load_start})",
                            time.perf_counter() - self.t0, [t.render() for t in self.tables], self.notes)

    def as_json(self) -> dict:
        return {"number": self.number, "title": self.title, "load_start": self.load_start, "load_end": loadavg(),
                "seconds": round(time.perf_counter() - self.t0, 2), "tables": [t.as_json() for t in self.tables],
                "notes": self.notes}


def progress(msg: str) -> None:
    """A progress line on stderr (stdout carries the report)."""
    if os.environ.get("EVALKIT_PERF_QUIET") != "1":
        print(f"  [perf {time.strftime('%H:%M:%S')} load {loadavg()}] {msg}", file=sys.stderr, flush=True)


# ---- timing ----------------------------------------------------------------------------------------------------

@dataclass
class Timing:
    """Repeated measurements of one callable: wall seconds and CPU seconds per repeat."""

    wall: list[float]
    cpu: list[float]
    result: Any = None

    @property
    def best(self) -> float:
        return min(self.wall)

    @property
    def median(self) -> float:
        return float(np.median(self.wall))

    @property
    def best_cpu(self) -> float:
        return min(self.cpu)


def timed(fn: Callable[[], Any], repeats: int = 3, warmup: int = 0) -> Timing:
    """Best-of-N friendly timing: ``warmup`` untimed calls, then ``repeats`` timed ones (wall and process CPU)."""
    for _ in range(warmup):
        fn()
    wall, cpu, res = [], [], None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        res = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return Timing(wall, cpu, res)


def ms_percentiles(seconds: Iterable[float]) -> tuple[float, float]:
    a = np.asarray(list(seconds), dtype=np.float64) * 1000.0
    if a.size == 0:
        return float("nan"), float("nan")
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def rss_mb() -> float:
    import psutil  # lazy: optional-dep
    return psutil.Process().memory_info().rss / 2**20


def dir_mb(path: Path) -> float:
    total = 0
    for p in Path(path).rglob("*"):
        if p.is_file():
            total += p.stat().st_size
    return total / 2**20


@contextmanager
def temp_dir(prefix: str = "evalkit-perf-"):
    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- datasets --------------------------------------------------------------------------------------------------

def test_split(ds):
    sp = "test" if "test" in ds.splits else ("all" if "all" in ds.splits else None)
    return ds.split(sp) if sp else ds


def subset(ds, n: int | None):
    """The first ``n`` queries of ``ds`` (qrels and splits restricted to them)."""
    if not n or n >= len(ds.queries):
        return ds
    return ds.head(n)


@dataclass
class Readiness:
    name: str
    available: bool
    ready: bool
    why: str


def readiness(name: str, embedder, sample: int = 3000) -> Readiness:
    """Is dataset ``name`` in the data directory, and are its vectors already in the embedding cache?

    Checks a sample of the texts the shared index would embed (its MaxP units when their cache file exists, else the
    document texts) against the content-hash cache, without loading the model. A dataset another job is still
    embedding is reported as not ready, with the cached share.
    """

    if locate(name) is None:
        return Readiness(name, False, False, "not in the data directory (set EVALKIT_DATA)")
    ds = load_dataset(name)
    rep = ds.info.get("representation", "maxp")
    key = hashlib.sha256(json.dumps([ds.corpus_hash(), embedder.model_id, rep], sort_keys=True).encode()
                         ).hexdigest()[:20]
    units = cachefile.read(units_path(cache_root(), key)) if rep.startswith("maxp") else None
    if units is not None:
        texts = [u for us in units for u in us]
    elif rep.startswith("maxp"):  # units are not persisted: split a sample of documents as the index would
        tok = embedder.tokenizer()
        pick = np.linspace(0, len(ds.documents) - 1, num=min(sample // 4, len(ds.documents))).astype(int)
        docs = [ds.documents[i].full_text for i in pick]
        window = embedder.max_seq_length - 2  # as the index splits: the model's pieces less [CLS] [SEP]
        texts = [u for t in docs for u in split_pieces(user_lines(t) if rep == "maxp-user" else t, tok, window)]
    else:
        texts = [d.full_text for d in ds.documents]
    idx = np.linspace(0, len(texts) - 1, num=min(sample, len(texts))).astype(int)
    keys = list({embedder.key(texts[i]) for i in idx})
    share = len(embedder.cache.get_many(keys)) / max(1, len(keys))
    if share == 0.0:
        return Readiness(name, True, False, "its vectors are not in the embedding cache (an `evalkit run` on it "
                                            "embeds them once)")
    if share < 1.0:
        return Readiness(name, True, False, f"only {share:.1%} of a {len(keys)}-text sample is embedded "
                                            f"(another job may still be embedding it)")
    return Readiness(name, True, True, f"{len(texts):,} vectors cached")


def load_ready(names: list[str], embedder, fallback: str = DEFAULT, log=progress) -> tuple[list, list[str]]:
    """(dataset names to use, notes): the ready ones among ``names``; ``fallback`` when none is."""
    use, notes = [], []
    for n in names:
        r = readiness(n, embedder)
        if r.ready:
            use.append(n)
        else:
            notes.append(f"{n}: skipped, {r.why}")
            log(f"{n}: {r.why}")
    if not use and fallback:
        use = [fallback]
        notes.append(f"using {fallback} instead")
    return use, notes


# ---- which presets the sections measure (data, not code) ---------------------------------------------------------

PERF_PRESETS = REPO_ROOT / "tune" / "perf" / "presets.toml"


def perf_presets(path: Path = PERF_PRESETS) -> dict:
    """The presets `evalkit perf` measures, read from ``tune/perf/presets.toml``: ``{"sweep": {preset: {stage
    label: {param: values}}} in table order, "scale": [preset, …]}``."""
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    return {"sweep": {f["preset"]: f["grid"] for f in raw.get("sweep", [])},
            "scale": list(raw.get("scale", {}).get("presets", []))}
