"""helpers.similarity.pair_slabs: a view's snippet-token Jaccard read from its root set's per-query blocks
(``exact`` kinds, past PAIR_BLOCK documents) is the same, bit for bit, as the blocks the view builds itself."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.candidates.table import ArmHits, CandidateSet, view
from retrievers.index.corpus import Corpus
from retrievers.stages.helpers import similarity
from retrievers.types import Dataset, Document, Query


def _root(seed: int, Q: int = 6, C: int = 9, n_docs: int = 30) -> CandidateSet:
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
    docs = [Document(f"d{i}", " ".join(rng.choice(words, size=int(rng.integers(0, 6))))) for i in range(n_docs)]
    corpus = Corpus(Dataset("tiny", docs, [], {}))
    doc = np.array([rng.permutation(n_docs)[:C] for _ in range(Q)])
    doc[rng.random((Q, C)) < 0.15] = -1
    rank = np.where(doc >= 0, np.argsort(np.argsort(rng.random((Q, C)), axis=1), axis=1) + 1, 0).astype(np.int32)
    arm = ArmHits(np.where(doc >= 0, rng.random((Q, C)), np.nan), rank)
    return CandidateSet(corpus, [Query(f"q{i}", "t") for i in range(Q)], doc, {"a": arm})


def _pairs(cs: CandidateSet, monkeypatch, shared: bool) -> np.ndarray:
    monkeypatch.setattr(similarity, "PAIR_BLOCK", 0)  # per-query blocks, as past 4,096 distinct documents
    monkeypatch.setattr(similarity, "ROOT_BLOCK_BYTES", (1 << 40) if shared else 0)
    M, mq, idx = similarity.jaccard_slabs(cs)
    out = M[mq[:, None, None], idx[:, :, None], idx[:, None, :]]
    return np.where(cs.valid[:, :, None] & cs.valid[:, None, :], out, np.nan)


@pytest.mark.parametrize("seed", range(4))
def test_view_reads_the_root_blocks_exactly(seed, monkeypatch):
    v_own = view(_root(seed), {"x": ("a", 4)})
    v_shared = view(_root(seed), {"x": ("a", 4)})
    own = _pairs(v_own, monkeypatch, shared=False)
    shared = _pairs(v_shared, monkeypatch, shared=True)
    assert own.shape == shared.shape and own.tobytes() == shared.tobytes()
    assert v_shared.root.memo(("pairs.slabs", "jaccard.ascii_word.700"), lambda: None) is not None  # root built
    assert np.isfinite(own[v_own.valid[:, :, None] & v_own.valid[:, None, :]]).all()
