"""The architecture as a check: the import graph of ``retrievers/`` and ``evalkit/``, built from the source.

Every import statement counts — module level, inside functions, under ``if TYPE_CHECKING:``, inside ``try`` —
plus the implicit one Python makes when ``a.b.c`` is imported (``a.b``'s ``__init__`` runs first). The test fails
on an import cycle, on ``retrievers`` importing ``evalkit``, on an edge pointing up the layer order of
``docs/architecture.md``, on a module reaching for another module's ``_private`` name, and on a function-local
import without a ``# lazy:`` reason. Run it alone: ``pytest tests/unit/test_import_graph.py``; ``python
tests/unit/test_import_graph.py`` prints the layers, the counts and every function-local import with its reason.
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file also runs as a script)
PACKAGES = ("retrievers", "evalkit")

#: the layers, lowest first: a module may import its own layer (acyclically) or a lower one. The first matching
#: prefix gives a module's layer.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("library: base", ("retrievers.errors", "retrievers.types", "retrievers.text", "retrievers.tokens",
                       "retrievers.cachefile", "retrievers")),
    ("library: kernels", ("retrievers.kernels",)),
    ("library: embed", ("retrievers.embed",)),
    ("library: index", ("retrievers.index",)),
    ("library: candidates", ("retrievers.candidates",)),
    ("library: stages", ("retrievers.stages",)),
    ("library: pipeline", ("retrievers.pipeline",)),
    ("library: systems", ("retrievers.systems",)),
    ("library: presets", ("retrievers.presets",)),
    ("harness: errors and data", ("evalkit.errors", "evalkit.data", "evalkit")),
    ("measures", ("evalkit.measures",)),
    ("runfolder", ("evalkit.runfolder",)),
    ("engine", ("evalkit.engine",)),
    ("report", ("evalkit.report",)),
    ("tune", ("evalkit.tune",)),
    ("workflows", ("evalkit.workflows",)),
    ("perf", ("evalkit.perf",)),
    ("cli", ("evalkit.commands", "evalkit.cli")),
    ("api", ("evalkit.api",)),  # the public Python API: glue over the workflows; nothing imports it (but see FACADES)
]
#: Package ``__init__`` modules whose public names are imported on first attribute access (PEP 562 ``__getattr__``
#: over a ``_LAZY`` table {name: module}), and the modules those tables may name. Exempt from the layer order: the
#: look-up runs only after ``import evalkit`` / ``import retrievers`` has finished, so it can neither slow the import
#: nor close a cycle at import time — which is the point (``evalkit --help`` and every ``import retrievers.x`` stay
#: light). ``evalkit``'s names all come from the top layer (``evalkit.api``); ``retrievers``' from the library only.
FACADES = {"evalkit": ("evalkit.api",), "retrievers": ("retrievers.",)}
LAZY = re.compile(r"#.*\blazy:\s*(startup|optional-dep)\b")


def layer_of(mod: str) -> int:
    best, idx = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, idx = len(p), i
    return idx


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> tuple[str, list[str], ast.Module]:
    """(source, lines, tree) of a file, parsed once per test process (the checks below read the same files)."""
    src = path.read_text()
    return src, src.splitlines(), ast.parse(src)


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


class Import:
    def __init__(self, importer: str, target: str, names: list[str], line: int, local: bool, lazy: str | None):
        self.importer, self.target, self.names, self.line, self.local, self.lazy = (importer, target, names, line,
                                                                                   local, lazy)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(mods: dict[str, Path]) -> list[Import]:
    """Every import statement of ``mods`` whose target is one of them (``from pkg import module`` resolved to the
    module), with whether it sits inside a function / class body / TYPE_CHECKING block, and its ``# lazy:``
    reason."""
    out: list[Import] = []
    for mod, path in mods.items():
        src, lines, tree = parsed(path)
        top = {id(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            text = " ".join(lines[node.lineno - 1:node.end_lineno])
            m = LAZY.search(text)
            lazy = m.group(1) if m else None
            local = id(node) not in top
            if isinstance(node, ast.Import):
                for a in node.names:
                    out.append(Import(mod, a.name, [], node.lineno, local, lazy))
                continue
            target = _resolve(mod, path.name == "__init__.py", node)
            names = [a.name for a in node.names]
            subs = [n for n in names if f"{target}.{n}" in mods]
            for n in subs:
                out.append(Import(mod, f"{target}.{n}", [], node.lineno, local, lazy))
            rest = [n for n in names if n not in subs]
            if rest or not subs:
                out.append(Import(mod, target, rest, node.lineno, local, lazy))
    return out


def graph(mods: dict[str, Path], imps: list[Import]) -> dict[str, set[str]]:
    """Module → modules it makes Python import (internal ones), implicit parent-package imports included (a
    package that is an ancestor of the importer is already being imported, so that edge is not real)."""
    g: dict[str, set[str]] = defaultdict(set)
    for i in imps:
        t = i.target
        while t and t not in mods:  # ``import a.b.c`` of a name inside a module: the module
            t = t.rpartition(".")[0]
        if not t:
            continue
        parts = t.split(".")
        for k in range(1, len(parts) + 1):
            anc = ".".join(parts[:k])
            if anc in mods and anc != i.importer and not (i.importer + ".").startswith(anc + "."):
                g[i.importer].add(anc)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(g) | {w for ws in g.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def private_reaches(mods: dict[str, Path], imps: list[Import]) -> list[str]:
    """``from other import _name`` and ``other._name`` on an imported internal module (dunders excluded)."""
    out = []
    for i in imps:
        if i.target in mods and i.target != i.importer:
            for n in i.names:
                if n.startswith("_") and not n.startswith("__"):
                    out.append(f"{i.importer}:{i.line} imports {i.target}.{n}")
    for mod, path in mods.items():
        tree = parsed(path)[2]
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods and a.name != mod:
                        aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in mods and full != mod:
                        aliases[a.asname or a.name] = full
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = ast.unparse(node.value)
                if base in aliases:
                    out.append(f"{mod}:{node.lineno} uses {aliases[base]}.{node.attr}")
    return out


@functools.lru_cache(maxsize=1)
def _state():
    mods = modules()
    imps = imports(mods)
    return mods, imps, graph(mods, imps)


def test_no_import_cycle_counting_function_local_and_type_checking_imports():
    _, _, g = _state()
    assert cycles(g) == []


def test_the_library_never_imports_the_harness():
    _, imps, _ = _state()
    bad = [f"{i.importer}:{i.line} -> {i.target}" for i in imps
           if i.importer.startswith("retrievers") and i.target.split(".")[0] == "evalkit"]
    assert bad == []


def upward_edges(g: dict[str, set[str]]) -> list[str]:
    """Imports of a module from a higher layer than the importer's."""
    return [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
            for a, bs in sorted(g.items()) for b in sorted(bs) if layer_of(b) > layer_of(a)]


