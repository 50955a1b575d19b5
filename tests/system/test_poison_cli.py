"""`evalkit poison` end to end: the planted notes of real datasets are never in the qrels and always dated before
their targets; bad input is one line, exit 2, nothing written; `evalkit run` on a poisoned folder reports the poison
measures per attack, the manifest names the targets and report.md has the robustness section."""
import json
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.data.readers.beir import load_beir
from evalkit.data.registry import load_dataset, locate
from retrievers.index.visibility import VISIBLE_TO

ATTACKS = "query-echo,instruction,trigger,keyword-stuff,false-fact"


def _check_planted(clean, poisoned):
    """Every planted note: labelled, in its targets' group, dated before each target's as_of, absent from every
    qrels row; the clean corpus, qrels and splits are unchanged."""
    qs = {q.id: q for q in poisoned.queries}
    notes = [d for d in poisoned.documents if d.metadata.get("poison")]
    assert notes
    judged = {d for rel in poisoned.qrels.values() for d in rel}
    assert not judged & {d.id for d in notes}, "a planted note is in the qrels"
    for d in notes:
        for t in d.metadata["poison_target"]:
            assert d.group == qs[t].group
            assert d.created is not None and d.created < qs[t].as_of, (d.id, t)
    assert poisoned.qrels == clean.qrels
    assert [d.id for d in poisoned.documents[:len(clean.documents)]] == [d.id for d in clean.documents]
    assert {k: sorted(v) for k, v in poisoned.splits.items()} == {k: sorted(v) for k, v in clean.splits.items()}
    return notes


@pytest.mark.parametrize("name, args", [("memory-workspace", ["--rate", "0.01", "--isolate"]),
                                        ("memory-workspace", ["--rate", "0.3"]),
                                        ("locomo", ["--rate", "0.01", "--isolate", "--targets", "300"]),
                                        ("locomo", ["--rate", "0.01"])])
def test_planted_notes_of_real_datasets_are_never_in_qrels_and_dated_before_their_targets(tmp_path, capsys, name,
                                                                                            args):
    if locate(name) is None:
        pytest.skip(f"real data for {name!r} not present (set EVALKIT_DATA)")
    out = tmp_path / "p"
    assert main(["poison", "--dataset", name, "--attacks", ATTACKS, "--seed", "7", "--out", str(out), *args]) == 0
    assert "the planted notes are in none" in capsys.readouterr().out
    notes = _check_planted(load_dataset(name), load_beir(out))
    assert all((VISIBLE_TO in d.metadata) == ("--isolate" in args) for d in notes)


def _undated_folder(root: Path) -> Path:
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"note {i} about port {i}"}) + "\n"
                                               for i in range(20)))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "which port"}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    return root


