"""Tuning: search spaces (TOML), grid / random / Bayesian search, the tune run and its output folder."""
