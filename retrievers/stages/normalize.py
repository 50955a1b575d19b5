"""Score mappings (raw arm score → a system's score convention) and per-query list normalisations.

Mappings are element-wise; normalisations work per query over the rows of one list (NaN = absent).
Both are registries so fusion stages can name them (``vector_map = "inv_l2"``, ``norm = "minmax"``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

MAPPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
NORMALISATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {}


def mapping(name: str):
    def deco(fn):
        MAPPINGS[name] = fn
        return fn
    return deco


def normalisation(name: str):
    def deco(fn):
        NORMALISATIONS[name] = fn
        return fn
    return deco


@mapping("identity")
def _identity(x: np.ndarray) -> np.ndarray:
    """Raw score unchanged (vector: cosine similarity = 1 − cosine distance; lexical: BM25 score)."""
    return x


@normalisation("none")
def _none(x: np.ndarray) -> np.ndarray:
    return x


@normalisation("minmax")
def minmax(x: np.ndarray) -> np.ndarray:
    """(s − min)/(max − min) per query over present rows; max == min → 1 for every present row."""
    lo = np.nanmin(np.where(np.isnan(x), np.inf, x), axis=1, keepdims=True)
    hi = np.nanmax(np.where(np.isnan(x), -np.inf, x), axis=1, keepdims=True)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(span > 0, (x - lo) / np.where(span > 0, span, 1), 1.0)
    return np.where(np.isnan(x), np.nan, out)
