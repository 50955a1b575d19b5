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


# Texts the batch tokenizer must treat exactly as the per-text one: final sigma at a text's end and start, a capital
# whose lower case is two code points (İ), ligatures and fractions under NFKD, a combining accent, underscores, single
# letters, an emoji (a UCS-4 string), a lone surrogate, empty and punctuation-only texts, and texts holding the batch
# separator itself (tokenised on their own).
EDGE_TEXTS = ["ΟΔΟΣ ΟΔΟΣ.", "ΣΑ and ΑΣ", "İstanbul ﬁne café naïve _x_ a_b 3.14 ½ x² ǅemal", "emoji 😀 text",
              "e\u0301e", "\ud800 lone surrogate ab", "", "!!", "a", "bad \x00 separator ΑΣ", "\x00", "tab\tnew\nline"]


def _every_code_point() -> list[str]:
    """Every code point but NUL, one per word, in texts of 50,000 characters."""
    text = "".join(chr(c) + " " for c in range(1, 0x110000))
    return [text[i:i + 50_000] for i in range(0, len(text), 50_000)]


@pytest.mark.slow  # loads LongMemEval-S and LoCoMo (~10 s)
def test_batch_tokenizer_equals_per_text_tokenizers_on_real_texts():
    """tokenize_many (joined batches, a code-point table for ``\\w``, the compiled word runs and their ids) gives each text
    exactly the tokens of TOKENIZERS[name](text) — the regex definitions — on real LoCoMo and LongMemEval-S texts
    (ASCII and not), on every Unicode code point, and on the edge cases above."""
    texts = _texts() + EDGE_TEXTS + _every_code_point()
    assert sum(map(len, texts)) >= lexical.BATCH_MIN  # the batch path
    for tk in ("stem_en", "unicode61"):
        vocab = lexical.TokenIds(tk)
        flat, counts = lexical.tokenize_many(texts, vocab)
        assert flat.dtype == np.int32 and len(counts) == len(texts)
        ends = np.cumsum(counts)
        got = [[vocab.names[i] for i in flat[e - c:e]] for e, c in zip(ends.tolist(), counts.tolist())]
        want = [lexical.TOKENIZERS[tk](t) for t in texts]
        assert got == want, tk


def test_batch_tokenizer_edge_cases_and_small_batches(monkeypatch):
    """The edge texts, in batches of a few characters (every batch boundary path), mixed with ASCII texts."""
    monkeypatch.setattr(lexical, "_BATCH_CHARS", 12)
    monkeypatch.setattr(lexical, "BATCH_MIN", 0)  # the batch path even for so few characters
    texts = ["Red apples", *EDGE_TEXTS, "green_apples and PEARS", "x y zz"]
    for tk in ("stem_en", "unicode61"):
        vocab = lexical.TokenIds(tk)
        flat, counts = lexical.tokenize_many(texts, vocab)
        ends = np.cumsum(counts)
        got = [[vocab.names[i] for i in flat[e - c:e]] for e, c in zip(ends.tolist(), counts.tolist())]
        assert got == [lexical.TOKENIZERS[tk](t) for t in texts], tk
    assert lexical.tokenize_many([], lexical.TokenIds("stem_en"))[0].size == 0


def test_one_pass_build_equals_constructor_on_one_large_group_and_repeats(monkeypatch):
    """build_many over a group of repeated texts (one text tokenised once, read many times), a large group of short
    notes and notes past 255 tokens (one word 300 times) equals the constructor bit for bit."""
    words = [f"w{i}" for i in range(400)]
    big = [" ".join(words[(i * 7 + j * 13) % 400] for j in range(3 + i % 9)) for i in range(600)]
    # "long": notes of 256 tokens and more, one word 300 times (a term frequency past one byte)
    long = big[:50] + [" ".join(["w1"] * 300 + words[:10]), " ".join(words[j % 400] for j in range(700))]
    groups = {"big": big, "repeats": ["apples and pears", "apples", "apples and pears", "ΟΔΟΣ"] * 5,
              "edge": EDGE_TEXTS, "long": long}
    for tk, least in (("stem_en", 0), ("unicode61", 0), ("stem_en", 1 << 30)):  # batch and per-text tokenising
        monkeypatch.setattr(lexical, "BATCH_MIN", least)
        many = lexical.build_many(groups, tk)
        for g, texts in groups.items():
            one, fast = LexicalIndex(texts, tk), many[g]
            assert list(fast.vocab.items()) == list(one.vocab.items()) and fast.n == one.n
            for key in ("data", "indices", "indptr"):
                a, b = fast.bm25.scores[key], one.bm25.scores[key]
                assert a.dtype == b.dtype and np.array_equal(a, b), (g, key)


