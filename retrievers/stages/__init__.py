"""The stage library. Importing this package registers every stage (see ``base.REGISTRY``)."""
from retrievers import kernels as _kernels  # noqa: E402
from retrievers.stages import (  # noqa: F401,E402  (import for registration side effects)
    budget,
    decay,
    diversity,
    enrich,
    feedback,
    filters,
    fuse,
    gates,
    guards,
    helpers,
    hookclaw,
    intent,
    normalize,
    rerank,
)
from retrievers.stages.helpers import keywords as _keywords  # noqa: F401  (registers query transform openclaw_keywords)
from retrievers.stages.base import (  # noqa: F401
    REGISTRY,
    ConfigError,
    Context,
    Stage,
    build_stage,
    param,
    register,
)


def warm_kernels() -> float:
    """Compile or load from the on-disk cache every stage kernel (numba import, LLVM set-up: ~1–4 s once per
    process); returns the seconds it took. Sweeps and latency runs call it before timing."""
    return _kernels.warm(_kernels.registered_kernels())
