"""A reader that has gone away (`evalkit presets | head -1`) ends the command quietly: no traceback, exit 141."""
import os
import subprocess
import sys
from tests.helpers import ROOT



def test_presets_into_a_closed_pipe_exits_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write fails with EPIPE, deterministically
    try:
        proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "presets"], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141, (proc.returncode, err)
