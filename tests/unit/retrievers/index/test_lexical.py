"""Lexical indexes built with the memoised stemmer and the one-pass vocabulary equal the plain definitions (regex,
stop words, PyStemmer per text; vocabulary in order of first occurrence) on real LoCoMo and LongMemEval-S texts:
same tokens, same vocabulary, same bm25s score arrays, same query scores."""
from __future__ import annotations

import numpy as np
import pytest

import retrievers.index.lexical as lexical
from retrievers.index.lexical import LexicalIndex, tokenize_stem_en


def _plain_stem_en(text):
    """The stem_en definition written out independently: bm25s's word regex and English stop words, PyStemmer's
    English stemmer applied to every occurrence."""
    import re

    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN
    stop = frozenset(STOPWORDS_EN)
    toks = [t for t in re.findall(r"(?u)\b\w\w+\b", text.lower()) if t not in stop]
    return Stemmer.Stemmer("english").stemWords(toks) if toks else []


def _texts():
    from evalkit.data.registry import load_dataset
    from retrievers.index.corpus import Corpus
    lme = Corpus(load_dataset("longmemeval-s")).texts
    return Corpus(load_dataset("locomo")).texts[:1500] + lme[:150] + lme[-150:]


@pytest.mark.slow  # > 4 s: left out of make test-unit, run by make test
def test_memoised_stems_equal_plain_stemming(monkeypatch):
    texts = _texts()
    want = [_plain_stem_en(t) for t in texts]
    assert [tokenize_stem_en(t) for t in texts] == want
    monkeypatch.setattr(lexical, "STEM_MEMO_MAX", 50)  # the memo starting over mid-corpus changes nothing
    lexical.STEM_MEMO.clear()
    assert [tokenize_stem_en(t) for t in texts] == want
    assert len(lexical.STEM_MEMO) < sum(map(len, want))


def test_index_equals_plain_build_on_real_texts():
    import bm25s
    texts = _texts()[:800]
    queries = ["what did I say about my sister's wedding?", "Caroline LGBTQ support group", "the the of"]
    for tk, plain in (("stem_en", _plain_stem_en), ("unicode61", lexical.tokenize_unicode61)):
        lex = LexicalIndex(texts, tk)
        docs = [plain(t) for t in texts]
        vocab: dict[str, int] = {}
        for d in docs:
            for t in d:
                vocab.setdefault(t, len(vocab))
        ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        ref.index(bm25s.tokenization.Tokenized(ids=[[vocab[t] for t in d] for d in docs], vocab=vocab),
                  show_progress=False)
        assert list(lex.vocab.items()) == list(vocab.items())  # (bm25s adds "" to both, for empty documents)
        for key in ("data", "indices", "indptr"):
            assert np.array_equal(lex.bm25.scores[key], ref.scores[key]), key
        for q in queries:
            ids = [vocab[t] for t in plain(q) if t in vocab]
            if ids:
                assert np.array_equal(lex.token_scores(ids), ref.get_scores(ids))


@pytest.mark.slow  # loads LongMemEval-S (~10 s)
def test_one_pass_build_equals_one_index_per_group_on_real_groups():
    """build_many over LongMemEval-S haystacks (sessions shared between groups) and a LoCoMo conversation: the same
    vocabulary, the same bm25s score arrays (dtype and bits), the same scores and top lists as one LexicalIndex per
    group."""
    from evalkit.data.registry import load_dataset
    lme = load_dataset("longmemeval-s")
    by_group: dict[str, list[str]] = {}
    for d in lme.documents:
        by_group.setdefault(d.group or "", []).append(d.full_text)
    groups = dict(list(by_group.items())[:12])
    groups["empty-texts"] = ["", "!!", "a"]
    queries = ["what did I say about my sister's wedding?", "how many miles did I run", "the the of"]
    for tk in ("stem_en", "unicode61"):
        many = lexical.build_many(groups, tk)
        for g, texts in groups.items():
            one, fast = LexicalIndex(texts, tk), many[g]
            assert list(fast.vocab.items()) == list(one.vocab.items()) and fast.n == one.n
            assert fast._empty == one._empty
            if one._empty:
                continue
            for key in ("data", "indices", "indptr"):
                a, b = fast.bm25.scores[key], one.bm25.scores[key]
                assert a.dtype == b.dtype and np.array_equal(a, b), (g, key)
            for q in queries:
                pa, sa = fast.top(q, 10)
                pb, sb = one.top(q, 10)
                assert pa.tolist() == pb.tolist() and sa.tobytes() == sb.tobytes()
