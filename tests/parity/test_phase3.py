"""Phase-3 hybrid retrieval policy (seed 001, PIPELINES.md §D1): D1-1, D1-2, D1-3, routing [A1]–[A4],
rare tokens [A14], expansions [A15]/[A16], early stop [A17]–[A19], exclusions, the secret pre-filter."""
import numpy as np
import pytest

from retrievers.candidates.files import candidates_from_json
from retrievers.pipeline import build_pipeline, load_preset, ranked
from retrievers.stages import Context
from retrievers.stages.helpers.query_text import phase3_expansions, strip_dates
from retrievers.stages.route import early_stop, has_rare_token, mode_c_runs_fts, phase3_mode

pytestmark = pytest.mark.kernels  # re-run bounds-checked by `make test-kernels`

NOW = "2026-02-27T00:00:00Z"


def run(stages, cs, ctx=None):
    st = build_pipeline({"name": "t", "stages": stages}).run(cs, ctx)
    return st, ranked(st, cs, 0)


# ---- D1-1 (Mode A) -------------------------------------------------------------------------------------------

D11_DOCS = [
    {"id": "c1", "path": "memory/topics/network.md", "text": "Home network: Omada router, VLAN 10 for IoT.",
     "start_line": 1, "end_line": 12},
    {"id": "c2", "path": "MEMORY.md", "text": "Curated: network config lives in memory/topics/network.md.",
     "start_line": 3, "end_line": 9},
    {"id": "c3", "path": "memory/2024-11-02.md", "text": "Old router setup notes from 2024."},
    {"id": "c4", "path": "memory/2026-02-20.md", "text": "Moved the NAS to VLAN 20."},
    {"id": "c5", "path": "memory/2026-02-25.md", "text": "Configured the home network DNS (AdGuard)."},
    {"id": "c6", "path": "node_modules/x/readme.md", "text": "configure the network of this package"},
]
D11_ARMS = {"vec": [{"id": "c1", "score": 0.78}, {"id": "c3", "score": 0.74}, {"id": "c2", "score": 0.70},
                    {"id": "c4", "score": 0.66}],
            "fts": [{"id": "c6", "score": 12.0}, {"id": "c5", "score": 9.0}, {"id": "c2", "score": 3.0},
                    {"id": "c4", "score": 1.0}]}


def d11_cs(**extra):
    return candidates_from_json({"query": "how did we configure the home network?", "as_of": NOW,
                                 "documents": D11_DOCS, "arms": dict(D11_ARMS, **extra)})


def test_d1_1_scores_order_and_early_stop():
    cs = d11_cs()
    st, r = run([{"type": "route.phase3"}, {"type": "fuse.phase3", "early_stop": "converge"}], cs)
    assert st.info["phase3_mode"].tolist() == ["A"]
    assert [d for d, _ in r] == ["c5", "c1", "c2", "c4", "c3"]  # c6 excluded (node_modules)
    assert [s for _, s in r] == pytest.approx([0.90, 0.88, 0.80, 0.66, 0.64])
    assert st.extra["nf"][0, 2] == pytest.approx(0.75) and st.extra["nv"][0, 2] == pytest.approx(0.70)
    # "early stop false (top-3 span 3 files)": the seed's Mode A convergence clause
    assert st.info["phase3"]["early_stop"].tolist() == [False]
    # §D1.5 as written also stops on ">= 2 snippets from distinct files above tau" [A19]: true here
    st, _ = run([{"type": "fuse.phase3"}], cs)
    assert st.info["phase3"]["early_stop"].tolist() == [True]



def test_tier_boosts_are_the_stage_parameters():
    """``topics_boost`` / ``curated_boost`` are what the score adds (a sweep over them must move it): c1 is under
    memory/topics/ (0.78 + boost), c2 is MEMORY.md (0.75 + boost)."""
    cs = d11_cs()
    _, r = run([{"type": "route.phase3"}, {"type": "fuse.phase3", "early_stop": "converge", "topics_boost": 0.3,
                                          "curated_boost": 0.0}], cs)
    assert dict(r)["c1"] == pytest.approx(0.78 + 0.3) and dict(r)["c2"] == pytest.approx(0.75)
    assert [d for d, _ in r][:2] == ["c1", "c5"]

