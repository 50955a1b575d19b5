"""Glue for named third-party memory systems (each a ``kind = "python"`` object): mem0, OpenClaw."""
