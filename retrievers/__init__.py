"""retrievers: retrieval as data — the library evalkit measures (it never imports evalkit).

Public names (imported on first use, PEP 562, so importing one submodule never loads the rest)::

    from retrievers import Dataset, Document, Query                   # the data model
    from retrievers import Pipeline, build_pipeline, load_preset      # presets: arms + stages + budget
    from retrievers import Stage, param, register, CandidateSet       # writing a stage of your own
    from retrievers import Hit, Answer, MemorySystem                  # the live protocol (your own system)

>>> from retrievers import Dataset, Document, Query
>>> ds = Dataset("notes", [Document("d1", "the cat sat"), Document("d2", "dogs bark")],
...              [Query("q1", "cat")], {"q1": {"d1": 1}})
>>> len(ds.documents), ds.qrels["q1"]
(2, {'d1': 1})
"""

#: public name -> the module that defines it (tests/unit/test_import_graph.py reads this table)
_LAZY = {
    "Dataset": "retrievers.types", "Document": "retrievers.types", "Query": "retrievers.types",
    "DataError": "retrievers.errors", "ConfigError": "retrievers.errors",
    "Pipeline": "retrievers.pipeline", "build_pipeline": "retrievers.pipeline", "load_preset": "retrievers.pipeline",
    "Stage": "retrievers.stages.base", "param": "retrievers.stages.base", "register": "retrievers.stages.base",
    "Context": "retrievers.stages.base",
    "CandidateSet": "retrievers.candidates.table", "State": "retrievers.candidates.table",
    "Hit": "retrievers.systems.protocol", "Answer": "retrievers.systems.protocol",
    "MemorySystem": "retrievers.systems.protocol", "SystemFault": "retrievers.systems.protocol",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'retrievers' has no attribute {name!r}")
    import importlib  # lazy: startup

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
