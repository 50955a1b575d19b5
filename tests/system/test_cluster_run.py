"""`evalkit run --cluster local:2` on a real Dask LocalCluster (two worker processes, one thread each): the corpus
embedding and the pipelines' query blocks run on the workers, and metrics.csv / per_query.csv are byte-identical to
one process (issue 46). Each run starts from its own empty cache, so the cluster run embeds every text remotely."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrievers.embed.model import cache_root

PRESETS = "bm25,dense,hybrid-rrf"


def _run(cache: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVALKIT_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "CI": "1",
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR") or str(cache_root() / "numba")}
    return subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--dataset", "memory-workspace",
                           "--retrievers", PRESETS, "--out", str(out), *extra],
                          env=env, capture_output=True, text=True, timeout=1800)


@pytest.mark.slow
def test_cluster_run_is_byte_identical_to_one_process(tmp_path):
    one = _run(tmp_path / "cache-one", tmp_path / "one")
    assert one.returncode == 0, one.stderr[-2000:]
    two = _run(tmp_path / "cache-two", tmp_path / "two", "--cluster", "local:2")
    assert two.returncode == 0, two.stderr[-2000:]
    said = two.stdout + two.stderr
    assert "embedding chunks done" in said and "query blocks done" in said, said[-2000:]  # the workers did the work
    for name in ("metrics.csv", "per_query.csv"):
        a, b = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert len(a) > 1000 and a == b, name


def test_bad_cluster_spec_is_one_error_line(tmp_path):
    r = _run(tmp_path / "cache", tmp_path / "out", "--cluster", "udp://nowhere")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("evalkit: error: --cluster"), r.stderr
    assert not (tmp_path / "out").exists()