def test_d1_1_budget_with_given_token_sizes():
    cs = d11_cs()
    sizes = {"c5": 300, "c1": 500, "c2": 450, "c4": 200, "c3": 100}
    st, r = run([{"type": "fuse.phase3"},
                 {"type": "budget.pack", "max_chunks": 6, "max_tokens": 1200, "token_count": "given",
                  "token_scope": "snippets", "policy": "skip", "format": "phase3"}],
                cs, Context(options={"chunk_tokens": sizes}))
    injected = [d for (d, _), m in zip(r, st.info["injected"][0]) if m]
    assert injected == ["c5", "c1", "c4", "c3"]  # c2 skipped at 1,250
    assert st.info["budget"]["budget_tokens"].tolist() == [1100]
    assert st.info["budget"]["chunks"].tolist() == [4]
    block = st.info["blocks"][0]
    assert block.startswith("[memory/2026-02-25.md] (score 0.900)\nConfigured the home network DNS (AdGuard).\n\n"
                            "[memory/topics/network.md#L1-L12] (score 0.880)\n")
    assert "MEMORY.md" not in block
    # "stop" instead of [A21] "skip": the walk ends at c2
    st, _ = run([{"type": "fuse.phase3"},
                 {"type": "budget.pack", "max_chunks": 6, "max_tokens": 1200, "token_count": "given",
                  "token_scope": "snippets", "policy": "stop"}], cs, Context(options={"chunk_tokens": sizes}))
    assert st.info["injected"][0].tolist() == [True, True, False, False, False]


def test_d1_1_through_the_preset():
    cs = d11_cs()
    st = load_preset("phase3_policy").run(cs)
    assert [d for d, _ in ranked(st, cs, 0)] == ["c5", "c1", "c2", "c4", "c3"]
    assert st.info["injected"][0].all()  # short snippets: all five fit 6 chunks / 1,200 tokens
    b = st.info["budget"]
    assert 0 < b["tokens"][0] == b["budget_tokens"][0] <= 1200  # the cap applies to the injected block


def test_historical_query_and_mtime_age():
    docs = [{"id": "h", "path": "notes/old.md", "text": "x", "mtime": "2024-01-01T00:00:00Z"},
            {"id": "d", "path": "memory/2024-11-02.md", "text": "y"}]
    arms = {"vec": [{"id": "h", "score": 0.6}, {"id": "d", "score": 0.5}], "fts": []}
    cs = candidates_from_json({"query": "how was the router set up", "as_of": NOW, "documents": docs, "arms": arms})
    assert run([{"type": "fuse.phase3"}], cs)[1] == [("h", pytest.approx(0.5)), ("d", pytest.approx(0.4))]
    cs = candidates_from_json({"query": "how was the router set up back in 2024", "as_of": NOW, "documents": docs,
                               "arms": arms})
    assert run([{"type": "fuse.phase3"}], cs)[1] == [("h", 0.6), ("d", 0.5)]  # [A8] historical: no penalty


# ---- D1-2 (Mode B) ---------------------------------------------------------------------------------------------

def d12_cs(e3_rank=-1.5):
    docs = [{"id": f"e{i}", "path": f"notes/e{i}.md", "text": f"e{i}"} for i in range(1, 6)]
    fts = [{"id": "e1", "score": 8.0}, {"id": "e2", "score": 4.0}, {"id": "e3", "score": -e3_rank},
           {"id": "e4", "score": 0.5}]
    fts.sort(key=lambda h: -h["score"])
    vec = [{"id": "e2", "score": 0.70}, {"id": "e5", "score": 0.65}]
    return candidates_from_json({"query": "why does `openclaw.json` throw EADDRINUSE", "as_of": NOW,
                                 "documents": docs, "arms": {"vec": vec, "fts": fts}})


