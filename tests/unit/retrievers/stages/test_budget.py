"""The injection-budget packer (``budget.pack``): token counting, limits, tier priority, formats, determinism."""
import random

import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, ranked
from retrievers.stages import ConfigError, Context
from retrievers.stages.budget import tier_of
from retrievers.text import js_number, js_to_fixed
from retrievers.tokens import count_tokens, encoding, tokenizer_info
from retrievers.text import utf16_len
from tests.helpers import pack, random_budget_candidates

@pytest.mark.parametrize("fmt", ["plain", "openclaw", "hookclaw_xml", "phase3"])
def test_sum_of_parts_equals_full_block_encode(fmt):
    """Measured tolerance: 0 tokens over 2,400 random blocks per format (the parts end with a newline and no
    part starts with one, so cl100k's pre-tokeniser never merges across a boundary)."""
    rng = random.Random(7)
    enc = encoding()
    n_blocks = 0
    for _ in range(400):
        cs = random_budget_candidates(rng)
        st = pack(cs, format=fmt, snippet_chars=rng.choice([None, 5, 37, 700]))
        for q, block in enumerate(st.info["blocks"]):
            assert st.info["budget"]["tokens"][q] == len(enc.encode_ordinary(block)), (fmt, block)
            assert st.info["budget"]["chars"][q] == utf16_len(block)
            n_blocks += 1
    assert n_blocks == 2400


@pytest.mark.parametrize("seed", range(6))
def test_limits_are_never_exceeded(seed):
    rng = random.Random(seed)
    for _ in range(60):
        cs = random_budget_candidates(rng, n_docs=15)
        p = {"format": rng.choice(["plain", "openclaw", "hookclaw_xml", "phase3"]),
             "max_chunks": rng.choice([None, 0, 1, 3, 6]), "max_tokens": rng.choice([None, 0, 20, 80, 300]),
             "max_chars": rng.choice([None, 0, 60, 250, 1000]), "policy": rng.choice(["skip", "stop", "truncate"]),
             "token_scope": rng.choice(["block", "snippets"]), "snippet_chars": rng.choice([None, 30, 700]),
             "char_accounting": "block", "tier_priority": rng.choice([[], ["daily", "topic"]])}
        st = pack(cs, **p)
        b = st.info["budget"]
        inj = st.info["injected"]
        assert inj.shape == st.col.shape and not (inj & (st.col < 0)).any()
        assert (b["chunks"] == inj.sum(axis=1)).all()
        for q in range(cs.Q):
            block = st.info["blocks"][q]
            if p["max_chunks"] is not None:
                assert b["chunks"][q] <= p["max_chunks"]
            if p["max_tokens"] is not None:
                assert b["budget_tokens"][q] <= p["max_tokens"]
                if p["token_scope"] == "block":
                    assert count_tokens(block) <= p["max_tokens"]
            if p["max_chars"] is not None:
                assert utf16_len(block) <= p["max_chars"]
            assert (block == "") == (b["chunks"][q] == 0)


def test_policies_skip_stop_and_chunk_limit():
    docs = [{"id": f"d{i}", "text": "word " * n} for i, n in enumerate([10, 100, 5, 5, 5])]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": f"d{i}", "score": 1 - i / 10} for i in range(5)]}})
    st = pack(cs, max_tokens=40, token_scope="snippets")
    assert st.info["injected"][0].tolist() == [True, False, True, True, True]  # d1 (100 tokens) skipped
    st = pack(cs, max_tokens=40, token_scope="snippets", policy="stop")
    assert st.info["injected"][0].tolist() == [True, False, False, False, False]
    st = pack(cs, max_chunks=2)
    assert st.info["injected"][0].tolist() == [True, True, False, False, False]
    st = pack(cs, max_tokens=40, token_scope="snippets", token_count="chars4")
    # [A20] ceil(chars/4) of the trimmed snippets: 13 + 3 × 6 = 31 (d1: 125 does not fit)
    assert st.info["budget"]["budget_tokens"].tolist() == [31]
    assert st.info["injected"][0].tolist() == [True, False, True, True, True]