def _top_by_definition(lex, text, depth, match, visible):
    """The best ``depth`` of :meth:`LexicalIndex.scores` written out: NaN = no match, hidden documents dropped,
    score descending, ties by position."""
    s = lex.scores(text, match)
    pos = [i for i in range(lex.n) if not np.isnan(s[i]) and (visible is None or visible[i])]
    pos.sort(key=lambda i: (-s[i], i))
    pos = pos[:depth] if depth > 0 else pos
    return np.array(pos, dtype=np.int64), s[pos]


@pytest.mark.slow  # loads LoCoMo and LongMemEval-S (~10 s)
def test_top_equals_the_definition_over_scores_with_visibility_masks():
    """The "any" path of top (the matching documents found from the index-dtype scores) gives the positions and the
    float64 scores of the definition over scores(), with and without an as-of mask, for repeated, unknown, stop-word
    and empty queries; the "all" path likewise."""
    texts = _texts()[:1200]
    texts += [texts[5]] * 3  # exact ties, broken by position
    lex = LexicalIndex(texts, "stem_en")
    rng = np.random.default_rng(3)
    queries = ["what did I say about my sister's wedding?", "Caroline LGBTQ support group", "the the of", "",
               "wedding wedding wedding", "zzzqqq unknownword", texts[5][:80], "Melanie painting camping"]
    masks = [None, rng.random(lex.n) < 0.5, np.zeros(lex.n, dtype=bool), np.ones(lex.n, dtype=bool)]
    for q in queries:
        for vis in masks:
            for depth in (1, 10, 100, 5000):
                for match in ("any", "all"):
                    got_pos, got_sc = lex.top(q, depth, match, vis)
                    want_pos, want_sc = _top_by_definition(lex, q, depth, match, vis)
                    assert got_pos.tolist() == want_pos.tolist(), (q, depth, match)
                    assert got_sc.dtype == np.float64 and got_sc.tobytes() == want_sc.tobytes(), (q, depth, match)


def test_threaded_batches_number_tokens_as_one_thread(monkeypatch):
    """Batches of a few characters tokenised on worker threads that finish in reverse order (each sleeps longer than
    the next): the vocabulary is numbered in order of first occurrence over the texts as visited (ASCII first), every
    id and count equals one thread's and the plain tokenizer's — whatever the threads' timing. Words recur across
    batches and first occur late, in ASCII and non-ASCII texts."""
    import time
    from itertools import chain
    monkeypatch.setattr(lexical, "_BATCH_CHARS", 12)
    monkeypatch.setattr(lexical, "BATCH_MIN", 0)
    words = ["pears", "Apples", "ΟΔΟΣ", "naïve", "zeta", "the", "running", "runs"]
    texts = [" ".join(words[(i * 3 + j) % len(words)] for j in range(1 + i % 4)) for i in range(40)]
    texts += EDGE_TEXTS + ["late_word ΑΣ", "late word again"]
    plan = lexical.plan_batches(texts)
    assert sum(kind == "batch" for kind, _ in plan) > 10  # many batches, so several in flight at once
    rank = {tuple(texts[i] for i in which): k for k, (_, which) in enumerate(plan)}
    batch_words = lexical.batch_words

    def slow_first(batch, uni):  # earlier batches finish later
        time.sleep(0.0005 * (len(plan) - rank[tuple(batch)]))
        return batch_words(batch, uni)

    visited = [i for _, which in plan for i in which]
    for tk in ("stem_en", "unicode61"):
        plain = [lexical.TOKENIZERS[tk](t) for t in texts]
        first_seen = list(dict.fromkeys(chain.from_iterable(plain[i] for i in visited)))
        runs = []
        for threads, fn in ((1, batch_words), (2, slow_first), (4, slow_first)):
            monkeypatch.setattr(lexical, "batch_words", fn)
            vocab = lexical.TokenIds(tk)
            flat, counts, starts = lexical.tokenize_visited(texts, vocab, threads)
            assert vocab.names == first_seen, (tk, threads)
            got = [[vocab.names[k] for k in flat[s:s + c]] for s, c in zip(starts.tolist(), counts.tolist())]
            assert got == plain, (tk, threads)
            runs.append(flat)
        assert all(np.array_equal(runs[0], r) for r in runs[1:]), tk
