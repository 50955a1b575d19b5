"""As-of visibility (issue 16): each query searches only the notes that existed at its own ``as_of``.

A tiny store where a note written *after* the question would otherwise rank first, through the vector arm (Chroma
and exact), the lexical arm and a recency stage, under ``strict`` (never seen) and ``all`` (the official
LongMemEval protocol: seen, and its negative age counted); the memory workspace and its query log end to end; the
LongMemEval protocol switch on a LongMemEval-shaped fixture; the candidate-cache key. Scoped notes (metadata
``visible_to``): searched by their queries only, under either protocol.
"""
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from evalkit.cli import main
from evalkit.data.readers.beir import load_beir
from evalkit.data.readers.longmemeval import load_longmemeval
from retrievers.types import DataError, Dataset, Document, Query, parse_time
from evalkit.engine.evaluate import age_metrics
from evalkit.engine.runner import arm_map, run_quality, shared_candidates
from retrievers.candidates.files import candidates_from_json
from retrievers.embed.model import Embedder
from retrievers.index.shared import IndexSettings, SharedIndex
from retrievers.pipeline import build_pipeline, load_preset
from retrievers.candidates.search import cache_path
from retrievers.candidates.table import view
from retrievers.stages import Context
from tests.helpers import FIXTURES
from tests.helpers import ROOT

WORKSPACE = ROOT / "datasets" / "memory-workspace"
LOADERS = FIXTURES / "loaders"
AS_OF = "2026-03-10T12:00:00Z"
QUERY = "Zephyr budget review"
# id, text, created (None = undated, e.g. MEMORY.md)
NOTES = [
    ("future-1", "Zephyr budget review: the quarterly Zephyr budget review approved the launch.", "2026-03-20"),
    ("future-2", "Zephyr budget review follow-up, budget approved for Zephyr.", "2026-03-25"),
    ("past-1", "Kickoff notes for the Zephyr project: scope and owners.", "2026-03-01"),
    ("past-2", "The household budget spreadsheet lives in the shared drive.", "2026-02-11"),
    ("past-3", "Dinner plans: lasagna on Friday, tacos on Saturday.", "2026-01-05"),
    ("evergreen", "MEMORY.md: prefers dark mode; reviews happen on Mondays.", None),
]
FUTURE = {"future-1", "future-2"}


