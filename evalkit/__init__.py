"""evalkit: offline evaluation harness for agent-memory retrieval."""
__version__ = "0.1.0"
