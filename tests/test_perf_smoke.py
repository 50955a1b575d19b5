"""`evalkit perf --quick` runs end to end and prints every section with its machine line (no timing asserted)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_perf_quick_prints_every_section(tmp_path):
    env = dict(os.environ, EVALKIT_PERF_QUIET="1", CI="true")
    out_json = tmp_path / "perf.json"
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "perf", "--quick", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    for n, title in [(1, "Sweep throughput"), (2, "Per-query latency"), (3, "Embedding"),
                     (4, "Index build and reopen"), (5, "Vector search exactness"), (6, "Scale")]:
        head = f"== {n}. {title} =="
        assert head in text, f"section {n} missing"
        body = text.split(head, 1)[1].split("\n== ", 1)[0]
        assert "load average" in body and "cores" in body, f"section {n} has no machine line"
        assert "section failed" not in body, body
        assert "\n-- " in body, f"section {n} printed no table"
    assert "finished in" in text
    assert out_json.exists()


def test_perf_bad_section_is_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "perf", "--sections", "9"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("evalkit: error:") and "Traceback" not in proc.stderr
