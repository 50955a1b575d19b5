"""`evalkit replay`: overlap measures against hand-computed values, the citation rule's test vector, lenient log
reading end to end, the replay numbers' invariants on a slice of the memory-workspace log, and the run folder."""
import json
import math
import os
from pathlib import Path

import pytest

from evalkit.data.readers.querylog import load_querylog
from retrievers.types import DataError
from evalkit.measures.overlap import jaccard, jaccard_at_k, rbo_ext
from evalkit.workflows.replay import PRODUCTION, build_replay_set, cited_notes, log_label, run_replay
from retrievers.stages.helpers.feedback import significant_words
from tests.helpers import ROOT, FIXTURES

FIX = FIXTURES / "replay"
WORKSPACE_LOG = ROOT / "datasets" / "memory-workspace" / "querylog.jsonl"
CHEAP = ["bm25", "dense", "lancedb_pro_6a50220_vector", "hookclaw_v2_1_fts"]
SLICE = 150


# ---- RBO (Webber et al. 2010, extrapolated form) ---------------------------------------------------------------

def test_rbo_identical_lists_is_one():
    for n in (1, 2, 5, 30):
        xs = [f"d{i}" for i in range(n)]
        assert rbo_ext(xs, xs) == pytest.approx(1.0, abs=1e-12)
        assert rbo_ext(xs, xs, p=0.5) == pytest.approx(1.0, abs=1e-12)


def test_rbo_disjoint_lists_is_zero():
    assert rbo_ext(["a", "b", "c"], ["x", "y", "z"]) == 0.0
    assert rbo_ext(["a"], ["x", "y", "z", "w"]) == 0.0
    assert rbo_ext(["a", "b"], []) == 0.0
    assert math.isnan(rbo_ext([], []))


def test_rbo_worked_example_equal_lengths():
    # S = a b c d, L = b a e d, p = 0.9:  X_1..X_4 = 0, 2, 2, 3
    # (1-p)/p * (0 + 2/2*.81 + 2/3*.729 + 3/4*.6561) + 3/4*.6561
    # = (0.81 + 0.486 + 0.492075) / 9 + 0.492075 = 0.198675 + 0.492075 = 0.690750
    assert rbo_ext(list("abcd"), list("baed")) == pytest.approx(0.690750, abs=1e-9)
    assert rbo_ext(list("baed"), list("abcd")) == pytest.approx(0.690750, abs=1e-9)


def test_rbo_worked_example_uneven_lengths():
    # S = a b (s = 2), L = a c b d (l = 4), p = 0.9:  X_1..X_4 = 1, 1, 2, 2; X_s = 1, X_l = 2
    # sum_d X_d/d p^d            = .9 + .405 + .486 + .32805           = 2.11905
    # sum_{d=3..4} X_s(d-s)/(sd) p^d = 1/6*.729 + 2/8*.6561           = 0.285525
    # (1-p)/p * 2.404575 = 0.267175;  ((X_l-X_s)/l + X_s/s) p^l = .75 * .6561 = 0.492075  → 0.759250
    assert rbo_ext(["a", "b"], ["a", "c", "b", "d"]) == pytest.approx(0.759250, abs=1e-9)
    assert rbo_ext(["a", "c", "b", "d"], ["a", "b"]) == pytest.approx(0.759250, abs=1e-9)


def test_rbo_single_item_and_prefix():
    # S = a, L = a b: X_1 = 1, X_2 = 1; (1/9)(.9 + .5*.81 + 1*1/(1*2)*.81) + ((1-1)/2 + 1/1)*.81 = 0.19 + 0.81 = 1
    # (a list that is a prefix of the other agrees completely as far as it goes: extrapolation gives 1)
    assert rbo_ext(["a"], ["a", "b"]) == pytest.approx(1.0, abs=1e-12)
    # top item swapped: X_1 = 0, X_2 = 2: (1/9)(0 + .81) + .81 = 0.9
    assert rbo_ext(["a", "b"], ["b", "a"]) == pytest.approx(0.9, abs=1e-12)


def test_rbo_bounds_and_validation():
    import random
    rng = random.Random(7)
    for _ in range(200):
        a = rng.sample(range(30), rng.randint(1, 15))
        b = rng.sample(range(30), rng.randint(1, 15))
        v = rbo_ext(a, b)
        assert 0.0 <= v <= 1.0 + 1e-12
        assert v == pytest.approx(rbo_ext(b, a), abs=1e-12)
    with pytest.raises(ValueError):
        rbo_ext(["a"], ["a"], p=1.0)


