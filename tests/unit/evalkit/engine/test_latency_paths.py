"""Latency-mode fast paths give exactly what the general paths give (issue 8: per-query latency)."""
import numpy as np
import pytest

import retrievers.index.shared as index_mod
from evalkit.data.readers.beir import load_beir
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex


@pytest.fixture()
def idx(tiny, cache):
    ds = load_beir(tiny)
    return ds, SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)


def _same(a, b):
    assert len(a) == len(b)
    for (d1, s1), (d2, s2) in zip(a, b):
        assert d1.dtype == d2.dtype and list(d1) == list(d2)
        assert np.array_equal(s1, s2)


@pytest.mark.parametrize("depth", [1, 3, 50])
@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_group_filter_by_record_ids_equals_metadata_filter(idx, monkeypatch, depth):
    ds, index = idx
    assert len(index.group_names) > 1
    qemb = index.embed_queries([q.text for q in ds.queries])
    groups = [q.group for q in ds.queries]
    assert "ids" in index.group_filter(groups[0])
    by_ids = index.vector_search(qemb, groups, depth)
    monkeypatch.setattr(index_mod, "ID_FILTER_MAX", 0)  # every group above the limit: metadata filter
    assert "where" in index.group_filter(groups[0])
    by_where = index.vector_search(qemb, groups, depth)
    _same(by_ids, by_where)
    # one query at a time (latency mode) = the batch (quality mode)
    _same([index.vector_search(qemb[i:i + 1], [g], depth)[0] for i, g in enumerate(groups)], by_ids)


# ---- lexical: bm25s scorer called directly, top-k by partial selection -------------------------------------------

def _reference_top(lex, text, depth, match):
    """LexicalIndex.top as written before the fast path: bm25s' own get_scores, full lexsort."""
    toks = lex.query_tokens(text)
    known = [t for t in toks if t in lex.vocab]
    s = np.full(lex.n, np.nan)
    if toks and known and not (match == "all" and len(set(known)) < len(set(toks))):
        s = np.asarray(lex.bm25.get_scores([lex.vocab[t] for t in known]), dtype=np.float64)
        present = s > 0
        if match == "all":
            present = np.ones(lex.n, dtype=bool)
            for t in set(known):
                present &= np.asarray(lex.bm25.get_scores([lex.vocab[t]])) > 0
        s = np.where(present, s, np.nan)
    idx = np.flatnonzero(~np.isnan(s))
    order = np.lexsort((idx, -s[idx]))[:depth]
    return idx[order], s[idx[order]]


def _corpus(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(40)] + ["postgres", "backup", "router", "vlan"]
    return [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) for _ in range(n)]


@pytest.mark.parametrize("tokenizer", ["stem_en", "unicode61"])
def test_lexical_fast_scores_and_top_equal_bm25s(tokenizer):
    from retrievers.index.lexical import LexicalIndex
    texts = _corpus(300, 1)  # few distinct words and short texts: many exactly tied scores
    lex = LexicalIndex(texts, tokenizer)
    queries = _corpus(60, 2) + ["w1 w1 w2", "postgres zebra", "", "w3"]
    for text in queries:
        ids = [lex.vocab[t] for t in lex.query_tokens(text) if t in lex.vocab]
        if ids:
            a, b = lex.token_scores(ids), lex.bm25.get_scores(ids)
            assert a.dtype == b.dtype and np.array_equal(a, b)  # bit for bit, same float32 additions
        for depth in (1, 2, 5, 20, 1000):
            for match in ("any", "all"):
                got, want = lex.top(text, depth, match), _reference_top(lex, text, depth, match)
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# ---- several vector arms in one backend call; candidate table assembly ------------------------------------------

@pytest.mark.slow  # > 4 s: left out of make test-unit, run by make test
def test_vector_arms_together_equal_one_by_one(idx):
    from retrievers.candidates.arms import ArmSpec
    from retrievers.candidates.search import run_arm, run_vector_arms
    ds, index = idx
    qemb = index.embed_queries([q.text for q in ds.queries])
    specs = [ArmSpec("a", "vector", depth=2), ArmSpec("b", "vector", depth=5), ArmSpec("c", "vector", depth=2)]
    together = run_vector_arms(index, specs, ds.queries, qemb)
    for spec, got in zip(specs, together):
        alone = run_arm(index, spec, ds.queries, qemb)
        assert len(got) == len(alone)
        for g, a in zip(got, alone):
            _same(g, a)


def _reference_assemble(queries, merged, results):
    """The candidate table as assemble() built it before vectorising: a dict per query in first-seen order."""
    cols = [dict() for _ in queries]
    for key in merged:
        for qi, per_var in enumerate(results[key]):
            for docs, _ in per_var:
                for d in docs:
                    cols[qi].setdefault(int(d), len(cols[qi]))
    return cols


