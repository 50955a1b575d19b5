"""The numba kernel registry: stage modules write their hot loops as plain Python over arrays, declare them with
:func:`kernel_example` and call them through :func:`jit_kernel`, which compiles each one once per process (on first
use, from the checked on-disk cache of ``retrievers/kernels/cache.py``) or falls back to the Python function when
numba is missing. Sits just above the data model, below embeddings, the index, candidates and the stages, so
registering a kernel never imports a stage.
"""
from __future__ import annotations

import time
from typing import Callable

_KERNELS: dict = {}
_EXAMPLES: dict = {}


def kernel_example(example: Callable[[], tuple]) -> Callable:
    """Decorator for a kernel function: ``example()`` returns small arguments of the types the stages pass, so
    :func:`warm` can compile (or load) it before anything is timed."""
    def deco(fn):
        _EXAMPLES[fn] = example
        return fn
    return deco


def registered_kernels() -> list[tuple[Callable, Callable[[], tuple]]]:
    """``(kernel, example)`` for every kernel declared with :func:`kernel_example` so far (import
    ``retrievers.stages`` first to have them all)."""
    return list(_EXAMPLES.items())


def warm(kernels: list[tuple[Callable, Callable[[], tuple]]]) -> float:
    """Compile (or load from the on-disk cache) every kernel of ``kernels`` and run it once on its example;
    returns the seconds it took. ``retrievers.stages.warm_kernels()`` passes every stage kernel."""
    t0 = time.perf_counter()
    for fn, example in kernels:
        jit_kernel(fn)(*example())
    return time.perf_counter() - t0


def jit_kernel(fn: Callable) -> Callable:
    """``fn`` (a plain loop over arrays) compiled with numba ``njit`` and an on-disk cache under NUMBA_CACHE_DIR
    whose files are checked before numba reads them (``retrievers/kernels/cache.py``), so only the first process
    ever compiles and a damaged cache file is recompiled, never run — or ``fn`` itself when numba is missing (same
    results, slower). Compiled once per process, on first use (importing this module never imports numba); a
    kernel with a :func:`kernel_example` is then checked once against ``fn`` on that example."""
    k = _KERNELS.get(fn)
    if k is None:
        try:
            from retrievers.kernels.cache import (  # lazy: optional-dep (numba)
                checked,
                compile_cached,
            )
            k = checked(fn, compile_cached(fn), _EXAMPLES.get(fn))
        except ImportError:  # pragma: no cover - numba ships with ranx
            k = fn
        _KERNELS[fn] = k
    return k
