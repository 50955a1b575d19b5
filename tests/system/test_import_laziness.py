"""A command imports only what it needs: `evalkit --help`, `evalkit runs` and a BM25-only run never import the
embedding stack (torch, OpenVINO, transformers, sentence-transformers: ~10-20 s of imports on a cold page cache),
and a dense run whose vectors are all cached does not either; a dense run with the compiled OpenVINO model kept
embeds without sentence-transformers (the shipped model's folder is a plain one). Each case runs in a fresh
interpreter and prints the heavy modules found in ``sys.modules`` after the command."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

HEAVY = ("torch", "openvino", "transformers", "sentence_transformers", "onnxruntime")
PROBE = """
import json, sys
from evalkit.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in %r if m in sys.modules)), file=sys.stderr)
""" % (HEAVY,)


def heavy_imports(args, env, cwd):
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return dict(os.environ, EVALKIT_CACHE=str(cache), EVALKIT_PROGRESS="0", CI="true")


@pytest.mark.parametrize("args", [["--help"], ["runs"]])
def test_help_and_runs_import_no_embedding_stack(args, env, tmp_path):
    found, proc = heavy_imports(args, env, tmp_path)
    assert found == [], (found, proc.stderr[-1500:])


@pytest.mark.slow
def test_bm25_run_imports_no_embedding_stack_and_a_warm_dense_run_neither(env, tmp_path):
    run = ["run", "--dataset", "memory-workspace", "--out", str(tmp_path / "out")]
    found, proc = heavy_imports(run + ["--retrievers", "bm25"], env, ROOT)
    assert "bm25" in proc.stdout and found == [], (found, proc.stderr[-1500:])
    # a cold dense run loads the model (it must: the check above is not vacuous) ...
    found, proc = heavy_imports(run + ["--retrievers", "dense"], env, ROOT)
    assert "torch" in found and "sentence_transformers" in found, (found, proc.stderr[-1500:])  # it converted
    # ... and the same run again takes every vector from the cache: no model, no torch
    found, proc = heavy_imports(run + ["--retrievers", "dense"], env, ROOT)
    assert "dense" in proc.stdout and found == [], (found, proc.stderr[-1500:])
    # with the compiled model kept but no vector cached, the shipped (plain) model embeds without sentence-transformers
    # (retrievers.embed.folder_model: ~10 s and ~500 MB less per process) and without converting the model again
    for entry in Path(env["EVALKIT_CACHE"]).iterdir():  # everything but the compiled model: vectors, candidates …
        if entry.name != "openvino":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    kept = {p: p.stat().st_mtime_ns for p in (Path(env["EVALKIT_CACHE"]) / "openvino").iterdir()}
    found, proc = heavy_imports(run + ["--retrievers", "dense"], env, ROOT)
    embedded = re.search(r"embedded (\d+) new texts", proc.stdout)
    assert embedded and int(embedded.group(1)) > 0, proc.stdout[-1500:]  # it did embed: the check is not vacuous
    assert "openvino" in found and "sentence_transformers" not in found, (found, proc.stderr[-1500:])
    assert {p: p.stat().st_mtime_ns for p in (Path(env["EVALKIT_CACHE"]) / "openvino").iterdir()} == kept
