"""Tests by kind, one folder each, and the marker of its kind on every test in it:

* ``tests/unit/<package>/…`` — ``unit``: fast, in one process, no server, no browser, no notebook kernel, no
  subprocess CLI (``python -m pytest tests/unit -m "unit and not slow"`` = ``make test-unit``, the inner loop);
* ``tests/parity/`` — ``parity``: agreement with an independent implementation (ranx, pytrec_eval's trec_eval,
  scipy) or with the original systems' worked examples (PIPELINES.md);
* ``tests/system/`` — ``system``: real servers (Chroma, HTTP rerank / embedding), headless Chromium, notebook
  kernels, Dask worker processes, the CLI in subprocesses, process-level cache faults, perf smoke.

Two more markers are set in the test files themselves: ``kernels`` (the numba kernels' tests, which ``make
test-kernels`` re-runs bounds-checked) and ``slow`` (a test or module fixture that takes more than ~5 s).
A test module outside the three folders is a collection error, so every test has a kind.
"""
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# progress lines (retrievers/embed/progress.py) would interleave with the one-line error checks: the tests that
# check them turn them on themselves
os.environ.setdefault("EVALKIT_PROGRESS", "0")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "datasets"
if "EVALKIT_DATA" not in os.environ and SHARED_DATA.exists():
    os.environ["EVALKIT_DATA"] = str(SHARED_DATA)

TESTS = Path(__file__).resolve().parent
KINDS = ("unit", "parity", "system")


def kind_of(path: Path) -> str | None:
    """The kind of a test file: the first folder under tests/ (None outside the three)."""
    rel = Path(path).resolve().relative_to(TESTS)
    return rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in KINDS else None


def warm_ranx() -> None:
    """Load (or compile once, into numba's on-disk cache) ranx's numba kernels for the metrics the tests score, with
    document ids of the two widths the tests use (ranx's own ``<U{longest id}>``, evalkit's padded ``<U32``)."""
    from ranx import Qrels, Run, evaluate  # lazy: startup (numba, LLVM)

    from evalkit.measures.lists import DEFAULT_METRICS, evaluate as evalkit_evaluate  # lazy: startup
    qrels = {"q0": {"d" * 31: 1, "e": 2}, "q1": {"f": 1}}
    run = {"q0": {"d" * 31: 0.9, "x": 0.5, "e": 0.1}, "q1": {"y": 0.3, "f": 0.2}}
    evaluate(Qrels.from_dict(qrels), Run.from_dict(run), DEFAULT_METRICS, return_mean=True, make_comparable=True)
    evaluate(Qrels.from_dict(qrels), Run.from_dict(run), DEFAULT_METRICS, return_mean=False, make_comparable=True)
    evalkit_evaluate(qrels, {q: sorted(r.items(), key=lambda kv: -kv[1]) for q, r in run.items()}, DEFAULT_METRICS,
                     engine="ranx")


def pytest_configure(config):
    """Under pytest-xdist the controller warms ranx's numba cache once before the workers start: each worker
    compiling it cold at the same time cost ~54 s (measured); from a warm cache a worker only loads it. And it
    keeps the files in the order :func:`heavy_first` gives them (xdist's own reorder is switched off)."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if config.getoption("collectonly", False):
        return
    warm_ranx_once()


def warm_ranx_once() -> None:
    """:func:`warm_ranx` unless :func:`ranx_warm_stamp` says this numba cache has it already (loading ranx's kernels
    once more costs ~6 s), then the stamp. ``make test`` runs it before pytest, beside the bounds-checked kernel
    tests (``make test-warm``), so the controller finds the cache warm."""
    stamp = ranx_warm_stamp()
    if stamp is None or stamp.exists():
        return
    warm_ranx()
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text("ranx kernels compiled into this numba cache\n")


def ranx_warm_stamp() -> Path | None:
    """A marker in numba's cache folder (``$NUMBA_CACHE_DIR``, else ranx's own ``__pycache__``) for this ranx
    installation and numba version: written after :func:`warm_ranx`, so a warm cache is not loaded once more."""
    import hashlib  # lazy: startup
    import importlib.util  # lazy: startup
    from importlib.metadata import version  # lazy: startup
    spec = importlib.util.find_spec("ranx")
    if spec is None or not spec.origin:
        return None
    key = hashlib.sha256(f"{spec.origin}|{version('ranx')}|{version('numba')}".encode()).hexdigest()[:16]
    folder = Path(os.environ.get("NUMBA_CACHE_DIR") or Path(spec.origin).parent / "__pycache__")
    return folder / f"evalkit-ranx-warm-{key}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        kind = kind_of(Path(str(item.fspath)))
        if kind is None:
            raise pytest.UsageError(f"{item.nodeid}: a test lives in tests/unit/, tests/parity/ or tests/system/ "
                                    "(see tests/conftest.py)")
        item.add_marker(getattr(pytest.mark, kind))
    if hasattr(config, "workerinput"):
        heavy_first(items)


def heavy_first(items) -> None:
    """Order the files for pytest-xdist's ``--dist loadfile`` (a file is one unit of work, handed to whichever
    worker asks next), longest first: system files with a slow test, the other system files (servers, notebooks,
    subprocess CLIs), the parity and unit files with a slow test, the other parity files, then the many fast unit
    files, which fill both workers' last minutes evenly; inside a group the collection order is kept, and each
    file's own tests keep theirs. xdist's default order (most tests first) put the two-test determinism file, the
    longest, last: one worker ran it alone for minutes while the other had nothing left (the wall time of
    ``make test`` is the busier worker's)."""
    group: dict[str, int] = {}
    for item in items:
        f = str(item.fspath)
        kind = kind_of(Path(f))
        slow = item.get_closest_marker("slow") is not None
        g = (0 if slow else 1) if kind == "system" else (2 if slow else 3 if kind == "parity" else 4)
        group[f] = min(group.get(f, g), g)
    first = {}
    for i, item in enumerate(items):
        first.setdefault(str(item.fspath), i)
    items.sort(key=lambda it: (group[str(it.fspath)], first[str(it.fspath)]))


# ---- fixtures several test folders share -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny BEIR dataset with two groups (tests/helpers.py ``write_tiny_beir``)."""
    from tests.helpers import write_tiny_beir
    return write_tiny_beir(tmp_path_factory.mktemp("tiny"))


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A fresh ``$EVALKIT_CACHE`` for this test, but for its ``openvino/`` folder: a link to the session cache's, so
    the compiled embedding model (content-keyed, written atomically, shared by concurrent processes) is converted
    once per machine instead of once per test process (~8 s each; the conversion's own tests use folders of their
    own). Embeddings, Chroma collections, BM25 indexes and candidates all start empty."""
    from retrievers.embed.loading import cache_root
    shared = cache_root() / "openvino"
    shared.mkdir(parents=True, exist_ok=True)
    d = tmp_path / "cache"
    d.mkdir()
    (d / "openvino").symlink_to(shared, target_is_directory=True)
    monkeypatch.setenv("EVALKIT_CACHE", str(d))
    return d