def test_assemble_matches_first_seen_reference(idx):
    from retrievers.candidates.arms import ArmSpec
    from retrievers.candidates.search import assemble
    ds, index = idx
    rng = np.random.default_rng(3)
    merged = {"v": ArmSpec("v", "vector"), "x": ArmSpec("x", "lexical", query="raw", max_variants=3)}
    results = {}
    for key, nvar in (("v", 1), ("x", 3)):
        results[key] = [[(rng.choice(12, size=int(rng.integers(0, 8)), replace=False).astype(np.int64),
                          rng.random(8)) for _ in range(int(rng.integers(0, nvar + 1)))] for _ in ds.queries]
        for per_var in results[key]:  # scores as long as the hits
            for i, (d, s) in enumerate(per_var):
                per_var[i] = (d, s[:len(d)])
    cs = assemble(index, ds.queries, merged, results, None)
    ref = _reference_assemble(ds.queries, merged, results)
    for qi, cols in enumerate(ref):
        assert list(cs.doc[qi][cs.doc[qi] >= 0]) == list(cols)
        assert (cs.doc[qi][len(cols):] == -1).all()
    for key in merged:
        names = [n for n in cs.arms if n == key or n.startswith(key + "#")]
        for vi, name in enumerate(names):
            h = cs.arms[name]
            for qi, per_var in enumerate(results[key]):
                want_s, want_r = np.full(cs.C, np.nan), np.zeros(cs.C, dtype=np.int32)
                if vi < len(per_var):
                    d, s = per_var[vi]
                    p = [ref[qi][int(x)] for x in d]
                    want_s[p], want_r[p] = s, np.arange(1, len(d) + 1)
                assert np.array_equal(h.score[qi], want_s, equal_nan=True) and np.array_equal(h.rank[qi], want_r)


# ---- budget packer: snippet parts memoised per corpus -------------------------------------------------------------

def _one_query(cs, q):
    """Query ``q`` of ``cs`` as its own candidate set over the same corpus (what latency mode builds per query)."""
    from retrievers.candidates.table import ArmHits, CandidateSet
    arms = {n: ArmHits(h.score[q:q + 1], h.rank[q:q + 1]) for n, h in cs.arms.items()}
    return CandidateSet(cs.corpus, cs.queries[q:q + 1], cs.doc[q:q + 1], arms, qemb=None)


@pytest.mark.parametrize("fmt", ["plain", "openclaw", "hookclaw_xml", "phase3"])
def test_budget_parts_shared_per_corpus_equal_fresh(fmt):
    import random

    from retrievers.tokens import encoding
    from tests.helpers import pack, random_budget_candidates
    enc = encoding()
    for seed in range(30):
        rng = random.Random(seed)
        cs = random_budget_candidates(rng)
        params = dict(format=fmt, snippet_chars=rng.choice([None, 5, 37, 700]), max_chunks=rng.choice([None, 3]),
                      max_tokens=rng.choice([None, 40, 200]), tier_priority=rng.choice([[], ["topic", "daily"]]))
        batch = pack(cs, **params)  # fresh corpus: empty parts store
        for q in range(cs.Q):  # one candidate set per query, the corpus store shared and already warm
            one = pack(_one_query(cs, q), **params)
            assert one.info["blocks"][0] == batch.info["blocks"][q]
            inj, width = batch.info["injected"][q], one.info["injected"].shape[1]  # batch rows padded wider
            assert one.info["injected"][0].tolist() == inj[:width].tolist() and not inj[width:].any()
            for k, v in batch.info["budget"].items():
                assert one.info["budget"][k][0] == v[q], k
        store = cs.corpus.cached(("budget.pack.parts", fmt, params["snippet_chars"]), dict)
        for text, body, b_tok, b_chr, _, _ in store.values():
            if text is not None:
                assert b_tok == len(enc.encode_ordinary(body))  # cached token counts = a fresh encode


# ---- query embedding: one text without encode()'s per-call bookkeeping -------------------------------------------

