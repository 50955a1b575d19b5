"""The manual cannot drift from the code: the README's size and its quickstart run verbatim, every command shown in
a fenced ```bash / ```console block of the README or docs/ run (or, for a block marked ``<!-- parse-only: why -->``,
parsed by the real argument parser), every ``--option`` in an inline ``evalkit …`` code span known to its command,
the README's command table complete, the generated stage reference equal to its generator's output, the TOML
examples of the presets and tuning pages valid, and the README's headline figures those of the reference page.
The site itself is built strictly by `make docs` (inside `make test`)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # the first run embeds the example folder (the model loads once)

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README] + sorted(DOCS.glob("*.md"))
EXAMPLE = DOCS / "examples" / "my-notes"
README_LIMIT = 10 * 1024
FENCE = re.compile(r"^```(bash|console|sh|shell)[ \t]*\n(.*?)^```", re.S | re.M)
PARSE_ONLY = re.compile(r"<!--\s*parse-only:\s*(.+?)\s*-->\s*$")
SHELL_OPS = {">", ">>", "|", "&&", "||", ";", "2>&1"}


@dataclass
class Shown:
    page: Path
    line: int
    text: str  # the command line as shown (prompt removed)
    parse_only: str | None  # the reason given in the block's marker

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def argv(self) -> list[str]:
        """The evalkit arguments (after `evalkit` / `python -m evalkit[.cli]`), cut at the first shell operator."""
        words = shlex.split(self.text, comments=True)
        if words[0] == "python":
            words = words[3:]
        else:
            words = words[1:]
        for i, w in enumerate(words):
            if w in SHELL_OPS:
                return words[:i]
        return words


def fenced_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line of the block's first command, body, parse-only reason) of every shell block of a page."""
    src = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(src):
        before = [ln for ln in src[: m.start()].splitlines() if ln.strip()]
        marker = PARSE_ONLY.search(before[-1]) if before else None
        out.append((src[: m.start()].count("\n") + 2, m.group(2), marker.group(1) if marker else None))
    return out


def shown_commands(pages=PAGES) -> list[Shown]:
    out = []
    for page in pages:
        for line, body, parse_only in fenced_blocks(page):
            for i, raw in enumerate(body.splitlines()):
                text = raw.strip().removeprefix("$ ")
                if text.startswith("evalkit ") or text.startswith("python -m evalkit"):
                    out.append(Shown(page, line + i, text, parse_only))
    return out


def parser() -> argparse.ArgumentParser:
    from evalkit.cli import build_parser
    return build_parser()


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:  # argparse keeps its sub-parsers here; there is no public accessor
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def test_readme_is_at_most_10_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes (limit {README_LIMIT:,}): move detail into docs/"


