"""numba's on-disk cache for evalkit's kernels, with every file checked before numba reads a byte of it.

Measured with numba 0.68.1: numba reads a kernel's ``<name>.nbi`` (index) and ``<name>.<n>.nbc`` (LLVM bitcode)
with plain ``pickle.loads`` and hands the bitcode to LLVM. A truncated file raises ``UnpicklingError`` /
``EOFError`` out of the kernel's first call (a traceback). 16 bytes overwritten in the middle of an ``.nbc``, at
48 offsets: 10 raised (LLVM "Invalid record", a pickle error …), 6 killed the process (SIGSEGV, SIGABRT: nothing
to catch), the rest happened to recompile. numba's writes are atomic (temporary name + ``os.replace``), but two
processes adding different signatures of one kernel can pair an index entry with the other's data file.

So evalkit's kernels use :class:`VerifiedFunctionCache` (numba's ``FunctionCache`` with its file layer
replaced): each file is a :mod:`retrievers.cachefile` envelope (sha256 + length) around numba's own bytes, named
``<name>.ek.nbi`` / ``<name>.ek.<n>.nbc`` beside numba's (stock numba never reads them); a data file also stores
the index key it was compiled for, and index updates take a lock. A file that fails its check is one line on
stderr, is deleted and the kernel is recompiled; anything else that goes wrong while loading a cached kernel is
also one line and a recompile.

On top of that, :func:`checked` runs a kernel once on its registered example (``kernel_example``) against its
pure-Python version on first use in a process — numba does not notice when a global a kernel reads changes in
another module, and then serves stale machine code from its cache. A disagreement is one line, the kernel's cache
files are deleted and it is recompiled; if a fresh compile still disagrees, the Python version is used.
"""
from __future__ import annotations

import contextlib
import functools
import os
import pickle
import sys
from pathlib import Path

import numpy as np

from retrievers import cachefile

TAG = ".ek"


@functools.lru_cache(maxsize=1)
def _cache_class():
    from numba.core.caching import (  # lazy: optional-dep
        FunctionCache,
        IndexDataCacheFile,
    )

    class VerifiedCacheFile(IndexDataCacheFile):
        def __init__(self, cache_path, filename_base, source_stamp):
            super().__init__(cache_path, filename_base + TAG, source_stamp)

        def save(self, key, data):
            with cachefile.locked(Path(self._index_path)):  # the index is read, extended, rewritten
                super().save(key, (key, data))

        def load(self, key):
            got = super().load(key)
            if got is None:
                return None
            stored_key, data = got
            return data if stored_key == key else None

        def _load_index(self):
            body = self._read(self._index_path)
            if body is None:
                return {}
            version, stamp, overloads = pickle.loads(body)
            if version != self._version or stamp != self._source_stamp:
                return {}
            return overloads

        def _save_index(self, overloads):
            self._write(self._index_path, (self._version, self._source_stamp, overloads))

        def _load_data(self, name):
            body = self._read(self._data_path(name))
            if body is None:
                raise FileNotFoundError(name)  # numba's load() treats an OSError as "not cached"
            return pickle.loads(body)

        def _save_data(self, name, data):
            self._write(self._data_path(name), data)

        def _write(self, path, obj):
            cachefile.atomic_write_bytes(Path(path), cachefile.wrap(self._dump(obj)))

        def _read(self, path):
            try:
                raw = Path(path).read_bytes()
            except FileNotFoundError:
                return None
            try:
                return cachefile.unwrap(raw)
            except cachefile.CorruptCache as exc:
                cachefile.report(path, str(exc), "recompiling")
                with contextlib.suppress(OSError):
                    os.unlink(path)
                return None

    class VerifiedFunctionCache(FunctionCache):
        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = VerifiedCacheFile(self._cache_path, self._impl.filename_base,
                                                 self._impl.locator.get_source_stamp())

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception as exc:  # noqa: BLE001 - a verified file numba still cannot use: compile instead
                cachefile.report(self._cache_file._index_path, f"cannot be loaded: {type(exc).__name__}",
                                 "recompiling")
                return None

    return VerifiedFunctionCache


def compile_cached(fn):
    """``numba.njit(nogil=True)(fn)`` with the verified on-disk cache (under ``NUMBA_CACHE_DIR``)."""
    import numba  # lazy: optional-dep
    disp = numba.njit(nogil=True)(fn)
    try:
        disp._cache = _cache_class()(fn)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - numba's caching internals moved
        disp.enable_caching()
    return disp


def cache_files(disp) -> list[Path]:
    """The on-disk cache files of one compiled kernel (index and data)."""
    cf = getattr(getattr(disp, "_cache", None), "_cache_file", None)
    if cf is None:
        return []
    index = Path(cf._index_path)
    return [index, *index.parent.glob(index.name[:-len(".nbi")] + ".*.nbc")]


def checked(fn, disp, example):
    """``disp`` if it agrees with ``fn`` on ``example()`` (or there is no example); else recompiled from scratch,
    and ``fn`` itself if even a fresh compile disagrees. Each disagreement is one stderr line."""
    if example is None:
        return disp
    if _agree(disp(*example()), fn(*example())):
        return disp
    files = cache_files(disp)
    where = files[0] if files else fn.__qualname__
    cachefile.report(where, f"compiled kernel {fn.__qualname__} disagrees with its Python version on its example",
                     "recompiling", state="is stale or corrupt")
    for p in files:
        with contextlib.suppress(OSError):
            p.unlink()
    fresh = compile_cached(fn)
    if _agree(fresh(*example()), fn(*example())):
        return fresh
    print(f"evalkit: kernel {fn.__qualname__}: numba's compile disagrees with the Python version on its example; "
          f"using the Python version", file=sys.stderr, flush=True)
    return fn


def _agree(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(map(_agree, a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True))
    return bool(np.array_equal(a, b))
