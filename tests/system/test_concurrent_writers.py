"""Processes writing the same run folder at once (evalkit/runfolder/claim.py): every write finishes, and the folder
is one writer's whole output, its marker naming exactly its files."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from evalkit.runfolder.claim import MARKER
from evalkit.runfolder.read import read_run
from tests.helpers import ROOT

WRITER = """
import sys
from evalkit.runfolder.write import RunWriter
out, i = sys.argv[1], int(sys.argv[2])
for _ in range(20):
    w = RunWriter(out)
    w.manifest.update(writer=i, machine={})
    for k in range(200):
        w.add_metric("d", "r", f"m{k:03d}", float(i))
    w.write()
"""


def test_concurrent_writers_last_complete_one_wins(tmp_path):
    """Processes writing the same folder at once: every write finishes; the folder is one writer's whole output."""
    out = tmp_path / "run"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(i)], cwd=ROOT, stderr=subprocess.PIPE,
                              text=True) for i in range(6)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errs
    run = read_run(out)
    writer = run["manifest"]["writer"]
    assert {r["value"] for r in run["metrics"]} == {float(writer)} and len(run["metrics"]) == 200
    marker = json.loads((out / MARKER).read_text())
    assert sorted(marker["files"]) == sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                                             if p.is_file() and p.name != MARKER)
    assert sorted(os.listdir(tmp_path)) == ["run"]
