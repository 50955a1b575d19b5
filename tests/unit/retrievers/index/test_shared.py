"""The shared backend: embedded Chroma vs exact search, persistence, determinism, bad input (a real Chroma server:
tests/system/test_chroma_server.py)."""
import json

import numpy as np
import pytest

from evalkit.cli import main
from evalkit.data.readers.beir import load_beir
from retrievers.types import DataError
from retrievers.embed.model import Embedder
from retrievers.index.shared import SharedIndex


def _search(idx, ds, backend):
    qemb = idx.embed_queries([q.text for q in ds.queries])
    return idx.vector_search(qemb, [q.group for q in ds.queries], 5, backend=backend)


def test_chroma_matches_exact_and_respects_groups(tiny, cache):
    ds = load_beir(tiny)
    idx = SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)
    ch = _search(idx, ds, "chroma")
    ex = _search(idx, ds, "exact")
    for (d1, s1), (d2, s2), q in zip(ch, ex, ds.queries):
        assert list(d1) == list(d2)
        np.testing.assert_allclose(s1, s2, atol=1e-5)
        assert {ds.documents[d].group for d in d1} == {q.group}  # a query only sees its own group
    # the relevant document of an easy query is found first
    assert ds.documents[ex[2][0][0]].id == "build-0"


def test_second_build_reuses_embeddings_collection_and_bm25(tiny, cache):
    ds = load_beir(tiny)
    emb = Embedder(cache_dir=cache)
    a = SharedIndex(ds, embedder=emb, cache_dir=cache)
    a.collection()
    a.lexical("g1", "stem_en")
    assert a.stats["embedded_texts"] == 12 and a.stats["chroma_built"] and a.stats["bm25_built"] == 2
    calls = emb.model_calls
    b = SharedIndex(ds, embedder=emb, cache_dir=cache)
    b.collection()
    b.lexical("g1", "stem_en")
    assert b.stats["embedded_texts"] == 0 and emb.model_calls == calls
    assert not b.stats["chroma_built"] and b.stats["bm25_built"] == 0


def test_lexical_and_query_matches_every_token(tiny, cache):
    ds = load_beir(tiny)
    idx = SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)
    docs, _ = idx.lexical_search("postgres backups", "g1", "unicode61", 10, match="all")
    assert [ds.documents[d].id for d in docs] == ["db-2"]
    docs, _ = idx.lexical_search("postgres backups", "g1", "unicode61", 10, match="any")
    assert [ds.documents[d].id for d in docs][:2] == ["db-2", "db-1"]
    docs, _ = idx.lexical_search("postgres zebra", "g1", "unicode61", 10, match="all")
    assert len(docs) == 0