def _write_store(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for did, text, day in NOTES:
            meta = {"group": "ws", "path": f"memory/{day}.md" if day else "MEMORY.md", "importance": 0.7}
            if day:
                meta["timestamp"] = f"{day}T00:00:00Z"
            fh.write(json.dumps({"_id": did, "text": text, "metadata": meta}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        fh.write(json.dumps({"_id": "q1", "text": QUERY, "metadata": {"group": "ws", "as_of": AS_OF}}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tpast-1\t1\n")
    return root


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return load_beir(_write_store(tmp_path_factory.mktemp("asof")))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def _index(ds, cache, backend="exact", visibility="auto"):
    return SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache,
                       settings=IndexSettings(backend=backend, as_of_visibility=visibility))


def _ids(ds, docs):
    return [ds.documents[d].id for d in docs]


def test_dataset_declares_strict_and_created_defaults_to_timestamp(store):
    vis = store.as_of_visibility()
    assert (vis.protocol, vis.source) == ("strict", "dataset default")
    assert store.as_of_visibility("all").protocol == "all"
    assert store.as_of_visibility("all").source == "--as-of-visibility"
    with pytest.raises(DataError, match="as-of visibility"):
        store.as_of_visibility("sometimes")
    by = {d.id: d for d in store.documents}
    assert by["future-1"].created == parse_time("2026-03-20T00:00:00Z") and by["evergreen"].created is None


@pytest.mark.parametrize("backend", ["exact", "chroma"])
@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_vector_arm_never_returns_a_later_note_under_strict(store, cache, backend):
    idx = _index(store, cache, backend)
    qemb = idx.embed_queries([QUERY])
    t = parse_time(AS_OF)
    (all_docs, _), = idx.vector_search(qemb, ["ws"], 6)
    assert _ids(store, all_docs)[0] in FUTURE  # without the rule the later note ranks first
    for depth in (1, 2, 4):
        (docs, scores), = idx.vector_search(qemb, ["ws"], depth, as_of=[t])
        got = _ids(store, docs)
        assert not FUTURE & set(got)
        # depth stays exact: the `depth` best *visible* notes, not the best `depth` filtered afterwards
        visible = [d for d in all_docs if store.documents[d].id not in FUTURE]
        assert got == _ids(store, visible[:depth])
        np.testing.assert_allclose(scores, [s for d, s in zip(*idx.vector_search(qemb, ["ws"], 6)[0])
                                            if store.documents[d].id not in FUTURE][:depth], atol=1e-5)


@pytest.mark.parametrize("backend", ["exact", "chroma"])
def test_a_query_before_every_note_searches_an_empty_store(cache, backend):
    # LongMemEval-S has such a question (all 47 sessions dated after it) under --as-of-visibility strict
    docs = [Document(id=did, text=text, group="g", created=parse_time(f"{day}T00:00:00Z"))
            for did, text, day in NOTES if day]
    ds = Dataset("early", docs, [Query("q", QUERY, parse_time("2025-01-01T00:00:00Z"), "g")], {})
    idx = _index(ds, cache, backend)
    (got, scores), = idx.vector_search(idx.embed_queries([QUERY]), ["g"], 5, as_of=[ds.queries[0].as_of])
    assert len(got) == 0 and len(scores) == 0
    assert len(idx.lexical_search(QUERY, "g", "stem_en", 5, as_of=ds.queries[0].as_of)[0]) == 0
    assert idx.visible.summary(ds.queries, ds.as_of_visibility())["visible_documents"]["max"] == 0


def test_lexical_arm_never_returns_a_later_note_under_strict(store, cache):
    idx = _index(store, cache)
    t = parse_time(AS_OF)
    docs, _ = idx.lexical_search(QUERY, "ws", "stem_en", 2)
    assert set(_ids(store, docs)) == FUTURE
    docs, _ = idx.lexical_search(QUERY, "ws", "stem_en", 2, as_of=t)
    assert _ids(store, docs) == ["past-1", "past-2"]  # the 2 best visible matches, not 0 left after a filter
    docs, _ = idx.lexical_search(QUERY, "ws", "stem_en", 2, match="all", as_of=t)
    assert _ids(store, docs) == []


@pytest.mark.parametrize("backend", ["exact", "chroma"])
def test_recency_stage_pipeline_sees_the_later_note_only_under_all(store, cache, backend):
    presets = [load_preset(n) for n in ("lancedb_pro_6a50220", "bm25", "dense", "hybrid-rrf")]
    strict = run_quality(store, presets, _index(store, cache, backend))
    for name, run in strict.items():
        assert not FUTURE & {d for d, _ in run.results["q1"].ranked}, name
    assert age_metrics(strict["lancedb_pro_6a50220"])["negative_age_candidates"] == 0.0
    opened = run_quality(store, presets, _index(store, cache, backend, visibility="all"))
    lance = opened["lancedb_pro_6a50220"]
    assert lance.results["q1"].ranked[0][0] in FUTURE  # boosted by its negative age (lancedb-pro as shipped)
    m = age_metrics(lance)
    assert m["negative_age_candidates"] >= 1 and m["negative_age_queries"] == 1.0 and 0 < m["negative_age_share"] <= 1


def _one_query(timestamp: str | None, stages: list[dict], ctx=None):
    cs = candidates_from_json({
        "query": "zephyr", "as_of": "2026-03-10T00:00:00Z",
        "documents": [{"id": "later", "text": "zephyr later", "timestamp": timestamp},
                      {"id": "earlier", "text": "zephyr earlier", "timestamp": "2026-03-09T00:00:00Z"}],
        "arms": {"vec": [{"id": "earlier", "score": 0.9}, {"id": "later", "score": 0.8}]}})
    p = build_pipeline({"name": "t", "arms": [{"name": "vec", "kind": "vector"}], "stages": [
        {"type": "fuse.single", "arm": "vec"}] + stages})
    st = p.run(cs, ctx)
    return [cs.corpus.ids[cs.doc[0, c]] for c in st.col[0] if c >= 0], st


@pytest.mark.parametrize("stage,first,factor", [
    ({"type": "score.recency_boost"}, "later", None),  # PIPELINES §B.4 step 6: a future date boosts > weight
    ({"type": "decay.half_life", "timestamps": "timestamp"}, "earlier", 1.0),  # §A.6: future → age 0
])
def test_time_stages_treat_a_negative_age_as_shipped_and_count_it(stage, first, factor):
    order, st = _one_query("2026-03-20T00:00:00Z", [stage])
    assert order[0] == first
    assert st.info["negative_age"].tolist() == [1] and st.info["age_scored"].tolist() == [2]
    order, st = _one_query(None, [stage])
    assert st.info["negative_age"].tolist() == [0] and st.info["age_scored"].tolist() == [1]
    # a sweep reads no age counts: same order, nothing counted
    order, st = _one_query("2026-03-20T00:00:00Z", [stage], Context(options={"count_ages": False}))
    assert order[0] == first and "negative_age" not in st.info


def test_cache_key_names_the_visible_set(store, cache):
    idx = _index(store, cache)
    spec = load_preset("bm25").arms[0]
    strict = cache_path(idx, spec, store.queries, "strict")
    assert strict != cache_path(idx, spec, store.queries, "all")
    # a query whose as_of is after every note sees its whole group: the key of a search without the rule
    late = [Query(q.id, q.text, parse_time("2027-01-01T00:00:00Z"), q.group) for q in store.queries]
    assert cache_path(idx, spec, late, "strict") == cache_path(idx, spec, late, "all")


def _created(path: Path) -> dict:
    """Document id → (in the store from, replaced at): ``created`` else ``timestamp``, and ``retired`` (None = never)."""
    out = {}
    for line in open(path / "corpus.jsonl"):
        d = json.loads(line)
        md = d["metadata"]
        out[d["_id"]] = (parse_time(md.get("created") or md.get("timestamp")), parse_time(md.get("retired")))
    return out


def _later_in_top10(run_dir: Path, as_of: dict, created: dict) -> dict[str, int]:
    """Top-10 slots holding a document not in the store at the query's as_of (created later, or a version retired
    by then)."""
    out = {}
    for f in sorted(run_dir.glob("results/*/*.jsonl")):
        n = 0
        for line in open(f):
            r = json.loads(line)
            t = as_of[r["query_id"]]
            n += sum(1 for d, _ in r["ranked"][:10] if d in created and (
                (created[d][0] is not None and created[d][0] > t) or (created[d][1] is not None and created[d][1] <= t)))
        out[f.stem] = n
    return out


SIX = "bm25,dense,hybrid-rrf,lancedb_pro_6a50220,phase3_policy,openclaw_core_2026_2_26"


@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_workspace_run_and_querylog_replay_never_rank_a_later_note(tmp_path):
    created = _created(WORKSPACE)
    assert main(["run", "--dataset", "memory-workspace", "--retrievers", SIX, "--backend", "exact",
                 "--out", str(tmp_path / "run")]) == 0
    as_of = {json.loads(line)["_id"]: parse_time(json.loads(line)["metadata"]["as_of"])
             for line in open(WORKSPACE / "queries.jsonl")}
    later = _later_in_top10(tmp_path / "run", as_of, created)
    assert later == {n: 0 for n in SIX.split(",")}
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    seen = man["datasets"]["memory-workspace"]["as_of_visibility"]
    assert (seen["protocol"], seen["source"]) == ("strict", "dataset default")
    v = seen["visible_documents"]
    # no undated chunk since issue 41 (evergreen files as they stood, junk from its mtime); 181 = the folder at the end
    assert 8 == v["min"] < v["median"] < v["max"] == 181 and seen["undated_documents"]["max"] == 0
    n_test = sum(1 for line in open(WORKSPACE / "queries.jsonl") if json.loads(line)["metadata"]["split"] == "test")
    assert seen["created_after_as_of"]["mean"] > 0 and seen["queries"] == n_test
    assert "as-of visibility strict" in (tmp_path / "run" / "report.md").read_text()

    log = WORKSPACE / "querylog.jsonl"
    assert main(["replay", "--log", str(log), "--dataset", "memory-workspace", "--retrievers", SIX,
                 "--backend", "exact", "--out", str(tmp_path / "replay")]) == 0
    ts = {f"log:{i}": parse_time(json.loads(line)["ts"]) for i, line in enumerate(open(log), 1) if line.strip()}
    assert _later_in_top10(tmp_path / "replay", ts, created) == {n: 0 for n in SIX.split(",")}
    man = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    seen = next(iter(man["datasets"].values()))["as_of_visibility"]
    assert seen["protocol"] == "strict" and seen["queries"] == 1326 and seen["visible_documents"]["max"] == 173


def _lme_data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data" / "longmemeval"
    d.mkdir(parents=True)
    with open(LOADERS / "lme_tiny.json", "rb") as src, gzip.open(d / "longmemeval_s_498.json.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return tmp_path / "data"


@pytest.mark.parametrize("backend", ["exact", "chroma"])
def test_longmemeval_keeps_its_official_protocol_unless_strict_is_asked(tmp_path, monkeypatch, backend):
    ds = load_longmemeval(LOADERS / "lme_tiny.json", level="session", variant="s")
    assert ds.as_of_visibility().protocol == "all"
    after = {d.id for d in ds.documents if d.metadata["after_question"]}
    assert after and all(d.created == d.timestamp for d in ds.documents)
    monkeypatch.setenv("EVALKIT_DATA", str(_lme_data_dir(tmp_path)))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    base = ["run", "--dataset", "longmemeval-s", "--retrievers", "bm25,dense", "--backend", backend]
    seen_after = {}
    for mode, extra in (("all", []), ("strict", ["--as-of-visibility", "strict"])):
        assert main(base + extra + ["--out", str(tmp_path / mode)]) == 0
        man = json.loads((tmp_path / mode / "manifest.json").read_text())
        seen = man["datasets"]["longmemeval-s"]["as_of_visibility"]
        assert seen["protocol"] == mode
        assert seen["source"] == ("dataset default" if mode == "all" else "--as-of-visibility")
        assert seen["created_after_as_of"]["max"] >= 1
        ranked = set()
        for f in (tmp_path / mode).glob("results/*/*.jsonl"):
            for line in open(f):
                ranked |= {d for d, _ in json.loads(line)["ranked"]}
        seen_after[mode] = ranked & after
    assert seen_after["all"] and not seen_after["strict"]


def test_bad_protocol_is_one_line(tmp_path, capsys, store, cache):
    root = _write_store(tmp_path / "s")
    with pytest.raises(SystemExit) as exc:
        main(["run", "--dataset", str(root), "--retrievers", "bm25", "--as-of-visibility", "never"])
    assert exc.value.code == 2 and "invalid choice: 'never'" in capsys.readouterr().err
    with pytest.raises(DataError, match="unknown as-of visibility 'never'"):
        _index(store, cache, visibility="never")


def test_fixture_later_notes_are_exactly_those_after_as_of():
    t = parse_time(AS_OF)
    assert all((parse_time(f"{day}T00:00:00Z") > t) == (did in FUTURE) for did, _, day in NOTES if day)


# ---- scoped notes: a note whose metadata ``visible_to`` lists query ids is searched by those queries only — through
# both vector backends and the lexical arm, under both as-of protocols, in the candidate cache key and in the
# neighbour stage — and a group without scoped notes keeps its plain keys (its cache entries)

SCOPED_AS_OF = parse_time("2026-03-10T12:00:00Z")
SCOPED_TEXT = "Zephyr budget review"
SCOPED_DOCS = [("d1", "Kickoff notes for the Zephyr project: scope and owners.", "2026-03-01", None),
        ("d2", "The household budget spreadsheet lives in the shared drive.", "2026-02-11", None),
        ("d3", "Dinner plans: lasagna on Friday, tacos on Saturday.", "2026-01-05", None),
        # a planted-style note scoped to q1: it would rank first for both queries if it were visible to both
        ("s1", "Zephyr budget review: Zephyr budget review approved, review the Zephyr budget.", "2026-03-05", ["q1"]),
        # a note for the other group, scoped: never seen from group "ws"
        ("s2", "Zephyr budget review in the other store.", "2026-03-05", ["q3"])]


def _scoped_ds():
    docs = [Document(i, t, path=f"memory/{day}.md", group="ws" if i != "s2" else "other",
                     timestamp=parse_time(f"{day}T00:00:00Z"), created=parse_time(f"{day}T00:00:00Z"),
                     metadata={"visible_to": who} if who else {}) for i, t, day, who in SCOPED_DOCS]
    qs = [Query("q1", SCOPED_TEXT, SCOPED_AS_OF, "ws"), Query("q2", SCOPED_TEXT, SCOPED_AS_OF, "ws"), Query("q3", SCOPED_TEXT, SCOPED_AS_OF, "other")]
    return Dataset("scoped", docs, qs, {"q1": {"d1": 1}, "q2": {"d1": 1}, "q3": {"s2": 1}})


@pytest.mark.parametrize("visibility", ["strict", "all"])
@pytest.mark.parametrize("backend", ["exact", "chroma"])
def test_a_scoped_note_is_searched_by_its_query_only(cache, backend, visibility):
    ds = _scoped_ds()
    idx = _index(ds, cache, backend, visibility)
    qemb = idx.embed_queries([SCOPED_TEXT, SCOPED_TEXT])
    t = [SCOPED_AS_OF, SCOPED_AS_OF] if visibility == "strict" else None
    (a, _), (b, _) = idx.vector_search(qemb, ["ws", "ws"], 4, as_of=t, query_ids=["q1", "q2"])
    ids = lambda docs: [ds.documents[d].id for d in docs]  # noqa: E731
    assert ids(a)[0] == "s1" and "s1" not in ids(b)
    assert len(ids(b)) == 3 and "s2" not in ids(a) + ids(b)  # depth stays exact: the 3 visible notes
    la, _ = idx.lexical_search(SCOPED_TEXT, "ws", "stem_en", 4, as_of=t and SCOPED_AS_OF, query_id="q1")
    lb, _ = idx.lexical_search(SCOPED_TEXT, "ws", "stem_en", 4, as_of=t and SCOPED_AS_OF, query_id="q2")
    assert ids(la)[0] == "s1" and "s1" not in ids(lb)
    # a search without a query id (no one's) sees no scoped note
    (c, _), = idx.vector_search(qemb[:1], ["ws"], 4, as_of=t[:1] if t else None)
    assert "s1" not in ids(c)


def test_presets_candidates_and_the_cache_key_follow_the_scope(cache):
    ds = _scoped_ds()
    idx = _index(ds, cache)
    runs = run_quality(ds, [load_preset("bm25"), load_preset("dense")], idx)
    for run in runs.values():
        assert run.results["q1"].ranked[0][0] == "s1"
        assert "s1" not in {d for d, _ in run.results["q2"].ranked}
    keys = idx.visible.keys(ds.queries, "strict")
    assert keys[0] != keys[1] and keys[1][1] is None  # q2's key hides every scoped note of its group
    spec = load_preset("bm25").arms[0]
    assert cache_path(idx, spec, ds.queries[:1]) != cache_path(idx, spec, ds.queries[1:2])
    # a group without scoped notes keeps the plain integer / None key
    plain = Dataset("plain", [d for d in ds.documents if d.id in ("d1", "d2", "d3")], ds.queries[:2], {})
    assert all(k is None or isinstance(k, int) for k in _index(plain, cache).visible.keys(plain.queries, "strict"))
    total, _, after = idx.visible.counts("ws", SCOPED_AS_OF, "q2")
    assert (total, after) == (3, 0) and idx.visible.counts("ws", SCOPED_AS_OF, "q1")[0] == 4


def test_a_scoped_note_is_nobody_elses_neighbour(cache):
    """score.neighbours reads documents beside the candidates: a scoped note beside a candidate (same path) counts
    for its own query only."""
    docs = [Document("a", "Zephyr budget review notes part one", path="memory/x.md", group="ws", created=1.0,
                     metadata={"start_line": 1, "end_line": 2}),
            Document("b", "Zephyr budget review approved, budget review", path="memory/x.md", group="ws", created=1.0,
                     metadata={"start_line": 3, "end_line": 4, "visible_to": ["q1"]})]
    ds = Dataset("nb", docs, [Query("q1", SCOPED_TEXT, 5.0, "ws"), Query("q2", SCOPED_TEXT, 5.0, "ws")], {})
    idx = _index(ds, cache)
    pipe = build_pipeline({"name": "nb", "arms": [{"name": "vec", "kind": "vector", "depth": 5}],
                           "stages": [{"type": "fuse.single", "arm": "vec"},
                                      {"type": "score.neighbours", "signal": "dense", "weight": 1.0}]})
    cs = view(shared_candidates(idx, ds.queries, [pipe]), arm_map(pipe))
    pipe.run(cs)
    a_col = [next(c for c in range(cs.C) if cs.doc[q, c] == 0) for q in range(2)]
    vis = pipe.stages[1]._visible(cs)
    assert (vis[0, a_col[0]] == 1).any() and not (vis[1, a_col[1]] == 1).any()


# A note the memory rewrote in place (issue 41): MEMORY.md as it stood on 1 March, and as rewritten on 15 March.
REVISED = [
    ("mem@03-01", "MEMORY.md: the Zephyr budget owner is Dana.", "2026-03-01", "2026-03-15"),
    ("mem", "MEMORY.md: the Zephyr budget owner is Dana; the Zephyr budget review moved to Fridays.", "2026-03-15",
     None),
    ("daily", "Dinner plans: lasagna on Friday.", "2026-02-01", None),
]
REVISED_AT = {"before": "2026-02-20T09:00:00Z", "first": "2026-03-10T09:00:00Z", "second": "2026-03-20T09:00:00Z"}


def _revised_ds(root: Path) -> Dataset:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for did, text, created, retired in REVISED:
            meta = {"group": "ws", "path": "MEMORY.md", "created": f"{created}T00:00:00Z"}
            if retired:
                meta["retired"] = f"{retired}T00:00:00Z"
            fh.write(json.dumps({"_id": did, "text": text, "metadata": meta}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for qid, at in REVISED_AT.items():
            fh.write(json.dumps({"_id": qid, "text": QUERY, "metadata": {"group": "ws", "as_of": at}}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nfirst\tmem@03-01\t1\nsecond\tmem\t1\n")
    return load_beir(root)


@pytest.mark.parametrize("backend", ["exact", "chroma"])
@pytest.mark.slow  # > 5 s: left out of make test-unit, run by make test
def test_a_revised_note_is_searched_as_it_stood(tmp_path, cache, backend):
    """Each version from its creation until the next replaced it, under strict (a query after every event still sees
    less than the whole group); every version under all (no time rule) — in both arms, in the visible counts and in
    the cache key; the BEIR loader reads ``retired`` and refuses one that is not after the creation."""
    ds = _revised_ds(tmp_path / "rev")
    by = {d.id: d for d in ds.documents}
    assert by["mem@03-01"].retired == parse_time("2026-03-15T00:00:00Z") and by["mem"].retired is None
    idx = _index(ds, cache, backend)
    ids = lambda docs: sorted(ds.documents[d].id for d in docs)  # noqa: E731
    qemb = idx.embed_queries([QUERY] * 3)
    want = {"before": ["daily"], "first": ["daily", "mem@03-01"], "second": ["daily", "mem"]}
    got = idx.vector_search(qemb, ["ws"] * 3, 5, as_of=[q.as_of for q in ds.queries], query_ids=list(REVISED_AT))
    assert {q: ids(d) for q, (d, _) in zip(REVISED_AT, got)} == want
    for q in ds.queries:
        assert ids(idx.lexical_search("MEMORY.md budget Dinner", "ws", "stem_en", 5, as_of=q.as_of)[0]) == want[q.id]
        assert idx.visible.visible_count("ws", q.as_of, q.id, "strict") == len(want[q.id])
        assert idx.visible.visible_count("ws", q.as_of, q.id, "all") == 3
    (d, _), = idx.vector_search(qemb[:1], ["ws"], 5)  # all: no time rule, every version
    assert ids(d) == ["daily", "mem", "mem@03-01"]
    assert ids(idx.lexical_search("MEMORY.md budget Dinner", "ws", "stem_en", 5)[0]) == ["daily", "mem", "mem@03-01"]
    late = Query("late", QUERY, parse_time("2027-01-01T00:00:00Z"), "ws")
    assert ids(idx.lexical_search("MEMORY.md budget Dinner", "ws", "stem_en", 5, as_of=late.as_of)[0]) == \
        ["daily", "mem"]
    keys = idx.visible.keys(ds.queries + [late], "strict")
    # events 02-01, 03-01, 03-15 (created), 03-15 (retired): the count of those at or before each as_of
    assert keys == [1, 2, 4, 4] and set(idx.visible.keys(ds.queries, "all")) == {None}
    spec = load_preset("bm25").arms[0]
    assert cache_path(idx, spec, ds.queries, "strict") != cache_path(idx, spec, ds.queries, "all")
    runs = run_quality(ds, [load_preset("bm25")], idx)
    assert {q: [d for d, _ in r.ranked] for q, r in runs["bm25"].results.items()}["first"][0] == "mem@03-01"
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "rev", bad)
    rows = (bad / "corpus.jsonl").read_text().replace('"retired": "2026-03-15T00:00:00Z"',
                                                      '"retired": "2026-03-01T00:00:00Z"')
    (bad / "corpus.jsonl").write_text(rows)
    with pytest.raises(DataError, match="retired must be after"):
        load_beir(bad)


def test_a_live_system_receives_each_revised_note_once_in_its_last_version(tmp_path):
    from evalkit.engine.live.driver import creation_order

    ds = _revised_ds(tmp_path / "rev")
    assert [d.id for d in creation_order(ds.documents)] == ["daily", "mem"]
    assert [d.id for d in creation_order(ds.documents, strict=False)] == ["daily", "mem@03-01", "mem"]  # all


def test_a_revised_notes_versions_are_not_each_others_neighbours(tmp_path):
    """score.neighbours reads the chunks beside a candidate in its file: a version's chunks neighbour their own
    version only (every document of REVISED has the path MEMORY.md; 'daily' is not revised but shares it too)."""
    from retrievers.index.corpus import Corpus
    from retrievers.stages.score.blend import neighbour_table

    ds = _revised_ds(tmp_path / "rev")
    nb = neighbour_table(Corpus(ds), 1)
    assert (nb == -1).all()  # three versions (created 03-01, 03-15, 02-01): three one-chunk files
