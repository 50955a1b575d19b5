"""Dataset names → loaders, and where the data lives.

Lookup order for a dataset's files: the data directory in ``$EVALKIT_DATA`` (CI points it at
``../shared/datasets``); when it is not set, ``../shared/datasets`` beside the clone if it exists (as `make`
finds it); then the repository's own ``datasets/`` folder. Anything else given to
``--dataset`` that is a folder is read as a BEIR folder.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data.readers.beir import SIDECAR, load_beir
from retrievers.errors import did_you_mean
from retrievers.types import DataError, Dataset

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO_DATASETS = REPO_ROOT / "datasets"
#: the shared data directory beside the clone (the Makefile's default for EVALKIT_DATA)
SIBLING_DATASETS = REPO_ROOT.parent / "shared" / "datasets"


@dataclass
class DatasetEntry:
    name: str
    relpath: str  # file or folder relative to a data directory
    loader: str  # "module:function"
    kwargs: dict = field(default_factory=dict)
    description: str = ""
    large: bool = False  # benchmarked by `make bench`, sliced in tests
    info: dict = field(default_factory=dict)  # set on the loaded dataset (e.g. the vector representation)
    title: str = ""  # display name in help and report text (default: the name)
    whole_split: str = "test"  # the split a whole-dataset measurement (perf's sweep) uses ("all": no held-out split)


DATASETS: dict[str, DatasetEntry] = {}


def _add(e: DatasetEntry) -> None:
    DATASETS[e.name] = e


_add(DatasetEntry("memory-workspace", "memory-workspace", "evalkit.data.readers.memory_workspace:load_workspace", {},
                  "the project's own agent-memory benchmark (chunks of an OpenClaw-style workspace)"))
_add(DatasetEntry("scifact", "scifact", "evalkit.data.readers.beir:load_beir", {"name": "scifact"},
                  "BEIR SciFact (5,183 abstracts, 300 test queries)", info={"representation": "truncate"},
                  title="SciFact"))
_add(DatasetEntry("locomo", "locomo/locomo10.json", "evalkit.data.readers.locomo:load_locomo", {"level": "turn"},
                  "LoCoMo, turn level (one document per dialogue turn)", title="LoCoMo"))
_add(DatasetEntry("locomo-paper", "locomo/locomo10.json", "evalkit.data.readers.locomo:load_locomo",
                  {"level": "turn", "protocol": "paper"},
                  "LoCoMo, turn level, the paper's retrieval protocol (sessions 1-19, its turn format)",
                  title="LoCoMo (paper protocol)"))
_add(DatasetEntry("locomo-session", "locomo/locomo10.json", "evalkit.data.readers.locomo:load_locomo",
                  {"level": "session"}, "LoCoMo, session level (one document per session)"))
_add(DatasetEntry("longmemeval-s", "longmemeval/longmemeval_s_498.json.gz",
                  "evalkit.data.readers.longmemeval:load_longmemeval", {"level": "session", "variant": "s"},
                  "LongMemEval-S, session level (one haystack per question)", large=True,
                  info={"representation": "maxp-user"}, whole_split="all", title="LongMemEval-S"))
_add(DatasetEntry("longmemeval-s-turn", "longmemeval/longmemeval_s_498.json.gz",
                  "evalkit.data.readers.longmemeval:load_longmemeval", {"level": "turn", "variant": "s"},
                  "LongMemEval-S, turn level", large=True, whole_split="all",
                  title="LongMemEval-S turn level"))
_add(DatasetEntry("longmemeval-oracle", "longmemeval/longmemeval_oracle.json.gz",
                  "evalkit.data.readers.longmemeval:load_longmemeval", {"level": "session", "variant": "oracle"},
                  "LongMemEval oracle (evidence sessions only), session level", whole_split="all"))
_add(DatasetEntry("longmemeval-oracle-turn", "longmemeval/longmemeval_oracle.json.gz",
                  "evalkit.data.readers.longmemeval:load_longmemeval", {"level": "turn", "variant": "oracle"},
                  "LongMemEval oracle, turn level", whole_split="all"))

# The dataset a command uses when none is named: the project's own, always present and small enough to embed on
# the spot (a fresh cache, a quick run, the fallback when no other dataset's vectors are cached).
DEFAULT = "memory-workspace"

# Named dataset lists, so no harness module has to name a dataset: who runs what.
SUITES: dict[str, list[str]] = {
    "bench": [DEFAULT, "scifact", "locomo", "longmemeval-s"],  # `evalkit bench`, when the data directory has them
    "bench.full": ["longmemeval-s-turn"],  # added by `evalkit bench --full` (hours of embedding)
    "bench.latency": [DEFAULT, "scifact"],  # bench's latency pass
    "gate": [DEFAULT, "scifact"],  # `evalkit gate` (a dataset missing from the data directory is skipped)
    "perf.quick": [DEFAULT],  # every `evalkit perf --quick` section: a cold cache embeds only this one
    "perf.sweep": ["longmemeval-s", "locomo"],  # perf section 1: the first whose vectors are cached
    "perf.latency": ["scifact", "locomo", "longmemeval-s"],  # perf section 2 (full run; skipped when not embedded)
    "perf.embedding": ["scifact"],  # perf section 3: corpus texts (abstracts: a realistic 256-token load)
    "perf.index": ["scifact"],  # perf section 4: build and reopen the shared index
    "perf.groups": ["longmemeval-s"],  # perf section 4 (full run): BM25 of many small groups, one pass per tokenizer
    "perf.exactness": ["scifact", "locomo", "longmemeval-s"],  # perf section 5, after DEFAULT (full run)
}


def suite(name: str) -> list[str]:
    """A copy of a named dataset list (:data:`SUITES`)."""
    return list(SUITES[name])


def whole_split(name: str) -> str:
    """The split a whole-dataset measurement uses for ``name`` ("test" for an unregistered BEIR folder)."""
    e = DATASETS.get(name)
    return e.whole_split if e else "test"


def label(name: str) -> str:
    """A dataset's display name (its entry's ``title``), else the name."""
    e = DATASETS.get(name)
    return e.title if e and e.title else name


def data_dirs() -> list[Path]:
    """Where datasets are looked for, in order."""
    dirs = []
    env = os.environ.get("EVALKIT_DATA")
    if env:
        dirs.append(Path(env).expanduser())
    elif SIBLING_DATASETS.is_dir():
        dirs.append(SIBLING_DATASETS)
    dirs.append(REPO_DATASETS)
    return dirs


def locate(name: str) -> Path | None:
    e = DATASETS[name]
    for d in data_dirs():
        p = d / e.relpath
        if p.exists():
            return p
    return None


def _call(spec: str, path: Path, kwargs: dict) -> Dataset:
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)(path, **kwargs)


def load_dataset(name_or_path: str, **opts) -> Dataset:
    """Load a registered dataset by name, or any BEIR folder by path. Raises DataError (one line)."""
    if name_or_path in DATASETS:
        e = DATASETS[name_or_path]
        path = locate(name_or_path)
        if path is None:
            looked = ", ".join(str(d / e.relpath) for d in data_dirs())
            hint = "" if os.environ.get("EVALKIT_DATA") else " (set EVALKIT_DATA to the data directory)"
            raise DataError(f"dataset {name_or_path!r} not found: looked in {looked}{hint}")
        ds = _call(e.loader, path, dict(e.kwargs, **opts))
        for k, v in e.info.items():
            ds.info.setdefault(k, v)
        return ds
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return load_beir(p, **opts)
    raise DataError(f"unknown dataset {name_or_path!r}: not a registered name ({', '.join(DATASETS)}) "
                    f"and not a folder" + (did_you_mean(name_or_path, DATASETS) or _near_folder(p)))


def _near_folder(p: Path) -> str:
    """`` — did you mean 'notes/my-notes'?`` for a mistyped dataset folder: the closest folder beside ``p``, named as
    the user would type it (same parent prefix), else ``""``."""
    try:
        folders = [c for c in p.parent.iterdir() if c.is_dir() and not c.name.startswith(".")]
    except OSError:
        return ""
    return did_you_mean(str(p), [str(c) for c in folders], n=1)


def source_of(ds: Dataset, given: str | None = None) -> str:
    """Where a loaded dataset was read from, for a message: the loader's ``info["source"]``, else the registered
    entry's file, else what was given (``--dataset``), else its name."""
    src = ds.info.get("source")
    if src:
        return str(src)
    if given in DATASETS and locate(given) is not None:
        return str(locate(given))
    return given or ds.name


def require_distinct(loaded: list[tuple[str | None, Dataset]]) -> None:
    """DataError (one line, naming both paths) when two datasets of one run carry the same name: their metrics,
    results and manifest entry are keyed by it, so the second would silently merge into the first.
    ``loaded``: (what was given, or None for a Dataset object; the dataset) in run order.

    >>> require_distinct([("a", Dataset(name="x", documents=[], queries=[], qrels={}, splits={}, info={}))])
    """
    first: dict[str, str] = {}
    for given, ds in loaded:
        where = source_of(ds, given)
        if ds.name in first:
            raise DataError(f"two datasets named {ds.name!r} in one run: {first[ds.name]} and {where}; their rows "
                            f"would merge under one name (give the copy another \"name\" in its {SIDECAR}, "
                            f"or run them separately)")
        first[ds.name] = where


def available() -> list[tuple[DatasetEntry, Path | None]]:
    return [(e, locate(n)) for n, e in DATASETS.items()]
