"""Every notebook in notebooks/ runs headless (nbclient, a kernel on this venv's python) with small settings,
produces its plots and key variables; committed notebooks carry no outputs."""
from __future__ import annotations

import ast
import json
import sys
import time

import nbformat
import pytest
from tests.helpers import ROOT

NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
TIMEOUT = 1800  # seconds per cell, on a heavily loaded 2-core machine
KERNEL = "evalkit-test-venv"

# per notebook: minimum number of PNG plots, and checks run in the kernel after the notebook (each must be True)
EXPECT = {
    "01_explore_bench_report.ipynb": (3, {
        "leaderboards": "len(leaderboards) >= 1 and all(len(v) >= 2 for v in leaderboards.values())",
        "drill": "len(drill) >= 2 and {'query', 'delta'} <= set(drill.columns)",
        "conclusions": "len(conclusions) >= 1 and all(isinstance(c, str) and c for c in conclusions)",
    }),
    "02_tune_decay_half_life.ipynb": (1, {
        "curve": "{'half_life', 'train', 'heldout'} <= set(curve.columns) and len(curve) >= 5",
        "best_half_life": "best_half_life in set(curve['half_life'])",
        "conclusions": "len(conclusions) >= 1 and all(isinstance(c, str) and c for c in conclusions)",
    }),
    "03_ablation_stage_by_stage.ipynb": (3, {
        "results": "len(results) >= 2 and all(len(r.rows) == len(evalkit.load_preset(n).stages) for n, r in results.items())",
        "frames": "all(len(f) == len(results[n].rows) + 1 for n, f in frames.items())",
        "conclusions": "len(conclusions) == len(results) and all(conclusions)",
    }),
    "04_answers_funnel.ipynb": (1, {
        "answers": "len(answers) == 2 * N_QUESTIONS and set(answers['verdict']) <= {'correct', 'incorrect', "
                   "'abstained'}",
        "funnel": "int(funnel.values.sum()) == 2 * N_QUESTIONS",
        "conclusions": "len(conclusions) == 2 and all(conclusions)",
    }),
}


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    """A kernel spec that starts this interpreter (the venv's python) with ipykernel."""
    pytest.importorskip("ipykernel")
    d = tmp_path_factory.mktemp("jupyter")
    spec = d / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "evalkit test (venv python)", "language": "python"}))
    return d


def test_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= set(EXPECT)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown", "a notebook starts with a short explanation"
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{path.name}: outputs must be stripped"
    assert "widgets" not in nb.metadata


def imported_names(source: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement in a code cell (IPython magics dropped)."""
    code = "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", [a.name for a in node.names]))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_use_only_the_public_api(path):
    """A notebook is what a user would write: `import evalkit`, the public names of `evalkit` and `retrievers`,
    third-party packages — no internal module, no sys.path edits, no fallbacks for other versions."""
    import evalkit
    import retrievers

    public = {"evalkit": set(evalkit.__all__), "retrievers": set(retrievers.__all__)}
    nb = nbformat.read(path, as_version=4)
    bad = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for mod, names in imported_names(c.source):
            top = mod.split(".")[0]
            if top in public and (mod != top or not set(names) <= public[top]):
                bad.append(f"{mod} {names}")
        bad += [ln.strip() for ln in c.source.splitlines() if "sys.path" in ln or "except ImportError" in ln]
    assert bad == [], f"{path.name}: {bad}"
    assert any(m == "evalkit" for c in nb.cells if c.cell_type == "code" for m, _ in imported_names(c.source))


def test_the_public_api_check_catches_internal_imports():
    assert imported_names("%matplotlib inline\nfrom evalkit.engine.runner import x\nimport evalkit") == [
        ("evalkit.engine.runner", ["x"]), ("evalkit", [])]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_dir, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.delenv("EVALKIT_NB_FULL", raising=False)
    monkeypatch.setenv("EVALKIT_BENCH_DIR", str(tmp_path / "no-bench-here"))  # 01 runs its own small bench
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # ... into a temporary folder that pytest cleans up
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    min_png, checks = EXPECT.get(path.name, (1, {}))
    nb = nbformat.read(path, as_version=4)
    n_cells = len(nb.cells)
    probe = "import json as _j\nprint('NBCHECK ' + _j.dumps({%s}))" % ", ".join(
        f"{k!r}: bool({v})" for k, v in checks.items())
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=TIMEOUT, allow_errors=False,
                            resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError on the first failing cell
    secs = time.perf_counter() - t0
    print(f"\n{path.name}: executed in {secs:.0f}s")
    outputs = [o for c in nb.cells[:n_cells] if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o for o in outputs if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]
    assert len(pngs) >= min_png, f"{path.name}: {len(pngs)} plots, expected >= {min_png}"
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    line = next(ln for ln in text.splitlines() if ln.startswith("NBCHECK "))
    got = json.loads(line[len("NBCHECK "):])
    assert got == {k: True for k in checks}, f"{path.name}: failed checks {[k for k, v in got.items() if not v]}"