def test_tier_priority_order_and_block_keeps_rank_order():
    docs = [{"id": "daily", "path": "memory/2026-02-20.md", "text": "daily log " * 20},
            {"id": "other", "path": "notes/x.md", "text": "other note " * 20},
            {"id": "cur", "path": "MEMORY.md", "text": "curated " * 20},
            {"id": "topic", "path": "memory/topics/net.md", "text": "topic brief " * 20}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": d["id"], "score": 0.9 - i / 10} for i, d in enumerate(docs)]}})
    order = lambda st: [d for (d, _), m in zip(ranked(st, cs, 0), st.info["injected"][0]) if m]  # noqa: E731
    assert order(pack(cs, max_chunks=2)) == ["daily", "other"]
    st = pack(cs, max_chunks=2, tier_priority=["topic", "curated", "daily"])
    assert order(st) == ["cur", "topic"]  # admitted topic, curated; rendered in rank order
    assert st.info["blocks"][0].index("curated") < st.info["blocks"][0].index("topic brief")
    assert order(pack(cs, max_chunks=3, tier_priority=["topic", "curated", "daily"])) == ["daily", "cur", "topic"]
    assert [tier_of(p) for p in ("memory/topics/a.md", "MEMORY.md", "./memory/2026-01-01.md", "memory/x.md")] == \
        ["topic", "curated", "daily", "other"]
    with pytest.raises(ConfigError, match="unknown tier"):
        build_pipeline({"name": "x", "stages": [{"type": "budget.pack", "tier_priority": ["hot"]}]})


def test_determinism_and_render_switch():
    cs = random_budget_candidates(random.Random(3))
    p = dict(format="phase3", max_tokens=60, max_chunks=4, tier_priority=["topic"])
    a, b = pack(cs, **p), pack(cs, **p)
    assert (a.info["injected"] == b.info["injected"]).all() and a.info["blocks"] == b.info["blocks"]
    for k in ("chunks", "tokens", "chars", "budget_tokens"):
        assert (a.info["budget"][k] == b.info["budget"][k]).all()
    c = pack(cs, Context(options={"render_blocks": False}), **p)
    assert "blocks" not in c.info and (c.info["budget"]["tokens"] == a.info["budget"]["tokens"]).all()


def test_snippet_chars_is_surrogate_safe_and_blank_snippets_are_not_injected():
    docs = [{"id": "e", "text": "ab😀cd"}, {"id": "blank", "text": "   \n "}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": "e", "score": 0.9}, {"id": "blank", "score": 0.8}]}})
    st = pack(cs, snippet_chars=3)
    assert st.info["blocks"][0] == "ab\n\n" and st.info["injected"][0].tolist() == [True, False]
    assert pack(cs, snippet_chars=4).info["blocks"][0] == "ab😀\n\n"


def test_hookclaw_xml_truncation_and_accounting():
    long = "x" * 1500
    docs = [{"id": "a", "path": "memory/a.md", "text": "first " * 100, "start_line": 3, "end_line": 9},
            {"id": "b", "path": "memory/b.md", "text": long}, {"id": "c", "path": "c.md", "text": "third"}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": "a", "score": 0.80049}, {"id": "b", "score": 0.5}, {"id": "c", "score": 0.4}]}})
    st = pack(cs, format="hookclaw_xml", snippet_chars=700, max_chars=2000, char_accounting="hookclaw",
              policy="truncate")
    block = st.info["blocks"][0]
    # HookClaw's estimate (text + 120 + path): a 599 + 131 = 730; b (cut to 700 by OpenClaw) 831 → 1561;
    # c 5 + 124 → 1690 ≤ 2000: all three fit
    assert st.info["injected"][0].tolist() == [True, True, True]
    assert '<memory source="memory" path="memory/a.md" lines="3-9" score="0.800">' in block
    st = pack(cs, format="hookclaw_xml", snippet_chars=None, max_chars=2000, char_accounting="hookclaw",
              policy="truncate")
    block = st.info["blocks"][0]
    # b is 1500 chars: 730 + 1500 + 131 > 2000 → cut to 2000 − 730 − 131 − 3 = 1136 chars + "..." and stop
    assert st.info["injected"][0].tolist() == [True, True, False]
    assert ("x" * 1136 + "...\n") in block and ("x" * 1137) not in block
    # fewer than 51 characters of room → nothing is added and the walk stops
    st = pack(cs, format="hookclaw_xml", max_chars=730 + 131 + 3 + 50, char_accounting="hookclaw",
              policy="truncate")
    assert st.info["injected"][0].tolist() == [True, False, False]


def test_openclaw_json_block():
    import json
    docs = [{"id": "a", "path": "memory/a.md", "text": 'say "hi"\n', "start_line": 1, "end_line": 2,
             "source": "sessions"}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {"vec": [{"id": "a", "score": 0.1 + 0.2}]}})
    block = pack(cs, format="openclaw").info["blocks"][0]
    assert json.loads(block) == {"results": [{"path": "memory/a.md", "startLine": 1, "endLine": 2,
                                              "score": 0.30000000000000004, "snippet": 'say "hi"\n',
                                              "source": "sessions"}]}
    assert block.startswith('{\n  "results": [\n    {\n      "path": "memory/a.md",\n      "startLine": 1,')


def test_skipped_queries_inject_nothing():
    docs = [{"id": "a", "text": "alpha"}]
    cs = candidates_from_json({"documents": docs, "queries": [
        {"id": "1", "query": "hi", "arms": {"vec": [{"id": "a", "score": 0.9}]}},
        {"id": "2", "query": "tell me about the alpha release plan", "arms": {"vec": [{"id": "a", "score": 0.9}]}}]})
    st = build_pipeline({"name": "t", "stages": [{"type": "gate.hookclaw_skip"}, {"type": "fuse.single", "arm": "vec"},
                                                 {"type": "budget.pack"}]}).run(cs)
    assert st.info["budget"]["chunks"].tolist() == [0, 1] and st.info["blocks"][0] == ""


def test_js_number_formatting_and_tokenizer_info():
    assert [js_to_fixed(x) for x in (0.0625, 0.685221, 0.5, 1.0005, -0.0004, 2.5e-7)] == \
        ["0.063", "0.685", "0.500", "1.000", "-0.000", "0.000"]
    assert [js_number(x) for x in (1.0, 0.1 + 0.2, 1e-7, 1e21, 123456789012345680000.0, 0.000001, -2.5)] == \
        ["1", "0.30000000000000004", "1e-7", "1e+21", "123456789012345680000", "0.000001", "-2.5"]
    info = tokenizer_info()
    assert info["name"] == "cl100k_base" and info["package"] == "bpe-openai" and info["version"]
    assert count_tokens("hello world") == 2
