"""`python tests/fault_runner.py ARGS…` = `evalkit ARGS…` in a real process, with optional fault points for
tests/system/test_cache_faults.py (set by environment variables; production code has no test hooks):

* ``FAULT_BARRIER=DIR:N`` — after the imports, wait until N processes reached this point (so processes started
  together really run their cache work at the same time, not staggered by seconds of imports).
* ``FAULT_PAUSE=KIND`` — stop inside the first write of a cache entry of KIND, print ``PAUSED <what>`` on stderr
  and sleep (the test then kills the process with SIGKILL): ``units`` / ``bm25`` / ``candidates`` (half of the
  file's bytes written to its temporary file), ``embeddings`` (rows inserted, transaction not committed),
  ``chroma`` (every record added to the collection being built, before it is sealed and renamed into place).
* ``FAULT_PAUSE=server:DATASET`` with ``FAULT_RESUME=FILE`` — before the first vector search of DATASET (its
  collection already opened), print ``PAUSED``, wait until FILE exists, then go on.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.cli import main  # noqa: E402
from retrievers import cachefile  # noqa: E402
from retrievers.embed.model import EmbeddingCache  # noqa: E402
from retrievers.embed.model import cache_root as cachefile_root  # noqa: E402
from retrievers.index.shared import SharedIndex  # noqa: E402


def _pause(what: str) -> None:
    print(f"PAUSED {what}", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)


def _barrier(spec: str) -> None:
    folder, _, n = spec.rpartition(":")
    Path(folder, str(os.getpid())).touch()
    while len(os.listdir(folder)) < int(n):
        time.sleep(0.01)


def _install(kind: str) -> None:
    if kind in ("units", "bm25", "candidates"):
        write = cachefile.write_payload

        def half_then_pause(fh, data, path):
            if kind not in path.relative_to(cachefile_root()).parts:
                return write(fh, data, path)
            fh.write(data[:len(data) // 2])
            fh.flush()
            os.fsync(fh.fileno())
            _pause(str(path))
        cachefile.write_payload = half_then_pause
    elif kind == "embeddings":
        EmbeddingCache._commit = lambda self, con: _pause(str(self.path))
    elif kind == "chroma":
        fill = SharedIndex._fill_collection

        def fill_then_pause(self, col, max_batch):
            fill(self, col, max_batch)
            _pause(self.collection_name)
        SharedIndex._fill_collection = fill_then_pause
    elif kind.startswith("server:"):
        dataset, resume = kind.split(":", 1)[1], Path(os.environ["FAULT_RESUME"])
        search = SharedIndex.vector_search

        def wait_then_search(self, *args, **kwargs):
            if self.dataset.name == dataset and not resume.exists():
                self.collection()
                print("PAUSED", file=sys.stderr, flush=True)
                while not resume.exists():
                    time.sleep(0.05)
            return search(self, *args, **kwargs)
        SharedIndex.vector_search = wait_then_search
    else:
        raise SystemExit(f"unknown FAULT_PAUSE {kind!r}")


if __name__ == "__main__":
    if os.environ.get("FAULT_PAUSE"):
        _install(os.environ["FAULT_PAUSE"])
    if os.environ.get("FAULT_BARRIER"):
        _barrier(os.environ["FAULT_BARRIER"])
    sys.exit(main(sys.argv[1:]))
