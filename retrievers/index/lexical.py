"""Lexical arm: bm25s indexes (one per group and tokenizer) and the query forms the presets need.

Tokenizers (recorded in the manifest):

* ``stem_en`` — bm25s' default tokenizer (lower-case, ``(?u)\\b\\w\\w+\\b``) with English stop words and the
  PyStemmer English (Snowball) stemmer. The BEIR / bm25-benchmarks baseline configuration.
* ``unicode61`` — an approximation of SQLite FTS5's default ``unicode61`` tokenizer, which OpenClaw and
  HookClaw query and which stands in for LanceDB's FTS: NFKD + diacritics removed, lower-cased, maximal runs of
  Unicode letters/digits (``_`` and everything else separate tokens), no stemming, no stop words. A run of CJK
  ideographs is one token, as in unicode61.

Scoring is bm25s ``lucene`` (k1 = 1.2, b = 0.75 by default). ``match = "all"`` keeps only documents containing
every distinct query token (OpenClaw's ``"a" AND "b"`` FTS query; a quoted token FTS5 would split into a phrase,
e.g. ``SQLITE_BUSY``, is approximated by requiring each of its parts). Ties are broken by document position.
"""
from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache
from itertools import chain

import numpy as np

WORD_PATTERN = re.compile(r"[^\W_]+")
_BM25S_WORD = re.compile(r"(?u)\b\w\w+\b")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # lazy: startup
    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def _en_stopwords() -> frozenset:
    from bm25s.stopwords import STOPWORDS_EN  # lazy: startup
    return frozenset(STOPWORDS_EN)


def tokenize_unicode61(text: str) -> list[str]:
    if not text.isascii():  # NFKD and the diacritics filter leave ASCII text unchanged
        text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return WORD_PATTERN.findall(text.lower())


STEM_MEMO: dict[str, str | None] = {}  # word -> its Snowball stem, None for a stop word (stemming reads one word)
STEM_MEMO_MAX = 2_000_000  # entries kept before the memo starts over


def tokenize_stem_en(text: str) -> list[str]:
    words = _BM25S_WORD.findall(text.lower())
    new = set(words).difference(STEM_MEMO)
    if new:
        if len(STEM_MEMO) > STEM_MEMO_MAX:
            STEM_MEMO.clear()
            new = set(words)
        stop = _en_stopwords()
        keep = [w for w in new if w not in stop]
        STEM_MEMO.update(dict.fromkeys(new - set(keep)))
        STEM_MEMO.update(zip(keep, _stemmer().stemWords(keep)))
    return [s for s in map(STEM_MEMO.__getitem__, words) if s is not None]


TOKENIZERS = {"stem_en": tokenize_stem_en, "unicode61": tokenize_unicode61}


def tokenizer_info() -> dict:
    import bm25s  # lazy: startup
    import Stemmer  # noqa: F401  (lazy: startup)
    return {"stem_en": f"bm25s {bm25s.__version__} regex (?u)\\b\\w\\w+\\b + stopwords en + PyStemmer english",
            "unicode61": "FTS5 unicode61-like: NFKD, strip diacritics, lower, [^\\W_]+ runs",
            "scoring": "bm25s lucene"}


