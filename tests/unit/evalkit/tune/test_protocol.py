"""evalkit tune's protocol (issue 31): a declared split that cuts a group is refused (one line) or re-split; the
lockbox is never read until --final, and every opening is counted; few groups → leave-one-group-out
cross-validation with significance clustered as the dataset declares; a time split; splits.json in every output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.tune.space import load_space

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
         "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
         "xray", "yankee", "zulu"]


def _word(i: int) -> str:
    return WORDS[i % 26] + WORDS[(i // 26) % 26]


def _folder(tmp: Path, n_groups: int, sides: dict[str, list[int]], stores: int = 0, sidecar: dict | None = None,
            cut: tuple[int, ...] = ()) -> Path:
    """A BEIR folder: group g has documents d{g}a, d{g}b (words unique to g) and two questions a{g}, b{g} whose
    relevant documents are both of them (one evidence set). ``sides``: split name → groups in it; a group in
    ``cut`` has its second question in the next split instead (the declared split cuts the group). ``stores``:
    that many memory stores (``metadata.group``); queries dated one day apart."""
    root = tmp / "data"
    (root / "qrels").mkdir(parents=True)
    docs, queries = [], []
    for g in range(n_groups):
        w = _word(g)
        md = {"group": f"s{g % stores}"} if stores else {}
        docs += [{"_id": f"d{g}a", "text": f"{w} notes: the {w} plan is settled", "metadata": md},
                 {"_id": f"d{g}b", "text": f"{w} follow-up: more about {w} and its budget", "metadata": md},
                 {"_id": f"x{g}", "text": f"unrelated filler {g} about weather and lunch", "metadata": md}]
        for k, q in enumerate((f"a{g}", f"b{g}")):
            queries.append({"_id": q, "text": f"what about the {w} plan" + (" budget" if k else ""),
                            "metadata": {**md, "as_of": f"2026-03-{1 + (g % 28):02d}T10:00:00Z"}})
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    names = list(sides)
    rows = {s: ["query-id\tcorpus-id\tscore"] for s in names}
    for i, s in enumerate(names):
        for g in sides[s]:
            for q in (f"a{g}", f"b{g}"):
                side = names[(i + 1) % len(names)] if (q == f"b{g}" and g in cut) else s
                rows[side] += [f"{q}\td{g}a\t1", f"{q}\td{g}b\t1"]
    for s in names:
        (root / "qrels" / f"{s}.tsv").write_text("\n".join(rows[s]) + "\n")
    if sidecar:
        (root / "evalkit.json").write_text(json.dumps({"name": "mini", "info": sidecar}))
    return root


SPACE = """
preset = "bm25"
dataset = "{data}"
split = "train"
{heldout}
objective = "ndcg@10"
method = "grid"
seed = 1
baselines = ["bm25"]

[[param]]
arm = "bm25"
name = "depth"
values = [2, 50]
"""


def _space(tmp: Path, data: Path, heldout: str = 'heldout = "test"') -> Path:
    f = tmp / "space.toml"
    f.write_text(SPACE.format(data=data, heldout=heldout))
    return f


def _intervals_agree(rows: list[dict]) -> None:
    """Each printed interval is at its row's Holm-adjusted level: it excludes 0 exactly when p_holm < 0.05."""
    import math
    assert rows
    for r in rows:
        lo, hi = r["ci_holm_low"], r["ci_holm_high"]
        excludes = not (lo is None or math.isnan(lo)) and (lo > 0 or hi < 0)
        assert excludes == (r["p_holm"] < 0.05), r


