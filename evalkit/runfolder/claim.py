"""Claim an output path before writing there: nothing of the user's is ever replaced or removed.

Every command that writes (`run`, `replay`, `bench`, `tune`, `ablate`, `compare --out`, `report`, `score --out`,
`perf --json`) claims its output path here *before any work*, then writes through the claim:

* :func:`claim_folder` — a folder written whole (``with claim.staging() as tmp: ...write into tmp...``);
* :func:`claim_file` — one file (``claim.write_text(text)``);
* :func:`claim_in_place` — files rewritten inside an existing output folder (`evalkit report`).

Rules, checked when the path is claimed and again, on what is there then, at the moment of replacing:

1. The current directory, any folder above it, the home directory and ``/`` are never output paths; neither is a
   symbolic link (it is never followed, replaced or removed).
2. A missing path is fine; so is an empty folder.
3. A folder is replaced only when it is the same command's own earlier output: it holds the marker
   :data:`MARKER` (the command's output kind and the sha256 of every file it wrote) and nothing else — a file
   evalkit did not write, or one changed since, is refused and named. Folders written before the marker existed
   are recognised by their layout (see :data:`KINDS`; e.g. a readable run folder: ``manifest.json`` +
   ``metrics.json`` and only run-folder files).
4. A file is replaced only by the same command's own earlier output (score / perf JSON, recognised by its keys).

Writes are atomic. A folder is written to a temporary sibling ``.NAME.evalkit-tmp-*`` (a file likewise) and
renamed into place. An earlier output is first moved aside to ``.NAME.evalkit-old-*``, checked again there (it is
put back if it changed in between), and removed only once the new output is in place. A failure removes the
temporary sibling and nothing else. Two processes writing the same path at once both finish; the last complete
one wins. Refusals raise :class:`~evalkit.errors.OutputPathError` with one line naming the option, the path and
the reason (`evalkit.cli.main` prints it and exits 2).
"""
from __future__ import annotations

import errno
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from evalkit import __version__
from evalkit.errors import OutputPathError
from evalkit.runfolder.read import RunFolderError, read_run

MARKER = ".evalkit-output.json"
TEMP_NAME = re.compile(r"^\..+\.evalkit-(?:tmp|old)-[0-9a-z_]+$")  # evalkit's own temporary siblings
_ATTEMPTS = 20  # replace attempts while other processes keep writing the same path
_MAX_SNIFF = 256 << 20  # a file larger than this is never taken for evalkit's own JSON output
NEVER = "evalkit never replaces it"


# ---- what each command writes ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputKind:
    """One command's output: how an earlier one is recognised when it has no marker (written before markers
    existed, or a single file, which carries none)."""
    name: str
    noun: str  # "run folder", "perf JSON file", ... (messages)
    is_folder: bool = True
    legacy_files: tuple[str, ...] = ()  # patterns ('/'-separated, fnmatch) of files an unmarked folder may hold
    recognise: Callable[[Path], bool] = lambda path: False  # an unmarked earlier output of this kind
    parts: tuple[tuple[str, str], ...] = ()  # container of output folders: (pattern, kind) per entry

    @property
    def a_noun(self) -> str:
        return ("an " if self.noun[0] in "aeiou" else "a ") + self.noun