class LexicalIndex:
    """bm25s over one group's documents for one tokenizer (+ a token → documents incidence for AND queries)."""

    def __init__(self, texts: list[str], tokenizer: str, k1: float = 1.2, b: float = 0.75):
        import bm25s  # lazy: startup
        self.tokenizer = tokenizer
        self.k1, self.b = k1, b
        self.n = len(texts)
        tok = TOKENIZERS[tokenizer]
        docs = [tok(t) for t in texts]
        # token ids in order of first occurrence (dict.fromkeys keeps it)
        self.vocab: dict[str, int] = {t: i for i, t in enumerate(dict.fromkeys(chain.from_iterable(docs)))}
        self.bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        ids = [list(map(self.vocab.__getitem__, d)) for d in docs]
        if self.n and self.vocab:
            self.bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self.vocab), show_progress=False)
        self._empty = not (self.n and self.vocab)

    @classmethod
    def from_parts(cls, tokenizer: str, k1: float, b: float, n: int, vocab: dict[str, int], scores: dict | None
                   ) -> "LexicalIndex":
        """An index from a vocabulary and bm25s' score matrix (CSC ``data``/``indices``/``indptr``/``num_docs``),
        as :func:`build_many` computes them: the same object the constructor builds, without its per-index cost."""
        import bm25s  # lazy: startup
        self = cls.__new__(cls)
        self.tokenizer, self.k1, self.b, self.n, self.vocab = tokenizer, k1, b, n, vocab
        self.bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._empty = not (n and vocab)
        if not self._empty:
            self.bm25.scores = scores
            if "" not in vocab:  # bm25s' empty token, added to the very dict the constructor's index shares
                vocab[""] = len(vocab)
            self.bm25.vocab_dict = vocab
            self.bm25.unique_token_ids_set = set(self.bm25.vocab_dict.values())
            self.bm25.nonoccurrence_array = None
        return self

    def query_tokens(self, text: str) -> list[str]:
        return TOKENIZERS[self.tokenizer](text)

    def scores(self, text: str, match: str = "any") -> np.ndarray:
        """BM25 score of every document (0 = no match; with match="all" non-matching docs are NaN)."""
        toks = self.query_tokens(text)
        if self._empty or not toks:
            return np.full(self.n, np.nan)
        known = [t for t in toks if t in self.vocab]
        if match == "all":
            if len(set(known)) < len(set(toks)):
                return np.full(self.n, np.nan)
            ok = np.ones(self.n, dtype=bool)
            for t in set(known):
                ok &= self._doc_freq_mask(t)
        if not known:
            return np.full(self.n, np.nan)
        s = np.asarray(self.token_scores([self.vocab[t] for t in known]), dtype=np.float64)
        present = s > 0
        if match == "all":
            present = ok
        return np.where(present, s, np.nan)

    def token_scores(self, token_ids: list[int]) -> np.ndarray:
        """``bm25.get_scores(token_ids)`` without its per-call overhead, bit for bit.

        bm25s sums each query token's precomputed column with ``np.add.at`` in the index dtype, token by token;
        a column lists a document at most once, so a fancy-index add does the same additions in the same order
        (~10x faster for one query). Variants with a non-occurrence term (bm25l, bm25+) use bm25s itself."""
        bm = self.bm25
        if bm.nonoccurrence_array is not None:
            return bm.get_scores(token_ids)
        sc = bm.scores
        data, indices, indptr = sc["data"], sc["indices"], sc["indptr"]
        out = np.zeros(sc["num_docs"], dtype=np.dtype(bm.dtype))
        for t in token_ids:
            lo, hi = indptr[t], indptr[t + 1]
            out[indices[lo:hi]] += data[lo:hi]
        return out

    def _doc_freq_mask(self, token: str) -> np.ndarray:
        return self.token_scores([self.vocab[token]]) > 0

    def top(self, text: str, depth: int, match: str = "any",
            visible: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(doc positions, scores) of the best ``depth`` matches; ties by position. ``visible`` (bool per
        position, None = all): only those documents can match (as-of visibility), so the result is the best
        ``depth`` visible matches."""
        s = self.scores(text, match)
        if visible is not None:
            s = np.where(visible, s, np.nan)
        idx = np.flatnonzero(~np.isnan(s))
        if idx.size == 0:
            return idx, np.zeros(0)
        sv = s[idx]
        if idx.size > depth > 0:
            # only documents scoring at least the depth-th best can be in the top depth (ties at that score
            # all kept, so the position tie-break below sees every candidate)
            thr = -np.partition(-sv, depth - 1)[depth - 1]
            keep = sv >= thr
            idx, sv = idx[keep], sv[keep]
        order = np.lexsort((idx, -sv))[:depth]
        return idx[order], sv[order]


def build_many(texts_by_group: dict[str, list[str]], tokenizer: str, k1: float = 1.2, b: float = 0.75,
               on_group=None) -> dict[str, LexicalIndex]:
    """One :class:`LexicalIndex` per group, built in one pass: the same indexes (vocabulary, score matrix, scores bit
    for bit — tests/unit/retrievers/index/test_lexical.py) as ``LexicalIndex(texts, tokenizer, k1, b)`` per group.

    Many small groups (LongMemEval-S: 468 haystacks sharing sessions) made bm25s' per-document Python loops and the
    per-group set-up the cost. Here every distinct text is tokenized once into global token ids; per group, numpy
    does the rest: the vocabulary in first-occurrence order (``np.unique``), term frequencies of (document, token)
    pairs, document frequencies, and bm25s' Lucene formula in its own precision and order —
    ``idf = log(1 + (N − df + 0.5)/(df + 0.5))`` (``math.log``, stored float32), ``tfc = tf / (k1·((1 − b) +
    b·|d|/avgdl) + tf)`` (tf float32, the rest float64), ``score = float32(idf · tfc)`` — laid out as bm25s' CSC
    (columns = tokens, rows sorted within a column). ``on_group()`` is called after each group (progress).

    >>> idx = build_many({"g": ["red apples", "green apples and pears"]}, "unicode61")["g"]
    >>> idx.top("pears", 5)[0].tolist()
    [1]
    """
    tok = TOKENIZERS[tokenizer]
    gvocab: dict[str, int] = {}
    names: list[str] = []  # token of each global id
    memo: dict[str, np.ndarray] = {}
    out: dict[str, LexicalIndex] = {}
    for g, texts in texts_by_group.items():
        arrays = []
        for t in texts:
            a = memo.get(t)
            if a is None:
                words = tok(t)
                for w in words:
                    if w not in gvocab:
                        gvocab[w] = len(names)
                        names.append(w)
                a = memo[t] = np.fromiter(map(gvocab.__getitem__, words), dtype=np.int64, count=len(words))
            arrays.append(a)
        out[g] = _one_group(arrays, names, tokenizer, k1, b)
        if on_group is not None:
            on_group()
    return out


def _one_group(arrays: list[np.ndarray], names: list[str], tokenizer: str, k1: float, b: float
               ) -> LexicalIndex:
    n = len(arrays)
    lens = np.array([len(a) for a in arrays], dtype=np.int64)
    flat = np.concatenate(arrays) if n else np.zeros(0, dtype=np.int64)
    if not n or not flat.size:
        return LexicalIndex.from_parts(tokenizer, k1, b, n, {}, None)
    uniq, first, inv = np.unique(flat, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # tokens in order of first occurrence = bm25s ids
    local = np.empty(len(uniq), dtype=np.int64)
    local[order] = np.arange(len(uniq))
    tid = local[inv.reshape(-1)]
    vocab = {names[u]: i for i, u in enumerate(uniq[order].tolist())}
    V = len(vocab)
    doc = np.repeat(np.arange(n, dtype=np.int64), lens)
    pair, tf = np.unique(tid * n + doc, return_counts=True)  # sorted by (token, document): the CSC order
    col, row = pair // n, pair % n
    df = np.bincount(col, minlength=V)
    dfs, at = np.unique(df, return_inverse=True)  # one math.log per distinct document frequency
    idf = np.array([math.log(1 + (n - d + 0.5) / (d + 0.5)) for d in dfs.tolist()])[at].astype(np.float32)
    avg = lens.mean()
    denom = k1 * ((1 - b) + b * lens.astype(np.float64) / avg)
    tfc = tf.astype(np.float32) / (denom[row] + tf.astype(np.float32))
    data = (idf[col] * tfc).astype(np.float32)
    indptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    scores = {"data": data, "indices": row.astype(np.int32), "indptr": indptr, "num_docs": n}
    return LexicalIndex.from_parts(tokenizer, k1, b, n, vocab, scores)

