"""The stage library. Importing this package registers every stage (see ``base.REGISTRY``)."""
from retrievers.stages.base import REGISTRY, ConfigError, Context, Stage, build_stage, param, register  # noqa: F401
from retrievers.stages import (  # noqa: F401,E402  (import for registration side effects)
    normalize, fusion, decay, rerank, diversity, filters, gates, query, budget, feedback, enrich, intent, guards,
    signals, hookclaw, phase3,
)