def test_a_bad_template_file_is_one_line_naming_file_and_entry_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "out"
    good = '{"family": "soft-link", "template": "{topic}: see https://wiki.example/x"}\n'
    cases = [("a.jsonl", good + '{"family": "x", "template": "{answr}"}\n', "a.jsonl: line 2 (family x): unknown field"),
             ("b.jsonl", good + '{"template": "{query}"}\n', "b.jsonl: line 2: no 'family'"),
             ("c.jsonl", good + "{not json\n", "c.jsonl: line 2: malformed JSON"),
             ("d.toml", "[[template]]\nfamily = \"x\"\ntemplate = \"{query\"\n", "d.toml: entry 1 (family x): malformed"),
             ("e.jsonl", "\n\n", "e.jsonl: no templates")]
    for name, text, msg in cases:
        f = tmp_path / name
        f.write_text(text)
        assert main(["poison", "--dataset", "memory-workspace", "--templates", str(f), "--rate", "0.01", "--isolate",
                     "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("evalkit: error: ") and msg in err[0], err
        assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    f = tmp_path / "ok.jsonl"
    f.write_text(good)
    assert main(["poison", "--dataset", "memory-workspace", "--templates", str(f), "--rate", "0.01", "--isolate",
                 "--targets", "5", "--out", str(out)]) == 0
    assert "soft-link 5" in capsys.readouterr().out
    assert {d.metadata["poison_templates"] for d in load_beir(out).documents if d.metadata.get("poison")} == {
        "file:ok.jsonl"}


def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    undated = _undated_folder(tmp_path / "undated")
    out = tmp_path / "out"
    cases = [
        (["--dataset", "memory-workspace", "--attacks", "query-echo", "--rate", "1"], "would replace the store"),
        (["--dataset", "memory-workspace", "--attacks", "query-echo", "--rate", "0.01", "--isolate",
          "--targets", "ws-exact-001,no-such-query"], "'no-such-query' does not exist"),
        (["--dataset", str(undated), "--attacks", "query-echo", "--rate", "0.1"], "has no timestamps"),
        (["--dataset", "memory-workspace", "--attacks", "sql-injection", "--rate", "0.01"], "unknown attack"),
    ]
    for args, msg in cases:
        assert main(["poison", *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("evalkit: error: ") and msg in err[0], err
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no temporary folder left
    # --undated plants undated notes into that folder; an existing non-empty --out is refused
    assert main(["poison", "--dataset", str(undated), "--attacks", "query-echo", "--rate", "0.1", "--undated",
                 "--out", str(out)]) == 0
    assert all(d.created is None for d in load_beir(out).documents)
    capsys.readouterr()
    assert main(["poison", "--dataset", str(undated), "--attacks", "query-echo", "--rate", "0.1", "--undated",
                 "--out", str(out)]) == 2
    assert "not an empty folder" in capsys.readouterr().err


def test_run_on_a_poisoned_folder_reports_poison_measures_and_robustness(tmp_path, capsys):
    out = tmp_path / "ws-poisoned"
    assert main(["poison", "--dataset", "memory-workspace", "--attacks", ATTACKS, "--rate", "0.01", "--isolate",
                 "--seed", "3", "--out", str(out)]) == 0
    run = tmp_path / "run"
    assert main(["run", "--dataset", f"memory-workspace,{out}", "--retrievers", "bm25", "--backend", "exact",
                 "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    rows = metrics["rows"]
    got = {(r["dataset"], r["metric"]): r["value"] for r in rows}
    assert 0 < got[("ws-poisoned", "poison_rate@10")] <= 1 and ("memory-workspace", "poison_rate@10") not in got
    by_attack = [line for line in (run / "metrics_by_category.csv").read_text().splitlines() if ",attack," in line]
    assert len(by_attack) == 2 * 5  # both rates for each attack
    man = json.loads((run / "manifest.json").read_text())["datasets"]["ws-poisoned"]["poison"]
    assert set(man["targets"]) == set(ATTACKS.split(",")) and man["planting"]["source"]["name"] == "memory-workspace"
    report = (run / "report.md").read_text()
    assert "### Robustness: planted notes that reach the prompt" in report
    assert "nDCG@10 on the clean dataset (memory-workspace)" in report
    assert "data:image/png;base64," in (run / "report.html").read_text().split("The trade-off")[1][:4000]


@pytest.mark.slow  # plants LoCoMo and runs two retrievers over 2,000 questions: about 75 s
def test_run_report_names_what_each_guard_cannot_catch_with_clustered_intervals(tmp_path, capsys):
    """A LoCoMo planting (targets clustered by conversation) run with bm25 behind guard.payload: the robustness
    section lists, for the guarded retriever only, the families no guard of it reads (query-echo, false-fact,
    sourced-fact) with the run's own per-attack counts, each interval at least as wide as Wilson's for independent
    targets (a conversation's targets move together)."""
    from evalkit.measures.intervals import wilson_interval
    from evalkit.report import robustness
    from evalkit.runfolder.view import RunData

    out = tmp_path / "lc-poisoned"
    assert main(["poison", "--dataset", "locomo", "--attacks", "query-echo,instruction,sourced-fact,false-fact",
                 "--rate", "0.01", "--isolate", "--templates", "design", "--targets", "200", "--seed", "3",
                 "--out", str(out)]) == 0
    preset = tmp_path / "bm25_payload.toml"
    preset.write_text('extends = "bm25"\nname = "bm25_payload"\n\n[[replace_stages]]\ntype = "fuse.single"\n'
                      'arm = "bm25"\n\n[[replace_stages]]\ntype = "guard.payload"\n\n[[replace_stages]]\n'
                      'type = "cutoff.top_k"\nk = 100\n\n[[replace_stages]]\ntype = "budget.pack"\nlabel = "budget"\n'
                      'max_chunks = 10\nformat = "plain"\n')
    run = tmp_path / "run"
    assert main(["run", "--dataset", str(out), "--split", "all", "--retrievers", f"bm25,{preset}",
                 "--out", str(run)]) == 0
    data = RunData.from_folder(run)
    assert data.clusters("lc-poisoned")[0] == "conversation"
    table = robustness.blind_spots(data, "lc-poisoned")
    assert [r[0].text for r in table.rows] == ["bm25_payload"]  # bm25 has no guard: no row
    cell = table.rows[0][2].text
    assert sorted(c.split(" ")[0] for c in cell.split("; ")) == ["false-fact", "query-echo", "sourced-fact"]
    by = data.breakdown[("lc-poisoned", "attack")]["bm25_payload"]["poison_injected_rate"]
    counts = robustness.injected_counts(data, "lc-poisoned", "bm25_payload")
    for fam in ("query-echo", "sourced-fact", "false-fact"):
        v, n = by[fam]
        k = round(v * n)
        assert f"{fam} " in cell and f"({k}/{n})" in cell
        assert sum(c[1] for c in counts[fam].values()) == n and sum(c[0] for c in counts[fam].values()) == k
        lo, hi = robustness.injected_interval(counts[fam])
        wlo, whi = wilson_interval(k, n)
        assert lo <= wlo + 1e-12 and hi >= whi - 1e-12 and len(counts[fam]) > 1
    assert "instruction" not in cell  # guard.payload reads a payload
    report = (run / "report.md").read_text()
    assert "What the guards cannot catch by construction" in report and "bm25_payload" in report
