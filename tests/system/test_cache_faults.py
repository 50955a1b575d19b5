"""Faults of the shared caches under $EVALKIT_CACHE (issue 15), one test per fault, with real processes, real
Chroma and a real `chroma run` server: processes started together on an empty cache, SIGKILL inside every kind of
cache write, truncated and overwritten cache files of every kind, damaged and stale numba kernel caches, and a
Chroma server killed in the middle of a run. Each must end with the metrics of an undisturbed run, at most one
`evalkit: cache: …` line per damaged entry, and never a traceback.

Processes that must really die or really run at once go through tests/fault_runner.py (`evalkit` plus fault
points set by environment variables); the reruns after a fault run in this process (cheaper, same code).
"""
import contextlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evalkit.cli import main  # sets NUMBA_CACHE_DIR when unset
from retrievers import cachefile
from retrievers.embed.model import Embedder
from tests.helpers import TOPICS, ChromaServer, write_tiny_beir
from tests.helpers import ROOT

RUNNER = str(ROOT / "tests" / "fault_runner.py")
RETRIEVERS = "bm25,dense,hybrid-rrf"
# ranx's numba build (~70 s cold) is reused from the session's cache, whatever cache the evalkit runs get
NUMBA_DIR = os.environ.get("NUMBA_CACHE_DIR") or str(
    Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit") / "numba")


def _env(cache: Path, **extra) -> dict:
    return dict(os.environ, EVALKIT_CACHE=str(cache), NUMBA_CACHE_DIR=NUMBA_DIR, HF_HUB_OFFLINE="1", CI="1",
                **extra)


def _start(args: list[str], cache: Path, **extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, RUNNER, *args], env=_env(cache, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class _Lines:
    """Read a process's stderr in a thread, so a test can wait for one line and still get all of it later."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self.seen = proc, [], threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            with self.seen:
                self.lines.append(line.rstrip("\n"))
                self.seen.notify_all()
        with self.seen:
            self.lines.append(None)
            self.seen.notify_all()

    def wait_for(self, prefix: str, timeout: float = 240) -> str:
        with self.seen:
            ok = self.seen.wait_for(lambda: any(x is None or x.startswith(prefix) for x in self.lines), timeout)
            hit = next((x for x in self.lines if x is not None and x.startswith(prefix)), None)
        assert ok and hit, f"no {prefix!r} line; stderr so far:\n" + "\n".join(x for x in self.lines if x)
        return hit

    def text(self) -> str:
        self.proc.wait(120)
        with self.seen:
            self.seen.wait_for(lambda: self.lines and self.lines[-1] is None, 30)
            return "\n".join(x for x in self.lines if x is not None)


def _evalkit_lines(err: str) -> list[str]:
    return [x for x in err.splitlines() if x.startswith("evalkit:")]


def _run_here(args: list[str], cache: Path, monkeypatch, capsys) -> tuple[int, str]:
    """`evalkit ARGS` in this process with EVALKIT_CACHE=cache; (exit code, stderr)."""
    monkeypatch.setenv("EVALKIT_CACHE", str(cache))
    capsys.readouterr()
    rc = main(args)
    return rc, capsys.readouterr().err


def _work(out: Path) -> dict[str, dict]:
    man = json.loads((out / "manifest.json").read_text())
    return {name: d["index"]["work"] for name, d in man["datasets"].items()}


def _run_args(tiny: Path, out: Path) -> list[str]:
    # MaxP explicitly: a plain BEIR folder defaults to the MTEB truncation protocol, which writes no units entry;
    # Chroma's HNSW explicitly: the default exact search builds no collection, and its cache is one of those tested
    return ["run", "--dataset", str(tiny), "--retrievers", RETRIEVERS, "--representation", "maxp", "--backend", "hnsw",
            "--out", str(out)]


NOTHING_REDONE = {"embedded_texts": 0, "units_built": False, "chroma_built": False, "bm25_built": 0,
                  "candidates_computed": 0}


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A tiny dataset, the metrics of a lone undisturbed run on an empty cache, and the cache it left."""
    root = tmp_path_factory.mktemp("warm")
    tiny = write_tiny_beir(root / "tiny")
    cache, out, err = root / "cache", root / "lone", io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
        mp.setenv("EVALKIT_CACHE", str(cache))
        assert main(_run_args(tiny, out)) == 0
    assert not _evalkit_lines(err.getvalue())
    return {"tiny": tiny, "cache": cache, "metrics": (out / "metrics.json").read_text()}


def _assert_lone_metrics(out: Path, warm) -> None:
    assert (out / "metrics.json").read_text() == warm["metrics"]


# ---- 1. concurrency -------------------------------------------------------------------------------------------

def test_processes_started_together_on_an_empty_cache_match_a_lone_run(warm, tmp_path, monkeypatch, capsys):
    cache, barrier, n = tmp_path / "cache", tmp_path / "barrier", 2
    barrier.mkdir()
    procs = [_start(_run_args(warm["tiny"], tmp_path / f"run{i}"), cache, FAULT_BARRIER=f"{barrier}:{n}")
             for i in range(n)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    for p, err in zip(procs, errs):
        assert p.returncode == 0 and "Traceback" not in err, err
        assert not _evalkit_lines(err), err  # nothing half-written was ever read
    for i in range(n):
        _assert_lone_metrics(tmp_path / f"run{i}", warm)
    built = [next(iter(_work(tmp_path / f"run{i}").values()))["chroma_built"] for i in range(n)]
    assert sum(built) == 1  # one process built the collection under the lock; the other waited and opened it
    # every entry they left is complete and sound: another run reads everything and recomputes nothing
    rc, err = _run_here(_run_args(warm["tiny"], tmp_path / "after"), cache, monkeypatch, capsys)
    assert rc == 0 and not _evalkit_lines(err)
    assert next(iter(_work(tmp_path / "after").values())).items() >= NOTHING_REDONE.items()
    _assert_lone_metrics(tmp_path / "after", warm)


# ---- 2a. SIGKILL inside a cache write ---------------------------------------------------------------------------

# kind -> what to drop from a copy of the warm cache so that a run writes an entry of that kind (a bm25s index and
# the collection are only opened when some candidates are missing)
# what each kind's cache starts without: a cached candidate set is served without reading the vectors (they load
# lazily), so the vector kinds drop the candidates too, or nothing would write them
KINDS = {"units": ["units", "candidates"], "embeddings": ["embeddings", "candidates"],
         "chroma": ["chroma-collections", "candidates"],
         "candidates": ["candidates"], "bm25": ["bm25", "candidates"]}


def test_sigkill_inside_each_kind_of_cache_write_leaves_nothing_half_read(warm, tmp_path, monkeypatch, capsys):
    """Per kind of cache entry, a process stopped half-way through writing one and killed there with SIGKILL (all
    at once, so they pay their imports in parallel); then a run on each of those caches."""
    procs = {}
    for k, drop in KINDS.items():
        shutil.copytree(warm["cache"], tmp_path / k / "cache", ignore=lambda d, names: [] if d != str(
            warm["cache"]) else [n for n in names if n in drop])
        procs[k] = _start(_run_args(warm["tiny"], tmp_path / k / "killed"), tmp_path / k / "cache", FAULT_PAUSE=k)
    paused = {k: _Lines(p) for k, p in procs.items()}
    what = {k: paused[k].wait_for("PAUSED").split(" ", 1)[1] for k in KINDS}
    for k, p in procs.items():
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL, k
    for k in ("units", "candidates", "bm25"):  # the entry does not exist; its half-written temp file does
        path = Path(what[k])
        assert not path.exists() and list(path.parent.glob(f".{path.name}.*.tmp")), k
    chroma = tmp_path / "chroma" / "cache" / "chroma-collections"  # only the temporary folder being built
    assert not (chroma / what["chroma"]).exists() and list(chroma.glob(f".{what['chroma']}.tmp-*"))
    for k in KINDS:
        assert not (tmp_path / k / "killed").exists(), k
        rc, err = _run_here(_run_args(warm["tiny"], tmp_path / k / "rerun"), tmp_path / k / "cache", monkeypatch,
                            capsys)
        assert rc == 0 and "Traceback" not in err, (k, err)
        assert not _evalkit_lines(err), (k, err)  # the kill left no entry behind, so nothing is corrupt
        _assert_lone_metrics(tmp_path / k / "rerun", warm)
    assert not list(chroma.glob(".*.tmp-*"))  # the killed build's folder was cleared by the next build


# ---- 2b. truncated / overwritten cache files --------------------------------------------------------------------

def _truncate(p: Path) -> None:
    with open(p, "r+b") as fh:
        fh.truncate(p.stat().st_size // 2)


def _overwrite(p: Path, at: int | None = None) -> None:
    data = bytearray(p.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at:at + 16] = bytes(b ^ 0x5A for b in data[at:at + 16])
    p.write_bytes(bytes(data))


def _embedding_db(cache: Path) -> Path:
    db = next((cache / "embeddings").glob("*.sqlite"))
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the main file
    con.close()
    return db


def _damage_vector_row(cache: Path) -> Path:
    """16 bytes in the middle of the stored vector of one document (found in the file by its bytes)."""
    db = _embedding_db(cache)
    key = Embedder(cache_dir=cache).key(TOPICS["net"][0])
    con = sqlite3.connect(db)
    blob = bytes(con.execute("SELECT v FROM emb WHERE k = ?", (key,)).fetchone()[0])
    con.close()
    at = db.read_bytes().find(blob)
    assert at > 0
    _overwrite(db, at + len(blob) // 2)
    return db


def _collection(cache: Path) -> Path:
    return next(p for p in (cache / "chroma-collections").iterdir() if p.is_dir() and not p.name.startswith("."))


def _hnsw_file(cache: Path, name: str) -> Path:
    return next(_collection(cache).glob(f"*/{name}"))


def _without_candidates(path: Path, cache: Path) -> Path:
    """A bm25s index, the collection, the embedded units or the embedding cache is read only when some candidates are
    not cached (vectors are loaded lazily): drop them."""
    shutil.rmtree(cache / "candidates")
    return path


# case -> (cache -> (damaged file, how), work counters of the recovery run). The line names the damaged file; for
# the Chroma collection, its folder.
DAMAGES = {
    "units-truncate": (lambda c: (_without_candidates(next((c / "units").glob("*.ekc")), c), _truncate),
                       {"units_built": True, "candidates_computed": 2}),
    "units-overwrite": (lambda c: (_without_candidates(next((c / "units").glob("*.ekc")), c), _overwrite),
                        {"units_built": True, "candidates_computed": 2}),
    "bm25-truncate": (lambda c: (_without_candidates(sorted((c / "bm25").rglob("*.ekc"))[0], c), _truncate),
                      {"bm25_built": 2, "candidates_computed": 2}),
    "bm25-overwrite": (lambda c: (_without_candidates(sorted((c / "bm25").rglob("*.ekc"))[0], c), _overwrite),
                       {"bm25_built": 2, "candidates_computed": 2}),
    "candidates-truncate": (lambda c: (sorted((c / "candidates").glob("*.ekc"))[0], _truncate),
                            {"candidates_computed": 1}),
    "candidates-overwrite": (lambda c: (sorted((c / "candidates").glob("*.ekc"))[0], _overwrite),
                             {"candidates_computed": 1}),
    "embeddings-truncate": (lambda c: (_without_candidates(_embedding_db(c), c), _truncate),
                            {"embedded_texts": 12, "candidates_computed": 2}),
    "embeddings-overwrite-vector": (lambda c: (_without_candidates(_damage_vector_row(c), c), None),
                                    {"embedded_texts": 1, "candidates_computed": 2}),
    "chroma-hnsw-truncate": (lambda c: (_without_candidates(_hnsw_file(c, "data_level0.bin"), c), _truncate),
                             {"chroma_built": True, "candidates_computed": 2}),
    "chroma-hnsw-overwrite": (lambda c: (_without_candidates(_hnsw_file(c, "header.bin"), c), _overwrite),
                              {"chroma_built": True, "candidates_computed": 2}),
    "chroma-sqlite-truncate": (lambda c: (_without_candidates(_collection(c) / "chroma.sqlite3", c), _truncate),
                               {"chroma_built": True, "candidates_computed": 2}),
}


@pytest.mark.parametrize("case", list(DAMAGES))
def test_damaged_cache_file_is_one_line_then_recomputed(case, warm, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    shutil.copytree(warm["cache"], cache)
    damage, redone = DAMAGES[case]
    path, how = damage(cache)
    if how:
        how(path)
    named = _collection(cache) if case.startswith("chroma") else path
    rc, err = _run_here(_run_args(warm["tiny"], tmp_path / "rerun"), cache, monkeypatch, capsys)
    assert rc == 0 and "Traceback" not in err
    lines = _evalkit_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"evalkit: cache: {named} is corrupt ("), err
    _assert_lone_metrics(tmp_path / "rerun", warm)
    work = next(iter(_work(tmp_path / "rerun").values()))
    assert work.items() >= {**NOTHING_REDONE, **redone}.items()  # that entry was recomputed, nothing else
    # and it was written back sound: the next run says nothing and recomputes nothing
    rc, err = _run_here(_run_args(warm["tiny"], tmp_path / "again"), cache, monkeypatch, capsys)
    assert rc == 0 and not _evalkit_lines(err)
    assert next(iter(_work(tmp_path / "again").values())).items() >= NOTHING_REDONE.items()


# ---- 2c. numba's kernel cache -------------------------------------------------------------------------------------

KERNEL_RUN = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import numpy as np
from retrievers.stages.diversity import greedy_loop, greedy_select
rng = np.random.default_rng(7)
valid = rng.random((4, 9)) > 0.2
args = (valid, rng.random((4, 9)), rng.random((4, 9)), rng.random((4, 9, 9)), 0.6)
print(greedy_select(*args, raw_tiebreak=True).tolist())
"""


def _kernel_run(numba_dir: Path, code: str = KERNEL_RUN) -> tuple[str, str]:
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, NUMBA_CACHE_DIR=str(numba_dir)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return r.stdout, r.stderr


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """A NUMBA_CACHE_DIR holding the compiled MMR kernel, and the kernel's output on a fixed input."""
    numba_dir = tmp_path_factory.mktemp("kernels") / "numba"
    clean, err = _kernel_run(numba_dir)  # compiles and writes the cache
    assert not _evalkit_lines(err)
    return numba_dir, clean


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
@pytest.mark.parametrize("which", ["nbi", "nbc"])
def test_damaged_kernel_cache_file_is_one_line_then_recompiled(which, damage, kernel_cache, tmp_path):
    numba_dir = tmp_path / "numba"
    shutil.copytree(kernel_cache[0], numba_dir)
    clean = kernel_cache[1]
    (path,) = numba_dir.rglob(f"diversity.greedy_loop-*.ek*.{which}")
    (_truncate if damage == "truncate" else _overwrite)(path)
    out, err = _kernel_run(numba_dir)
    assert out == clean
    lines = _evalkit_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"evalkit: cache: {path} is corrupt ("), err
    assert lines[0].endswith("; recompiling")
    cachefile.unwrap(path.read_bytes())  # the recompiled kernel was written back sound (raises if not)


def test_stale_kernel_cache_fails_its_example_check_and_is_recompiled(tmp_path):
    """numba's cache does not notice a global read by a kernel changing in another module (measured: stock
    ``njit(cache=True)`` then returns the old result); the first-use example check does."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "kconst.py").write_text("SCALE = 2.0\n")
    (src / "kmod.py").write_text(
        "import numpy as np\nfrom kconst import SCALE\nfrom retrievers.kernels.registry import kernel_example\n\n"
        "@kernel_example(lambda: (np.arange(4.0),))\ndef scaled_sum(a):\n    s = 0.0\n"
        "    for i in range(a.shape[0]):\n        s += a[i] * SCALE\n    return s\n")
    code = (f"import sys\nsys.path[:0] = [{str(src)!r}, {str(ROOT)!r}]\nimport numpy as np, kmod\n"
            "from retrievers.kernels.registry import jit_kernel\n"
            "print(jit_kernel(kmod.scaled_sum)(np.arange(4.0) + 1))\n")
    numba_dir = tmp_path / "numba"
    out, err = _kernel_run(numba_dir, code)
    assert out.strip() == "20.0" and not _evalkit_lines(err)
    # a new size and no bytecode cache: Python's .pyc check (mtime in seconds + size) would otherwise hand the second
    # process the first SCALE when both writes fall in one second, which is not the staleness tested here
    (src / "kconst.py").write_text("SCALE = 3.0  # changed\n")
    shutil.rmtree(src / "__pycache__", ignore_errors=True)
    out, err = _kernel_run(numba_dir, code)
    assert out.strip() == "30.0"
    lines = _evalkit_lines(err)
    assert len(lines) == 1 and "scaled_sum disagrees with its Python version" in lines[0], err
    out, err = _kernel_run(numba_dir, code)
    assert out.strip() == "30.0" and not _evalkit_lines(err)


# ---- 3. a Chroma server killed in the middle of a run ---------------------------------------------------------

@pytest.mark.server
def test_chroma_server_killed_mid_run_is_one_line_and_a_rerun_redoes_only_unfinished_work(tmp_path, monkeypatch,
                                                                                        capsys):
    a = write_tiny_beir(tmp_path / "tiny-a")
    b = write_tiny_beir(tmp_path / "tiny-b", groups=False)  # another corpus: its own collection
    cache, resume, out = tmp_path / "cache", tmp_path / "resume", tmp_path / "run"
    with ChromaServer(tmp_path / "server-data") as srv:
        args = ["run", "--dataset", f"{a},{b}", "--retrievers", "bm25,dense", "--backend", "chroma-http",
                "--chroma-url", srv.url, "--out", str(out)]
        proc = _start(args, cache, FAULT_PAUSE="server:tiny-b", FAULT_RESUME=str(resume))
        lines = _Lines(proc)
        lines.wait_for("PAUSED")  # tiny-a is finished, tiny-b's collection is built: its searches come next
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(30)
        resume.touch()
        err = lines.text()
        assert proc.returncode not in (0, None) and "Traceback" not in err, err
        assert _evalkit_lines(err) == [
            f"evalkit: error: the Chroma server at {srv.url} stopped answering (ConnectError); finished work is "
            f"cached: start the server again and rerun the same command"], err
        assert not out.exists()  # nothing half-written
        again = ChromaServer(tmp_path / "server-data")
        again.port = srv.port  # the same server, restarted on its port with its data
        with again:
            rc, err = _run_here(args, cache, monkeypatch, capsys)
    assert rc == 0 and not _evalkit_lines(err), err
    work = _work(out)
    assert work["tiny-a"].items() >= {**NOTHING_REDONE, "candidates_loaded": 2}.items()  # all of it finished
    # tiny-b: its embeddings and its collection (on the restarted server) were finished; its candidates were not
    assert work["tiny-b"].items() >= {"embedded_texts": 0, "chroma_built": False, "candidates_loaded": 0,
                                      "candidates_computed": 2}.items()
    rc, err = _run_here(["run", "--dataset", f"{a},{b}", "--retrievers", "bm25,dense", "--backend", "chroma",
                         "--out", str(tmp_path / "embedded")], tmp_path / "cache-embedded", monkeypatch, capsys)
    assert rc == 0
    assert (out / "metrics.json").read_text() == (tmp_path / "embedded" / "metrics.json").read_text()


@pytest.mark.server
def test_two_clients_building_one_server_collection_at_once_share_one_complete_copy(tmp_path):
    """Two indexes (own HTTP clients, in threads) open the same missing collection on one server at the same
    moment: both build under temporary names, one rename wins, the other drops its copy and uses the winner's."""
    from evalkit.data.readers.beir import load_beir
    from retrievers.index.shared import IndexSettings, SharedIndex
    ds = load_beir(write_tiny_beir(tmp_path / "tiny"))
    with ChromaServer(tmp_path / "server-data") as srv:
        settings = IndexSettings(backend="chroma-http", chroma_url=srv.url)
        emb = Embedder(cache_dir=tmp_path / "cache")
        idx = [SharedIndex(ds, embedder=emb, settings=settings, cache_dir=tmp_path / "cache") for _ in range(2)]
        start, errors = threading.Barrier(2), []

        def open_it(i):
            start.wait()
            try:
                idx[i].collection()
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        threads = [threading.Thread(target=open_it, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors
        assert sorted(i.stats["chroma_built"] for i in idx) == [False, True]
        names = [c.name for c in idx[0]._chroma_store()._server_client().list_collections()]
        assert names == [idx[0].collection_name]  # one complete copy, no temporary leftovers
        for i in idx:
            assert i.collection().count() == len(i.unit_doc) and i._verify_collection(i.collection()) is None