@pytest.mark.slow  # > 5 s (the model's first load in the worker): left out of make test-unit, run by make test
def test_single_text_encoder_equals_model_encode(cache):
    from retrievers.embed.model import single_text_encoder
    model = Embedder(cache_dir=cache).model
    enc = single_text_encoder(model)
    assert enc.__name__ == "fast"  # the plain SentenceTransformer (or the ONNX encoder) takes the fast path
    texts = ["", "x", "which VLAN are the IoT devices on", "naïve café 東京 😀 --> </memory>",
             "SQLITE_BUSY " * 300]  # the last one is truncated at the model's 256 tokens
    for t in texts:
        want = model.encode([t], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        got = enc(t)
        assert got.dtype == np.float32 and got.shape == want.shape and np.array_equal(got, want.astype(np.float32))


def test_batch_text_encoder_equals_model_encode_on_a_few_texts(cache):
    from retrievers.embed.model import batch_text_encoder
    model = Embedder(cache_dir=cache).model
    enc = batch_text_encoder(model)
    assert enc.__name__ == "fast"
    texts = ["which VLAN are the IoT devices on", "which VLANs are the IoT device on", "IoT VLAN"]
    want = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    got = enc(texts)
    assert got.shape == (3, want.shape[1]) and np.allclose(got, want, atol=1e-6)


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_latency_mode_embeds_query_variants_live_and_counts_them_as_embedding(cache):
    """Phase-3's expansion arms embed up to 4 variant texts per query: in latency mode they go to the given encoder
    (the model, no cache), that time is booked as query embedding (not vector search), and the candidates are the
    ones the cached path builds from the same vectors."""
    from evalkit.data.registry import load_dataset
    from evalkit.engine.runner import run_latency
    from retrievers.candidates.search import variants
    from retrievers.index.shared import IndexSettings
    from retrievers.pipeline import load_preset
    from retrievers.candidates.search import build_candidates
    ds = load_dataset("memory-workspace")
    p = load_preset("phase3_policy")
    vec_x = next(a for a in p.arms if a.kind == "vector" and a.query != "raw")
    qs = [q for q in ds.queries if len(variants(vec_x, q)) >= 2][:4]
    assert qs, "some workspace query has Phase-3 expansions"
    sub = ds.subset([q.id for q in qs])
    index = SharedIndex(sub, Embedder(cache_dir=cache), settings=IndexSettings(backend="exact"), cache_dir=cache)
    for q in qs:
        seen: list[list[str]] = []

        def enc(texts):
            seen.append(list(texts))
            return index.embed_queries(texts)
        t: dict = {}
        qemb = index.embed_queries([q.text])
        live = build_candidates(index, [q], list(p.arms), use_cache=False, timings=t, qemb=qemb, encode=enc)
        want = variants(vec_x, q)
        assert seen == [[v] for v in want]  # one expansion at a time, as sequential passes embed them
        assert len(t["embed_variants"]) == len(want) and len(t["arm:vector"]) == 1 and "embed_query" not in t
        assert len(t["search_variants"]) == len(want)  # each expansion searched alone, as its own pass would
        cached = build_candidates(index, [q], list(p.arms), use_cache=False, qemb=qemb)
        assert np.array_equal(live.doc, cached.doc)
    st = run_latency(sub, [p], index, repeats=1, warmup=0).stages["phase3_policy"]
    assert "embed_variants" not in st and "search_variants" not in st
    for tot, w, e in zip(st["total"], st["total_with_embedding"], st["embed_query"]):
        assert abs((w - e) - tot) < 1e-9  # the figure without embedding leaves the variants' embedding out too


def test_variants_used_follows_the_declared_count():
    from evalkit.engine.runner import variants_used
    from retrievers.candidates.table import State
    st = State.empty(1)
    assert variants_used(st, 3) == 3  # no stage recorded a count: every variant was needed
    for used, want in [(-1, 0), (0, 0), (1, 1), (4, 4), (8, 4)]:
        st.info["variants_used"] = np.array([used])
        assert variants_used(st, 4) == want


def test_single_text_encoder_falls_back_to_encode_for_other_models():
    from retrievers.embed.model import single_text_encoder

    class Fake:
        def encode(self, texts, **kw):
            return np.ones((len(texts), 3))
    enc = single_text_encoder(Fake())
    assert enc.__name__ == "slow" and enc("a").dtype == np.float32 and enc("a").shape == (1, 3)


# ---- UTF-16 helpers at C speed ------------------------------------------------------------------------------------

def test_utf16_len_and_truncate_equal_the_character_loops():
    import itertools
    import random

    from retrievers.text import utf16_len, utf16_truncate

    def ref_len(s):
        return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)

    def ref_truncate(s, n):  # the characters whose UTF-16 end offset is within n; a limit <= 0 keeps nothing
        if n <= 0:
            return ""
        if len(s) <= n // 2:
            return s
        ends = itertools.accumulate(2 if ord(ch) > 0xFFFF else 1 for ch in s)
        return s[:sum(1 for e in ends if e <= n)]
    rng = random.Random(5)
    alphabet = ["a", "é", "東", "😀", "👍🏽", "\ud800", "\udfff", "\n", " ", "\U0010ffff", "\uffff"]
    for _ in range(3000):
        s = "".join(rng.choice(alphabet if rng.random() < 0.5 else alphabet[:4]) for _ in range(rng.randint(0, 30)))
        assert utf16_len(s) == ref_len(s)
        for n in (-1, 0, 1, 2, 3, 7, 15, 16, 31, 64):
            assert utf16_truncate(s, n) == ref_truncate(s, n)


def test_unicode61_ascii_shortcut_equals_full_normalisation():
    import random
    import unicodedata

    from retrievers.index.lexical import WORD_PATTERN, tokenize_unicode61
    rng = random.Random(11)
    alphabet = list("abcXYZ_-. 019") + ["é", "Å", "ﬁ", "İ", "東京", "ß", "\u0301", "Ⅻ", "😀"]
    for _ in range(5000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        nfkd = unicodedata.normalize("NFKD", t)
        assert tokenize_unicode61(t) == WORD_PATTERN.findall("".join(
            c for c in nfkd if not unicodedata.combining(c)).lower())
