"""An answer spec's record round-trips (what a gate baseline re-runs), names what changed, and budget variants are
the retriever's own packer at another token cap."""
from evalkit.engine.answer import AnswerSpec, Judge, Prompt, budget_of, budget_variants
from evalkit.engine.llm import Endpoint
from evalkit.report.answers import answers_line, budget_points
from retrievers.pipeline import load_preset


def _spec(tmp_path, judge_prompt="judge-v1"):
    ep = Endpoint("http://127.0.0.1:9/v1", "m", cache_dir=tmp_path)
    return AnswerSpec(ep, [Judge(Endpoint("http://127.0.0.1:9/v1", "j", cache_dir=tmp_path),
                                 Prompt.load(judge_prompt))], price_in=1.0, price_out=2.0)


def test_record_round_trips_and_names_changes(tmp_path):
    rec = _spec(tmp_path).record()
    again = AnswerSpec.from_record(rec, timeout=5.0)
    assert again.record() == rec and again.reader.timeout == 5.0 and again.judges[0].endpoint.model == "j"
    assert again.changed(rec) == []
    other = _spec(tmp_path, "judge-strict-v1")
    lines = other.changed(rec)
    assert len(lines) == 1 and lines[0].startswith("judge 1 prompt judge-v1 (") and "judge-strict-v1" in lines[0]
    # a prompt given as a path is recorded as that path, so the record reloads it
    custom = tmp_path / "mine.txt"
    custom.write_text("You grade.\n=== user ===\nReference answer: {gold}\nGiven answer: {answer}\n")
    p = Prompt.load(str(custom))
    assert p.name == "mine" and Prompt.load(p.source).hash == p.hash


def test_budget_variants_keep_the_packer_and_cap_its_tokens():
    bm25 = load_preset("bm25")
    out = budget_variants([bm25], [400, 150, 400])
    assert [p.name for p in out] == ["bm25", "bm25@150", "bm25@400"]
    pack = next(s for s in out[1].stages if s.name == "budget.pack")
    own = next(s for s in bm25.stages if s.name == "budget.pack")
    assert pack.max_tokens == 150 and own.max_tokens is None
    assert pack.max_chunks == own.max_chunks and pack.format == own.format and out[1].budget["max_tokens"] == 150
    assert out[1].hash != bm25.hash
    names = [p.name for p in out]
    assert budget_of("bm25@150", names) == ("bm25", 150) and budget_of("bm25", names) == ("bm25", None)
    assert budget_of("x@3", names) == ("x@3", None)       # not a variant: no base of that name in the run
    curves = budget_points(names, {"bm25": 330.0, "bm25@150": 140.0, "bm25@400": 330.0},
                           {"bm25": 0.2, "bm25@150": 0.1, "bm25@400": 0.2})
    assert curves == {"bm25": [(330.0, 0.2, "own"), (140.0, 0.1, "150"), (330.0, 0.2, "400")]}


def test_answers_line_names_models_and_prompt_hashes(tmp_path):
    rec = _spec(tmp_path).record()
    line = answers_line({"answers": {"a": rec, "b": rec}})
    assert line == (f"answers: reader m (reader-v1 {rec['reader']['prompt_hash']}); judges j (judge-v1 "
                    f"{rec['judges'][0]['prompt_hash']}); temperature 0, seed 0")
    assert answers_line({}) is None
