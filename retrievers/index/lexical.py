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

    def _matches(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions, float64 scores) of the documents that match ``text`` (score > 0): the non-NaN entries of
        ``scores(text, "any")``, the same values, found with one compare over the index-dtype scores (at 1 M
        documents the float64 copy, mask and NaN passes of the whole array cost ~5 ms a query)."""
        toks = self.query_tokens(text)
        known = [self.vocab[t] for t in toks if t in self.vocab] if not self._empty else []
        if not known:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        s = self.token_scores(known)
        idx = np.flatnonzero(s > 0)
        return idx, s[idx].astype(np.float64)

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
        if match == "any":  # the matching documents only: no pass of float64 arrays over the whole group
            idx, sv = self._matches(text)
            if visible is not None:
                keep = visible[idx]
                idx, sv = idx[keep], sv[keep]
        else:
            s = self.scores(text, match)
            if visible is not None:
                s = np.where(visible, s, np.nan)
            idx = np.flatnonzero(~np.isnan(s))
            sv = s[idx]
        if idx.size == 0:
            return idx, np.zeros(0)
        if idx.size > depth > 0:
            # only documents scoring at least the depth-th best can be in the top depth (ties at that score
            # all kept, so the position tie-break below sees every candidate)
            thr = -np.partition(-sv, depth - 1)[depth - 1]
            keep = sv >= thr
            idx, sv = idx[keep], sv[keep]
        order = np.lexsort((idx, -sv))[:depth]
        return idx[order], sv[order]


_SEP = "\x00"  # joins the texts of a batch (" \x00 "): a run of its own, so the token stream says where each text ends
BATCH_MIN = 1 << 21  # below this many characters in all, texts are tokenised one by one (no fixed cost)
_BATCH_CHARS = 1 << 22  # characters per tokenisation batch (bounds its arrays: ~10 bytes per character)


@lru_cache(maxsize=2)
def _word_table(underscore: bool) -> np.ndarray:
    """Whether each code point (0 … 0x10FFFF) is a word character of Python's ``re`` for ``str`` patterns
    (``str.isalnum()`` or ``_``; ``underscore=False``: not ``_``, i.e. ``[^\\W_]``). The separator counts as one."""
    every = "".join(map(chr, range(0x110000)))
    table = _utf32(re.sub(r"(?u)\W", "\x00", every)) != 0  # re's own \w, code point by code point
    table[ord("_")] = underscore
    table[ord(_SEP)] = True
    return table


@lru_cache(maxsize=1)
def _combining_table() -> np.ndarray:
    """Whether each code point has a non-zero canonical combining class (``unicodedata.combining``)."""
    return np.fromiter((unicodedata.combining(chr(c)) != 0 for c in range(0x110000)), dtype=bool, count=0x110000)


class TokenIds:
    """Global token ids of one build: each distinct word (a maximal run of word characters of the lower-cased text)
    is mapped once — stop word / too short → -1, else the id of its token (stem_en: its Snowball stem) — so a batch
    of texts costs one vectorised lookup, not a call per word."""

    def __init__(self, tokenizer: str):
        self.tokenizer = tokenizer
        self.word_id: dict[str, int] = {_SEP: -2, "": -1}
        self.token_id: dict[str, int] = {}
        self.names: list[str] = []  # token of each global id

    def ids(self, words: list[str]) -> np.ndarray:
        """Global id of each word (-1 dropped, -2 the batch separator)."""
        new = [w for w in words if w not in self.word_id]
        if new:
            if self.tokenizer == "stem_en":
                stop = _en_stopwords()
                keep = [w for w in new if len(w) > 1 and w not in stop]  # (?u)\b\w\w+\b: runs of two or more
                self.word_id.update(dict.fromkeys(new, -1))
                toks = _stemmer().stemWords(keep)
            else:
                keep = toks = new
            self.word_id.update(zip(keep, self.of_tokens(toks).tolist()))
        return np.fromiter(map(self.word_id.__getitem__, words), dtype=np.int64, count=len(words))

    def of_tokens(self, tokens: list[str]) -> np.ndarray:
        """Global id of each token (a tokenizer's output), new ones numbered in order."""
        for t in tokens:
            if t not in self.token_id:
                self.token_id[t] = len(self.names)
                self.names.append(t)
        return np.fromiter(map(self.token_id.__getitem__, tokens), dtype=np.int32, count=len(tokens))


def tokenize_many(texts: list[str], vocab: TokenIds) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of many texts as global ids of ``vocab`` (int32, text after text) and each text's token count:
    exactly ``TOKENIZERS[vocab.tokenizer](text)`` per text (tests/unit/retrievers/index/test_lexical.py), at C speed.

    A batch of texts is joined with a separator run (``" \\x00 "``: it cuts ``str.lower``'s final-sigma context as
    a string end does, and no word spans it); lower-cased (per text when not ASCII; unicode61 after NFKD and the
    combining-mark filter, as :func:`tokenize_unicode61`); every non-word code point becomes a space (a table of
    ``str.isalnum``, the definition of ``re``'s ``\\w``); pyarrow splits the result at the spaces and numbers the
    words (``dictionary_encode``); only the distinct words go through Python (:class:`TokenIds`).
    A text holding the separator itself, and a corpus of fewer than ``BATCH_MIN`` characters (whose fixed cost —
    pyarrow, the code-point tables, ~1 s — would dominate), are tokenised by the plain tokenizer.

    >>> v = TokenIds("unicode61")
    >>> ids, counts = tokenize_many(["Red apples", "green_apples"], v)
    >>> [v.names[i] for i in ids], counts.tolist()
    (['red', 'apples', 'green', 'apples'], [2, 2])
    """
    ids_parts, counts = [], np.zeros(len(texts), dtype=np.int64)
    if sum(map(len, texts)) < BATCH_MIN:  # a small corpus: the per-text tokenizer, no pyarrow or tables to load
        toks = [vocab.of_tokens(TOKENIZERS[vocab.tokenizer](t)) for t in texts]
        counts[:] = [len(t) for t in toks]
        return (np.concatenate(toks) if toks else np.zeros(0, dtype=np.int32)), counts
    batch: list[int] = []
    size = 0

    def flush():
        nonlocal size
        if batch:
            got, c = _batch_ids([texts[i] for i in batch], vocab)
            ids_parts.append(got)
            counts[batch] = c
            batch.clear()
        size = 0

    for ascii_pass in (True, False):  # ASCII texts take the fast path together
        for i, t in enumerate(texts):
            if t.isascii() != ascii_pass:
                continue
            if _SEP in t:
                flush()
                got = vocab.of_tokens(TOKENIZERS[vocab.tokenizer](t))
                ids_parts.append(got)
                counts[i] = len(got)
                continue
            batch.append(i)
            size += len(t)
            if size >= _BATCH_CHARS:
                flush()
        flush()
    # ids_parts hold the texts ASCII first: put them back in text order
    flat = np.concatenate(ids_parts) if ids_parts else np.zeros(0, dtype=np.int32)
    order = sorted(range(len(texts)), key=lambda i: not texts[i].isascii())  # the order the passes visited
    return _reorder(flat, counts, np.array(order, dtype=np.int64)), counts


def _reorder(flat: np.ndarray, counts: np.ndarray, visited: np.ndarray) -> np.ndarray:
    """``flat`` holds the texts' tokens in the order ``visited``; return them in text order."""
    if np.array_equal(visited, np.arange(len(visited))):
        return flat
    starts = np.zeros(len(counts), dtype=np.int64)
    starts[visited] = np.cumsum(counts[visited]) - counts[visited]
    return gather(flat, starts, counts)


def gather(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``concatenate([flat[s:s + n] for s, n in zip(starts, lens)])`` without a Python loop."""
    total = int(lens.sum())
    if not total:
        return flat[:0]
    ends = np.cumsum(lens)
    idx = np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lens), lens)
    return flat[idx]


def _batch_ids(texts: list[str], vocab: TokenIds) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa  # lazy: startup
    import pyarrow.compute as pc  # lazy: startup

    uni = vocab.tokenizer == "unicode61"
    joiner = f" {_SEP} "
    if texts[0].isascii():  # the ASCII pass: every text of the batch is ASCII
        spaced = joiner.join(texts).lower().translate(_ascii_spaces(uni))
    else:
        if uni:
            cp = _utf32(joiner.join([unicodedata.normalize("NFKD", t) for t in texts]))
            low = cp[~_combining_table()[cp]].tobytes().decode("utf-32-le", "surrogatepass").lower()
        else:
            low = joiner.join([t.lower() for t in texts])
        cp = _utf32(low)
        cp[~_word_table(not uni)[cp]] = 32
        spaced = cp.tobytes().decode("utf-32-le", "surrogatepass")
    # every non-word character is now a space: the words are the runs between spaces
    words = pc.list_flatten(pc.ascii_split_whitespace(pa.array([spaced], pa.large_string())))
    enc = pc.dictionary_encode(words)
    ids = vocab.ids(enc.dictionary.to_pylist())[np.asarray(enc.indices)]
    text_of = np.cumsum(ids == -2)
    keep = ids >= 0
    return ids[keep].astype(np.int32), np.bincount(text_of[keep], minlength=len(texts))


@lru_cache(maxsize=2)
def _ascii_spaces(unicode61: bool) -> dict[int, str]:
    """``str.translate`` table: each ASCII non-word character (unicode61: and ``_``) → a space."""
    return {c: " " for c in range(1, 128) if not (chr(c).isalnum() or (chr(c) == "_" and not unicode61))}


def _utf32(text: str) -> np.ndarray:
    """The code points of ``text`` (a writable uint32 array; lone surrogates kept)."""
    return np.frombuffer(bytearray(text.encode("utf-32-le", "surrogatepass")), dtype=np.uint32)


def build_many(texts_by_group: dict[str, list[str]], tokenizer: str, k1: float = 1.2, b: float = 0.75,
               on_group=None) -> dict[str, LexicalIndex]:
    """One :class:`LexicalIndex` per group, built in one pass: the same indexes (vocabulary, score matrix, scores bit
    for bit — tests/unit/retrievers/index/test_lexical.py) as ``LexicalIndex(texts, tokenizer, k1, b)`` per group.

    Many small groups (LongMemEval-S: 468 haystacks sharing sessions) and one large store (10^6 notes) made bm25s'
    per-document Python loops and per-word tokenising the cost. Here every distinct text is tokenised once, in
    batches (:func:`tokenize_many`), into global token ids; per group, numpy and scipy do the rest: the vocabulary in
    first-occurrence order, term frequencies of (document, token) pairs (a CSR of documents × tokens, duplicates
    summed, transposed to bm25s' CSC: columns = tokens, rows sorted within a column), document frequencies, and
    bm25s' Lucene formula in its own precision and order —
    ``idf = log(1 + (N − df + 0.5)/(df + 0.5))`` (``math.log``, stored float32), ``tfc = tf / (k1·((1 − b) +
    b·|d|/avgdl) + tf)`` (tf float32, the rest float64), ``score = float32(idf · tfc)``; indices int32, scores
    float32 as bm25s stores them. ``on_group()`` is called after each group (progress).

    >>> idx = build_many({"g": ["red apples", "green apples and pears"]}, "unicode61")["g"]
    >>> idx.top("pears", 5)[0].tolist()
    [1]
    """
    TOKENIZERS[tokenizer]  # KeyError for an unknown tokenizer, as the constructor
    uid: dict[str, int] = {}
    members = {g: np.fromiter((uid.setdefault(t, len(uid)) for t in texts), dtype=np.int64, count=len(texts))
               for g, texts in texts_by_group.items()}
    vocab = TokenIds(tokenizer)
    flat, counts = tokenize_many(list(uid), vocab)
    del uid
    starts = np.cumsum(counts) - counts
    names = np.array(vocab.names, dtype=object)
    out: dict[str, LexicalIndex] = {}
    for at, (g, docs) in enumerate(members.items()):
        lens = counts[docs]
        if len(docs) and np.array_equal(docs, np.arange(docs[0], docs[0] + len(docs))):
            s = int(starts[docs[0]])
            part = flat[s:s + int(lens.sum())]  # consecutive texts: a view
            owned = at == len(members) - 1  # no later group reads flat: its tokens may be overwritten
        else:
            part, owned = gather(flat, starts[docs], lens), True
        out[g] = _one_group(part, lens, names, tokenizer, k1, b, owned)
        if on_group is not None:
            on_group()
    return out


def _one_group(flat: np.ndarray, lens: np.ndarray, names: np.ndarray, tokenizer: str, k1: float, b: float,
               owned: bool = False) -> LexicalIndex:
    """One group's index from its tokens (global ids, text after text). ``owned``: ``flat`` is read by nobody
    after this call, so it is overwritten with the group's own token ids instead of copied (0.28 GB fewer at the
    peak of a 10^6-note build: 7·10^7 int32 tokens)."""
    from scipy import sparse  # lazy: startup

    n = len(lens)
    if not n or not flat.size:
        return LexicalIndex.from_parts(tokenizer, k1, b, n, {}, None)
    # tokens in order of first occurrence = bm25s ids
    first = np.full(len(names), flat.size, dtype=np.int64)
    for s in range(0, flat.size, 1 << 22):
        np.minimum.at(first, flat[s:s + (1 << 22)], np.arange(s, min(s + (1 << 22), flat.size), dtype=np.int64))
    present = np.flatnonzero(first < flat.size)
    order = present[np.argsort(first[present])]
    del first
    V = len(order)
    local = np.zeros(len(names), dtype=np.int32)
    local[order] = np.arange(V, dtype=np.int32)
    vocab = dict(zip(names[order].tolist(), range(V)))
    if owned:
        tid = flat
        for s in range(0, flat.size, 1 << 22):  # in place, a slice at a time
            tid[s:s + (1 << 22)] = local[tid[s:s + (1 << 22)]]
    else:
        tid = local[flat]
    if V * n <= 8 * flat.size:  # small enough to count every (token, document) cell: no sort at all
        cell = np.bincount(tid.astype(np.int64) * n + np.repeat(np.arange(n, dtype=np.int64), lens), minlength=V * n)
        pair = np.flatnonzero(cell)  # in (token, document) order: bm25s' CSC order
        tf = cell[pair].astype(np.int32)
        row = (pair % n).astype(np.int32)
        df = np.bincount(pair // n, minlength=V).astype(np.int64)
        del cell, pair
    else:  # documents × tokens with duplicates summed, transposed to tokens × documents
        indptr = np.zeros(n + 1, dtype=np.int32 if flat.size < 2**31 else np.int64)
        np.cumsum(lens, out=indptr[1:])
        # a term frequency never exceeds its document's length: count in the smallest dtype that holds the longest
        # document (uint8 for notes of < 256 tokens: 1 byte a token instead of 4 while the counts are summed)
        count = np.uint8 if lens.max() < 2**8 else np.uint16 if lens.max() < 2**16 else np.int32
        by_doc = sparse.csr_array((np.ones(flat.size, dtype=count), tid, indptr), shape=(n, V))
        by_doc.sum_duplicates()
        csc = by_doc.tocsc()
        del by_doc
        tf, row = csc.data, csc.indices.astype(np.int32, copy=False)
        df = np.diff(csc.indptr).astype(np.int64)
        del csc
    del tid
    dfs, at = np.unique(df, return_inverse=True)  # one math.log per distinct document frequency
    idf = np.array([math.log(1 + (n - d + 0.5) / (d + 0.5)) for d in dfs.tolist()])[at].astype(np.float32)
    avg = lens.mean()
    denom = k1 * ((1 - b) + b * lens.astype(np.float64) / avg)
    out_indptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(df, out=out_indptr[1:])
    data = np.empty(len(tf), dtype=np.float32)
    for s in range(0, len(tf), 1 << 20):  # in slices: bounded float64 temporaries, no token id per cell kept
        e = min(s + (1 << 20), len(tf))
        col = np.searchsorted(out_indptr, np.arange(s, e), side="right") - 1  # each cell's token
        tf32 = tf[s:e].astype(np.float32)
        tfc = tf32 / (denom[row[s:e]] + tf32)
        data[s:e] = (idf[col] * tfc).astype(np.float32)
    scores = {"data": data, "indices": row, "indptr": out_indptr, "num_docs": n}
    return LexicalIndex.from_parts(tokenizer, k1, b, n, vocab, scores)
