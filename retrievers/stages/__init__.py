"""The stage library. Importing this package registers every stage (see ``base.REGISTRY``)."""
from retrievers.stages.base import REGISTRY, ConfigError, Context, Stage, build_stage, param, register  # noqa: F401
from retrievers.stages import (  # noqa: F401,E402  (import for registration side effects)
    normalize, fusion, decay, rerank, diversity, filters, gates, query, budget, feedback, enrich, intent, guards,
    signals, hookclaw, phase3,
)
from retrievers import kernels as _kernels  # noqa: E402


def warm_kernels() -> float:
    """Compile or load from the on-disk cache every stage kernel (numba import, LLVM set-up: ~1–4 s once per
    process); returns the seconds it took. Sweeps and latency runs call it before timing."""
    return _kernels.warm(_kernels.registered_kernels())