def test_d1_2_mode_b_literal_and_fallback():
    st, r = run([{"type": "route.phase3"}, {"type": "fuse.phase3"}], d12_cs())
    assert st.info["phase3_mode"].tolist() == ["B"] and st.info["phase3"]["vector_ran"].tolist() == [True]
    assert r == [("e1", pytest.approx(0.888889, abs=1e-6)), ("e2", pytest.approx(0.8)), ("e5", pytest.approx(0.65)),
                 ("e3", pytest.approx(0.6)), ("e4", pytest.approx(0.333333, abs=1e-6))]
    # e3 at rank -0.9 (nf 0.473684): only 2 strong hits → FTS results only
    st, r = run([{"type": "fuse.phase3"}], d12_cs(-0.9))
    assert st.info["phase3"]["vector_ran"].tolist() == [False]
    assert r == [("e1", pytest.approx(0.888889, abs=1e-6)), ("e2", pytest.approx(0.8)),
                 ("e3", pytest.approx(0.473684, abs=1e-6)), ("e4", pytest.approx(0.333333, abs=1e-6))]
    # [A12] alternative reading: vector as the fallback when < 3 strong hits
    st, r = run([{"type": "fuse.phase3", "mode_b": "fallback"}], d12_cs(-0.9))
    assert [d for d, _ in r] == ["e1", "e2", "e5", "e3", "e4"]
    st, r = run([{"type": "fuse.phase3", "mode_b": "fallback"}], d12_cs())
    assert [d for d, _ in r] == ["e1", "e2", "e3", "e4"] and r[1][1] == pytest.approx(0.8)


# ---- D1-3 (Mode C) ---------------------------------------------------------------------------------------------

def d13_cs(scores):
    docs = [{"id": f"p{i}", "path": f"notes/p{i}.md", "text": f"p{i}"} for i in range(len(scores))] + \
        [{"id": "f", "path": "notes/f.md", "text": "printer"}]
    vec = [{"id": f"p{i}", "score": s} for i, s in enumerate(scores)]
    return candidates_from_json({"query": "what was that thing about the printer?", "as_of": NOW, "documents": docs,
                                 "arms": {"vec": vec, "fts": [{"id": "f", "score": 20.0}]}})


def test_d1_3_mode_c_spread():
    st, r = run([{"type": "route.phase3"}, {"type": "fuse.phase3"}], d13_cs([0.61, 0.60, 0.59, 0.58, 0.58, 0.55]))
    assert st.info["phase3_mode"].tolist() == ["C"]
    assert st.info["phase3"]["fts_ran"].tolist() == [True]  # spread 0.03 < 0.05
    assert r[0] == ("f", pytest.approx(20 / 21))
    st, r = run([{"type": "fuse.phase3"}], d13_cs([0.82, 0.64, 0.60, 0.52, 0.50]))
    assert st.info["phase3"]["fts_ran"].tolist() == [False]  # spread 0.32, no rare token
    assert "f" not in dict(r) and len(r) == 5
    # the decision function: fewer than 5 scores → the last one; no score → flat
    v = np.array([[0.9, 0.88, np.nan], [0.9, 0.5, np.nan], [np.nan, np.nan, np.nan]])
    assert mode_c_runs_fts(v, np.array([False, False, False])).tolist() == [True, False, True]
    assert mode_c_runs_fts(v, np.array([False, True, False])).tolist() == [True, True, True]


# ---- routing, rare tokens, expansions, early stop -----------------------------------------------------------------

@pytest.mark.parametrize("q,mode", [
    ("why does `openclaw.json` throw EADDRINUSE", "B"),
    ('what does "exact phrase" mean here', "B"),
    ("what’s the “blue green” plan", "B"),
    ("don't touch the router", "A"),  # [A1] single quotes / apostrophes ignored
    ("SQLITE_BUSY again after the upgrade", "B"),
    ("why do I get a 404 from the proxy", "B"),
    ("edit ~/config/app.yaml please", "B"),
    ("where is the /home/me/notes folder", "B"),
    ("check settings.toml", "B"),
    ("what was that thing about the printer?", "C"),
    ("Remember when we moved the NAS", "C"),
    ("how did we configure the home network?", "A"),
])
def test_routing(q, mode):
    assert phase3_mode(q) == mode


@pytest.mark.parametrize("q,rare", [("what was that thing about the printer?", False), ("the v2 release", True),
                                    ("my_var broke", True), ("ask about iPhone sync", True),
                                    ("internationalization plan", True), ("plain words only here", False)])
def test_rare_tokens(q, rare):
    assert has_rare_token(q) is rare


