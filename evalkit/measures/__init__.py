"""Measures: the catalogue of measure names, ranx-backed and vectorised implementations, budget compliance, significance statistics."""
