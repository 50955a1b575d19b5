"""Workflows built on the engine: bench, compare, gate, ablation, replay, reference tables, explain."""
