"""The stage library. Importing this package registers every stage (see ``base.REGISTRY``).

Where a stage lives — one rule, checked by ``tests/unit/retrievers/stages/test_catalog.py``: a stage named
``<prefix>.<rest>`` is defined in ``retrievers/stages/<prefix>.py``, or in a module of the package
``retrievers/stages/<prefix>/`` when the prefix has many stages; a stage whose name has no prefix (``dedupe``) lives
with its ``kind`` (``filter.py``). So ``fuse.*`` is in ``fuse/`` (``arms``, ``hookclaw``, ``phase3``, ``two_stage``),
``score.*`` in ``score/`` (``adjust``, ``blend``), ``decay.*`` in ``decay.py``, and likewise ``budget``, ``cutoff``, ``diversity``,
``filter``, ``gate``, ``guard``, ``query``, ``rerank``, ``route``. No other module defines a stage:

* ``base.py`` — the stage base class, parameters, the registry;
* ``helpers/`` — what several stage modules share (normalisations, ranking signals, time and age rules, query
  text, keywords, the utility tracker). A helper module never imports a stage module (only ``base``, other
  helpers and the library below the stages);
* text rules the whole library uses (JavaScript ``trim`` / UTF-16 lengths) live in :mod:`retrievers.text`, below
  the stages (``retrievers.index.corpus`` uses them too).
"""
from retrievers.kernels import registry as _kernels  # noqa: E402
from retrievers.stages import (  # noqa: F401,E402  (import for registration side effects)
    budget,
    cutoff,
    decay,
    diversity,
    filter,
    fuse,
    gate,
    guard,
    query,
    rerank,
    route,
    score,
)
from retrievers.stages.helpers import (  # noqa: F401,E402  (they register the query transforms)
    keywords as _keywords,
    query_text as _query_text,
)
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
