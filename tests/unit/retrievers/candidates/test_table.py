"""CandidateSet's derived matrices: qd_cosine in blocks of queries gives the bits of one pass over all of them."""
from types import SimpleNamespace

import numpy as np

from retrievers.candidates import table
from retrievers.candidates.table import CandidateSet
from retrievers.types import Query


def _one_pass(emb, qemb, doc, valid):
    """The formula over every query at once (what qd_cosine computed before it was blocked)."""
    d = emb[np.where(valid, doc, 0)].astype(np.float64)
    q = qemb.astype(np.float64)
    out = np.einsum("qcd,qd->qc", d, q)
    norms = np.linalg.norm(d, axis=2) * np.linalg.norm(q, axis=1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norms > 0, out / np.where(norms > 0, norms, 1), 0.0)
    return np.where(valid, out, np.nan)


def test_qd_cosine_in_blocks_is_bit_identical_to_one_pass(monkeypatch):
    rng = np.random.default_rng(7)
    Q, C, N, dim = 61, 23, 300, 384
    emb = rng.standard_normal((N, dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[3] = 0  # a zero vector: cosine 0
    qemb = rng.standard_normal((Q, dim)).astype(np.float32)
    doc = rng.integers(-1, N, size=(Q, C))  # -1 = padding: NaN
    ref = _one_pass(emb, qemb, doc, doc >= 0)
    for limit in (64 << 20, C * dim * 8 * 5, 1):  # one block, blocks of 5 queries, one query per block
        monkeypatch.setattr(table, "_GATHER_BYTES", limit)
        cs = CandidateSet(SimpleNamespace(embeddings=emb), [Query(f"q{i}", "t") for i in range(Q)], doc, {},
                          qemb=qemb)
        got = cs.qd_cosine()
        assert got.tobytes() == ref.tobytes()
    assert np.isnan(got[doc < 0]).all() and (got[doc == 3] == 0).all()
