"""The memory-workspace generator: a deterministic synthetic agent workspace with labelled questions
(``python -m evalkit.data.workspace_generator.build``). The loader of the generated folder is
:mod:`evalkit.data.readers.memory_workspace`."""