def _json_object(path: Path, required: set[str], allowed: set[str] | None = None) -> bool:
    """``path`` is a JSON object holding every key of ``required`` (and, given ``allowed``, no other key)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_SNIFF:
            return False
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(obj, dict) and required <= set(obj) and (allowed is None or set(obj) <= allowed)


def _readable_run(path: Path) -> bool:
    try:
        read_run(path)
    except (RunFolderError, OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _starts_with(path: Path, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(len(text)) == text
    except (OSError, ValueError):
        return False


def _first_line_has(path: Path, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return text in fh.readline(4096)
    except (OSError, ValueError):
        return False


def _earlier_compare(path: Path) -> bool:
    return (_json_object(path / "compare.json", {"rows", "runs"})
            or _starts_with(path / "compare.md", "# evalkit compare")
            or _starts_with(path / "compare.csv", "dataset,a,b,metric,"))


RUN_FILES = ("manifest.json", "metrics.json", "metrics.csv", "metrics_by_category.csv", "per_query.csv", "report.md",
             "report.html", "latency.json", "diagnostics.json", "replay.md", "replay_skipped.json", "results/*/*.jsonl",
             "runs/*/*.trec")
KINDS: dict[str, OutputKind] = {k.name: k for k in [
    OutputKind("run", "run folder", legacy_files=RUN_FILES, recognise=_readable_run),
    OutputKind("replay", "replay run folder", legacy_files=RUN_FILES, recognise=_readable_run),
    OutputKind("bench-run", "bench run folder", legacy_files=RUN_FILES, recognise=_readable_run),
    OutputKind("bench", "bench folder", parts=(("latest", "bench-run"), ("datasets/*", "bench-run"))),
    OutputKind("tune", "tune folder",
               legacy_files=("configs.csv", "leaderboard.csv", "leaderboard.md", "best.toml", "summary.json",
                             "report.md", "plots/*.png"),
               recognise=lambda p: _json_object(p / "summary.json", {"space", "objective", "best", "sweep"})),
    OutputKind("ablate", "ablation folder", legacy_files=("ablation.md", "ablation.csv", "ablation.json"),
               recognise=lambda p: _json_object(p / "ablation.json", {"preset", "preset_hash", "rows"})),
    OutputKind("agree", "agreement folder", legacy_files=("agree.md", "agree.json"),
               recognise=lambda p: _json_object(p / "agree.json", {"system", "preset", "rows"})),
    OutputKind("compare", "compare folder", legacy_files=("compare.md", "compare.html", "compare.csv", "compare.json"),
               recognise=_earlier_compare),
    OutputKind("score", "score output file", is_folder=False,
               recognise=lambda p: _json_object(p, {"preset", "preset_hash", "queries"},
                                                {"preset", "preset_hash", "queries"})),
    OutputKind("preset", "preset file", is_folder=False,
               recognise=lambda p: _first_line_has(p, "written by `evalkit preset from-config")),
    OutputKind("perf", "perf JSON file", is_folder=False,
               recognise=lambda p: _json_object(p, {"machine", "mode", "sections"},
                                                {"machine", "mode", "sections", "seconds"})),
]}
RUN_FOLDER_KINDS = ("run", "replay", "bench-run")  # folders `read_run` / `evalkit report` read


# ---- looking at what is there ---------------------------------------------------------------------------------

def _label(option: str | None, shown: str) -> str:
    return f"{option} {shown}" if option else shown


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")


def _location_refusal(path: Path, kind: OutputKind) -> str | None:
    """Rule 1: places that are never an output path, whatever they hold."""
    real = Path(os.path.realpath(path))
    cwd = Path(os.path.realpath(os.getcwd()))
    where = {cwd: "the current directory", Path(real.anchor): "the root directory",
             Path(os.path.realpath(Path.home())): "your home directory"}.get(real)
    if where is None and real in cwd.parents:
        where = "a folder above the current directory"
    if where:
        return f"is {where}; {NEVER} (give a new {'folder' if kind.is_folder else 'file name'})"
    return None


def _entries(root: Path) -> tuple[list[str], list[str]]:
    """Files under ``root`` ('/'-separated relative paths) and what evalkit never writes there (symbolic links,
    special files, empty folders, shown with a trailing '/'); evalkit's own temporary siblings are skipped."""
    files: list[str] = []
    odd: list[str] = []

    def walk(d: str, rel: str) -> bool:
        found = False
        with os.scandir(d) as it:
            for e in sorted(it, key=lambda e: e.name):
                if TEMP_NAME.match(e.name):
                    continue
                found = True
                r = rel + e.name
                if e.is_symlink():
                    odd.append(r)
                elif e.is_dir():
                    if not walk(e.path, r + "/"):
                        odd.append(r + "/")
                elif e.is_file():
                    files.append(r)
                else:
                    odd.append(r)
        return found

    walk(str(root), "")
    return files, odd


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (hex), read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_marker(folder: Path) -> dict | None:
    try:
        m = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (isinstance(m, dict) and isinstance(m.get("kind"), str) and isinstance(m.get("files"), dict)
            and all(isinstance(v, str) for v in m["files"].values())):
        return m
    return None


def _marker_text(kind: str, files: dict[str, str]) -> str:
    return json.dumps({"written_by": "evalkit", "evalkit_version": __version__, "kind": kind,
                       "files": dict(sorted(files.items()))}, indent=1) + "\n"


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) and name.count("/") == p.count("/") for p in patterns)


