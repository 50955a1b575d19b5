"""The ``guard.*`` stages: defences against poisoned memory (PoisonedRAG, USENIX Security 2025; AgentPoison,
NeurIPS 2024; OWASP agentic ASI06 "memory & context poisoning").

* :mod:`~retrievers.stages.guard.rules` — rule-based guards: ``guard.payload`` (patterns of talking to the agent),
  ``guard.query_echo``, ``guard.provenance``, ``guard.conflict``;
* :mod:`~retrievers.stages.guard.learned` — ``guard.classifier``, a trained payload detector (its model file in
  ``models/``, written by ``evalkit train-guard``).

None reads a dataset's labels: the metadata a planting carries exists to grade these stages, never to feed them.
"""
from retrievers.stages.guard.rules import *  # noqa: F401,F403
from retrievers.stages.guard.rules import __all__ as _rules_all
from retrievers.stages.guard.learned import *  # noqa: F401,F403
from retrievers.stages.guard.learned import __all__ as _learned_all

__all__ = list(_rules_all) + list(_learned_all)
