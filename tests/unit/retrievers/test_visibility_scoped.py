"""Scoped notes (retrievers/visibility.py): a note whose metadata ``visible_to`` lists query ids is searched by those
queries only — through both vector backends and the lexical arm, under both as-of protocols, in the candidate cache
key and in the neighbour stage — and a group without scoped notes keeps its plain keys (its cache entries)."""
import pytest

from evalkit.engine.runner import arm_map, run_quality, shared_candidates
from retrievers.embed import Embedder
from retrievers.index import IndexSettings, SharedIndex
from retrievers.pipeline import build_pipeline, load_preset
from retrievers.candidates import view
from retrievers.search import cache_path
from retrievers.types import Dataset, Document, Query, parse_time

AS_OF = parse_time("2026-03-10T12:00:00Z")
TEXT = "Zephyr budget review"
DOCS = [("d1", "Kickoff notes for the Zephyr project: scope and owners.", "2026-03-01", None),
        ("d2", "The household budget spreadsheet lives in the shared drive.", "2026-02-11", None),
        ("d3", "Dinner plans: lasagna on Friday, tacos on Saturday.", "2026-01-05", None),
        # a planted-style note scoped to q1: it would rank first for both queries if it were visible to both
        ("s1", "Zephyr budget review: Zephyr budget review approved, review the Zephyr budget.", "2026-03-05", ["q1"]),
        # a note for the other group, scoped: never seen from group "ws"
        ("s2", "Zephyr budget review in the other store.", "2026-03-05", ["q3"])]


def _ds():
    docs = [Document(i, t, path=f"memory/{day}.md", group="ws" if i != "s2" else "other",
                     timestamp=parse_time(f"{day}T00:00:00Z"), created=parse_time(f"{day}T00:00:00Z"),
                     metadata={"visible_to": who} if who else {}) for i, t, day, who in DOCS]
    qs = [Query("q1", TEXT, AS_OF, "ws"), Query("q2", TEXT, AS_OF, "ws"), Query("q3", TEXT, AS_OF, "other")]
    return Dataset("scoped", docs, qs, {"q1": {"d1": 1}, "q2": {"d1": 1}, "q3": {"s2": 1}})


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def _index(ds, cache, backend="exact", visibility="auto"):
    return SharedIndex(ds, embedder=Embedder(cache_dir=cache), cache_dir=cache,
                       settings=IndexSettings(backend=backend, as_of_visibility=visibility))


@pytest.mark.parametrize("visibility", ["strict", "all"])
@pytest.mark.parametrize("backend", ["exact", "chroma"])
def test_a_scoped_note_is_searched_by_its_query_only(cache, backend, visibility):
    ds = _ds()
    idx = _index(ds, cache, backend, visibility)
    qemb = idx.embed_queries([TEXT, TEXT])
    t = [AS_OF, AS_OF] if visibility == "strict" else None
    (a, _), (b, _) = idx.vector_search(qemb, ["ws", "ws"], 4, as_of=t, query_ids=["q1", "q2"])
    ids = lambda docs: [ds.documents[d].id for d in docs]  # noqa: E731
    assert ids(a)[0] == "s1" and "s1" not in ids(b)
    assert len(ids(b)) == 3 and "s2" not in ids(a) + ids(b)  # depth stays exact: the 3 visible notes
    la, _ = idx.lexical_search(TEXT, "ws", "stem_en", 4, as_of=t and AS_OF, query_id="q1")
    lb, _ = idx.lexical_search(TEXT, "ws", "stem_en", 4, as_of=t and AS_OF, query_id="q2")
    assert ids(la)[0] == "s1" and "s1" not in ids(lb)
    # a search without a query id (no one's) sees no scoped note
    (c, _), = idx.vector_search(qemb[:1], ["ws"], 4, as_of=t[:1] if t else None)
    assert "s1" not in ids(c)


def test_presets_candidates_and_the_cache_key_follow_the_scope(cache):
    ds = _ds()
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
    total, _, after = idx.visible.counts("ws", AS_OF, "q2")
    assert (total, after) == (3, 0) and idx.visible.counts("ws", AS_OF, "q1")[0] == 4


def test_a_scoped_note_is_nobody_elses_neighbour(cache):
    """score.neighbours reads documents beside the candidates: a scoped note beside a candidate (same path) counts
    for its own query only."""
    docs = [Document("a", "Zephyr budget review notes part one", path="memory/x.md", group="ws", created=1.0,
                     metadata={"start_line": 1, "end_line": 2}),
            Document("b", "Zephyr budget review approved, budget review", path="memory/x.md", group="ws", created=1.0,
                     metadata={"start_line": 3, "end_line": 4, "visible_to": ["q1"]})]
    ds = Dataset("nb", docs, [Query("q1", TEXT, 5.0, "ws"), Query("q2", TEXT, 5.0, "ws")], {})
    idx = _index(ds, cache)
    pipe = build_pipeline({"name": "nb", "arms": [{"name": "vec", "kind": "vector", "depth": 5}],
                           "stages": [{"type": "fuse.single", "arm": "vec"},
                                      {"type": "score.neighbours", "signal": "dense", "weight": 1.0}]})
    cs = view(shared_candidates(idx, ds.queries, [pipe]), arm_map(pipe))
    pipe.run(cs)
    a_col = [next(c for c in range(cs.C) if cs.doc[q, c] == 0) for q in range(2)]
    vis = pipe.stages[1]._visible(cs)
    assert (vis[0, a_col[0]] == 1).any() and not (vis[1, a_col[1]] == 1).any()
