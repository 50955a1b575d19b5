"""Fixtures of the parity tests."""
import os

import pytest


@pytest.fixture(scope="module")
def ranx():
    """The ranx module, its numba cache in evalkit's cache folder and its cast warnings silenced."""
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(
        os.environ.get("EVALKIT_CACHE", os.path.expanduser("~/.cache/evalkit")), "numba"))
    mod = pytest.importorskip("ranx")
    import warnings
    warnings.filterwarnings("ignore", module="ranx")
    warnings.filterwarnings("ignore", category=Warning, message=".*unsafe cast.*")
    return mod