def test_readme_links_point_at_pages():
    """The README is read outside the site (on a forge, on PyPI): its relative links name files that exist, and every
    page of the site is in mkdocs.yml's nav."""
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert len(links) >= 10
    assert [x for x in links if not (ROOT / x).is_file()] == []
    nav = set(re.findall(r"^\s+- [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M))
    assert nav == {p.name for p in DOCS.glob("*.md")}, sorted(nav ^ {p.name for p in DOCS.glob("*.md")})


def test_every_shown_command_parses(capsys):
    """Every command of every shell block, parse-only or not, is accepted by the real parser: each option it shows
    exists and each value fits the option's choices."""
    shown = shown_commands()
    assert len(shown) >= 10 and {s.page.name for s in shown} >= {"README.md", "quickstart.md", "ci.md"}
    bad = []
    for s in shown:
        try:
            parser().parse_args(s.argv())
        except SystemExit:
            bad.append(f"{s.where}: {s.text}\n    {capsys.readouterr().err.strip().splitlines()[-1]}")
    assert not bad, "\n".join(bad)


INLINE = re.compile(r"`((?:evalkit|python -m evalkit(?:\.cli)?) [^`]+)`")


def test_every_inline_option_exists():
    """Every ``--option`` in an inline ``evalkit SUBCOMMAND …`` code span of the README or docs is an option of that
    (sub-)command (placeholders such as ``NAME`` or ``a,b,c`` are not parsed, options are)."""
    root = parser()
    seen, bad = 0, []
    for page in PAGES:
        for m in INLINE.finditer(page.read_text(encoding="utf-8")):
            words = m.group(1).replace("\\|", "|").split()
            words = words[3:] if words[0] == "python" else words[1:]
            p, path = root, []
            while words and words[0] in _subparsers(p):
                path.append(words[0])
                p = _subparsers(p)[words.pop(0)]
            if not path:
                continue
            known = {o for a in p._actions for o in a.option_strings}
            for w in words:
                opt = re.match(r"\[?(--[a-z][a-z0-9-]*)", w)
                if opt:
                    seen += 1
                    if opt.group(1) not in known:
                        bad.append(f"{page.relative_to(ROOT)}: `{m.group(1)}`: {' '.join(path)} has no {opt.group(1)}")
    assert seen >= 50, seen
    assert not bad, "\n".join(bad)


def test_readme_command_table_names_every_command():
    table = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`evalkit ([a-z-]+)`", table))
    commands = set(_subparsers(parser())) - {"preset"}  # `preset` is the alias of `presets`
    assert listed == commands, (sorted(commands - listed), sorted(listed - commands))


def test_api_page_names_every_public_name():
    """docs/api.md covers the public API: every name of ``evalkit.__all__`` and ``retrievers.__all__``."""
    import evalkit
    import retrievers
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    missing = [n for n in evalkit.__all__ if f"evalkit.{n}" not in page]
    missing += [n for n in retrievers.__all__ if f"`{n}`" not in page]
    assert not missing, missing


def test_stage_reference_page_is_the_generators_output():
    from evalkit.report.stage_reference import library_stages, render
    from retrievers.stages import REGISTRY, Stage, param, register

    @register
    class MyOwnStage(Stage):  # a user's stage (process-wide registry): not part of the shipped reference
        name = "test_docs.my_own"
        k: int = param(1)

        def apply(self, st, cs, ctx):
            return st

    try:
        page = (DOCS / "stages.md").read_text(encoding="utf-8")
        assert page == render(), "docs/stages.md is stale: run `evalkit stages --markdown > docs/stages.md`"
        shipped = library_stages()
        assert "test_docs.my_own" in REGISTRY and "test_docs.my_own" not in shipped
        assert page.count("\n### `") == len(shipped) >= 40
        assert len(shipped) == len({n for n, c in REGISTRY.items() if c.__module__.startswith("retrievers.")})
        for name, cls in shipped.items():  # every parameter of every stage is on the page
            section = page.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
            for f in dataclasses.fields(cls):
                assert f"| `{f.name}` |" in section, (name, f.name)
    finally:
        REGISTRY.pop("test_docs.my_own", None)


def _toml_blocks(page: str) -> list[str]:
    return re.findall(r"^```toml\n(.*?)^```", (DOCS / page).read_text(encoding="utf-8"), re.S | re.M)


def test_preset_page_examples_build(tmp_path):
    from retrievers.pipeline import build_pipeline, resolve_preset
    blocks = _toml_blocks("presets.md")
    assert len(blocks) >= 2
    for i, text in enumerate(blocks):
        path = tmp_path / f"example{i}.toml"
        path.write_text(text, encoding="utf-8")
        p = build_pipeline(resolve_preset(str(path)))
        assert p.stages and p.hash
    extended = build_pipeline(resolve_preset(str(tmp_path / "example1.toml")))
    assert extended.stages[-1].name == "cutoff.top_k"  # [[after]] appended
    assert [s.params()["half_life_days"] for s in extended.stages if s.display == "decay"] == [14.0]


def test_tune_space_example_is_valid(tmp_path):
    from evalkit.tune.space import load_space
    (text,) = _toml_blocks("tuning.md")
    path = tmp_path / "space.toml"
    path.write_text(text, encoding="utf-8")
    space = load_space(path)
    assert {p.id for p in space.params} >= {"half_life_days", "depth", "multiplier", "diversity"}


HEADLINE = {  # README row label → (reference page section title prefix, column, k) — what each figure is
    "SciFact (nDCG@10)": ("SciFact", "nDCG@10", None),
    "SciFact (recall@100)": ("SciFact", "recall@100", None),
    "LoCoMo turns (recall@10, %)": ("LoCoMo", "overall", "10"),
    "LongMemEval-S sessions (recall_any@5)": ("LongMemEval-S", "recall_any@5", None),
    "LongMemEval-S sessions (nDCG@10)": ("LongMemEval-S", "nDCG@10", None),
}


def _reference_tables() -> dict[str, list[dict[str, str]]]:
    """The generated block of docs/reference.md: section title → rows (header → cell) of its first table."""
    src = (DOCS / "reference.md").read_text(encoding="utf-8")
    block = src.split("<!-- reference:begin -->", 1)[1].split("<!-- reference:end -->", 1)[0]
    out: dict[str, list[dict[str, str]]] = {}
    for title, body in re.findall(r"^\*\*(.+?)\*\*\n(.*?)(?=^\*\*|\Z)", block, re.S | re.M):
        first = re.search(r"(?:^\|.*\n?)+", body, re.M).group(0)  # the first table (a caption may follow)
        rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in first.splitlines()]
        head = rows[0]
        out[title] = [dict(zip(head, r)) for r in rows[2:]]
    return out


def test_readme_headline_figures_are_the_reference_pages():
    tables = _reference_tables()
    src = README.read_text(encoding="utf-8").split("<!-- headline:begin -->", 1)[1].split("<!-- headline:end -->")[0]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in src.strip().splitlines()]
    assert {r[0] for r in rows} == set(HEADLINE)
    for label, bm25, dense, rrf, published in rows:
        prefix, column, k = HEADLINE[label]
        (title,) = [t for t in tables if t.startswith(prefix)]
        for retriever, value in (("bm25", bm25), ("dense", dense), ("hybrid-rrf", rrf)):
            (row,) = [r for r in tables[title] if r["retriever"] == retriever and (k is None or r["k"] == k)]
            assert row[column] == value, (label, retriever, row[column], value)
        if prefix == "LoCoMo":  # the paper's figure on its own row
            assert [r["overall"] for r in tables[title] if r["retriever"].startswith("DRAGON") and r["k"] == k] \
                == [re.search(r"DRAGON ([\d.]+)", published).group(1)]
        if prefix == "SciFact":  # the published figures of the page's "published" column
            for retriever in ("bm25", "dense"):
                figure = re.search(rf"{retriever} ([\d.]+)", published).group(1)
                (row,) = [r for r in tables[title] if r["retriever"] == retriever]
                assert figure in row["published"], (label, retriever, figure, row["published"])


