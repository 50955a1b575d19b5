"""The memory-workspace generator: a deterministic synthetic agent workspace with labelled questions (python -m evalkit.data.workspace.build)."""
