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
import os
import re
import unicodedata
from collections import deque
from functools import lru_cache
from itertools import chain

import numpy as np

from retrievers.kernels.registry import jit_kernel, kernel_example

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
THREADS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@lru_cache(maxsize=2)
def _word_table(underscore: bool) -> np.ndarray:
    """Whether each code point (0 … 0x10FFFF) is a word character of Python's ``re`` for ``str`` patterns
    (``str.isalnum()`` or ``_``; ``underscore=False``: not ``_``, i.e. ``[^\\W_]``). The separator counts as one."""
    # re's \w for str patterns is str.isalnum() or "_" (CPython's SRE_UNI_IS_WORD: Py_UNICODE_ISALNUM or '_'),
    # here without building and scanning a 1.1 M-character string (0.3 → 0.1 s; test_lexical.py checks it)
    table = np.fromiter(map(str.isalnum, map(chr, range(0x110000))), dtype=bool, count=0x110000)
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
    of texts costs one compiled lookup of its distinct words (:func:`intern_runs`), and only the words never seen
    before go through Python."""

    def __init__(self, tokenizer: str):
        self.tokenizer = tokenizer
        self.token_id: dict[str, int] = {}
        self.names: list[str] = []  # token of each global id
        # the words seen so far, in a compiled hash table: code points, and each word's global id (gid)
        self.slots, self.store, self.w_start, self.w_len, self.n_words, self.n_store = new_table(np.uint32)
        self.gid = np.zeros(0, dtype=np.int64)  # global id of each word of the table

    def ids_of_batch(self, chars: np.ndarray, n: int) -> np.ndarray:
        """Global id of each of a batch's ``n`` distinct words (``chars``: their code points, uint8 or uint32,
        between single spaces): -1 dropped, -2 the batch separator.

        >>> v = TokenIds("stem_en")
        >>> v.ids_of_batch(np.frombuffer(b"apples a \\x00 pears", dtype=np.uint8), 4).tolist()
        [0, -1, -2, 1]
        >>> v.names
        ['appl', 'pear']
        """
        if not self.n_words:  # the table's first word: the separator (id -2)
            self._intern(np.array([ord(_SEP)], dtype=chars.dtype), 1)
            self.gid = np.array([-2], dtype=np.int64)
        before = self.n_words
        widx, fresh = self._intern(chars, n)
        if self.n_words > before:
            new = fresh.tobytes().decode("ascii" if fresh.dtype == np.uint8 else "utf-32-le").split(" ")
            self.gid = np.concatenate((self.gid, self._new_ids(new)))
        return self.gid[widx]

    def _intern(self, chars: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        (widx, self.slots, self.store, self.w_start, self.w_len, self.n_words, self.n_store,
         fresh) = jit_kernel(intern_runs)(chars, _ASCII_WORD if chars.dtype == np.uint8 else _NOT_SPACE,
                                           self.slots, self.store, self.w_start, self.w_len, self.n_words,
                                           self.n_store)
        assert len(widx) == n, "a batch's distinct words are one run each"
        return widx, fresh

    def _new_ids(self, new: list[str]) -> np.ndarray:
        """Global ids of words not seen before (in order; new tokens numbered in that order)."""
        out = np.full(len(new), -1, dtype=np.int64)
        if self.tokenizer == "stem_en":
            stop = _en_stopwords()
            at = [i for i, w in enumerate(new) if len(w) > 1 and w not in stop]  # (?u)\b\w\w+\b: runs of two +
            out[at] = self.of_tokens(_stemmer().stemWords([new[i] for i in at]))
        else:
            out[:] = self.of_tokens(new)
        return out

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
    a string end does, and no word spans it) and lower-cased (per text when not ASCII; unicode61 after NFKD and the
    combining-mark filter, as :func:`tokenize_unicode61`); a compiled pass (:func:`intern_runs`) splits it into the
    runs of word code points (a table of ``str.isalnum``, the definition of ``re``'s ``\\w``; ASCII batches are
    blanked by ``bytes.translate`` first) and numbers the distinct ones; only those go through Python
    (:class:`TokenIds`).
    A text holding the separator itself, and a corpus of fewer than ``BATCH_MIN`` characters (whose fixed cost —
    the code-point tables and kernels, ~1 s — would dominate), are tokenised by the plain tokenizer.

    >>> v = TokenIds("unicode61")
    >>> ids, counts = tokenize_many(["Red apples", "green_apples"], v)
    >>> [v.names[i] for i in ids], counts.tolist()
    (['red', 'apples', 'green', 'apples'], [2, 2])
    """
    flat, counts, starts = tokenize_visited(texts, vocab)
    if np.array_equal(starts, np.cumsum(counts) - counts):  # already in text order
        return flat, counts
    return gather(flat, starts, counts), counts