def test_jaccard_at_k():
    a, b = ["a", "b", "c", "d"], ["b", "c", "e"]
    assert jaccard_at_k(a, b, 1) == 0.0  # {a} vs {b}
    assert jaccard_at_k(a, b, 2) == pytest.approx(1 / 3)  # {a,b} vs {b,c}
    assert jaccard_at_k(a, b, 3) == pytest.approx(2 / 4)  # {a,b,c} vs {b,c,e}
    assert jaccard_at_k(a, b, 10) == pytest.approx(2 / 5)
    assert jaccard_at_k(a, a, 3) == 1.0
    assert jaccard_at_k(a, [], 3) == 0.0
    assert math.isnan(jaccard([], []))


# ---- citation rule (PIPELINES.md §C.4 test vector, through the shared function) ------------------------------

CHUNK = "Fixed DatePicker validation bug in RouteOps; root cause was timezone handling"
RESPONSES = [  # (response, matched of 8)
    ("The DatePicker bug in RouteOps was caused by timezone handling, which we fixed.", 6),
    ("Sure, here is a haiku.", 0),
    ("RouteOps DatePicker timezone handling", 4),
    ("Root cause: timezone handling in the DatePicker validation", 6),
    ("Fixed.", 1),
]


def test_citation_rule_test_vector():
    assert significant_words(CHUNK) == ["fixed", "datepicker", "validation", "routeops", "root", "cause",
                                        "timezone", "handling"]
    texts = {"m": CHUNK}
    for response, matched in RESPONSES:
        expect = matched / 8 >= 0.3
        assert cited_notes(["m"], texts, response) == (["m"] if expect else []), response
    # the threshold is configurable: 0.6 keeps 6/8 and drops 4/8
    got = [bool(cited_notes(["m"], texts, r, threshold=0.6)) for r, _ in RESPONSES]
    assert got == [True, False, False, True, False]
    # unknown ids and missing responses never cite
    assert cited_notes(["unknown"], texts, RESPONSES[0][0]) == []
    assert cited_notes(["m"], texts, None) == []


# ---- logs: lenient reading, labels, groups -------------------------------------------------------------------

def test_log_label():
    assert log_label("memory-workspace", Path("x/querylog.jsonl")) == "memory-workspace:querylog"
    assert log_label("memory-workspace", Path("prod-03.jsonl.gz")) == "memory-workspace:prod-03"


def _workspace():
    from evalkit.data.registry import load_dataset
    return load_dataset("memory-workspace")


def test_replay_set_counts_bad_lines_and_unknown_ids():
    log = load_querylog(FIX / "bad_lines.jsonl")
    reasons = dict(log.skipped)
    assert sorted(reasons) == [2, 3, 4, 7]
    assert reasons[2].startswith("not JSON")
    assert reasons[3] == "no 'query'"
    assert reasons[4] == "no 'ts'"
    assert reasons[7].startswith("invalid 'ts'")
    rs = build_replay_set(_workspace(), log)
    assert rs.label == "memory-workspace:bad_lines"
    assert [q.id for q in rs.dataset.queries] == ["log:1", "log:5", "log:6"]
    assert all(q.group == "workspace" for q in rs.dataset.queries)  # single-group corpus: its group
    assert rs.unknown_injected == {"memory/does-not-exist.md#L1-L2": 1} and rs.unknown_events == 1
    # the unknown id keeps its place in production's list (no retriever can match it), as trec_eval's rule for a run
    assert "memory/does-not-exist.md#L1-L2" in rs.production["log:5"]
    assert rs.production["log:6"] is None  # no `injected` logged
    first = json.loads((FIX / "bad_lines.jsonl").read_text().splitlines()[0])
    assert set(rs.cited.get("log:1", [])) <= set(first["injected"])  # only production-injected notes are cited
    assert rs.dataset.queries[1].context  # follow-up context travels with the query
    assert rs.dataset.queries[0].as_of == pytest.approx(1773081710.0)  # 2026-03-09T18:41:50Z


def test_all_bad_log_is_one_line_error():
    with pytest.raises(DataError, match="no valid events"):
        load_querylog(FIX / "all_bad.jsonl")


# ---- end to end on a slice of the project's own log -------------------------------------------------------------