def test_expansions_a15_a16():
    assert phase3_expansions("how did we configure the home network?") == [
        "how did we configure the home network", "how did we configures the home network",
        "how did we configure the home networks"]
    assert phase3_expansions("Backups since 2025-01-03 for the servers") == [
        "backups since 2025 01 03 for the servers", "backup since 2025 01 03 for the servers",
        "backups since 2025 01 03 for the server", "Backups since for the servers"]
    assert len(phase3_expansions("Deploy logs from March 3, 2025 for servers?")) <= 4
    assert strip_dates("what happened on March 3, 2025 and in May 2024 or May 5") == "what happened on and in or"
    assert strip_dates("what may have happened") == "what may have happened"  # the modal verb stays
    assert phase3_expansions("network") == ["networks"]


def test_expansion_passes_merge_by_max_and_early_stop_blocks_them():
    # weak main pass: only c4 (0.66); an expansion pass finds c5 strongly
    cs = candidates_from_json({"query": "configure network", "as_of": NOW, "documents": D11_DOCS, "arms": {
        "vec": [{"id": "c4", "score": 0.66}], "fts": [],
        "vecx#0": [{"id": "c4", "score": 0.70}, {"id": "c5", "score": 0.60}], "ftsx#0": [],
        "vecx#1": [{"id": "c3", "score": 0.99}], "ftsx#1": []}})
    st, r = run([{"type": "fuse.phase3", "early_stop": "converge_or_evidence"}], cs)
    # pass 1 merges (c4 max 0.70, c5 0.60): two distinct files > 0.5 → early stop, pass 2 (c3) never runs
    assert r == [("c4", pytest.approx(0.70)), ("c5", pytest.approx(0.60))]
    assert st.info["phase3"]["passes"].tolist() == [2] and st.info["phase3"]["early_stop"].tolist() == [True]
    st, r = run([{"type": "fuse.phase3", "early_stop": "off"}], cs)
    assert [d for d, _ in r] == ["c3", "c4", "c5"] and st.info["phase3"]["passes"].tolist() == [3]
    assert r[0][1] == pytest.approx(0.99 - 0.10)  # c3 is 482 days old


def test_early_stop_rules():
    s = np.array([[0.9, 0.8, 0.7], [0.9, 0.8, 0.7], [0.9, 0.4, 0.3], [0.9, 0.6, 0.55]])
    f = np.array([[1, 1, 2], [1, 2, 3], [1, 2, 3], [1, 1, 1]])
    assert early_stop(s, f, 0.5, "converge").tolist() == [True, False, False, True]
    assert early_stop(s, f, 0.5, "evidence").tolist() == [True, True, False, False]
    assert early_stop(s, f, 0.5, "converge_or_evidence").tolist() == [True, True, False, True]
    assert early_stop(s, f, 0.5, "off").tolist() == [False] * 4


def test_secret_prefilter_happens_before_top_k():
    docs = [{"id": "s", "path": "memory/secrets.md", "text": "OPENAI key sk-proj-abcdefghijklmnopqrstuvwxyz123456"},
            {"id": "a", "path": "memory/a.md", "text": "a"}, {"id": "b", "path": "memory/b.md", "text": "b"}]
    arms = {"vec": [{"id": "s", "score": 0.9}, {"id": "a", "score": 0.8}, {"id": "b", "score": 0.7}], "fts": []}
    cs = candidates_from_json({"query": "network", "as_of": NOW, "documents": docs, "arms": arms})
    assert [d for d, _ in run([{"type": "fuse.phase3", "a_vec": 2}], cs)[1]] == ["a", "b"]
    assert [d for d, _ in run([{"type": "fuse.phase3", "a_vec": 2, "exclude_secrets": False}], cs)[1]] == ["s", "a"]


def test_dedupe_by_path_lines():
    docs = [{"id": "x1", "path": "memory/topics/n.md", "text": "n", "start_line": 1, "end_line": 5},
            {"id": "x2", "path": "memory/topics/n.md", "text": "n", "start_line": 1, "end_line": 5}]
    cs = candidates_from_json({"query": "n", "as_of": NOW, "documents": docs, "arms": {
        "vec": [{"id": "x1", "score": 0.5}], "fts": [{"id": "x2", "score": 3.0}]}})
    assert len(run([{"type": "fuse.phase3"}], cs)[1]) == 2
    assert run([{"type": "fuse.phase3", "dedupe": "path_lines"}], cs)[1] == [("x1", pytest.approx(0.85))]