def tokenize_visited(texts: list[str], vocab: TokenIds, threads: int | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`tokenize_many`'s tokens in the order the texts were visited (ASCII texts first), with each text's
    count and start in ``flat`` — :func:`build_many` reads the texts through ``starts`` and so never pays for putting
    ~3·10^7 tokens back in text order.

    The batches' text work (lower-casing, the code-point passes, :func:`intern_runs`) runs on ``threads``
    worker threads (``THREADS``), at most ``threads + 1`` batches ahead; the distinct words of each batch are then
    numbered here, one batch after the other in visiting order, so the vocabulary and every id are those of one
    thread whatever the timing (test_lexical.py: tiny batches on several threads)."""
    counts = np.zeros(len(texts), dtype=np.int64)
    starts = np.zeros(len(texts), dtype=np.int64)
    if sum(map(len, texts)) < BATCH_MIN:  # a small corpus: the per-text tokenizer, no tables or kernels to load
        toks = [vocab.of_tokens(TOKENIZERS[vocab.tokenizer](t)) for t in texts]
        counts[:] = [len(t) for t in toks]
        starts[:] = np.cumsum(counts) - counts
        return (np.concatenate(toks) if toks else np.zeros(0, dtype=np.int32)), counts, starts
    uni = vocab.tokenizer == "unicode61"
    parts: list[np.ndarray] = []
    at = 0

    def put(which: list[int], ids: np.ndarray, c: np.ndarray | None = None) -> None:
        nonlocal at
        c = np.array([len(ids)]) if c is None else c  # None: one text, all of ids
        parts.append(ids)
        counts[which] = c
        starts[which] = at + np.cumsum(c) - c
        at += len(ids)

    work = plan_batches(texts)
    threads = THREADS if threads is None else threads
    if threads <= 1 or sum(kind == "batch" for kind, _ in work) <= 1:
        for kind, which in work:
            if kind == "text":
                put(which, vocab.of_tokens(TOKENIZERS[vocab.tokenizer](texts[which[0]])))
            else:
                put(which, *_number(batch_words([texts[i] for i in which], uni), vocab, len(which)))
    else:
        from concurrent.futures import ThreadPoolExecutor  # lazy: startup
        with ThreadPoolExecutor(threads, thread_name_prefix="bm25-tokenize") as pool:
            ahead: deque = deque()
            todo = iter(work)
            for kind, which in todo:
                ahead.append((kind, which, kind == "batch" and pool.submit(
                    batch_words, [texts[i] for i in which], uni)))
                if len(ahead) > threads:
                    break
            while ahead:
                kind, which, job = ahead.popleft()
                for nk, nw in todo:  # keep the workers busy while this batch is numbered
                    ahead.append((nk, nw, nk == "batch" and pool.submit(batch_words, [texts[i] for i in nw], uni)))
                    break
                if kind == "text":
                    put(which, vocab.of_tokens(TOKENIZERS[vocab.tokenizer](texts[which[0]])))
                else:
                    put(which, *_number(job.result(), vocab, len(which)))
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return flat, counts, starts


def plan_batches(texts: list[str]) -> list[tuple[str, list[int]]]:
    """The order texts are tokenised in: batches of ``_BATCH_CHARS`` characters, ASCII texts first (they take the fast
    path together), and a text holding the separator alone (``("text", [i])``), by the plain tokenizer."""
    work: list[tuple[str, list[int]]] = []
    for ascii_pass in (True, False):
        batch: list[int] = []
        size = 0
        for i, t in enumerate(texts):
            if t.isascii() != ascii_pass:
                continue
            if _SEP in t:
                if batch:
                    work.append(("batch", batch))
                batch, size = [], 0
                work.append(("text", [i]))
                continue
            batch.append(i)
            size += len(t)
            if size >= _BATCH_CHARS:
                work.append(("batch", batch))
                batch, size = [], 0
        if batch:
            work.append(("batch", batch))
    return work


def gather(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``concatenate([flat[s:s + n] for s, n in zip(starts, lens)])`` without a Python loop."""
    total = int(lens.sum())
    if not total:
        return flat[:0]
    ends = np.cumsum(lens)
    idx = np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lens), lens)
    return flat[idx]