@pytest.fixture(scope="module")
def slice_result(tmp_path_factory):
    if not WORKSPACE_LOG.exists():
        pytest.skip("memory-workspace query log not present")
    p = tmp_path_factory.mktemp("log") / "querylog.jsonl"
    lines = WORKSPACE_LOG.read_text(encoding="utf-8").splitlines(keepends=True)[:SLICE]
    p.write_text("".join(lines), encoding="utf-8")
    return run_replay(p, "memory-workspace", CHEAP, log=lambda *_: None, warn=lambda *_: None)


def test_replay_slice_invariants(slice_result):
    r = slice_result
    assert set(r.runs) == set(CHEAP)
    assert r.replay.label == "memory-workspace:querylog"
    events = r.replay.log.events
    assert len(events) == SLICE
    for name, run in r.runs.items():
        m = r.means[name]
        assert len(run.results) == SLICE
        for key in ("skip_rate", "injection_rate", "budget_compliance", "phase3_policy_compliance",
                    "pseudo_ndcg@10", "pseudo_recall@10", "prod_jaccard", "prod_recall", "prod_decision_agreement"):
            assert 0.0 <= m[key] <= 1.0, (name, key, m[key])
        assert m["skip_rate"] == pytest.approx(sum(x.skipped for x in run.results.values()) / SLICE)
        assert m["injection_rate"] == pytest.approx(sum(bool(x.injected) for x in run.results.values()) / SLICE)
        assert m["pseudo_events"] == len(r.replay.cited) > 0
        assert m["injected_tokens_mean"] >= 0  # filled for presets without a packer too
        for other in CHEAP:
            if other != name:
                assert m[f"rbo:{other}"] == r.means[other][f"rbo:{name}"]
                assert 0.0 <= m[f"jaccard@10:{other}"] <= 1.0
    # packer presets keep their budgets; the no-packer baselines inject their whole list
    assert r.means["lancedb_pro_6a50220_vector"]["budget_compliance"] == 1.0
    assert r.means["hookclaw_v2_1_fts"]["injected_chunks_max"] <= 3
    for name, run in r.runs.items():
        packer = any(s.kind == "budget" for s in run.pipeline.stages)
        for x in run.results.values():
            ids = [d for d, _ in x.ranked]
            assert [d for d in ids if d in set(x.injected)] == x.injected  # injected ⊆ ranked, same order
            if not packer:  # no budget packer: the whole ranked list is injected (harness convention)
                assert x.injected == ids
    # production's own numbers come from the log only
    prod = r.means[PRODUCTION]
    lat = sorted(e.latency_ms for e in events if e.latency_ms is not None)
    assert prod["latency_events"] == len(lat)
    assert prod["latency_ms_max"] == lat[-1]
    assert lat[0] <= prod["latency_ms_p50"] <= prod["latency_ms_p99"] <= lat[-1]
    assert prod["events"] == SLICE and prod["skipped_lines"] == 0


def test_replay_agreement_by_hand(slice_result):
    r = slice_result
    run = r.runs["lancedb_pro_6a50220_vector"]
    rec, prec, jac = [], [], []
    for q, prod in r.replay.production.items():
        if not prod:
            continue
        mine, ps = set(run.results[q].injected), set(prod)
        rec.append(len(mine & ps) / len(ps))
        jac.append(len(mine & ps) / len(mine | ps))
        if mine:
            prec.append(len(mine & ps) / len(mine))
    m = r.means["lancedb_pro_6a50220_vector"]
    assert m["prod_recall"] == pytest.approx(sum(rec) / len(rec))
    assert m["prod_jaccard"] == pytest.approx(sum(jac) / len(jac))
    assert m["prod_precision"] == pytest.approx(sum(prec) / len(prec))
    # pseudo-recall@10 by hand (the nDCG comes from ranx)
    vals = []
    for q, cited in r.replay.cited.items():
        top = {d for d, _ in run.results[q].ranked[:10]}
        vals.append(len(top & set(cited)) / len(cited))
    assert m["pseudo_recall@10"] == pytest.approx(sum(vals) / len(vals))


def test_pseudo_labels_match_the_logs_own_cited_field(slice_result):
    """The workspace generator records which injected notes its response cites (unknown key ``cited``, kept by
    the log reader); the replay's pseudo-labels from the shared citation rule must agree with it."""
    rs = slice_result.replay
    checked = 0
    for q, ev in zip(rs.dataset.queries, rs.log.events):
        if "cited" in ev.extra and rs.production.get(q.id):
            assert sorted(rs.cited.get(q.id, [])) == sorted(ev.extra["cited"]), q.id
            checked += 1
    if not checked:
        pytest.skip("this log has no 'cited' field to check against")


