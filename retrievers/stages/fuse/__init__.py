"""The ``fuse.*`` stages (kind ``fusion``): they build the ranked list from the arms.

* :mod:`~retrievers.stages.fuse.arms` — single arm, weighted linear (OpenClaw), vector bonus (lancedb-pro), RRF,
  CombSUM/MNZ, convex combination, OpenClaw FTS-only;
* :mod:`~retrievers.stages.fuse.hookclaw` — HookClaw v2.0 RRF with its in-memory BM25;
* :mod:`~retrievers.stages.fuse.phase3` — the Phase-3 policy fusion;
* :mod:`~retrievers.stages.fuse.two_stage` — seed-003 recall + hybrid.
"""
from retrievers.stages.fuse import arms, hookclaw, phase3, two_stage  # noqa: F401  (registration side effects)