def _kind_noun(name: str) -> str:
    k = KINDS.get(name)
    return k.a_noun if k else f"an evalkit {name!r} output"


def _own_folder_refusal(path: Path, kind: OutputKind) -> str | None:
    """Rule 3 for a folder that exists: None when it is empty or ``kind``'s own earlier output and nothing else."""
    files, odd = _entries(path)
    if not files and not odd:
        return None
    marker = _read_marker(path)
    if marker is None:
        if not kind.recognise(path):
            return f"is a folder evalkit did not write (it holds {_some(odd + files)}); {NEVER} " \
                   f"(give a new or empty folder)"
        foreign = odd + [f for f in files if not _matches(f, kind.legacy_files)]
        changed: list[str] = []
    else:
        if marker["kind"] != kind.name:
            return f"is {_kind_noun(marker['kind'])}, not {kind.a_noun}; {NEVER} (give a new folder)"
        written = marker["files"]
        foreign = odd + [f for f in files if f != MARKER and f not in written]
        changed = [f for f in files if f in written and file_sha256(path / f) != written[f]]
    if foreign:
        return (f"is an earlier {kind.noun} but also holds {_some(foreign)}, which evalkit did not write; nothing "
                f"was replaced (move {_them(foreign)} out or give a new folder)")
    if changed:
        return (f"is an earlier {kind.noun} but {_some(changed)} changed after evalkit wrote {_them(changed)}; nothing "
                f"was replaced (move {_them(changed)} out or give a new folder)")
    return None


def _them(names: list[str]) -> str:
    return "it" if len(names) == 1 else "them"


def _container_refusal(path: Path, kind: OutputKind) -> str | None:
    """A folder of output folders (a bench): every entry is one of ``kind.parts``, each claimable by its kind."""
    marker = _read_marker(path)
    if marker is not None:
        return f"is {_kind_noun(marker['kind'])}, not {kind.a_noun}; {NEVER} (give a new folder)"
    files, odd = _entries(path)
    parts: dict[str, str] = {}
    for pattern, part_kind in kind.parts:
        for sub in sorted(path.glob(pattern)):
            if not TEMP_NAME.match(sub.name):
                parts[sub.relative_to(path).as_posix()] = part_kind
    holders = {p.rsplit("/", 1)[0] + "/" for p, _ in kind.parts if "/" in p}  # e.g. "datasets/" (may be empty)
    foreign = [e for e in odd + files if e not in holders and not any(e == p or e.startswith(p + "/") for p in parts)]
    if foreign:
        return f"is a folder evalkit did not write (it holds {_some(foreign)}); {NEVER} (give a new or empty folder)"
    for rel, part_kind in parts.items():
        why = _existing_refusal(path / rel, KINDS[part_kind])
        if why:
            return f"{rel} {why}"
    return None