def test_run_twice_identical_metrics_and_no_rework(tiny, cache, tmp_path):
    args = ["run", "--dataset", str(tiny), "--retrievers", "bm25,dense,hybrid-rrf"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    for f in ("metrics.json", "metrics.csv", "per_query.csv", "metrics_by_category.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    work = next(iter(man["datasets"].values()))["index"]["work"]
    assert work["embedded_texts"] == 0 and not work["chroma_built"] and work["bm25_built"] == 0
    rows = json.loads((tmp_path / "a" / "metrics.json").read_text())["rows"]
    nd = {r["retriever"]: r["value"] for r in rows if r["metric"] == "ndcg@10"}
    assert set(nd) == {"bm25", "dense", "hybrid-rrf"} and all(0 < v <= 1 for v in nd.values())
    trec = next((tmp_path / "a" / "runs").glob("*/bm25.trec")).read_text().splitlines()
    assert trec and len(trec[0].split()) == 6


def test_server_down_is_one_clear_line(tiny, cache, tmp_path, capsys):
    rc = main(["run", "--dataset", str(tiny), "--retrievers", "dense", "--backend", "chroma-http",
               "--chroma-url", "http://127.0.0.1:9", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "cannot reach the Chroma server" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["missing_dir", "bad_json", "empty_corpus", "dup_ids", "unknown_retriever",
                                  "unknown_qrels_all"])
def test_bad_input_exits_nonzero_with_one_line_and_writes_nothing(case, tiny, cache, tmp_path, capsys,
                                                                  monkeypatch):
    import shutil
    d = tmp_path / "ds"
    shutil.copytree(tiny, d)
    retr = "bm25"
    dataset = str(d)
    if case == "missing_dir":
        monkeypatch.setenv("EVALKIT_DATA", str(tmp_path / "nowhere"))
        dataset = "locomo"
        monkeypatch.setattr("evalkit.data.registry.REPO_DATASETS", tmp_path / "nothing-here")
    elif case == "bad_json":
        with open(d / "corpus.jsonl", "a") as fh:
            fh.write("{not json\n")
    elif case == "empty_corpus":
        (d / "corpus.jsonl").write_text("")
    elif case == "dup_ids":
        with open(d / "corpus.jsonl", "a") as fh:
            fh.write(json.dumps({"_id": "net-0", "text": "again"}) + "\n")
    elif case == "unknown_retriever":
        retr = "bm25,no_such_preset"
    elif case == "unknown_qrels_all":
        (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nzz\tyy\t1\n")
    out = tmp_path / "out"
    rc = main(["run", "--dataset", dataset, "--retrievers", retr, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1 and err[0].startswith("evalkit: error:"), err
    assert not out.exists()


def test_unknown_qrels_rows_refused_or_dropped_on_request(tiny, tmp_path):
    import shutil
    d = tmp_path / "ds"
    shutil.copytree(tiny, d)
    with open(d / "qrels" / "test.tsv", "a") as fh:
        fh.write("q1\tno-such-doc\t1\n")
    with pytest.raises(DataError, match="unknown document id 'no-such-doc'"):
        load_beir(d)
    ds = load_beir(d, qrels_unknown="drop")
    assert "no-such-doc" not in ds.qrels["q1"] and ds.info["dropped_qrels"] == 1


def test_empty_corpus_cannot_be_indexed(tmp_path):
    from retrievers.types import Dataset
    with pytest.raises(DataError, match="empty corpus"):
        SharedIndex(Dataset("x", [], [], {}))


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_batched_maxp_split_equals_one_text_at_a_time_on_real_corpora():
    """split_pieces_many (the index's batched splitter) gives the same pieces as splitting each text alone, on real
    LongMemEval-S sessions (user side, the longest ones: many windows, long lines) and LoCoMo turns."""
    from evalkit.data.registry import load_dataset
    from retrievers.index.corpus import Corpus
    from retrievers.index.shared import split_pieces, split_pieces_many, user_lines

    emb = Embedder(progress=False)
    tok, window = emb.tokenizer(), emb.max_seq_length - 2
    lme = sorted((user_lines(t) for t in Corpus(load_dataset("longmemeval-s")).texts), key=len)
    texts = lme[:100] + lme[-150:] + Corpus(load_dataset("locomo")).texts[:300]
    got = split_pieces_many(texts, tok, window)
    assert sum(len(p) > 1 for p in got) > 100  # many texts span several windows
    assert got == [split_pieces(t, tok, window) for t in texts]
    # and the unsplit ones are the text itself
    assert all(ps == [t] for t, ps in zip(texts, got) if len(tok(t, add_special_tokens=False)["input_ids"]) <= window)


def test_exact_is_the_default_and_hnsw_states_its_recall_against_exact(tiny, cache):
    from retrievers.candidates.arms import ArmSpec
    from retrievers.candidates.search import build_candidates
    from retrievers.index.shared import IndexSettings
    ds = load_beir(tiny)
    emb = Embedder(cache_dir=cache)
    exact = SharedIndex(ds, embedder=emb, cache_dir=cache)
    assert exact.settings.backend == "exact" and exact.manifest()["search"].startswith("exact")
    spec = ArmSpec(name="vec", kind="vector", depth=5)
    build_candidates(exact, ds.queries, [spec])
    # below store.MIN_UNITS no store of record is written either (its fixed cost would be most of a small run's)
    assert "hnsw_recall_vs_exact" not in exact.manifest() and not (cache / "chroma-collections").exists()
    hnsw = SharedIndex(ds, embedder=emb, cache_dir=cache, settings=IndexSettings(backend="chroma"))
    assert hnsw.settings.backend == "hnsw"  # the older name
    build_candidates(hnsw, ds.queries, [spec])
    check = hnsw.manifest()["hnsw_recall_vs_exact"]
    assert check == {"k": 5, "queries": len(ds.queries), "recall": 1.0}  # a tiny store: HNSW is exact here


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_text_lengths_are_the_word_pieces_and_a_corpus_is_tokenized_once():
    """text_lengths counts each text's word pieces (no special tokens) and remembers them by content: the bench's
    estimate (corpus_tokens) and the MaxP split of the same corpus call the tokenizer once between them."""
    from evalkit.data.registry import load_dataset
    from evalkit.workflows.bench import corpus_tokens
    from retrievers.index.corpus import Corpus
    from retrievers.index.shared import split_pieces_many, text_lengths

    emb = Embedder(progress=False)
    tok = emb.tokenizer()
    calls = []

    class Counting:  # the real tokenizer, each batch call counted
        def __call__(self, texts, **kw):
            calls.append(len(texts) if isinstance(texts, list) else 1)
            return tok(texts, **kw)

        def decode(self, ids):
            return tok.decode(ids)

    counting = Counting()
    ds = load_dataset("memory-workspace")
    texts = Corpus(ds).texts
    got = text_lengths(texts, counting)
    assert got == [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert sum(calls) == len(texts)
    calls.clear()
    assert text_lengths(list(texts), counting) == got and not calls  # the same texts: remembered
    window = emb.max_seq_length - 2
    split_pieces_many(texts, counting, window)
    lines = sum(len(t.split("\n")) for t, n in zip(texts, got) if n > window)
    assert lines and calls[0] == lines  # the texts were not tokenized again: only the lines of the long ones
    assert text_lengths(texts[:-1] + [texts[-1] + " more"], counting)[-1] > got[-1]  # other content: counted again
    # the bench's estimate reads the remembered counts of the model's own tokenizer
    assert corpus_tokens(ds, emb) == sum(text_lengths(texts, tok))


def test_released_bm25_indexes_are_read_back_from_the_cache(tiny, cache):
    """A quality run drops its bm25s indexes once its candidates exist (SharedIndex.release_lexical): a later lexical
    search reads the same indexes back from the cache file, with the same hits and scores, and builds nothing."""
    ds = load_beir(tiny)
    idx = SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)
    before = idx.lexical_search("postgres backups", "g1", "unicode61", 10)
    built = idx.stats["bm25_built"]
    idx.release_lexical()
    assert not idx._lex
    after = idx.lexical_search("postgres backups", "g1", "unicode61", 10)
    assert idx._lex and idx.stats["bm25_built"] == built
    assert before[0].tolist() == after[0].tolist() and before[1].tobytes() == after[1].tobytes()


@pytest.mark.parametrize("keep", [False, True])
def test_a_quality_run_releases_its_bm25s_indexes_unless_asked_to_keep_them(tiny, cache, keep):
    """run_quality drops the index's bm25s indexes once its candidates are built; ``keep_lexical`` (a caller running
    the same index again at once, preset after preset) keeps them in memory — the same results either way."""
    from evalkit.engine.runner import run_quality
    from retrievers.pipeline import load_preset
    from retrievers.stages import Context

    ds = load_beir(tiny)
    idx = SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache)
    bm25 = load_preset("bm25")
    run = run_quality(ds, [bm25], idx, Context(embedder=idx.embedder), keep_lexical=keep)["bm25"]
    assert bool(idx._lex) is keep
    again = run_quality(ds, [bm25], idx, Context(embedder=idx.embedder))["bm25"]
    assert {q: r.ranked for q, r in run.results.items()} == {q: r.ranked for q, r in again.results.items()}
