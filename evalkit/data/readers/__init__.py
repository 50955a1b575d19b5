"""What reads a dataset from disk into a :class:`retrievers.types.Dataset`, one module per format:
:mod:`~evalkit.data.readers.beir` (any BEIR folder: corpus, queries, qrels; the format evalkit's own sets and
imports are written in), :mod:`~evalkit.data.readers.locomo`, :mod:`~evalkit.data.readers.longmemeval`,
:mod:`~evalkit.data.readers.memory_workspace` (the project's own set: a BEIR folder plus what is specific to it) and
:mod:`~evalkit.data.readers.querylog` (a log of queries, for ``evalkit replay`` and feedback stages). Names map to
readers in :mod:`evalkit.data.registry`."""