def test_imports_point_down_the_layers():
    mods, _, g = _state()
    assert all(layer_of(m) >= 0 for m in mods), [m for m in mods if layer_of(m) < 0]
    assert upward_edges(g) == []


def test_the_layers_are_in_the_documented_order():
    """The library and the harness are each a stack (docs/architecture.md): one module per layer, lowest first,
    gets a strictly higher layer each time; an index module importing a stage, or the engine importing a report,
    is an upward edge."""
    library = ["retrievers.types", "retrievers.kernels.registry", "retrievers.embed.model", "retrievers.index.shared",
               "retrievers.candidates.table", "retrievers.stages.base", "retrievers.pipeline",
               "retrievers.systems.protocol", "retrievers.presets.config.common"]
    harness = ["evalkit.data.registry", "evalkit.measures.stats", "evalkit.runfolder.write", "evalkit.engine.runner",
               "evalkit.report.format", "evalkit.tune.space", "evalkit.workflows.gate", "evalkit.perf.common",
               "evalkit.commands.gate", "evalkit.api"]
    for order in (library, harness):
        layers = [layer_of(m) for m in order]
        assert all(a < b for a, b in zip(layers, layers[1:])), list(zip(order, layers))
    assert layer_of(library[-1]) < layer_of(harness[0])
    assert upward_edges({"retrievers.index.shared": {"retrievers.stages.base"},
                         "evalkit.engine.runner": {"evalkit.report.format"},
                         "retrievers.stages.base": {"retrievers.index.shared"}}) == [
        "evalkit.engine.runner (engine) -> evalkit.report.format (report)",
        "retrievers.index.shared (library: index) -> retrievers.stages.base (library: stages)"]