def _existing_refusal(path: Path, kind: OutputKind) -> str | None:
    """Rules 2-4 for whatever is at ``path`` now (None: it may be replaced by ``kind``'s output).

    Another process may replace the path (or remove its own moved-aside copy) while it is looked at: the folder or
    file is held open during the look (so its inode cannot be reused), and the look is repeated unless ``path``
    still names that same object afterwards."""
    for _ in range(_ATTEMPTS):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            return _refusal(path, kind, st)  # a link or special file: refused whatever it points to
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError, OSError) as exc:
            if isinstance(exc, PermissionError):
                return f"cannot be checked ({exc.strerror}); {NEVER}"
            continue
        try:
            if not _same(os.fstat(fd), st):
                continue
            why = _refusal(path, kind, st)
            if _same(os.lstat(path), st):
                return why
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            return f"cannot be checked ({exc.strerror}: {exc.filename}); {NEVER}"
        finally:
            os.close(fd)
    return f"other processes keep replacing it; {NEVER} while it changes"


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _refusal(path: Path, kind: OutputKind, st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return f"is a symbolic link; {NEVER} (give a new {'folder' if kind.is_folder else 'file name'})"
    if kind.is_folder:
        if not stat.S_ISDIR(st.st_mode):
            return f"is an existing file, not {kind.a_noun}; {NEVER} (give a new folder)"
        return _container_refusal(path, kind) if kind.parts else _own_folder_refusal(path, kind)
    if stat.S_ISDIR(st.st_mode):
        return f"is a folder, not {kind.a_noun}; {NEVER} (give a new file name)"
    if not kind.recognise(path):
        return f"is an existing file that is not an earlier evalkit {kind.noun}; {NEVER} (give a new file name)"
    return None


# ---- writing --------------------------------------------------------------------------------------------------

def _read_umask() -> int:
    mask = os.umask(0o022)  # (the only way to read it sets it: read once, at import, before any thread starts)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _aside(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.evalkit-old-{secrets.token_hex(6)}"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _place(tmp: Path, dest: Path, is_folder: bool) -> bool:
    """Move ``tmp`` to ``dest`` unless something (other than an empty folder) is there: True when placed."""
    if is_folder:
        try:
            os.rename(tmp, dest)  # replaces a missing path or an empty folder, nothing else
            return True
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                return False
            raise
    try:
        os.link(tmp, dest)  # never replaces an existing file
    except FileExistsError:
        return False
    except OSError:  # a filesystem without hard links
        if os.path.lexists(dest):
            return False
        os.rename(tmp, dest)
        return True
    os.unlink(tmp)
    return True


def _install(tmp: Path, dest: Path, kind: OutputKind, shown: str) -> None:
    """Put ``tmp`` at ``dest``, moving an earlier output of ``kind`` aside first and removing it afterwards."""
    aside: list[Path] = []
    try:
        for _ in range(_ATTEMPTS):
            if _place(tmp, dest, kind.is_folder):
                break
            why = _existing_refusal(dest, kind)
            if why:
                raise OutputPathError(f"{shown}: {why}")
            old = _aside(dest)
            try:
                os.rename(dest, old)
            except FileNotFoundError:  # another process moved it first
                continue
            why = _existing_refusal(old, kind)
            if why:  # it changed between the check and the move: put it back untouched
                back = _place(old, dest, kind.is_folder)
                where = "" if back else f" (it is kept as {old})"
                raise OutputPathError(f"{shown}: {why}{where}")
            aside.append(old)
        else:
            raise OutputPathError(f"{shown}: other processes keep replacing it; nothing was written")
    except BaseException:
        for old in reversed(aside):  # our own earlier output goes back when nothing took its place
            try:
                if not _place(old, dest, kind.is_folder):
                    _remove(old)
            except OSError:
                pass  # it stays under its moved-aside name: never lost
        raise
    for old in aside:
        _remove(old)


def _prune_empty_folders(root: Path) -> None:
    """An empty folder in an output carries nothing and would read as the user's later: drop it."""
    for d, _, _ in os.walk(root, topdown=False):
        if d != str(root) and not os.listdir(d):
            os.rmdir(d)


class _Claim:
    """A path a command may write (see the module docstring); the check ran when the claim was made."""

    def __init__(self, path: Path, kind: OutputKind, shown: str):
        self.path = Path(path)
        self.kind = kind
        self.shown = shown
        self._abs = Path(os.path.abspath(self.path))


class FolderClaim(_Claim):
    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh temporary sibling to write into; on success it is marked and put in place atomically."""
        parent = self._abs.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self._abs.name}.evalkit-tmp-", dir=parent))
        try:
            os.chmod(tmp, 0o777 & ~_UMASK)
            yield tmp
            _prune_empty_folders(tmp)
            files, _ = _entries(tmp)
            (tmp / MARKER).write_text(_marker_text(self.kind.name, {f: file_sha256(tmp / f) for f in files}),
                                      encoding="utf-8")
            _install(tmp, self._abs, self.kind, self.shown)
        finally:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)


class FileClaim(_Claim):
    def write_text(self, text: str) -> Path:
        self._abs.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_sibling(self._abs, text)
        try:
            _install(tmp, self._abs, self.kind, self.shown)
        finally:
            tmp.unlink(missing_ok=True)
        return self.path


def _temp_sibling(path: Path, text: str) -> Path:
    """``text`` in a new temporary sibling of ``path`` (evalkit's temporary name, the umask's permissions)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.evalkit-tmp-", dir=path.parent)
    try:
        os.chmod(name, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _kind(name: str, is_folder: bool) -> OutputKind:
    kind = KINDS[name]
    if kind.is_folder != is_folder:
        raise ValueError(f"output kind {name!r} is a {'folder' if kind.is_folder else 'file'}")
    return kind


def _check(path: Path, kind: OutputKind, option: str | None) -> str:
    shown = _label(option, str(path))
    why = _location_refusal(path, kind) or _existing_refusal(path, kind)
    if why:
        raise OutputPathError(f"{shown}: {why}")
    return shown


def claim_folder(path: str | Path | FolderClaim, kind: str, option: str | None = "--out") -> FolderClaim:
    """Claim ``path`` for ``kind``'s output folder now (OutputPathError: one line, nothing touched).
    A claim passes through unchanged (library functions take either a path or the command's early claim)."""
    if isinstance(path, FolderClaim):
        if path.kind.name != kind:
            raise ValueError(f"claim for {path.kind.name!r} used for {kind!r}")
        return path
    k = _kind(kind, True)
    return FolderClaim(Path(path), k, _check(Path(path), k, option))


def claim_file(path: str | Path, kind: str, option: str | None = "--out") -> FileClaim:
    """Claim ``path`` for ``kind``'s output file now (OutputPathError: one line, nothing touched)."""
    k = _kind(kind, False)
    return FileClaim(Path(path), k, _check(Path(path), k, option))


class InPlaceClaim:
    """Files of an existing output folder that a command rewrites (each evalkit's own, or missing)."""

    def __init__(self, folder: Path, kinds: tuple[str, ...], names: tuple[str, ...], shown: str):
        self.folder = Path(folder)
        self.kinds = kinds
        self.names = names
        self.shown = shown
        self.check()

    def check(self) -> dict | None:
        """The folder's marker (None for an unmarked earlier output); OutputPathError when a file is not ours."""
        f = self.folder
        if not f.is_dir():
            raise OutputPathError(f"{self.shown}: is not {KINDS[self.kinds[0]].a_noun}"
                                  f"{'' if f.exists() else ' (no such folder)'}")
        marker = _read_marker(f)
        if marker is None:
            if not any(KINDS[k].recognise(f) for k in self.kinds):
                raise OutputPathError(f"{self.shown}: is not {KINDS[self.kinds[0]].a_noun} (evalkit did not write it)")
        elif marker["kind"] not in self.kinds:
            raise OutputPathError(f"{self.shown}: is {_kind_noun(marker['kind'])}, not "
                                  f"{KINDS[self.kinds[0]].a_noun}")
        for name in self.names:
            p = f / name
            if not os.path.lexists(p):
                continue
            if p.is_symlink() or not p.is_file():
                raise OutputPathError(f"{self.shown}: {name} is not a file evalkit wrote; {NEVER}")
            if marker is not None and marker["files"].get(name) != file_sha256(p):
                what = "changed after evalkit wrote it" if name in marker["files"] else "was not written by evalkit"
                raise OutputPathError(f"{self.shown}: {name} {what}; {NEVER} (move it out first)")
        return marker

    def write(self, texts: dict[str, str]) -> dict[str, Path]:
        """Replace each file atomically (a temporary sibling renamed over it) and record it in the marker."""
        unknown = set(texts) - set(self.names)
        if unknown:
            raise ValueError(f"not claimed: {sorted(unknown)}")
        marker = self.check()
        out = {}
        for name, text in texts.items():
            out[name] = _replace_text(self.folder / name, text)
        if marker is not None:
            files = dict(marker["files"], **{n: file_sha256(p) for n, p in out.items()})
            _replace_text(self.folder / MARKER, _marker_text(marker["kind"], files))
        return out


def _replace_text(path: Path, text: str) -> Path:
    tmp = _temp_sibling(path, text)
    try:
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def claim_in_place(folder: str | Path, kinds: tuple[str, ...], names: tuple[str, ...],
                   option: str | None = None) -> InPlaceClaim:
    """Claim files ``names`` inside the existing output folder ``folder`` of one of ``kinds`` (e.g. the reports of
    a run folder): the folder must be evalkit's own and each file evalkit's own or missing; other files are left
    alone."""
    return InPlaceClaim(Path(folder), kinds, names, _label(option, str(folder)))


__all__ = ["MARKER", "KINDS", "RUN_FOLDER_KINDS", "OutputKind", "FolderClaim", "FileClaim", "InPlaceClaim",
           "claim_folder", "claim_file", "claim_in_place", "file_sha256"]