def test_tiered_packer_variant():
    cs = d11_cs()
    st = load_preset("phase3_policy_tiered").with_params({"budget": {"max_chunks": 2}}).run(cs)
    inj = [d for (d, _), m in zip(ranked(st, cs, 0), st.info["injected"][0]) if m]
    assert inj == ["c1", "c2"]  # topic then curated, whatever their rank


# ---- secret guard (seed 001 "never surface secrets") --------------------------------------------------------------

from retrievers.stages.filter import SECRET_PATTERNS, compiled_secret, has_secret, find_secrets  # noqa: E402

SECRET_EXAMPLES = {
    "openai_key": "OPENAI_API_KEY=sk-proj-Abcdefghijklmnopqrstuv1234",
    "stripe_key": "billing uses sk_live_51HabcdefghijklmnopQR",
    "jina_key": "Test key from the dashboard: jina_4c9594a6fbac8ae2a29e0abcdef12",
    "github_token": "PAT for the API call: ghp_b17tfDQ4xmg4Wjtd9PGSL9bFKmZByxhm2jap",
    "slack_token": "bot token xoxb-123456789012-abcdefghijKL",
    "aws_access_key": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "google_api_key": "maps key AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "generic_api_key": "api_key = 'a1b2c3d4e5f6g7h8'",
    "bearer_token": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0'",
    "password": "PG password (ledgerline_app @ pg-nl-1): UYQzq!UpRdt!dEL90L!Ixs",
    "url_credentials": "DATABASE_URL=postgres://app:s3cr3tpw@db.internal:5432/app",
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
}
CLEAN = ["High priority: rotate JINA_API_KEY every 90 days.", "The password policy requires 12 characters.",
         "Postgres password: Fly secrets and 1Password (pg-nl-1)", "password: ********", "api_key: <your-key>",
         "api_key = ${API_KEY}", "we use sklearn, not sk-learn", "the bearer of bad news", "AKIA marks AWS key ids",
         "ghp_ tokens are GitHub PATs", "clone https://github.com/x/y.git", "-----BEGIN PUBLIC KEY-----",
         "Personal and API keys: 1Password, vault Dev."]


@pytest.mark.parametrize("name", sorted(SECRET_EXAMPLES))
def test_secret_guard_catches_each_pattern(name):
    assert name in find_secrets(SECRET_EXAMPLES[name])
    pats, extra = compiled_secret((name,), ())
    assert has_secret(SECRET_EXAMPLES[name], pats, extra)  # the stage's trigger pre-filter lets it through


@pytest.mark.parametrize("text", CLEAN)
def test_secret_guard_passes_clean_text(text):
    assert find_secrets(text) == []
    assert not has_secret(text, *compiled_secret((), ()))


def test_secret_guard_stage_reads_text_not_the_label():
    assert set(SECRET_EXAMPLES) == set(SECRET_PATTERNS)
    docs = [{"id": "s", "text": SECRET_EXAMPLES["github_token"], "contains_secret": False},
            {"id": "lab", "text": "where the key lives: vault Dev", "contains_secret": True},
            {"id": "t", "title": "ci", "text": "token", "metadata": {}},
            {"id": "k", "title": "AWS AKIAIOSFODNN7EXAMPLE", "text": "title holds the key"}]
    cs = candidates_from_json({"query": "q", "documents": docs, "arms": {
        "vec": [{"id": d["id"], "score": 0.9 - i / 10} for i, d in enumerate(docs)]}})
    st, r = run([{"type": "fuse.single", "arm": "vec"}, {"type": "filter.secret_guard"}], cs)
    assert [d for d, _ in r] == ["lab", "t"] and st.info["secrets_blocked"].tolist() == [2]
    st, r = run([{"type": "fuse.single", "arm": "vec"},
                 {"type": "filter.secret_guard", "patterns": ["aws_access_key"], "extra": [r"\bvault\b"]}], cs)
    assert [d for d, _ in r] == ["s", "t"]
    with pytest.raises(Exception, match="unknown secret pattern"):
        build_pipeline({"name": "x", "stages": [{"type": "filter.secret_guard", "patterns": ["nope"]}]})