# ---- running what the pages show -------------------------------------------------------------------------------

def _workdir(tmp: Path) -> Path:
    """A user's folder: the example notes as ``my-notes/``, the presets page's first TOML as ``my-preset.toml``, the
    docs' example candidate file where the pages name it."""
    shutil.copytree(EXAMPLE, tmp / "my-notes")
    (tmp / "my-preset.toml").write_text(_toml_blocks("presets.md")[0], encoding="utf-8")
    (tmp / "docs" / "examples").mkdir(parents=True)
    shutil.copy(DOCS / "examples" / "openclaw_a1.json", tmp / "docs" / "examples")
    for name in ("attacks.jsonl", "attacks.toml"):  # docs/poisoning.md plants the example attack files
        shutil.copy(DOCS / "examples" / name, tmp / "docs" / "examples")
    return tmp


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `evalkit` as installed
    return env


def _bash(script: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=_env(), text=True,
                          capture_output=True, timeout=timeout)


PYTHON = re.compile(r"^```python[ \t]*\n(.*?)^```", re.S | re.M)


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_env(), text=True, capture_output=True,
                          timeout=900)


def test_readme_quickstart_runs_verbatim(tmp_path):
    """The README's quickstart as printed — the shell block, then the Python block — in a folder holding the example
    notes as ``my-notes/``."""
    readme = README.read_text(encoding="utf-8")
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```bash\n(.*?)^```", quick, re.S | re.M)
    assert len(block.splitlines()) + len(PYTHON.findall(quick)[0].splitlines()) <= 15  # a 15-line quickstart
    work = _workdir(tmp_path)
    proc = _bash(block, work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    # the run folder: both retrievers scored on the example's test split
    metrics = json.loads((work / "runs" / "notes" / "metrics.json").read_text())
    assert {(r["retriever"], r["metric"]) for r in metrics["rows"]} >= {("bm25", "ndcg@10"), ("hybrid-rrf", "ndcg@10")}
    assert re.search(r"my-notes\s+bm25\s+hybrid-rrf\s+nDCG@10", out), out  # compare: B against the baseline
    baseline = json.dumps(json.loads((work / "ci" / "gate.json").read_text()))
    assert "my-notes" in baseline and "hybrid-rrf" in baseline
    assert out.rstrip().splitlines()[-1].startswith("gate: OK"), out[-500:]

    (code,) = PYTHON.findall(quick)
    proc = _python(code, work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cli = {(r["retriever"], r["metric"]): r["value"] for r in metrics["rows"]}
    py = {(r["retriever"], r["metric"]): r["value"]
          for r in json.loads((work / "runs" / "notes-py" / "metrics.json").read_text())["rows"]}
    assert py == cli  # the API's folder holds the CLI's numbers
    assert re.search(r"my-notes\s+bm25\s+hybrid-rrf\s+nDCG@10", proc.stdout), proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("gate: OK"), proc.stdout[-500:]


def _steps(page: Path) -> list[tuple[int, str, str]]:
    """A page's runnable steps in document order: ("sh", line, command) of shell blocks not marked parse-only and
    ("py", line, code) of ```python blocks."""
    src = page.read_text(encoding="utf-8")
    steps = [(s.line, "sh", s.text) for s in shown_commands([page]) if s.parse_only is None]
    steps += [(src[: m.start()].count("\n") + 2, "py", m.group(1)) for m in PYTHON.finditer(src)]
    return [(line, kind, text) for line, kind, text in sorted(steps)]


def test_every_shown_command_runs(tmp_path):
    """Every command of every shell block not marked parse-only, and every Python block, runs — page by page in
    document order (a page's later steps use what its earlier ones wrote) in a user's folder; exit 0 each."""
    pages = [p for p in PAGES if p != README]  # README: test above
    steps = {p: _steps(p) for p in pages}
    assert sum(len(v) for v in steps.values()) >= 10 and any(k == "py" for v in steps.values() for _, k, _ in v)
    failures = []
    for page, todo in steps.items():
        if not todo:
            continue
        work = _workdir(tmp_path / page.stem)
        done: set[str] = set()
        for line, kind, text in todo:
            if text in done:  # the same command shown twice on a page (a recipe, then its explanation) runs once
                continue
            done.add(text)
            proc = _bash(text, work) if kind == "sh" else _python(text, work)
            if proc.returncode != 0:
                failures.append(f"{page.relative_to(ROOT)}:{line}: {text.strip().splitlines()[0]}\n"
                                f"    exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    assert not failures, "\n".join(failures)


def test_a_marked_block_says_why():
    """Blocks that are only parsed carry a reason, and nothing else is skipped."""
    marked = [s for s in shown_commands() if s.parse_only is not None]
    assert all(len(s.parse_only) > 10 for s in marked), [(s.where, s.parse_only) for s in marked]
    assert {s.argv()[0] for s in marked} <= {"bench", "perf", "tune", "reference", "replay", "ablate", "agree",
                                            "systems", "serve-embeddings", "import", "pool", "run", "train-guard",
                                            "serve-llm", "answer", "lofo", "gate"}