def batch_words(texts: list[str], uni: bool) -> tuple[np.ndarray, int, np.ndarray]:
    """The distinct words of a batch (first occurrence first, the separator among them: their code points between
    single spaces, and how many), and each word occurrence's index among them. Runs on a worker thread: the
    splitting and numbering (:func:`intern_runs`) release the GIL."""
    joiner = f" {_SEP} "
    if texts[0].isascii():  # the ASCII pass: every text of the batch is ASCII
        # bytes.translate lower-cases and blanks the non-word bytes in one pass; the kernel reads the bytes in place
        cp = np.frombuffer(joiner.join(texts).encode("ascii").translate(_ascii_bytes(uni)), dtype=np.uint8)
        is_word = _ASCII_WORD
    else:
        if uni:
            cp = _utf32(joiner.join([unicodedata.normalize("NFKD", t) for t in texts]))
            low = cp[~_combining_table()[cp]].tobytes().decode("utf-32-le", "surrogatepass").lower()
        else:
            low = joiner.join([t.lower() for t in texts])
        cp, is_word = _utf32(low), _word_table(not uni)
    local, *_, n, _, chars = jit_kernel(intern_runs)(cp, is_word, *new_table(cp.dtype))
    return chars, n, local


_ASCII_WORD = np.arange(256) != 32  # after _ascii_bytes: a word byte is any but the space
_NOT_SPACE = np.arange(0x110000) != 32  # a batch's distinct words, between single spaces: any code point but the space


def _example_runs() -> tuple:
    # "ab cd  ab \x00 e" into a table full after one word: the slots, the code points and the word arrays all grow
    return (np.frombuffer(b"ab cd  ab \x00 e", dtype=np.uint8), _ASCII_WORD, *new_table(np.uint8, 4, 2, 1))


def new_table(dtype, slots: int = 1 << 12, chars: int = 1 << 16, words: int = 1 << 11) -> tuple:
    """An empty word table for :func:`intern_runs` (code points of ``dtype``): ``slots`` (a power of two), ``store``,
    ``w_start``, ``w_len``, ``n_words``, ``n_store``."""
    return (np.full(slots, -1, dtype=np.int64), np.zeros(chars, dtype=dtype), np.zeros(words, dtype=np.int64),
            np.zeros(words, dtype=np.int64), 0, 0)


