"""Runs never replace runs: the default output of `evalkit run` / `evalkit replay` is a new folder per command,
``reports/runs/<dataset>/<UTC time>-<short hash>/``, and ``reports/runs/<dataset>/latest`` links to the newest.

* :func:`new_run_folder` — the folder a command writes when no ``--out`` is given: the UTC time the command started
  (``20261127T061502Z``) and the first 8 hex digits of the sha256 of its arguments (the same command run twice in one
  second gets ``-2``, ``-3`` …). An explicit ``--out`` keeps its rules (:mod:`evalkit.runfolder.claim`: replaced only
  when it is that command's own earlier output);
* a ``reports/runs/<dataset>`` written by an earlier evalkit (one run folder there, the layout before this one) is
  moved, whole, into ``reports/runs/<dataset>/<its time>-earlier/`` the first time a new run lands beside it — never
  deleted (:func:`keep_earlier`);
* :func:`link_latest` — ``latest`` (a relative symbolic link) is switched atomically to the new folder after it is
  written; a ``latest`` that is not evalkit's link is left alone;
* :func:`resolve_run_folder` — ``evalkit compare reports/runs/notes`` and ``evalkit report reports/runs/notes`` read
  the newest run of such a folder (its ``latest``), so commands written for the earlier layout keep working;
* :func:`list_runs` — what `evalkit runs` prints: date, datasets, retrievers and headline of every run folder.

The folder name reads the wall clock; nothing inside a run does (metrics files stay byte-identical across runs).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from evalkit.runfolder.read import RunFolderError, read_run

RUNS_ROOT = Path("reports") / "runs"
LATEST = "latest"
STAMP = "%Y%m%dT%H%M%SZ"


def run_key(argv: list[str]) -> str:
    """First 8 hex digits of the sha256 of a command's arguments: runs of the same command share it."""
    return hashlib.sha256("\0".join(map(str, argv)).encode()).hexdigest()[:8]


def _is_run_folder(path: Path) -> bool:
    try:
        read_run(path)
    except (RunFolderError, OSError, ValueError, KeyError, TypeError):
        return False
    return True


def keep_earlier(container: Path, log=print) -> Path | None:
    """Move a run folder of the earlier layout (``container`` itself is a run folder) into
    ``container/<its manifest's modification time, UTC>-earlier/``; returns the new path, or None when there was
    nothing to move. Only a readable run folder is moved (anything else is left where it is)."""
    if container.is_symlink() or not (container / "manifest.json").is_file() or not _is_run_folder(container):
        return None
    when = time.strftime(STAMP, time.gmtime((container / "manifest.json").stat().st_mtime))
    aside = container.with_name(f".{container.name}.evalkit-old-{secrets.token_hex(4)}")
    os.rename(container, aside)
    container.mkdir()
    target = container / f"{when}-earlier"
    os.rename(aside, target)
    log(f"kept the earlier run {container} as {target} (every run now has a folder of its own)")
    return target


def new_run_folder(stem: str, argv: list[str], root: Path = RUNS_ROOT, now: float | None = None,
                   log=print) -> Path:
    """``root/stem/<UTC time>-<run_key(argv)>`` — a path no earlier run used (see the module docstring)."""
    container = root / stem
    keep_earlier(container, log)
    base = f"{time.strftime(STAMP, time.gmtime(time.time() if now is None else now))}-{run_key(argv)}"
    path, k = container / base, 2
    while path.exists() or path.is_symlink():
        path, k = container / f"{base}-{k}", k + 1
    return path


def link_latest(folder: Path, log=print) -> Path | None:
    """Point ``folder.parent/latest`` at ``folder`` (relative link, replaced atomically); None, with one line,
    when ``latest`` exists and is not a symbolic link (something of the user's: left alone)."""
    link = folder.parent / LATEST
    if link.exists() and not link.is_symlink():
        log(f"evalkit: warning: {link} is not evalkit's link; left alone (the new run is {folder})")
        return None
    tmp = folder.parent / f".{LATEST}.evalkit-tmp-{secrets.token_hex(4)}"
    os.symlink(folder.name, tmp)
    os.replace(tmp, link)
    return link


def resolve_run_folder(path: Path) -> Path:
    """``path`` itself when it is a run folder; its ``latest`` run when it is a folder of runs (the default layout:
    ``reports/runs/<dataset>``); else ``path`` (the reader then says what is wrong with it)."""
    path = Path(path)
    if (path / "manifest.json").exists():
        return path
    latest = path / LATEST
    if latest.is_symlink() and (latest / "manifest.json").exists():
        return path / os.readlink(latest)
    return path


@dataclass
class RunEntry:
    path: Path
    when: str            # UTC time from the folder name ("2026-11-27 06:15:02"), else the manifest's mtime
    datasets: list[str]
    retrievers: list[str]
    headline: str        # per dataset: the best retriever by nDCG@10 and its value
    latest: bool = False


def _when(path: Path) -> str:
    stamp = path.name.split("-", 1)[0]
    try:
        t = time.strptime(stamp, STAMP)
    except ValueError:
        t = time.gmtime((path / "manifest.json").stat().st_mtime)
    return time.strftime("%Y-%m-%d %H:%M:%S", t)


def _headline(path: Path, metric: str = "ndcg@10") -> tuple[list[str], list[str], str]:
    rows = json.loads((path / "metrics.json").read_text(encoding="utf-8")).get("rows") or []
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    retrievers = list(dict.fromkeys(r["retriever"] for r in rows))
    parts = []
    for ds in datasets:
        vals = [(r["value"], r["retriever"]) for r in rows if r["dataset"] == ds and r["metric"] == metric
                and isinstance(r["value"], (int, float)) and not math.isnan(r["value"])]
        if vals:
            v, who = max(vals, key=lambda x: (x[0], x[1]))
            parts.append(f"{ds}: {who} {metric} {v:.4f}" if len(datasets) > 1 else f"{who} {metric} {v:.4f}")
    return datasets, retrievers, "; ".join(parts) or "–"


def list_runs(root: Path = RUNS_ROOT) -> list[RunEntry]:
    """Every run folder under ``root`` (``root/<name>/`` of the earlier layout and ``root/<name>/<time>-<hash>/``),
    oldest first. Folders that are not readable run folders are skipped."""
    out: list[RunEntry] = []
    if not root.is_dir():
        return out
    for top in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        candidates = [top] if (top / "manifest.json").exists() else sorted(
            p for p in top.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
        latest = top / LATEST
        target = os.readlink(latest) if latest.is_symlink() else None
        for p in candidates:
            if not _is_run_folder(p):
                continue
            datasets, retrievers, head = _headline(p)
            out.append(RunEntry(p, _when(p), datasets, retrievers, head, latest=p.name == target))
    # runs started in the same second (the folder stamp's resolution) in the order they were written
    return sorted(out, key=lambda e: (e.when, (e.path / "manifest.json").stat().st_mtime_ns, str(e.path)))
