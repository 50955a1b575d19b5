"""`evalkit perf --quick` runs end to end and prints every section with its machine line (no timing asserted)."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.perf, pytest.mark.slow]  # ~129 s: behind `make perf`, not in `make test`


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
    # the README table is rendered from that JSON, every row from a section that ran
    import json
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- perf:begin -->\nold\n<!-- perf:end -->\n\ntail\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "perf", "--from-json", str(out_json),
                           "--readme", str(readme)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = readme.read_text(encoding="utf-8")
    assert "old" not in md and md.endswith("tail\n") and md.count("<!-- perf:begin -->") == 1
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(rows) == 6, rows
    res = json.loads(out_json.read_text(encoding="utf-8"))
    fams = res["sections"]["1"]["data"]["families"]
    slowest = min(fams, key=lambda f: fams[f]["evals_per_s"])
    assert f"({slowest})" in rows[0]


def test_perf_readme_render_skips_missing_sections():
    from evalkit.report.perf import render
    res = {"machine": {"cpu": "X", "cores": 2, "ram_gb": 1}, "mode": "full", "sections": {
        "3": {"data": {"texts": 10, "ratio": 1.25, "warm_model_calls": [0, 0]}},
        "5": {"data": {"error": "RuntimeError: boom"}}}}
    md = render(res)
    assert "ratio 1.250" in md and "0 model calls" in md and "HNSW" not in md and "sweep" not in md
    assert "nothing" not in render({"sections": {}}) and "No section" in render({"sections": {}})


def test_perf_bad_section_is_one_line_error():
    proc = subprocess.run([sys.executable, "-m", "evalkit.cli", "perf", "--sections", "99"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("evalkit: error:") and "Traceback" not in proc.stderr


def test_readiness_on_a_cold_cache_splits_like_the_index(tmp_path, monkeypatch):
    """On an empty cache (no persisted units) perf's readiness check splits a sample of documents itself — with the
    index's own MaxP splitter — and reports "not embedded" instead of failing the section (a cold CI run did)."""
    from evalkit.perf.common import readiness
    from retrievers.embed.model import Embedder
    from retrievers.index.shared import split_pieces
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path))
    emb = Embedder(cache_dir=tmp_path, progress=False)
    r = readiness("memory-workspace", emb, sample=40)
    assert r.available and not r.ready and "not in the embedding cache" in r.why
    tok = emb.tokenizer()
    long = "\n".join(f"line {i} " + "word " * 40 for i in range(30))  # ~1,300 pieces: several windows
    pieces = split_pieces(long, tok, emb.max_seq_length - 2)
    assert len(pieces) > 1 and all(len(tok(p, add_special_tokens=False)["input_ids"]) <= emb.max_seq_length - 2
                                   for p in pieces)
    assert "\n".join(pieces).replace("\n", "") == long.replace("\n", "")  # whole lines, nothing lost
