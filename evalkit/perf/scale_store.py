"""A synthetic memory store for the scale section of ``evalkit perf``: a COST PROBE, not a quality set.

``generate(n, n_queries, seed)`` returns a :class:`retrievers.types.Dataset` of ``n`` dated notes in one group and
``n_queries`` queries, each asked some days after the note it is about (its ``as_of``), with that note as its one
relevant document (qrels), plus the vectors of both (384-d, unit norm). The dataset declares the ``strict`` as-of
protocol, so every search is cut at the query's ``as_of`` exactly as a long-lived agent's memory is.

* Notes: text = Zipf–Mandelbrot draws (``p(r) ∝ 1/(r + 2.7)``) from a 30,000-word pseudo-word vocabulary, 20–120
  words (realistic BM25 posting lists); created at increasing times over two years (one note every
  ``2 years / n``), so the visible set of a query is a prefix of the store in creation order.
* Queries: 5 words of a random note, asked 1–30 days after it; the query vector is that note's vector plus noise
  (cosine ≈ 0.8), so both arms have a real nearest neighbour.
* Vectors: random unit vectors, seeded, reached through :class:`GeneratedEmbedder` — a fast deterministic stand-in
  for the embedding model (text → row lookup) so the model's cost does not hide the harness's. Nothing measured
  with it says anything about retrieval quality.

Deterministic for ``(n, n_queries, seed)``.

>>> ds, emb, qemb = generate(50, 3, seed=1)
>>> len(ds.documents), len(ds.queries), emb.shape, ds.info["as_of_visibility"]
(50, 3, (50, 384), 'strict')
>>> all(q.as_of > ds.documents[ds.doc_index[next(iter(ds.qrels[q.id]))]].created for q in ds.queries)
True
"""
from __future__ import annotations

import numpy as np

from retrievers.types import Dataset, Document, Query

DIM = 384
VOCAB = 30000
SEED = 20260226
START = 1_720_000_000.0  # the first note's creation time (epoch seconds)
SPAN = 2 * 365 * 86400.0  # the notes span two years
CHUNK = 50_000  # notes generated at a time (bounds the generator's memory at 10^6 notes)
_PATHS = [f"memory/topic-{i}.md" for i in range(97)]  # one string per topic file, shared by its notes
_SYL = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["an", "el", "or", "is", "um"]


def vocabulary(rng) -> list[str]:
    words: set[str] = set()
    out: list[str] = []
    while len(out) < VOCAB:
        w = "".join(_SYL[i] for i in rng.integers(0, len(_SYL), rng.integers(2, 5)))
        if w not in words:
            words.add(w)
            out.append(w)
    return out


def generate(n: int, n_queries: int, seed: int = SEED):
    """(Dataset, document vectors (n, 384) float32, query vectors (n_queries, 384) float32); see the module."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(rng), dtype=object)
    p = 1.0 / (np.arange(VOCAB) + 2.7)
    p /= p.sum()
    lengths = rng.integers(20, 121, n)
    draws = rng.choice(VOCAB, size=int(lengths.sum()), p=p).astype(np.int32)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    created = (START + np.arange(n) * (SPAN / max(1, n))).tolist()  # one float object per note, shared below
    meta = {"start_line": 1}  # one dict shared by every note (nothing writes a document's metadata): 184 B a note
    docs = []
    for lo in range(0, n, CHUNK):  # the words as strings a chunk at a time: 10^6 notes hold 7·10^7 words
        hi = min(lo + CHUNK, n)
        words = vocab[draws[bounds[lo]:bounds[hi]]]
        at = (bounds[lo:hi + 1] - bounds[lo]).tolist()
        docs += [Document(id=f"n{i}", text=" ".join(words[at[i - lo]:at[i - lo + 1]]), timestamp=created[i],
                          created=created[i], path=_PATHS[i % 97], metadata=meta) for i in range(lo, hi)]
        del words
    emb = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, CHUNK):  # the same normal stream, drawn in rows: no float64 copy of the whole matrix,
        part = emb[lo:lo + CHUNK]  # and each row normalised in its chunk (the same bits as over the whole matrix)
        part[:] = rng.standard_normal((len(part), DIM))
        part /= np.linalg.norm(part, axis=1, keepdims=True)
    queries, qemb, qrels = [], [], {}
    for j in range(n_queries):
        d = int(rng.integers(0, n))
        own = draws[bounds[d]:bounds[d + 1]]
        text = " ".join(vocab[rng.choice(own, size=5, replace=False)])
        as_of = float(created[d] + rng.uniform(1, 30) * 86400)
        queries.append(Query(id=f"q{j}", text=text, as_of=as_of))
        v = emb[d] + rng.standard_normal(DIM).astype(np.float32) * (0.75 / np.sqrt(DIM))
        qemb.append(v / np.linalg.norm(v))
        qrels[f"q{j}"] = {f"n{d}": 1}
    info = {"representation": "truncate", "generator": f"evalkit.perf.scale_store seed {seed}",
            "as_of_visibility": "strict", "as_of_visibility_why": "a cost probe of a store growing over time"}
    ds = Dataset(f"scale-store-{n}", docs, queries, qrels, {"test": [q.id for q in queries]}, info)
    return ds, emb, np.stack(qemb).astype(np.float32)


class GeneratedEmbedder:
    """FAST DETERMINISTIC STAND-IN for retrievers.embed.model.Embedder over generated vectors (the scale section
    only): ``encode`` looks texts up, no model."""

    def __init__(self, ds, emb: np.ndarray, qemb: np.ndarray, tag: str):
        self.docs = ds.documents
        self._rows: dict[str, int] | None = None  # text -> row, built only if a text outside the corpus order comes
        self.qrows = {q.text: i for i, q in enumerate(ds.queries)}
        self.emb, self.qemb = emb, qemb
        self.model_id = f"generated:{tag}"
        self.model_name = "generated (no model: cost probe)"
        self.dim = emb.shape[1]
        self.model_calls = 0
        self.texts_embedded = 0
        self.max_seq_length = 256
        self.model = self  # run_latency embeds the query with index.embedder.model.encode(...)

    @property
    def rows(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = {d.full_text: i for i, d in enumerate(self.docs)}
        return self._rows

    def encode(self, texts, *args, **kwargs) -> np.ndarray:
        """The vectors of ``texts``: the corpus itself, in order, is the generated matrix as it is (no copy: 1.5 GB
        at 10^6 notes); query texts (5 words) and note texts (20 or more) never coincide, so a query is looked up
        among the queries first."""
        if len(texts) == len(self.docs) and all(t is d.full_text or t == d.full_text
                                                for t, d in zip(texts, self.docs)):
            return self.emb
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            r = self.qrows.get(t)
            out[i] = self.qemb[r] if r is not None else self.emb[self.rows[t]]
        return out

    def tokenizer(self):  # pragma: no cover - representation "truncate" never splits
        raise RuntimeError("generated corpora use the truncate representation")
