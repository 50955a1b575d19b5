"""Issue 17's house rule: a harness module never names a seed system or a dataset.

Every module under ``evalkit/`` except ``evalkit/data/`` (loaders and the registry, which name datasets by design)
is tokenized; a NAME or STRING token (f-string text included) containing a seed-system or dataset name fails the
test. Comments and docstrings may mention them as examples. Seed and dataset knowledge lives in the library
(presets, stages), in data files (``tune/perf/presets.toml``, ``evalkit/data/reference_numbers.toml``) and in
``evalkit/data/registry.py`` (``DEFAULT``, ``SUITES``).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from tests.helpers import ROOT

HARNESS = ROOT / "evalkit"
EXEMPT_DIRS = ("evalkit/data/",)
NAMES = re.compile(r"openclaw|lancedb|hookclaw|phase.?3|two_stage|scifact|locomo|longmemeval|memory-workspace",
                   re.IGNORECASE)
TEXT_TOKENS = {tokenize.NAME, tokenize.STRING} | {getattr(tokenize, n) for n in ("FSTRING_MIDDLE",)
                                                  if hasattr(tokenize, n)}

# Files that may still name a seed system or dataset, with the names (lower-cased matches): none. Kept as a
# mechanism so an exception is explicit and reviewed; an entry that no longer matches fails
# test_allow_list_is_minimal.
ALLOWED: dict[str, set[str]] = {}


def _docstring_lines(src: str) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def offending(path: Path) -> list[tuple[int, str, str]]:
    """(line, matched name lower-cased, token) for every NAME / STRING token of ``path`` naming a seed system or
    a dataset, outside comments and docstrings."""
    src = path.read_text(encoding="utf-8")
    doc = _docstring_lines(src)
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in TEXT_TOKENS or (tok.type != tokenize.NAME and tok.start[0] in doc):
            continue
        for m in NAMES.finditer(tok.string):
            out.append((tok.start[0], m.group(0).lower(), tok.string))
    return out


def harness_modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in HARNESS.rglob("*.py")
                  if not str(p.relative_to(ROOT)).startswith(EXEMPT_DIRS))


@pytest.mark.parametrize("rel", harness_modules())
def test_harness_module_names_no_seed_system_or_dataset(rel):
    allowed = ALLOWED.get(rel, set())
    bad = [(line, name, tok) for line, name, tok in offending(ROOT / rel) if name not in allowed]
    assert not bad, f"{rel} names a seed system or dataset (move it to a preset, a data file or " \
                    f"evalkit/data/registry.py): " + "; ".join(f"line {ln}: {tok[:60]!r}" for ln, _, tok in bad)


def test_allow_list_is_minimal():
    stale = {rel: sorted(names - {n for _, n, _ in offending(ROOT / rel)}) for rel, names in ALLOWED.items()
             if (ROOT / rel).exists()}
    stale = {k: v for k, v in stale.items() if v} | {rel: ["(file gone)"] for rel in ALLOWED
                                                    if not (ROOT / rel).exists()}
    assert not stale, f"allow-list entries no longer needed, remove them: {stale}"


def test_detector_sees_code_not_comments_or_docstrings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Mentions scifact in a docstring."""\n# locomo in a comment\n'
                 'def g():\n    """hookclaw here is fine."""\n    return f"{x} LongMemEval-S"\n'
                 'OPENCLAW_X = "memory-workspace"\n', encoding="utf-8")
    assert [(ln, n) for ln, n, _ in offending(f)] == [(5, "longmemeval"), (6, "openclaw"), (6, "memory-workspace")]
