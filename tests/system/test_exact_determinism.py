"""Exact vector search gives the same bits in every process (issue 46): two cold `evalkit run` processes on SciFact
(and the project's own memory workspace), each with its own empty cache seeded only with the same embeddings (computed
once, in the session's cache), write byte-identical metrics.csv, per_query.csv, per-query result files and TREC run
files for every runnable preset."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from retrievers.embed.model import Embedder, cache_root

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "reports" / "gate" / "expected.json"


def _presets() -> list[str]:
    """Every runnable preset (the gate's list: the seed presets and the baselines that need no reranker)."""
    return [r["name"] if isinstance(r, dict) else r for r in json.loads(GATE.read_text())["retrievers"]]


def _backend() -> str:
    """The embedding backend the gate's baseline was made with (``openvino-f32``: float32 vectors, the reference's
    within cosine 0.9999999, for 2.4x less CPU than torch): the test embeds with it so `make gate` reuses them."""
    return json.loads(GATE.read_text())["embedder"]["backend"]


def _run(cache: Path, out: Path, presets: list[str], dataset: str) -> None:
    env = {**os.environ, "EVALKIT_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR") or str(cache_root() / "numba")}
    env.pop("EVALKIT_BACKEND", None)
    r = subprocess.run([sys.executable, "-m", "evalkit.cli", "run", "--dataset", dataset, "--retrievers",
                        ",".join(presets), "--embed-backend", _backend(), "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=7200)
    assert r.returncode == 0, r.stderr[-2000:]


def _files(folder: Path) -> dict[str, bytes]:
    keep = ["metrics.csv", "per_query.csv", "metrics_by_category.csv"]
    out = {k: (folder / k).read_bytes() for k in keep}
    for sub in ("results", "runs"):
        for p in sorted((folder / sub).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(folder))] = p.read_bytes()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["memory-workspace", "scifact"])
def test_two_cold_processes_write_the_same_bytes(tmp_path, dataset):
    if dataset == "scifact" and not (Path(os.environ.get("EVALKIT_DATA", "")) / "scifact").exists():
        pytest.fail("SciFact is not under EVALKIT_DATA")
    presets = _presets()
    # the embeddings both runs share: computed once (or reused) in the session's own cache ($EVALKIT_CACHE), where
    # `make gate` finds them next in .ci/run (the same model on the same backend: the baseline's, float32) instead of
    # embedding SciFact cold a second time; then only that model's embedding file is copied, as one consistent snapshot
    _run(cache_root(), tmp_path / "warm", ["dense"], dataset)
    db = Embedder(backend=_backend(), progress=False).cache.path
    outs = []
    for name in ("a", "b"):
        cache = tmp_path / f"cache-{name}"
        (cache / "embeddings").mkdir(parents=True)
        with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(cache / "embeddings" / db.name)) as dst:
            src.backup(dst)
        assert not (cache / "candidates").exists() and not (cache / "bm25").exists()
        _run(cache, tmp_path / f"run-{name}", presets, dataset)
        man = json.loads((tmp_path / f"run-{name}" / "manifest.json").read_text())
        work = man["datasets"][dataset]["index"]["work"]
        assert work["embedded_texts"] == 0 and work["candidates_loaded"] == 0  # cold but for the embeddings
        assert man["datasets"][dataset]["index"]["backend"] == "exact"
        outs.append(_files(tmp_path / f"run-{name}"))
    a, b = outs
    assert set(a) == set(b) and len(a) >= 3 + 2 * len(presets)
    differ = [k for k in a if a[k] != b[k]]
    assert not differ, f"files differ between two cold processes: {differ[:5]}"
