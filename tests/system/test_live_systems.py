"""Live memory systems driven for real: the reference HTTP service (real sockets), the reference MCP server (the
official SDK, stdio and streamable HTTP), Python objects — ingest as of each query's time, hit mapping, the response
cache, and every fault a user can meet (timeout, 5xx, malformed answer, refused call, server killed mid-run, fault
threshold exceeded, resume from the cache), through the library and through the command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from evalkit.engine.evaluate import evaluate_run
from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.mapping import HitMapper, map_answer
from evalkit.engine.live.retriever import run_system
from evalkit.errors import LiveError
from retrievers.errors import ConfigError
from retrievers.systems.file import load_system, system_from_dict, system_of
from retrievers.systems.protocol import Answer, Hit, SystemFault
from retrievers.types import Document
from retrievers.index.visibility import VISIBLE_TO
from tests.helpers import free_port, write_tiny_beir
from tests.memory_service import DAY, TOKEN, HTTPService, expected_lists, timed_dataset

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "systems" / "examples"
SERVICE = str(ROOT / "tests" / "memory_service.py")


def example(name: str, **limits) -> "SystemSpec":  # noqa: F821
    raw = tomllib.loads((EXAMPLES / name).read_text())
    raw["limits"] = dict(raw.get("limits", {}), **limits)
    return system_from_dict(raw, f"<{name}>")


@pytest.fixture
def service(monkeypatch):
    started = []

    def start(faults=None):
        srv = HTTPService(faults).start()
        started.append(srv)
        monkeypatch.setenv("MEMORY_SERVICE_URL", srv.url)
        monkeypatch.setenv("MEMORY_API_KEY", "test-key")
        return srv

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def cache(tmp_path):
    c = ResponseCache(tmp_path / "responses.sqlite")
    yield c
    c.close()


def ids(run) -> dict[str, list[str]]:
    return {q: [d for d, _ in r.ranked] for q, r in run.results.items()}


# ---- HTTP: the example system file against the reference service --------------------------------------------------

@pytest.mark.parametrize("protocol", ["strict", "all"])
def test_http_ingests_as_of_each_query_and_maps_echoed_ids(service, cache, protocol):
    srv = service()
    ds = timed_dataset()
    run = run_system(example("http-memory.toml"), ds, protocol, cache=cache, log=lambda *a: None)
    assert ids(run) == expected_lists(ds, protocol)
    if protocol == "strict":  # the system could not see the future: q3's only match was created after its as_of
        assert ids(run)["q3"] == [] and ids(run)["q1"] == ["u1", "d1"]
    else:
        assert ids(run)["q3"] == ["d2"]
        assert run.info["live_future_hits"] >= 1  # d2 dated after q3's as_of, counted
    assert run.info["live_asked"] == 5 and run.info["live_cached"] == 0 and run.info["live_faults"] == 0
    assert run.info["live_ingested_docs"] == 6 and srv.memory.ingested == 6
    assert run.info["live"]["version"] == "ref-1.0" and run.pipeline.hash == example("http-memory.toml").hash
    assert all(k in run.info for k in ("latency_with_embedding_p50_ms", "latency_with_embedding_p95_ms", "latency_with_embedding_p99_ms", "ingest_docs_per_s"))
    ev = evaluate_run(ds, run)
    # q1: d1 at rank 2 → nDCG 1/log2(3); q2: d3 at rank 4 under strict (all four alpha notes, creation order)
    assert ev.per_query["ndcg@10"]["q1"] == pytest.approx(1 / 1.5849625007211563)


def test_rerun_asks_nothing_and_refresh_asks_again(service, cache):
    srv = service()
    ds = timed_dataset()
    first = run_system(example("http-memory.toml"), ds, "strict", cache=cache, log=lambda *a: None)
    searches, ingested = srv.memory.searches, srv.memory.ingested
    again = run_system(example("http-memory.toml"), ds, "strict", cache=cache, log=lambda *a: None)
    assert (srv.memory.searches, srv.memory.ingested) == (searches, ingested)  # the service saw nothing new
    assert again.info["live_asked"] == 0 and again.info["live_cached"] == 5 and again.info["live_ingested_docs"] == 0
    assert ids(again) == ids(first)
    assert again.info["latency_with_embedding_p50_ms"] == first.info["latency_with_embedding_p50_ms"]  # the time measured when it was asked
    fresh = run_system(example("http-memory.toml"), ds, "strict", cache=cache, refresh=True, log=lambda *a: None)
    assert fresh.info["live_asked"] == 5 and srv.memory.searches == searches + 5
    # the cache key names the ingest state: the other protocol is a different memory, asked anew
    other = run_system(example("http-memory.toml"), ds, "all", cache=cache, log=lambda *a: None)
    assert 0 < other.info["live_asked"] <= 5


def test_damaged_cache_row_is_asked_again(service, cache, capsys):
    service()
    ds = timed_dataset()
    run_system(example("http-memory.toml"), ds, "all", cache=cache, log=lambda *a: None)
    con = cache._db()
    key = con.execute("SELECT k FROM answers ORDER BY k LIMIT 1").fetchone()[0]
    con.execute("UPDATE answers SET v = CAST('{\"answer\": {\"hits\": []}, \"ms\": 1}' AS BLOB) WHERE k = ?", (key,))
    con.commit()
    again = run_system(example("http-memory.toml"), ds, "all", cache=cache, log=lambda *a: None)
    assert "is corrupt (crc32 mismatch); asking again" in capsys.readouterr().err
    assert ids(again) == expected_lists(ds, "all")


def test_flaky_5xx_is_retried_and_counted_not_failed(service, cache):
    srv = service({"flaky": {"banana": 1}})
    ds = timed_dataset()
    run = run_system(example("http-memory.toml", backoff=0.01), ds, "all", cache=cache, log=lambda *a: None)
    assert run.info["live_faults"] == 0 and run.info["live_retries"] == 1
    assert ids(run) == expected_lists(ds, "all") and srv.memory.asked["banana"] == 2


def test_faults_under_the_threshold_are_counted_per_query_and_scored_empty(service, cache):
    srv = service({"sleep": {"cherry": 1.0}, "status": {"banana": 500}, "malformed": ["banana cherry"]})
    ds = timed_dataset()
    spec = example("http-memory.toml", timeout=0.3, retries=1, backoff=0.01, fault_threshold=0.8)
    run = run_system(spec, ds, "all", cache=cache, log=lambda *a: None)
    assert run.info["live_fault_timeout"] == 1 and run.info["live_fault_server_error"] == 1
    assert run.info["live_fault_malformed"] == 1 and run.info["live_faults"] == 3
    assert srv.memory.asked["cherry"] == 2 and srv.memory.asked["banana"] == 2  # retried once each
    assert srv.memory.asked["banana cherry"] == 1  # a malformed answer is not retried
    assert ids(run)["q3"] == [] and ids(run)["q1"] == expected_lists(ds, "all")["q1"]
    (w,) = [w for w in run.info["warnings"] if w["what"] == "live_faults"]
    assert "3 of 5 queries failed" in w["text"] and "timeout 1" in w["text"]
    # faulted answers are never cached: the rerun against a healthy service asks exactly those three
    srv.memory.faults = {}
    again = run_system(spec, ds, "all", cache=cache, log=lambda *a: None)
    assert again.info["live_asked"] == 3 and again.info["live_cached"] == 2 and again.info["live_faults"] == 0
    assert ids(again) == expected_lists(ds, "all")


def test_threshold_exceeded_stops_with_one_line(service, cache):
    service({"status": {"alpha": 503, "banana": 503}})
    spec = example("http-memory.toml", retries=0, fault_threshold=0.2)
    with pytest.raises(LiveError) as e:
        run_system(spec, timed_dataset(), "all", cache=cache, log=lambda *a: None)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("system http-memory: 2 of 5 queries failed, more than the 20% allowed")
    assert "HTTP 503" in msg and "run again to resume" in msg


def test_unmapped_and_duplicate_hits_keep_their_rank_as_misses():
    ds = timed_dataset()
    mapper = HitMapper(ds)
    q = ds.queries[1]
    ans = Answer([Hit(text="nothing like it"), Hit(id="d3", score=0.9), Hit(text="  ALPHA   cherry day three "),
                  Hit(text="alpha banana day two")])
    m = map_answer(mapper, q, ans)
    assert [d for d, _ in m.ranked] == [m.ranked[0][0], "d3", "~duplicate:d3:3", "d2"]
    assert m.ranked[0][0].startswith("~unmapped:text:")
    assert m.counts == {"unmapped": 1, "duplicate": 1, "future": 0, "id": 1, "text": 1, "normalised": 1}
    # no score given: list order is the ranking
    assert m.ranked[0][1] == 4.0 and m.ranked[3][1] == 1.0


# ---- Python objects through the API --------------------------------------------------------------------------------

class Keyword:
    """A keyword memory in a dozen lines (the protocol's own example)."""

    def __init__(self):
        self.docs: dict = {}
        self.calls = 0

    def ingest(self, documents, *, group):
        self.docs.setdefault(group, []).extend(documents)

    def search(self, query, *, k, as_of, group, context):
        self.calls += 1
        words = set(TOKEN.findall(query.lower()))
        scored = [(len(words & set(TOKEN.findall(d.text.lower()))), i, d.id)
                  for i, d in enumerate(self.docs.get(group, []))]
        return [Hit(id=d, score=float(s)) for s, _, d in sorted(scored, key=lambda x: (-x[0], x[1]))[:k] if s]

    def injected(self, query, hits, *, k, as_of, group, context):
        return "\n".join(f"- {h.id}" for h in hits[:2])


class AsyncBroken:
    async def search(self, query, *, k, as_of, group, context):
        if "banana" in query:
            raise RuntimeError("index exploded")
        return [{"text": "alpha apple day one", "score": 1}]


def test_python_object_through_the_api(cache):
    ds = timed_dataset()
    obj = Keyword()
    run = run_system(system_of(obj, "kw"), ds, "strict", cache=cache, log=lambda *a: None)
    assert ids(run) == expected_lists(ds, "strict")
    assert run.results["q2"].block == "- u1\n- d1" and run.results["q2"].budget["chunks"] == 4
    assert run.results["q2"].budget["tokens"] > 0


def test_python_object_faults_and_preloaded(cache):
    ds = timed_dataset()
    spec = system_of(AsyncBroken(), "broken")
    object.__setattr__(spec, "limits", type(spec.limits)(concurrency=1, fault_threshold=0.5, retries=0))
    run = run_system(spec, ds, "strict", cache=cache, log=lambda *a: None)
    assert run.info["live_fault_error"] == 2 and run.info["live_ingested_docs"] == 0
    assert ids(run)["q1"] == ["d1"]  # mapped by its exact text; no ingest: asked as loaded
    assert run.info["live"]["protocol"] == "preloaded"
    assert "RuntimeError: index exploded" in run.info["warnings"][0]["text"]


def test_scoped_notes_are_refused_before_anything_is_asked(cache):
    """An isolated poison planting hides each planted note from every query but its target; a live system holds one
    store per group and cannot, so the run stops with one line before ingesting or asking anything."""
    ds = timed_dataset()
    ds.documents.append(Document("p1", "alpha planted", group="g1", created=1.2 * DAY, timestamp=1.2 * DAY,
                                 metadata={VISIBLE_TO: ["q1"]}))
    obj = Keyword()
    with pytest.raises(LiveError) as e:
        run_system(system_of(obj, "kw"), ds, "strict", cache=cache, log=lambda *a: None)
    assert "scoped notes" in str(e.value) and "'p1'" in str(e.value) and "\n" not in str(e.value)
    assert obj.calls == 0 and obj.docs == {}


# ---- system files: one-line validation ----------------------------------------------------------------------------

BASE = {"kind": "http", "http": {"base_url": "http://127.0.0.1:1", "search": {
    "path": "/s", "body": {"q": "{query}"}, "answer": {"results": "r", "id": "id"}}}}


@pytest.mark.parametrize("patch, message", [
    ({"colour": 1}, "unknown key(s) colour"),
    ({"kind": "grpc"}, "kind 'grpc' is not one of http, mcp, python"),
    ({"k": 0}, "k must be an integer >= 1"),
    ({"namespace": "{run}"}, "needs {group} in the namespace template"),
    ({"limits": {"fault_threshold": 2}}, "0 <= fault_threshold <= 1"),
    ({"http": {"base_url": "ftp://x", "search": {}}}, "base_url must start with http"),
    ({"http": {"base_url": "http://x", "search": {"path": "/s", "body": {"q": "{quuery}"},
                                                  "answer": {"id": "id"}}}}, "unknown field(s) {quuery}"),
    ({"http": {"base_url": "http://x", "search": {"path": "/s", "answer": {"score": "s"}}}},
     "say where a hit's id or its text is"),
    ({"mcp": {}}, "the file has a [mcp] table"),
])
def test_bad_system_files_are_one_line_errors(patch, message):
    raw = json.loads(json.dumps(BASE))
    raw.update(patch)
    with pytest.raises(ConfigError) as e:
        system_from_dict(raw, "bad.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_identity_never_holds_an_environment_value(monkeypatch):
    monkeypatch.setenv("MEMORY_API_KEY", "secret-one")
    a = load_system(str(EXAMPLES / "http-memory.toml"))
    monkeypatch.setenv("MEMORY_API_KEY", "secret-two")
    b = load_system(str(EXAMPLES / "http-memory.toml"))
    assert a.hash == b.hash and "secret" not in json.dumps(a.canonical())


def test_missing_environment_variable_is_one_line(cache, monkeypatch):
    monkeypatch.delenv("MEMORY_SERVICE_URL", raising=False)
    with pytest.raises(ConfigError, match="environment variable MEMORY_SERVICE_URL is not set"):
        run_system(example("http-memory.toml"), timed_dataset(), "all", cache=cache, log=lambda *a: None)


# ---- MCP: the official SDK against the reference server --------------------------------------------------------------

def mcp_stdio(faults=None, **limits):
    cmd = [sys.executable, SERVICE, "mcp-stdio"] + (["--faults", json.dumps(faults)] if faults else [])
    raw = tomllib.loads((EXAMPLES / "mcp-memory.toml").read_text())
    raw["mcp"] = {k: v for k, v in raw["mcp"].items() if k != "url"}
    raw["mcp"]["command"] = cmd
    raw["mcp"]["cwd"] = str(ROOT)
    raw["limits"] = dict(raw.get("limits", {}), **limits)
    return system_from_dict(raw, "<mcp stdio>")


def test_mcp_stdio_matches_the_reference_ranking(cache):
    ds = timed_dataset()
    run = run_system(mcp_stdio(), ds, "strict", cache=cache, log=lambda *a: None)
    assert ids(run) == expected_lists(ds, "strict")
    assert run.info["live"]["version"] == "ref-1.0" and run.info["live_ingested_docs"] == 6


def test_mcp_tool_errors_and_malformed_results_are_faults(cache):
    spec = mcp_stdio({"status": {"banana": 500}, "malformed": ["cherry"]}, fault_threshold=0.5, retries=0)
    run = run_system(spec, timed_dataset(), "all", cache=cache, log=lambda *a: None)
    assert run.info["live_fault_refused"] == 1 and run.info["live_fault_malformed"] == 1


def test_mcp_server_dying_mid_run_stops_with_one_line_and_resumes(cache, monkeypatch):
    ds = timed_dataset()
    spec = mcp_stdio(concurrency=1, retries=1, backoff=0.01)
    monkeypatch.setenv("MEMORY_FAULTS", json.dumps({"die_after": 3}))  # same system file, a server that dies
    with pytest.raises(LiveError) as e:
        run_system(spec, ds, "all", cache=cache, log=lambda *a: None)
    monkeypatch.delenv("MEMORY_FAULTS")
    msg = str(e.value)
    assert "\n" not in msg and "the system is gone" in msg and "2 of 5 queries answered and cached" in msg
    run = run_system(spec, ds, "all", cache=cache, log=lambda *a: None)
    assert run.info["live_cached"] == 2 and run.info["live_asked"] == 3
    assert ids(run) == expected_lists(ds, "all")


def test_mcp_streamable_http_example_file(cache, monkeypatch):
    port = free_port()
    p = subprocess.Popen([sys.executable, SERVICE, "mcp-http", "--port", str(port)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        monkeypatch.setenv("MEMORY_MCP_URL", f"http://127.0.0.1:{port}/mcp")
        ds = timed_dataset()
        run = run_system(load_system(str(EXAMPLES / "mcp-memory.toml")), ds, "strict", cache=cache,
                         log=lambda *a: None)
        assert ids(run) == expected_lists(ds, "strict")
        p.kill()
        p.wait()
        with pytest.raises(LiveError, match="cannot connect to MCP server|the system is gone"):
            run_system(load_system(str(EXAMPLES / "mcp-memory.toml")), ds, "all", cache=cache, refresh=True,
                       log=lambda *a: None)
    finally:
        p.kill()
        p.wait()


# ---- the command line: a system beside a preset, faults, resume -----------------------------------------------------

def _service_process(faults=None) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, SERVICE, "http"] + (["--faults", json.dumps(faults)] if faults else []),
                         stdout=subprocess.PIPE, text=True, cwd=ROOT)
    port = int(p.stdout.readline().split()[1])
    return p, f"http://127.0.0.1:{port}"


def _cli(args, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


def test_cli_run_system_beside_preset_then_fault_stop_and_resume(tmp_path):
    data = write_tiny_beir(tmp_path / "tiny")
    sysfile = tmp_path / "mine.toml"
    raw = (EXAMPLES / "http-memory.toml").read_text().replace('name = "http-memory"', 'name = "mine"')
    # a header only this test sends: a new system identity, so the shared response cache has nothing for it yet
    raw = raw.replace('headers = { Authorization', f'headers = {{ X-Test-Run = "{uuid.uuid4().hex}", Authorization')
    sysfile.write_text(raw.replace("retries = 2", "retries = 0"))
    env = dict(os.environ, MEMORY_API_KEY="k")
    def run(faults=None) -> subprocess.CompletedProcess:
        p, url = _service_process(faults)
        try:
            return _cli(["run", "--dataset", str(data), "--retrievers", f"bm25,{sysfile}", "--out",
                         str(tmp_path / "run"), "--backend", "exact"], dict(env, MEMORY_SERVICE_URL=url))
        finally:
            p.kill()
            p.wait()

    r = run({"die_after": 4})  # a service that dies on its 4th search: one line, exit 2, no run folder
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("evalkit: error:")]
    assert r.returncode == 2 and len(errors) == 1 and "system mine: the system is gone" in errors[0]
    assert not (tmp_path / "run").exists()
    r = run()  # a healthy service: the run resumes from the cache and writes the folder
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("  system mine (ref-1.0): 6 queries, "))
    asked = int(line.split("6 queries, ")[1].split(" asked")[0])
    assert 0 < asked < 6
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    rows = {(m["retriever"], m["metric"]): m["value"] for m in metrics}
    assert ("mine", "ndcg@10") in rows and ("bm25", "ndcg@10") in rows
    assert rows[("mine", "live_asked")] == asked and rows[("mine", "live_cached")] == 6 - asked
    assert rows[("mine", "latency_with_embedding_p50_ms")] > 0 and rows[("mine", "injected_tokens_mean")] > 0
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["retrievers"]["mine"]["hash"] == load_system(str(sysfile)).hash
    assert man["datasets"]["tiny"]["live"]["mine"]["version"] == "ref-1.0"


def test_replay_sends_logged_queries_at_their_own_time(service, tmp_path, monkeypatch):
    from evalkit.data.registry import locate
    from evalkit.workflows.replay import run_replay
    if locate("memory-workspace") is None:
        pytest.skip("memory-workspace not found")
    srv = service()
    lines = (ROOT / "datasets" / "memory-workspace" / "querylog.jsonl").read_text().splitlines()
    events = [json.loads(ln) for ln in lines if '"injected"' in ln][:25]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    sysfile = tmp_path / "svc.toml"
    sysfile.write_text((EXAMPLES / "http-memory.toml").read_text().replace(
        'headers = { Authorization', f'headers = {{ X-Test-Run = "{uuid.uuid4().hex}", Authorization'))
    res = run_replay(log, "memory-workspace", ["bm25", str(sysfile)], log=lambda *a: None)
    m = res.means["http-memory"]
    assert m["events"] == 25 and m["live_asked"] == 25 and m["live_faults"] == 0
    assert "prod_jaccard" in m and "latency_with_embedding_p50_ms" in m and "jaccard@10:bm25" in m
    # strict: the service held, at each event, only the notes created by its ts (plus the undated ones); a note
    # kept as several dated versions reaches a live system once, in its last version (the ingest has no delete)
    ts = sorted(e["ts"] for e in events)
    from retrievers.types import parse_time
    last = parse_time(ts[-1])
    at_last = sum(1 for d in res.replay.base.documents
                  if d.retired is None and (d.created is None or d.created <= last))
    assert m["live_ingested_docs"] == at_last == srv.memory.ingested


def test_cli_gate_records_and_regates_a_live_system(service, tmp_path):
    srv = service()
    data = write_tiny_beir(tmp_path / "tiny")
    sysfile = tmp_path / "svc.toml"
    sysfile.write_text((EXAMPLES / "http-memory.toml").read_text().replace(
        'headers = { Authorization', f'headers = {{ X-Test-Run = "{uuid.uuid4().hex}", Authorization'))
    env = dict(os.environ, MEMORY_SERVICE_URL=srv.url, MEMORY_API_KEY="k")
    base = tmp_path / "baseline.json"
    r = _cli(["gate", "--baseline", str(base), "--datasets", str(data), "--retrievers", f"bm25,{sysfile}",
              "--update", "--backend", "exact"], env)
    assert r.returncode == 0, r.stderr
    recorded = json.loads(base.read_text())
    assert {x["name"] for x in recorded["retrievers"]} == {"bm25", "http-memory"}
    assert {(x["retriever"], x["metric"]) for x in recorded["rows"]} >= {("http-memory", "ndcg@10")}
    asked = srv.memory.searches
    r = _cli(["gate", "--baseline", str(base), "--backend", "exact"], env)  # re-runs what the baseline records
    assert r.returncode == 0, r.stdout + r.stderr
    assert "http-memory" in r.stdout and srv.memory.searches == asked  # answered from the response cache


# ---- issue 41: refused notes, code changes, killed servers, cached answers without a server ------------------------

def single_note(**limits) -> "SystemSpec":  # noqa: F821
    """An mcp-memory-service-like file: one note per request, its answer's `success` read by default."""
    raw = tomllib.loads((EXAMPLES / "http-memory.toml").read_text())
    raw["http"]["ingest"] = {"path": "/v1/memories",
                             "body": {"text": "{text}", "user_id": "{group}", "metadata": {"evk_id": "{id}"}}}
    raw["limits"] = dict(raw.get("limits", {}), **limits)
    return system_from_dict(raw, "<single-note>")


def test_refused_notes_are_counted_and_named_within_the_threshold(service, cache):
    srv = service({"refuse": ["d2"]})  # 200 {"stored": [..., false, ...]} for a batch
    ds = timed_dataset()
    run = run_system(example("http-memory.toml", fault_threshold=0.2), ds, "all", cache=cache, log=lambda *a: None)
    assert srv.memory.refused == 1 and srv.memory.ingested == 5
    assert run.info["live_notes_sent"] == 6 and run.info["live_notes_accepted"] == 5
    assert run.info["live_fault_note_refused"] == 1 and run.info["live_faults"] == 1
    (w,) = [w for w in run.info["warnings"] if w["what"] == "live_refused_notes"]
    assert w["text"].startswith("system http-memory: 1 of 6 notes refused by the system: d2 (first: d2: refused")
    assert ids(run)["q3"] == []  # its only match was refused: scored as the system answered
    # a cached rerun still says what the system refused, as recorded when the notes were sent
    again = run_system(example("http-memory.toml", fault_threshold=0.2), ds, "all", cache=cache,
                       log=lambda *a: None)
    assert again.info["live_asked"] == 0 and again.info["live_fault_note_refused"] == 1
    assert "1 of 6 notes refused" in next(w["text"] for w in again.info["warnings"] if w["what"] == "live_refused_notes")


def test_refusals_beyond_the_threshold_stop_and_take_back_the_answers(service, cache):
    srv = service({"dedup": True})  # mcp-memory-service: its exact-duplicate check spans namespaces
    ds = timed_dataset()
    spec = single_note(fault_threshold=0.2)
    first = run_system(spec, ds, "strict", cache=cache, log=lambda *a: None)
    assert first.info["live_notes_accepted"] == 6 and first.info["live_faults"] == 0
    # asked again in a new {run} namespace, against the same store: every note is a duplicate of the first run's
    with pytest.raises(LiveError) as e:
        run_system(spec, ds, "strict", cache=cache, refresh=True, log=lambda *a: None)
    msg = str(e.value)
    assert "\n" not in msg and "notes sent refused by the system" in msg and "Duplicate content detected" in msg
    assert "run again to resume" not in msg  # resuming cannot help: the store holds them
    assert srv.memory.refused >= 2
    # nothing this run asked stays in the cache; the first run's answers do
    srv.memory.faults = {}
    again = run_system(spec, ds, "strict", cache=cache, log=lambda *a: None)
    assert again.info["live_cached"] == 5 and again.info["live_asked"] == 0


def test_mcp_store_refusals_and_stderr_in_a_log_file(cache):
    lines = []
    run = run_system(mcp_stdio({"refuse": ["d1"]}, fault_threshold=0.5), timed_dataset(), "all", cache=cache,
                     log=lines.append)
    assert run.info["live_fault_note_refused"] == 1 and run.info["live_notes_accepted"] == 5
    log = run.info["live"]["stderr_log"]
    assert Path(log).is_file() and [ln for ln in lines if "the server's stderr goes to" in ln] == [
        f"  system mcp-memory: the server's stderr goes to {log}"]


def test_a_401_stops_without_the_resume_hint(service, cache):
    service({"status": {"alpha": 401, "banana": 401}})
    with pytest.raises(LiveError) as e:
        run_system(example("http-memory.toml", retries=0, fault_threshold=0.2), timed_dataset(), "all", cache=cache,
                   log=lambda *a: None)
    assert "HTTP 401" in str(e.value) and "answered and cached)" in str(e.value)
    assert "run again" not in str(e.value)


def test_unversioned_service_answers_from_the_cache_say_when(service, cache):
    service()
    raw = tomllib.loads((EXAMPLES / "http-memory.toml").read_text())
    del raw["http"]["version"]
    spec = system_from_dict(raw, "<no version>")
    first = run_system(spec, timed_dataset(), "all", cache=cache, log=lambda *a: None)
    assert not [w for w in first.info["warnings"] if w["what"] == "live_cached_unversioned"]
    again = run_system(spec, timed_dataset(), "all", cache=cache, log=lambda *a: None)
    (w,) = [w for w in again.info["warnings"] if w["what"] == "live_cached_unversioned"]
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert w["text"] == (f"system http-memory reports no version: 5 of 5 answers cached on {today}; "
                         f"`--refresh` to ask again")


def test_every_answer_cached_needs_no_server(service, cache, monkeypatch):
    srv = service()
    ds = timed_dataset()
    run_system(example("http-memory.toml"), ds, "all", cache=cache, log=lambda *a: None)
    srv.stop()  # its /version cannot be asked: the version it last reported names the cached answers
    run = run_system(example("http-memory.toml"), ds, "all", cache=cache, log=lambda *a: None)
    assert run.info["live_cached"] == 5 and ids(run) == expected_lists(ds, "all")
    assert any(w["what"] == "live_unreachable" and "version ref-1.0" in w["text"] for w in run.info["warnings"])
    with pytest.raises(LiveError, match="ClientConnectorError.*run again to resume"):  # something to ask: needed
        run_system(example("http-memory.toml"), ds, "strict", cache=cache, log=lambda *a: None)


def _mcp_http_process(port: int, faults=None) -> subprocess.Popen:
    import socket
    env = dict(os.environ, MEMORY_FAULTS=json.dumps(faults)) if faults else None
    p = subprocess.Popen([sys.executable, SERVICE, "mcp-http", "--port", str(port)], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    return p


def test_mcp_every_answer_cached_needs_no_server(cache, monkeypatch):
    port = free_port()
    monkeypatch.setenv("MEMORY_MCP_URL", f"http://127.0.0.1:{port}/mcp")
    ds = timed_dataset()
    p = _mcp_http_process(port)
    try:
        run_system(load_system(str(EXAMPLES / "mcp-memory.toml")), ds, "all", cache=cache, log=lambda *a: None)
    finally:
        p.kill()
        p.wait()
    run = run_system(load_system(str(EXAMPLES / "mcp-memory.toml")), ds, "all", cache=cache, log=lambda *a: None)
    assert run.info["live_cached"] == 5 and run.info["live_asked"] == 0 and ids(run) == expected_lists(ds, "all")


@pytest.mark.slow
def test_cli_killed_mcp_server_is_one_line_exit_2(tmp_path):
    port = free_port()
    data = write_tiny_beir(tmp_path / "tiny")
    sysfile = tmp_path / "mcp.toml"
    sysfile.write_text((EXAMPLES / "mcp-memory.toml").read_text().replace("concurrency = 4", "concurrency = 1"))
    p = _mcp_http_process(port, {"die_after": 3})  # the server process exits on its 3rd search
    try:
        r = _cli(["run", "--dataset", str(data), "--retrievers", str(sysfile), "--out", str(tmp_path / "run")],
                 dict(os.environ, MEMORY_MCP_URL=f"http://127.0.0.1:{port}/mcp",
                      EVALKIT_CACHE=str(tmp_path / "cache")))  # the hash keeps ${MEMORY_MCP_URL}: a fresh cache
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "CancelledError" not in r.stderr
    (err,) = [ln for ln in r.stderr.splitlines() if ln.startswith("evalkit:")]
    assert err.startswith("evalkit: error: system mcp-memory: the system is gone: ")
    assert "2 of 6 queries answered and cached; run again to resume" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cli_python_system_asked_again_when_its_code_changes(tmp_path):
    data = write_tiny_beir(tmp_path / "tiny")
    pkg = tmp_path / "pkg" / f"kw_{uuid.uuid4().hex[:8]}"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    src = (ROOT / "tests" / "system" / "test_live_systems.py").read_text()
    body = src[src.index("class Keyword:"):src.index("class AsyncBroken:")]
    (pkg / "keyword.py").write_text("import re\nfrom retrievers.systems.protocol import Hit\n"
                                    "TOKEN = re.compile(r'\\w+')\n\n\n" + body)
    sysfile = tmp_path / "kw.toml"
    sysfile.write_text(f'name = "kw"\nkind = "python"\n[python]\nobject = "{pkg.name}.keyword:Keyword"\n')
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'pkg'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")

    def run(n: int) -> tuple[str, dict]:
        out = tmp_path / f"run{n}"
        r = _cli(["run", "--dataset", str(data), "--retrievers", str(sysfile), "--out", str(out)], env)
        assert r.returncode == 0, r.stderr[-2000:]
        rows = {m["metric"]: m["value"] for m in json.loads((out / "metrics.json").read_text())["rows"]}
        return next(ln for ln in r.stdout.splitlines() if ln.startswith("  system kw (")), rows

    line, rows = run(1)
    assert "6 queries, 6 asked, 0 from cache" in line
    assert "recall@10" in rows and "recall@100" not in rows  # deeper than its k = 10: left empty
    line, _ = run(2)
    assert "6 queries, 0 asked, 6 from cache" in line
    kw = pkg / "keyword.py"
    kw.write_text(kw.read_text().replace("[:k] if s]", "[:1] if s]"))  # same file, new code: only the best hit
    line, changed = run(3)
    assert "6 queries, 6 asked, 0 from cache" in line
    assert changed["recall@10"] < rows["recall@10"]  # the new code's answers, not the old code's