@kernel_example(_example_runs)
def intern_runs(cp, is_word, slots, store, w_start, w_len, n_words, n_store):  # pragma: no cover - jitted
    """The maximal runs of word code points (``is_word[c]``) of ``cp``, each as its number in a table of words (the
    new ones added in order of first occurrence): ``(number of each run (int32), slots, store, w_start, w_len,
    n_words, n_store, the new words between single spaces)``, the table's arrays grown (and returned) when full.

    The table: FNV-1a over the code points (31 bits) in open-addressed ``slots`` (hash << 32 | word number, one
    read rejects most; doubled at half full); each word's code points in ``store`` (``w_start``, ``w_len``).
    Two uses, one code: a worker thread numbers a batch's runs in a fresh table (what pyarrow's whitespace split
    and ``dictionary_encode`` gave, without the decode / UTF-8 copies of the batch); then the main thread, batch
    after batch, numbers those distinct words (``is_word`` everything but the space) in the build's table of every
    word seen so far (:class:`TokenIds`): a word already seen costs a hash and one compare, not a Python string and
    two dict lookups (LongMemEval-S: 9.6·10^5 distinct words in 44 batches)."""
    n = cp.shape[0]
    local = np.empty(n // 2 + 1, dtype=np.int32)
    fresh = np.empty(n, dtype=cp.dtype)
    nf = 0
    runs = 0
    i = 0
    while i < n:
        if not is_word[cp[i]]:
            i += 1
            continue
        j = i
        h = np.int64(2166136261)
        while j < n and is_word[cp[j]]:
            h = ((h ^ np.int64(cp[j])) * np.int64(16777619)) & np.int64(0x7FFFFFFF)  # < 2^56: no overflow
            j += 1
        ln = j - i
        mask = slots.shape[0] - 1
        k = h & mask
        d = -1
        while slots[k] != -1:
            if slots[k] >> 32 == h:
                d = slots[k] & 0xFFFFFFFF
                s = w_start[d]
                m = 0
                if w_len[d] == ln:
                    while m < ln and store[s + m] == cp[i + m]:
                        m += 1
                if m == ln:
                    break
                d = -1
            k = (k + 1) & mask
        if d == -1:
            d = n_words
            if n_store + ln > store.shape[0]:
                store = np.concatenate((store, np.zeros(max(store.shape[0], ln), dtype=store.dtype)))
            if d == w_start.shape[0]:
                w_start = np.concatenate((w_start, np.zeros(w_start.shape[0], dtype=np.int64)))
                w_len = np.concatenate((w_len, np.zeros(w_len.shape[0], dtype=np.int64)))
            store[n_store:n_store + ln] = cp[i:j]
            w_start[d] = n_store
            w_len[d] = ln
            n_store += ln
            n_words += 1
            slots[k] = (h << 32) | d
            if 2 * n_words >= slots.shape[0]:
                old = slots
                slots = np.full(2 * old.shape[0], -1, dtype=np.int64)
                mask = slots.shape[0] - 1
                for e in old:
                    if e != -1:
                        k = (e >> 32) & mask
                        while slots[k] != -1:
                            k = (k + 1) & mask
                        slots[k] = e
            if nf:
                fresh[nf] = 32
                nf += 1
            fresh[nf:nf + ln] = cp[i:j]
            nf += ln
        local[runs] = d
        runs += 1
        i = j
    return local[:runs].copy(), slots, store, w_start, w_len, n_words, n_store, fresh[:nf].copy()


def _number(words: tuple[np.ndarray, int, np.ndarray], vocab: TokenIds, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A batch's tokens as global ids (its distinct words numbered by ``vocab``: in batch order, one batch at a
    time) and its ``n`` texts' token counts."""
    chars, distinct, local = words
    return jit_kernel(batch_ids)(local, vocab.ids_of_batch(chars, distinct), n)


@kernel_example(lambda: (np.array([0, 1, 2, 0], dtype=np.int32), np.array([5, -2, -1], dtype=np.int64), 2))
def batch_ids(local, gid, n):  # pragma: no cover - jitted
    """Each word's global id ``gid[local]`` with the dropped (-1) left out, and the token count of each of the ``n``
    texts (the separator, -2, ends a text)."""
    ids = np.empty(local.shape[0], dtype=np.int32)
    counts = np.zeros(n, dtype=np.int64)
    text = 0
    k = 0
    for w in local:
        g = gid[w]
        if g >= 0:
            ids[k] = g
            k += 1
            counts[text] += 1
        elif g == -2:
            text += 1
    return ids[:k].copy(), counts


@lru_cache(maxsize=2)
def _ascii_bytes(unicode61: bool) -> bytes:
    """``bytes.translate`` table: an ASCII word byte lower-cased, any other (unicode61: and ``_``) a space; the
    separator kept."""
    spaces = _ascii_spaces(unicode61)
    return bytes(32 if c in spaces else ord(chr(c).lower()) for c in range(256))


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
    batches (:func:`tokenize_many`), into global token ids; per group, two compiled passes over its documents' tokens
    (read in place) do the rest: the vocabulary in first-occurrence order, term frequencies of (document, token)
    pairs in bm25s' CSC order (columns = tokens, rows sorted within a column), document frequencies, and bm25s'
    Lucene formula in its own precision and order —
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
    flat, counts, starts = tokenize_visited(list(uid), vocab)
    del uid
    names = np.array(vocab.names, dtype=object)
    out: dict[str, LexicalIndex] = {}

    def arrays(docs):
        return _group_arrays(flat, starts[docs], counts[docs], len(names), k1, b)

    def finish(g, parts):
        out[g] = _group_index(parts, names, tokenizer, k1, b)
        if on_group is not None:
            on_group()
    if THREADS <= 1 or len(members) <= 1:
        for g, docs in members.items():
            finish(g, arrays(docs))
        return out
    # the compiled passes of the next groups (GIL released) run on a worker thread while this one builds the
    # vocabulary dicts of the finished groups; every group's arrays are a function of its documents alone
    from concurrent.futures import ThreadPoolExecutor  # lazy: startup
    with ThreadPoolExecutor(1, thread_name_prefix="bm25-groups") as pool:
        ahead: deque = deque()
        for g, docs in members.items():
            ahead.append((g, pool.submit(arrays, docs)))
            if len(ahead) > 2:
                g0, job = ahead.popleft()
                finish(g0, job.result())
        while ahead:
            g0, job = ahead.popleft()
            finish(g0, job.result())
    return out


def _group_arrays(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, n_names: int, k1: float, b: float
                  ) -> tuple:
    """One group's index arrays from its documents' tokens ``flat[starts[i]:starts[i] + lens[i]]`` (global ids):
    ``(documents, order, score matrix or None)``, ``order`` the global id of each local token (bm25s' ids).

    Two compiled passes (:func:`group_cells`, :func:`group_scores`) read the tokens in place and replace numpy's
    first-occurrence ``minimum.at``, the (token, document) ``bincount`` / scipy CSR, the gather of the group's tokens
    and the sliced scoring: on LongMemEval-S's 468 groups (3.8·10^7 tokens) ~2.4 → ~1.2 s CPU; the same arrays bit
    for bit."""
    n = len(lens)
    if not n or not lens.sum():
        return n, None, None
    lens = np.ascontiguousarray(lens, dtype=np.int64)
    order, df, indptr, row, tf = jit_kernel(group_cells)(flat, np.ascontiguousarray(starts, dtype=np.int64), lens,
                                                         n_names)
    # idf = log(1 + (N − df + 0.5)/(df + 0.5)): one math.log per distinct document frequency, stored float32
    dfs = np.flatnonzero(np.bincount(df))
    by_df = np.zeros(int(dfs[-1]) + 1)
    by_df[dfs] = [math.log(1 + (n - d + 0.5) / (d + 0.5)) for d in dfs.tolist()]
    idf = by_df[df].astype(np.float32)
    denom = k1 * ((1 - b) + b * lens.astype(np.float64) / lens.mean())
    data = jit_kernel(group_scores)(tf, row, indptr, idf, denom)
    return n, order, {"data": data, "indices": row, "indptr": indptr, "num_docs": n}


def _group_index(parts: tuple, names: np.ndarray, tokenizer: str, k1: float, b: float) -> LexicalIndex:
    """The :class:`LexicalIndex` of :func:`_group_arrays`' ``parts``: its vocabulary (token → local id) as a dict,
    the part that holds the GIL."""
    n, order, scores = parts
    if order is None:
        return LexicalIndex.from_parts(tokenizer, k1, b, n, {}, None)
    vocab = dict(zip(names[order].tolist(), range(len(order))))
    return LexicalIndex.from_parts(tokenizer, k1, b, n, vocab, scores)


def _example_cells() -> tuple:
    return (np.array([3, 1, 3, 0, 1, 9], dtype=np.int32), np.array([0, 3, 3], dtype=np.int64),
            np.array([3, 0, 2], dtype=np.int64), 4)


@kernel_example(_example_cells)
def group_cells(flat, starts, lens, n_names):  # pragma: no cover - jitted
    """bm25s' CSC cells of the documents ``flat[starts[i]:starts[i] + lens[i]]``: ``order`` (the global id of each
    local token, in order of first occurrence = bm25s' ids), document frequencies, ``indptr`` (int64), and per cell
    (token-major, documents ascending within a token) its document (int32) and term frequency (int32).

    One pass numbers the tokens and collects the (document, token) cells document after document — a token's cell
    is new when its last one is of an earlier document — then a stable counting sort puts them token-major.
    ``np.empty`` / ``np.zeros`` pages are committed only where written: ~8 bytes a cell, not a token."""
    local = np.full(n_names, -1, dtype=np.int32)
    total = 0
    for d in range(lens.shape[0]):
        total += lens[d]
    order = np.empty(min(n_names, total), dtype=np.int64)
    last = np.full(order.shape[0], -1, dtype=np.int64)  # each token's last cell
    cell_tok = np.empty(total, dtype=np.int32)
    cell_tf = np.zeros(total, dtype=np.int32)
    doc_cells = np.zeros(lens.shape[0] + 1, dtype=np.int64)
    df = np.zeros(order.shape[0], dtype=np.int64)
    V = 0
    cells = 0
    for d in range(lens.shape[0]):
        for p in range(starts[d], starts[d] + lens[d]):
            t = local[flat[p]]
            if t < 0:
                t = V
                local[flat[p]] = t
                order[V] = flat[p]
                V += 1
            if last[t] < doc_cells[d]:
                last[t] = cells
                cell_tok[cells] = t
                df[t] += 1
                cells += 1
            cell_tf[last[t]] += 1
        doc_cells[d + 1] = cells
    indptr = np.zeros(V + 1, dtype=np.int64)
    for t in range(V):
        indptr[t + 1] = indptr[t] + df[t]
    nxt = indptr[:V].copy()
    row = np.empty(cells, dtype=np.int32)
    tf = np.empty(cells, dtype=np.int32)
    for d in range(lens.shape[0]):
        for c in range(doc_cells[d], doc_cells[d + 1]):
            t = cell_tok[c]
            row[nxt[t]] = d
            tf[nxt[t]] = cell_tf[c]
            nxt[t] += 1
    return order[:V].copy(), df[:V].copy(), indptr, row, tf


@kernel_example(lambda: (np.array([2, 1], dtype=np.int32), np.array([0, 1], dtype=np.int32),
                         np.array([0, 1, 2], dtype=np.int64), np.array([0.5, 0.25], dtype=np.float32),
                         np.array([1.0, 1.5])))
def group_scores(tf, row, indptr, idf, denom):  # pragma: no cover - jitted
    """bm25s' Lucene score of each cell, in its precision and order: ``float32(idf · tf / (denom[doc] + tf))`` with
    tf as float32 and the rest float64 (no fast-math: the same IEEE operations as numpy's)."""
    data = np.empty(tf.shape[0], dtype=np.float32)
    for t in range(indptr.shape[0] - 1):
        w = np.float64(idf[t])
        for c in range(indptr[t], indptr[t + 1]):
            f = np.float64(np.float32(tf[c]))
            data[c] = np.float32(w * (f / (denom[row[c]] + f)))
    return data
