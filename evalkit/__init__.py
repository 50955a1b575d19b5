"""evalkit: offline evaluation harness for agent-memory retrieval.

The public Python API (the same numbers as the command line; :mod:`evalkit.api` has every docstring)::

    import evalkit
    run = evalkit.run("memory-workspace", ["bm25", "dense"])   # -> evalkit.Run (pandas views, .report(path))
    run.metrics                                                 # one row per (dataset, retriever)
    cmp = evalkit.compare([run], baseline="bm25")               # -> evalkit.Comparison (.to_markdown(), .table)
    evalkit.gate("reports/gate/expected.json").failed           # the CI gate

What there is: ``evalkit.datasets()``, ``presets()``, ``systems()``, ``measure_names()``; loading: ``load_dataset``,
``load_preset``, ``read_run``; workflows: ``run``, ``compare``, ``gate``, ``tune``, ``ablate``, ``replay``; ranx's verbs on in-memory
runs and qrels: ``evaluate``, ``fuse``; run and compare in one call: ``experiment``.
Names are imported on first use (PEP 562), so ``import evalkit`` and ``evalkit --help`` stay fast.
"""
__version__ = "0.1.0"

#: the public names, in one place: evalkit.api defines them and declares ``__all__`` from this tuple
PUBLIC = ("datasets", "load_dataset", "presets", "load_preset", "systems", "measure_names", "run", "Run", "read_run",
          "evaluate", "fuse", "experiment", "Experiment", "compare", "Comparison", "gate", "GateResult", "tune",
          "ablate", "replay")
#: public name -> the module that defines it, imported on first attribute access (tests/unit/test_import_graph.py
#: reads this table: these are the package's only lazy edges, and they all point at the top layer, evalkit.api)
_LAZY = {name: "evalkit.api" for name in PUBLIC}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
    import importlib  # lazy: startup

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
