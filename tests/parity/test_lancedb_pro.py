"""memory-lancedb-pro @6a50220 (PIPELINES.md §3): score conversions, noise filter (§B.7), adaptive-retrieval gate
(§B.8, all 26 vectors), score-stage tables, examples B1 and B3, Appendix D details, presets."""
import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked, resolve_preset
from retrievers.stages import Context
from retrievers.stages.filter import is_noise
from retrievers.stages.gate import lancedb_should_skip, normalize_lancedb_query
from retrievers.stages.helpers.normalize import MAPPINGS, clamp01, inv_l2_to_cosine

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

NOW = 1772150400.0  # 2026-02-27T00:00:00Z
DAY = 86400.0


def _iso(age_days):
    from datetime import datetime, timezone
    return datetime.fromtimestamp(NOW - age_days * DAY, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _text(n):
    return ("abcde " * (n // 6 + 1))[:n]


def _ranked(st, cs):
    return [(d, round(s, 6)) for d, s in ranked(st, cs, 0)]


def _run(stages, obj, ctx=None):
    cs = candidates_from_json(obj)
    st = build_pipeline({"name": "t", "stages": stages}).run(cs, ctx)
    return _ranked(st, cs), st, cs


def _trace(st, cs):
    out = {}
    for label, cols, scores, _, _ in st.trace:
        out[label] = [(cs.corpus.ids[cs.doc[0, c]], round(s, 6)) for c, s in zip(cols[0], scores[0]) if c >= 0]
    return out


def _preset(name, overrides=None):
    cfg = resolve_preset(name)
    stages = []
    for s in cfg["stages"]:
        if s["type"] == "budget.pack":
            continue
        s = dict(s, **(overrides or {}).get(s.get("label"), {}))
        stages.append(s)
    cfg["stages"] = stages
    return build_pipeline(cfg)


# ---- score conversions (§B.2) ---------------------------------------------------------------------------------

def test_bm25_sigmoid_examples():
    m = MAPPINGS["lancedb_sigmoid"]
    got = m(np.array([2.0, 4.0, 10.0, 0.0, -3.0]))
    assert np.round(got, 6).tolist() == [0.598688, 0.689974, 0.880797, 0.5, 0.5]
    # a returned row without a usable _score → 0.5; an absent row stays absent
    assert m.present(np.array([np.nan, np.nan]), np.array([True, False]))[0] == 0.5
    assert np.isnan(m.present(np.array([np.nan]), np.array([False]))[0])


def test_inv_l2_is_one_over_three_minus_two_cos_and_inverts():
    m = MAPPINGS["inv_l2"]
    d = np.array([0.30, 0.45, 0.50])
    cos = 1 - d / 2  # d = 2 - 2cos for unit vectors
    assert np.round(m(cos), 6).tolist() == [0.769231, 0.689655, 0.666667]
    assert m(np.array([1.0, 0.0, -1.0])).tolist() == pytest.approx([1.0, 1 / 3, 0.2])
    s = np.array([0.8, 0.45, 0.28])
    assert m(inv_l2_to_cosine(s)) == pytest.approx(s, abs=1e-12)
    assert m.present(np.array([np.nan]), np.array([True]))[0] == 1.0  # missing _distance counts as 0
    assert MAPPINGS["inv_cos_distance"](np.array([1.0, 0.0])).tolist() == [1.0, 0.5]


def test_other_system_mappings():
    rank = np.array([-0.5, -1, -2, -4, -6, -10.0])
    assert np.round(MAPPINGS["rel_over_rel_plus_2"](-rank), 6).tolist() == [0.2, 0.333333, 0.5, 0.666667, 0.75,
                                                                            0.833333]
    assert MAPPINGS["rel_over_rel_plus_2"](np.array([0.0, -1.0])).tolist() == [0.0, 0.0]
    assert MAPPINGS["openclaw_rank"](np.array([7.9, 1e-6, 0.0, -2.0])).tolist() == [1.0, 1.0, 1.0, 1 / 3]
    assert MAPPINGS["openclaw_rank"](np.array([np.inf, -np.inf])).tolist() == [0.001, 0.001]
    assert MAPPINGS["openclaw_rank"].present(np.array([np.nan]), np.array([True]))[0] == 0.001
    assert np.round(MAPPINGS["rel_over_1_plus_rel"](np.array([4.1, 0.0, -1.0])), 6).tolist() == [0.803922, 1.0, 0.5]
    assert MAPPINGS["rel_over_1_plus_rel_pos"](np.array([3.0, 0.0])).tolist() == [0.75, 0.0]
    assert MAPPINGS["clamp01"](np.array([-0.2, 0.4, 1.3])).tolist() == [0.0, 0.4, 1.0]


def test_clamp01_fallbacks():
    got = clamp01(np.array([np.nan, np.inf, 2.0, -1.0, np.nan]), np.array([0.5, 0.5, 0.5, 0.5, np.nan]))
    assert got.tolist() == [0.5, 0.5, 1.0, 0.0, 0.0]


# ---- fusion ---------------------------------------------------------------------------------------------------

FUSE = {"type": "fuse.vector_bonus", "vector_arm": "vec", "text_arm": "fts"}


def test_vector_bonus_rules_and_order():
    s = [0.8, 0.75, 0.4, 0.95]
    obj = {"query": "q", "documents": [{"id": k, "text": k} for k in ("a", "b", "c", "d", "e")],
           "arms": {"vec": [{"id": k, "score": float(inv_l2_to_cosine(v))} for k, v in zip("abcd", s)],
                    "fts": [{"id": "e", "score": 10.0}, {"id": "a", "score": 4.0}, {"id": "d", "score": 1.0}]}}
    out, _, _ = _run([FUSE], obj)
    # d: 1.15·0.95 → clamped 1; a: 0.92; e BM25-only: sigmoid(10) = 0.880797; b, c vector-only
    assert out == [("d", 1.0), ("a", 0.92), ("e", 0.880797), ("b", 0.75), ("c", 0.4)]
    # the 0.5 floor: a missing _score maps to 0.5 (BM25-only) — max(b, 0.5) never changes a sigmoid score
    obj["arms"]["fts"] = [{"id": "e", "score": None}]
    out, _, _ = _run([FUSE], obj)
    assert ("e", 0.5) in out
    # ties keep the insertion order: vector ids first, then BM25-only ids
    obj2 = {"query": "q", "documents": [{"id": k, "text": k} for k in "xyz"],
            "arms": {"vec": [{"id": "x", "score": float(inv_l2_to_cosine(0.5))}],
                     "fts": [{"id": "z", "score": 0.0}, {"id": "y", "score": -1.0}]}}
    out, _, _ = _run([FUSE], obj2)
    assert out == [("x", 0.5), ("z", 0.5), ("y", 0.5)]


# ---- noise filter (§B.7) ------------------------------------------------------------------------------------

NOISE_VECTORS = [
    ("ok", True), ("I don't have any information about that.", True), ("I'm not sure about the date", True),
    ("Do you remember my email?", True), ("High priority: rotate keys", True), ("History of the billing service", True),
    ("Hello team, deploy at 5pm", True), ("HEARTBEAT_OK", True), ("User prefers dark mode in all editors", False),
    ("new session started", True), ("Remind me: I don't recall the password policy", True),
]


@pytest.mark.parametrize("text,noise", NOISE_VECTORS)
def test_noise_vectors(text, noise):
    assert is_noise(text) is noise


def test_noise_word_boundary_fix_and_js_semantics():
    assert not is_noise("High priority: rotate keys", word_boundary=True)
    assert not is_noise("History of the billing service", word_boundary=True)
    assert is_noise("Hello team, deploy at 5pm", word_boundary=True)
    assert is_noise("hi, there", word_boundary=True)
    # lengths are UTF-16 units: two emoji = 4 units (< 5), three = 6
    assert is_noise("😀😀") and not is_noise("😀😀😀")
    # JS trim removes U+3000/U+FEFF but not U+001C–U+001F
    assert is_noise("\u3000abc\ufeff")
    assert not is_noise("\x1c\x1cabc")
    # ASCII-only case folding and word boundaries (JS regexes without the u flag)
    assert is_noise("DID I TELL you this")
    assert is_noise("édo you remember this")  # é is not a word character for JS \b


def test_noise_stage_keeps_order():
    docs = [{"id": "a", "text": "Remember the deploy runbook"}, {"id": "b", "text": "Hey"},
            {"id": "c", "text": "High priority: rotate keys"}, {"id": "d", "text": "User prefers dark mode"}]
    obj = {"query": "q", "documents": docs, "arms": {"vec": [{"id": k, "score": 0.9 - i / 10}
                                                            for i, k in enumerate("abcd")]}}
    single = {"type": "fuse.single", "arm": "vec"}
    assert [d for d, _ in _run([single, {"type": "filter.noise"}], obj)[0]] == ["a", "d"]
    assert [d for d, _ in _run([single, {"type": "filter.noise", "word_boundary": True}], obj)[0]] == ["a", "c", "d"]


# ---- adaptive retrieval gate (§B.8) -------------------------------------------------------------------------

SKIP_VECTORS = [
    ("hi there", True), ("hello, what's my wifi password?", True), ("/status", True), ("git status please", True),
    ("ok.", True), ("okay thanks a lot", False), ("go ahead", True), ("继续", True), ("👍👍", True), ("#1", True),
    ("HEARTBEAT check", True), ("[System] restart", True), ("do you remember my email", False), ("what's up", True),
    ("what was decided?", False), ("short one", True), ("fix the login bug in auth", False), ("你记得吗", False),
    ("部署失败了", True), ("日本語のテスト", False), ("[cron:abc daily] run backup now", True),
    ('Conversation info (untrusted metadata):\n{"a":1}\n\nwhat did we decide about the DB schema?', False),
    ("test the new endpoint for payments", True), ("my name is Bob", False), ("summarize this", True),
    ("yes please do the migration now", False),
]


def test_there_are_26_skip_vectors():
    assert len(SKIP_VECTORS) == 26


@pytest.mark.parametrize("query,skip", SKIP_VECTORS)
def test_skip_vectors(query, skip):
    assert lancedb_should_skip(query) is skip


def test_skip_gate_details():
    assert lancedb_should_skip("12345678")  # digits have the Emoji property
    assert lancedb_should_skip("✅ ❌ 👍")
    assert not lancedb_should_skip("❤️ what is the plan for today")
    assert lancedb_should_skip("good   morning team")  # good\s*(morning|…)
    assert lancedb_should_skip("thanks!")
    assert not lancedb_should_skip("thanks for fixing the login flow")
    assert not lancedb_should_skip("what?")  # < 15 but a question
    assert not lancedb_should_skip("部署失败？")  # full-width question mark
    assert not lancedb_should_skip("before we ship, check it")  # forced by a temporal word
    # header: only the part between the first and the second blank line survives (Appendix D)
    hdr = "Conversation info (untrusted metadata):\n{\"a\":1}\n\nhi\n\nremember my email"
    assert normalize_lancedb_query(hdr) == "hi" and lancedb_should_skip(hdr)
    assert normalize_lancedb_query("conversation INFO (untrusted metadata): fix the login bug in auth") == \
        "fix the login bug in auth"
    assert normalize_lancedb_query("  [CRON:x y]   deploy it now please  ") == "deploy it now please"


def test_gate_marks_skipped_and_is_memoised_per_query_text():
    docs = [{"id": "a", "text": "alpha"}]
    obj = {"documents": docs, "queries": [
        {"id": "1", "query": "hi there", "arms": {"vec": [{"id": "a", "score": 0.9}]}},
        {"id": "2", "query": "fix the login bug in auth", "arms": {"vec": [{"id": "a", "score": 0.9}]}}]}
    cs = candidates_from_json(obj)
    p = build_pipeline({"name": "t", "stages": [{"type": "gate.lancedb_skip"}, {"type": "fuse.single", "arm": "vec"}]})
    before = lancedb_should_skip.cache_info().hits
    st = p.run(cs)
    assert st.skipped.tolist() == [True, False]
    assert ranked(st, cs, 0) == [] and ranked(st, cs, 1) == [("a", 0.9)]
    p.run(cs)
    assert ("gate", "lancedb_skip") in cs._memo
    assert lancedb_should_skip.cache_info().hits >= before
    lancedb_should_skip("fix the login bug in auth")
    assert lancedb_should_skip.cache_info().hits > before


# ---- score stage tables ---------------------------------------------------------------------------------------

def _one(score_cos=None, **doc):
    d = dict({"id": "x", "text": "x" * 10}, **doc)
    return {"query": "q", "as_of": NOW, "documents": [d], "arms": {"vec": [{"id": "x", "score": score_cos}]}}


SINGLE = {"type": "fuse.single", "arm": "vec"}


@pytest.mark.parametrize("age,boost", [(0, 0.1), (7, 0.060653), (14, 0.036788), (28, 0.013534)])
def test_recency_boost_table(age, boost):
    out, _, _ = _run([SINGLE, {"type": "score.recency_boost"}], _one(0.0, timestamp=_iso(age)))
    assert out[0][1] == pytest.approx(boost, abs=1e-6)


def test_recency_missing_zero_negative_future_and_skips():
    for ts in (None, 0, -5):
        doc = {} if ts is None else {"timestamp": ts}
        out, _, _ = _run([SINGLE, {"type": "score.recency_boost"}], _one(0.0, **doc))
        assert out[0][1] == pytest.approx(0.1)
    out, _, _ = _run([SINGLE, {"type": "score.recency_boost"}], _one(0.0, timestamp=_iso(-7)))
    assert out[0][1] == pytest.approx(0.164872, abs=1e-6)  # future → boost above the weight
    out, _, _ = _run([SINGLE, {"type": "score.recency_boost"}], _one(0.95, timestamp=_iso(0)))
    assert out[0][1] == 1.0  # clamped
    for p in ({"weight": 0.0}, {"half_life_days": 0.0}):
        out, _, _ = _run([SINGLE, dict({"type": "score.recency_boost"}, **p)], _one(0.3))
        assert out[0][1] == 0.3
    out, _, _ = _run([SINGLE, {"type": "score.recency_boost", "curve": "half_life"}], _one(0.0, timestamp=_iso(14)))
    assert out[0][1] == pytest.approx(0.05)
    # raw values as applyRecencyBoost reads them (issue 19): a half-life <= 0 skips the step; a negative weight
    # lowers a recent row (score + w·e^0 = 0.5 − 0.1)
    for p in ({"half_life_days": -14.0}, ):
        out, _, _ = _run([SINGLE, dict({"type": "score.recency_boost"}, **p)], _one(0.3))
        assert out[0][1] == 0.3
    out, _, _ = _run([SINGLE, {"type": "score.recency_boost", "weight": -0.1}], _one(0.5, timestamp=_iso(0)))
    assert out[0][1] == pytest.approx(0.4)


@pytest.mark.parametrize("n,factor", [(100, 1.0), (500, 1.0), (800, 0.746806), (1000, 0.666667), (1500, 0.557886),
                                      (2000, 0.5), (3000, 0.436209)])
def test_length_norm_table(n, factor):
    out, _, _ = _run([SINGLE, {"type": "score.length_norm"}], _one(1.0, text=_text(n)))
    assert out[0][1] == pytest.approx(factor, abs=1e-6)


def test_length_is_utf16_and_anchor_zero_skips():
    out, _, _ = _run([SINGLE, {"type": "score.length_norm"}], _one(1.0, text="😀" * 500))  # 1000 units
    assert out[0][1] == pytest.approx(2 / 3)
    out, _, _ = _run([SINGLE, {"type": "score.length_norm", "anchor": 0}], _one(1.0, text=_text(3000)))
    assert out[0][1] == 1.0


@pytest.mark.parametrize("age,factor", [(0, 1.0), (7, 0.944941), (14, 0.895945), (60, 0.683940), (120, 0.567668),
                                        (240, 0.509158)])
def test_time_decay_table(age, factor):
    out, _, _ = _run([SINGLE, {"type": "decay.floor"}], _one(1.0, timestamp=_iso(age)))
    assert out[0][1] == pytest.approx(factor, abs=1e-6)


def test_importance_rules():
    for imp, want in ((1.0, 1.0), (0.7, 0.91), (0.5, 0.85), (0.0, 0.7), (None, 0.91)):
        doc = {} if imp is None else {"importance": imp}
        out, _, _ = _run([SINGLE, {"type": "score.importance"}], _one(1.0, **doc))
        assert out[0][1] == pytest.approx(want)


def test_non_finite_scores_fall_back():
    # a returned row with a non-finite score: every multiplier falls back to (factor × NaN) → non-finite → 0
    for stage in ({"type": "score.importance"}, {"type": "score.recency_boost"}, {"type": "score.length_norm"},
                  {"type": "decay.floor"}):
        obj = _one(None, timestamp=_iso(3), text=_text(900))
        out, _, _ = _run([SINGLE, stage], obj)
        assert out[0][1] == 0.0, stage


def test_time_stages_do_nothing_without_now():
    obj = _one(0.5, timestamp=_iso(30))
    obj.pop("as_of")
    for stage in ({"type": "score.recency_boost"}, {"type": "decay.floor"}):
        assert _run([SINGLE, stage], obj)[0] == [("x", 0.5)]


# ---- diversity ------------------------------------------------------------------------------------------------

def test_cosine_defer_compares_only_with_selected_and_ignores_missing_vectors():
    c = np.cos(np.radians(25))
    s = np.sin(np.radians(25))
    docs = [{"id": "A", "text": "a", "embedding": [1.0, 0.0, 0.0]},
            {"id": "B", "text": "b", "embedding": [c, s, 0.0]},  # cos(A,B) = 0.906 > 0.85 → deferred
            {"id": "C", "text": "c", "embedding": [np.cos(np.radians(50)), np.sin(np.radians(50)), 0.0]},
            {"id": "D", "text": "d"},  # no vector: never similar
            {"id": "E", "text": "e", "embedding": [2.0, 0.0, 0.0]}]  # not unit norm: cosine 1 with A
    obj = {"query": "q", "documents": docs,
           "arms": {"vec": [{"id": k, "score": 0.9 - i / 10} for i, k in enumerate("ABCDE")]}}
    out, _, _ = _run([SINGLE, {"type": "diversity.cosine_defer"}], obj)
    # C: cos(A,C) = 0.643, cos(B,C) = 0.906 but B was deferred → C selected
    assert [d for d, _ in out] == ["A", "C", "D", "B", "E"]
    assert dict(out)["B"] == 0.8  # scores unchanged


# ---- worked examples ---------------------------------------------------------------------------------------

B1_TEXT6 = "I don't have any information about the staging server."


def _b1():
    rows = [  # id, vec (post 1/(1+d)), bm25 raw, age, len, imp, vector
        ("m1", 0.80, 4.0, 2, 300, 0.9, [1, 0, 0]),
        ("m2", 0.75, None, 30, 1000, 0.5, [0, 1, 0]),
        ("m3", None, 2.0, 0.5, 120, 0.7, [0.95, 0.312, 0]),
        ("m4", 0.45, None, 10, 400, 0.3, [0, 0, 1]),
        ("m5", 0.28, None, 1, 100, 1.0, [0.5, 0.5, 0]),
        ("m6", 0.70, None, 1, 54, 0.8, [0, 0.7, 0.7]),
    ]
    docs, vec, fts = [], [], []
    for i, v, b, age, n, imp, e in rows:
        text = B1_TEXT6 if i == "m6" else _text(n)
        docs.append({"id": i, "text": text, "timestamp": _iso(age), "importance": imp, "embedding": e})
        if v is not None:
            vec.append({"id": i, "score": float(inv_l2_to_cosine(v))})
        if b is not None:
            fts.append({"id": i, "score": b})
    return {"query": "how is the staging server configured", "as_of": NOW, "documents": docs,
            "arms": {"vec": vec, "fts": fts}}


def test_b1_fixture():
    assert len(B1_TEXT6) == 54 and is_noise(B1_TEXT6)


def test_b1_hybrid_rerank_none_stage_by_stage():
    obj = _b1()
    cs = candidates_from_json(obj)
    p = _preset("lancedb_pro_6a50220", {"rerank": {"mode": "none"}})
    st = p.run(cs, Context(trace=True))
    tr = _trace(st, cs)
    assert tr["fuse"] == [("m1", 0.92), ("m2", 0.75), ("m6", 0.7), ("m3", 0.598688), ("m4", 0.45), ("m5", 0.28)]
    assert [d for d, _ in tr["min_score"]] == ["m1", "m2", "m6", "m3", "m4"]
    assert tr["recency"] == [("m1", 1.0), ("m6", 0.793106), ("m2", 0.761732), ("m3", 0.695179), ("m4", 0.498954)]
    assert tr["importance"] == [("m1", 0.97), ("m6", 0.74552), ("m2", 0.647472), ("m3", 0.632613),
                                ("m4", 0.394174)]
    assert tr["length"] == [("m1", 0.97), ("m6", 0.74552), ("m3", 0.632613), ("m2", 0.431648), ("m4", 0.394174)]
    assert tr["decay"] == [("m1", 0.9541), ("m6", 0.739359), ("m3", 0.629988), ("m4", 0.363917), ("m2", 0.346728)]
    assert [d for d, _ in tr["hard_min_score"]] == ["m1", "m6", "m3", "m4"]
    assert [d for d, _ in tr["noise"]] == ["m1", "m3", "m4"]
    assert _ranked(st, cs) == [("m1", 0.9541), ("m4", 0.363917), ("m3", 0.629988)]


def test_b1_with_the_fixed_siblings():
    obj = _b1()
    cs = candidates_from_json(obj)
    # the noise fix does not touch a real denial; the answer is unchanged
    st = _preset("lancedb_pro_6a50220_fixed_noise_boundary", {"rerank": {"mode": "none"}}).run(cs)
    assert _ranked(st, cs) == [("m1", 0.9541), ("m4", 0.363917), ("m3", 0.629988)]
    # true half-life recency: m4 (10 d) gets 0.1·2^(-10/14) instead of 0.1·e^(-10/14)
    st = _preset("lancedb_pro_6a50220_fixed_recency_half_life", {"rerank": {"mode": "none"}}).run(cs, Context(trace=True))
    assert dict(_trace(st, cs)["recency"])["m4"] == pytest.approx(0.45 + 0.1 * 2 ** (-10 / 14), abs=1e-6)


B3 = {
    "query": "how do we rotate the api keys", "as_of": NOW,
    "documents": [
        {"id": "p1", "text": "High priority: rotate JINA_API_KEY every 90 days.", "timestamp": _iso(1),
         "importance": 0.9},
        {"id": "p2", "text": _text(200), "timestamp": _iso(100), "importance": 0.8},
        {"id": "p3", "text": _text(3000)}],
    # distances 0.30, 0.45, 0.50 → cosine 1 - d/2 (unit vectors, squared L2)
    "arms": {"vec": [{"id": "p1", "score": 0.85}, {"id": "p2", "score": 0.775}, {"id": "p3", "score": 0.75}]},
}


def test_b3_vector_only_stage_by_stage():
    cs = candidates_from_json(B3)
    st = _preset("lancedb_pro_6a50220_vector").run(cs, Context(trace=True))
    tr = _trace(st, cs)
    assert tr["vector"] == [("p1", 0.769231), ("p2", 0.689655), ("p3", 0.666667)]
    assert tr["recency"] == [("p1", 0.862337), ("p3", 0.766667), ("p2", 0.689734)]
    assert tr["importance"] == [("p1", 0.836467), ("p3", 0.697667), ("p2", 0.64835)]
    assert tr["length"] == [("p1", 0.836467), ("p2", 0.64835), ("p3", 0.304328)]
    assert tr["decay"] == [("p1", 0.829554), ("p2", 0.385404), ("p3", 0.304328)]
    assert [d for d, _ in tr["hard_min_score"]] == ["p1", "p2"]
    assert _ranked(st, cs) == [("p2", 0.385404)]


def test_b3_vector_only_store_returns_only_limit_rows():
    cfg = resolve_preset("lancedb_pro_6a50220_vector")
    assert cfg["arms"] == [{"name": "vec", "kind": "vector", "depth": 3}]
    assert [s["type"] for s in cfg["stages"]].count("rerank.lancedb") == 0


def test_presets_build_and_declare_their_budget():
    for name in ("lancedb_pro_6a50220", "lancedb_pro_6a50220_vector", "lancedb_pro_6a50220_fixed_noise_boundary",
                 "lancedb_pro_6a50220_fixed_recency_half_life", "lancedb_pro_6a50220_fixed_cosine_metric",
                 "lancedb_pro_6a50220_fixed_all"):
        cfg = resolve_preset(name)
        assert cfg["stages"][-1] == {"label": "budget", "type": "budget.pack", "max_chunks": 3, "format": "plain"}
        _preset(name)
        if name.startswith("lancedb_pro_6a50220_fixed"):
            assert cfg["fixes"]
    rr = [s for s in resolve_preset("lancedb_pro_6a50220")["stages"] if s["type"] == "rerank.lancedb"][0]
    assert (rr["mode"], rr["limit"], rr["api_key_env"], rr["provider"]) == ("cross-encoder", 3, "JINA_API_KEY", "jina")


def test_as_shipped_preset_without_api_key_is_deterministic(monkeypatch):
    monkeypatch.delenv("JINA_API_KEY", raising=False)
    obj = _b1()
    obj["query_embedding"] = [0.6, 0.8, 0.0]
    cs = candidates_from_json(obj)
    p = _preset("lancedb_pro_6a50220")
    a, b = _ranked(p.run(cs), cs), _ranked(p.run(cs), cs)
    assert a == b and len(a) <= 3