def test_replay_uses_each_events_as_of(slice_result):
    rs = slice_result.replay
    for q, ev in zip(rs.dataset.queries, rs.log.events):
        assert q.as_of == ev.ts and q.id == f"log:{ev.line_no}"


# ---- the command: run folder, stderr summary, failures -------------------------------------------------------------

def _cli(argv, capsys):
    from evalkit.cli import main
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_bad_lines_are_listed_and_rest_replayed(tmp_path, capsys):
    out = tmp_path / "run"
    code, stdout, stderr = _cli(["replay", "--log", str(FIX / "bad_lines.jsonl"), "--dataset", "memory-workspace",
                                 "--retrievers", "bm25,hookclaw_v2_1_fts", "--out", str(out)], capsys)
    assert code == 0, stderr
    summary = [ln for ln in stderr.splitlines() if ln.startswith("evalkit: warning: replay ")]
    assert len(summary) == 1
    assert "4 bad log line(s) skipped" in summary[0] and "3 events replayed" in summary[0]
    assert "1 injected id(s) not in the corpus" in summary[0]
    skipped = json.loads((out / "replay_skipped.json").read_text())
    assert [(s["line"], s["reason"].split(":")[0]) for s in skipped["skipped"]] == [
        (2, "not JSON"), (3, "no 'query'"), (4, "no 'ts'"), (7, "invalid 'ts'")]
    assert skipped["unknown_injected"]["count"] == 1
    for f in ("metrics.json", "metrics.csv", "per_query.csv", "manifest.json", "replay.md",
              "results/memory-workspace_bad_lines/bm25.jsonl", "runs/memory-workspace_bad_lines/bm25.trec"):
        assert (out / f).exists(), f
    rows = json.loads((out / "metrics.json").read_text())["rows"]
    assert {r["dataset"] for r in rows} == {"memory-workspace:bad_lines"}
    get = {(r["retriever"], r["metric"]): r["value"] for r in rows}
    assert get[(PRODUCTION, "skipped_lines")] == 4 and get[(PRODUCTION, "events")] == 3
    assert get[("bm25", "events")] == 3
    results = (out / "results/memory-workspace_bad_lines/bm25.jsonl").read_text().splitlines()
    assert [json.loads(x)["query_id"] for x in results] == ["log:1", "log:5", "log:6"]
    man = json.loads((out / "manifest.json").read_text())
    assert man["replay"]["citation_threshold"] == 0.3
    assert man["datasets"]["memory-workspace:bad_lines"]["querylog"]["skipped"] == 4
    md = (out / "replay.md").read_text()
    assert "Biased toward production" in md
    assert "pseudo-nDCG@10" in stdout and "production (from the log)" in stdout


def test_cli_all_bad_log_exits_nonzero_with_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, stderr = _cli(["replay", "--log", str(FIX / "all_bad.jsonl"), "--dataset", "memory-workspace",
                            "--retrievers", "bm25", "--out", str(out)], capsys)
    assert code != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "no valid events" in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_bad_input_one_line(tmp_path, capsys):
    for argv, msg in ((["--retrievers", "no_such_preset"], "unknown retriever"),
                      (["--retrievers", "bm25", "--log", str(tmp_path / "missing.jsonl")], "not found")):
        base = ["replay", "--log", str(FIX / "bad_lines.jsonl"), "--dataset", "memory-workspace",
                "--out", str(tmp_path / "run")]
        code, _, stderr = _cli(base + argv, capsys)
        assert code != 0 and msg in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_run_folder_written_atomically(tmp_path, capsys, monkeypatch):
    """A failure while the folder is being written leaves nothing behind (and an existing folder intact)."""
    from evalkit.runfolder.write import RunWriter
    out = tmp_path / "run"
    argv = ["replay", "--log", str(FIX / "bad_lines.jsonl"), "--dataset", "memory-workspace",
            "--retrievers", "bm25", "--out", str(out)]
    real = RunWriter._write_into

    def half_written(self, d):  # some files are in the temporary folder when the failure hits
        (Path(d) / "metrics.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(RunWriter, "_write_into", half_written)
    with pytest.raises(OSError):
        _cli(argv, capsys)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(RunWriter, "_write_into", real)
    assert _cli(argv, capsys)[0] == 0
    before = (out / "metrics.json").read_text()
    monkeypatch.setattr(RunWriter, "_write_into", half_written)
    with pytest.raises(OSError):
        _cli(argv, capsys)
    assert (out / "metrics.json").read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["run"]