def test_no_module_reaches_for_another_modules_private_names():
    mods, imps, _ = _state()
    assert private_reaches(mods, imps) == []


def test_no_test_reaches_for_a_private_name_of_the_packages():
    """Tests use the public API too (a test may exercise a kernel or a cache, through its public name)."""
    mods = modules()
    tests = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in sorted((ROOT / "tests").rglob("*.py"))
             if p.name != "__init__.py"}
    both = dict(mods, **tests)
    reaches = [r for r in private_reaches(both, imports(both)) if r.startswith("tests.")
               and r.split(" ")[-1].split(".")[0] in PACKAGES]
    assert reaches == []


def test_every_function_local_import_says_why_it_is_lazy():
    """Function-local imports only keep the CLI start-up fast or an optional dependency optional, and say so."""
    mods = modules()
    missing = []
    for mod, path in mods.items():
        src, lines, tree = parsed(path)
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
                text = " ".join(lines[node.lineno - 1:node.end_lineno])
                if not LAZY.search(text):
                    missing.append(f"{mod}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert missing == []


def test_lazy_facades_name_only_what_they_may():
    """The two lazy ``__init__`` tables (FACADES): every entry names an existing module that defines the name;
    evalkit's point only at evalkit.api, retrievers' only inside the library (never at the harness)."""
    import importlib

    mods = modules()
    for pkg, allowed in FACADES.items():
        table = importlib.import_module(pkg)._LAZY
        assert table, pkg
        for name, target in table.items():
            assert target in mods, (pkg, name, target)
            assert any(target == a or target.startswith(a) for a in allowed), (pkg, name, target)
            assert name in ast.unparse(parsed(mods[target])[2]), (pkg, name, target)
        assert set(table) <= set(importlib.import_module(pkg).__all__)


def test_nothing_imports_the_public_api_module():
    """evalkit.api is the top: no module imports it (the package's lazy table is the one way in)."""
    _, imps, _ = _state()
    assert [f"{i.importer}:{i.line}" for i in imps if i.target == "evalkit.api"] == []


def test_the_checks_catch_what_they_claim(tmp_path):
    """The graph builder itself: a function-local back edge is a cycle, an implicit package import is an edge,
    a private reach is found."""
    pkg = tmp_path / "retrievers"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from retrievers.b import thing\n")
    (pkg / "b.py").write_text("def f():\n    from retrievers.a import _hidden  # lazy: startup\n")
    (pkg / "sub" / "__init__.py").write_text("from retrievers import c\n")
    (pkg / "sub" / "leaf.py").write_text("")
    (pkg / "c.py").write_text("import retrievers.sub.leaf\n")
    mods = {}
    for p in sorted(pkg.rglob("*.py")):
        parts = list(p.relative_to(tmp_path).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = p
    imps = imports(mods)
    g = graph(mods, imps)
    assert sorted(map(sorted, cycles(g))) == [["retrievers.a", "retrievers.b"], ["retrievers.c", "retrievers.sub"]]
    assert private_reaches(mods, imps) == ["retrievers.b:2 imports retrievers.a._hidden"]


if __name__ == "__main__":  # a readable summary of the graph
    m, ii, gg = _state()
    local = [i for i in ii if i.local]
    print(f"{len(m)} modules, {sum(len(v) for v in gg.values())} edges, {len(ii)} import statements "
          f"({len(local)} function-local), cycles: {len(cycles(gg))}, private reaches: {len(private_reaches(m, ii))}")
    for k, (name, _) in enumerate(LAYERS):
        print(f"L{k} {name}: {', '.join(x for x in m if layer_of(x) == k)}")