def test_a_split_that_cuts_a_group_is_refused_in_one_line_then_resplit(tmp_path, capsys):
    from evalkit.cli import main
    data = _folder(tmp_path, 40, {"train": list(range(20)), "test": list(range(20, 40))}, cut=(3, 7))
    sp = _space(tmp_path, data)
    rc = main(["tune", "--space", str(sp), "--out", str(tmp_path / "o"), "--journal", "off"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("evalkit: error:"), err
    assert "puts 2 groups (evidence) on both sides of 'train' / 'test'" in err and "q:a3" in err and "q:a7" in err
    assert "--resplit" in err and not (tmp_path / "o").exists()
    rc = main(["tune", "--space", str(sp), "--out", str(tmp_path / "o"), "--journal", "off", "--resplit", "--quiet"])
    assert rc == 0
    splits = json.loads((tmp_path / "o" / "splits.json").read_text())
    of = splits["group_of"]
    tr, he = splits["splits"]["tuning"], splits["splits"]["heldout"]
    assert sorted(tr + he) == sorted(of) and not {of[q] for q in tr} & {of[q] for q in he}
    assert splits["resplit"] and splits["rule"] == "evidence"
    head = (tmp_path / "o" / "best.toml").read_text()
    assert "--resplit`" in head and "RE-SPLIT with --resplit" in head
    assert "held-out queries whose evidence set equals a tuning query's: held-out 0" in head


def test_lockbox_is_never_read_until_final_and_openings_are_counted(tmp_path, monkeypatch):
    import evalkit.tune.prepare as prepare_mod
    import evalkit.tune.run as run_mod
    import evalkit.tune.scoring as scoring_mod
    from evalkit.tune.protocol import Options
    data = _folder(tmp_path, 36, {"train": list(range(30)), "lockbox": list(range(30, 36))})
    sp = load_space(_space(tmp_path, data, heldout=""))
    lock = {f"{c}{g}" for g in range(30, 36) for c in "ab"}
    seen: list[set] = []
    real = prepare_mod.build_candidates

    def spy(index, queries, specs):
        seen.append({q.id for q in queries})
        return real(index, queries, specs)

    for mod in (prepare_mod, scoring_mod):  # every module of the tune that builds a candidate set
        monkeypatch.setattr(mod, "build_candidates", spy)
    s = run_mod.run_tune(sp, out=tmp_path / "cv", log=lambda m: None).summary
    assert seen and not any(ids & lock for ids in seen)  # the lockbox queries never reached a candidate set
    assert "lockbox" not in s and s["protocol"]["lockbox"] == "lockbox" and s["cv"]["folds"] == 5
    assert not (tmp_path / "lockbox.jsonl").exists()
    splits = json.loads((tmp_path / "cv" / "splits.json").read_text())
    assert set(splits["lockbox"]["ids"]) == lock and not splits["lockbox"]["opened"]
    assert not lock & set(splits["splits"]["tuning"]) and len(splits["folds"]["ids"]) == 5
    seen.clear()
    first = run_mod.run_tune(sp, out=tmp_path / "f1", log=lambda m: None, options=Options(final=True))
    assert any(ids == lock for ids in seen)  # --final: scored there, once
    assert first.summary["lockbox"]["opened"] == 1 and "lockbox opened 1 time " in first.text
    second = run_mod.run_tune(sp, out=tmp_path / "f2", log=lambda m: None, options=Options(final=True))
    assert second.summary["lockbox"]["opened"] == 2
    for f in ("best.toml", "report.md"):
        assert "opened 2 times" in (tmp_path / "f2" / f).read_text()
    lines = (tmp_path / "lockbox.jsonl").read_text().splitlines()
    assert [json.loads(x)["opening"] for x in lines] == [1, 2]
    assert second.summary["lockbox"]["best"] == first.summary["lockbox"]["best"]  # the same config, the same figure
    _intervals_agree(second.summary["lockbox"]["significance"] + second.summary["significance"])


def test_few_groups_cross_validate_leaving_one_group_out_with_clustered_significance(tmp_path):
    from evalkit.tune.run import run_tune
    clusters = {"clusters": {"by": "group", "what": "conversation"}, "official_measures": ["ndcg@10", "recall@10"]}
    data = _folder(tmp_path, 24, {"train": list(range(12)), "test": list(range(12, 24))}, stores=4,
                   sidecar=clusters)
    res = run_tune(load_space(_space(tmp_path, data)), out=tmp_path / "o", log=lambda m: None)
    s = res.summary
    assert s["protocol"]["mode"] == "cv" and s["protocol"]["rule"] == "group(conversation)+evidence"
    assert s["cv"]["folds"] == 4 and "leave-one-conversation-out" in s["cv"]["fold_rule"]
    assert s["queries"]["tuning"] == 48  # both declared splits: too few groups for one held-out half
    # four conversations: the sign-flip test flips whole conversations, so p can never be below 2/16
    for r in s["significance"]:
        assert r["clusters"] == 4 and r["p_randomization"] >= 0.125 - 1e-12
    _intervals_agree(s["significance"])
    head = (res.out / "best.toml").read_text()
    assert "# significance (estimate): clustered, 4 clusters" in head
    assert "# official measures (cross-validation" in head and "recall@10" in head
    assert "# denominator: ndcg@10 over 48 judged of 48 cross-validated tuning queries" in head
    assert s["optimism"]["folds"] == 4 and "by_query" in s["optimism"]


def test_time_split_tunes_before_a_date_and_holds_out_after(tmp_path):
    from evalkit.tune.protocol import Options
    from evalkit.tune.run import run_tune
    data = _folder(tmp_path, 40, {"train": list(range(20)), "test": list(range(20, 40))})
    res = run_tune(load_space(_space(tmp_path, data)), out=tmp_path / "t", log=lambda m: None,
                   options=Options(split_by="time", split_date="2026-03-15"))
    s = res.summary
    assert s["protocol"]["mode"] == "time" and s["heldout"] == "after 2026-03-15T00:00:00Z"
    splits = json.loads((res.out / "splits.json").read_text())
    q = {x["_id"]: x["metadata"]["as_of"] for x in map(json.loads, (data / "queries.jsonl").read_text().splitlines())}
    assert all(q[i] < "2026-03-15" for i in splits["splits"]["tuning"])
    assert all(q[i] >= "2026-03-15" for i in splits["splits"]["heldout"])
    assert "# time-split held-out:" in (res.out / "best.toml").read_text()


def test_protocol_options_are_validated(tmp_path, capsys):
    from evalkit.cli import main
    data = _folder(tmp_path, 40, {"train": list(range(20)), "test": list(range(20, 40))})
    sp = _space(tmp_path, data)
    for extra, want in ((["--final"], "declares none"), (["--split-by", "moon"], "unknown split rule"),
                        (["--folds", "1"], "folds must be"), (["--split-by", "time", "--folds", "3"], "time split"),
                        (["--split-by", "time", "--split-date", "soon"], "not an ISO 8601")):
        rc = main(["tune", "--space", str(sp), "--out", str(tmp_path / "x"), "--journal", "off", *extra])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and want in err, (extra, err)
        assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("bad", ['split_by = "moon"', 'folds = "many"'])
def test_space_keys_are_validated(tmp_path, bad):
    from retrievers.errors import ConfigError
    data = _folder(tmp_path, 4, {"train": [0, 1], "test": [2, 3]})
    f = tmp_path / "s.toml"
    f.write_text(SPACE.format(data=data, heldout=bad))
    with pytest.raises(ConfigError):
        load_space(f)
