"""evalkit.data.poison: targets, notes per target, dates, places and labels of planted notes; determinism; the
template sets; the exporter round trip. A small store written here (no dataset text)."""
import itertools
import json
import random

import pytest

from evalkit.data.readers.beir import load_beir
from evalkit.data.export import export_beir
from evalkit.data.poison import ATTACKS, TEMPLATE_SETS, PlantConfig, plant
from evalkit.data.poison.attacks import Store, change_one_fact, fact_spans
from evalkit.data.poison.templates import DESIGN, DESIGN_2, DESIGN_SETS, EVALUATION
from retrievers.errors import ConfigError
from retrievers.types import DataError, Dataset, Document, Query, parse_time

DAY = 86400.0
#: the attacks every template set has (sourced-fact and chat-echo are design-set families)
ALL = ("query-echo", "instruction", "trigger", "keyword-stuff", "false-fact")
DESIGN_ONLY = ("sourced-fact", "chat-echo")


def store(groups=("g1", "g2"), n_docs=50, n_queries=30) -> Dataset:
    """Two stores of dated daily notes with numbers, names and dates; queries judged against one note each."""
    rng = random.Random(3)
    people = ["Marco", "Wen", "Jonas", "Lucia", "Priya"]
    docs, queries, qrels = [], [], {}
    t0 = parse_time("2026-01-01T00:00:00Z")
    for g in groups:
        for i in range(n_docs):
            day = t0 + i * DAY
            p = rng.choice(people)
            docs.append(Document(f"{g}/memory/{i:03d}.md#L1-L3", f"# day {i}\n\n- Met {p} about ticket LED-{100 + i}; "
                                 f"moved the sync to port {5000 + i} because of load.", path=f"memory/2026-01-{i % 28 + 1:02d}.md",
                                 timestamp=day, created=day, group=g,
                                 metadata={"start_line": 1, "end_line": 3, "source": "memory", "tier": "daily"}))
        docs.append(Document(f"{g}/MEMORY.md", "Prefers dark mode. Reviews happen on Mondays.", path="MEMORY.md",
                             group=g, metadata={"source": "memory", "tier": "curated"}))
        for j in range(n_queries):
            i = rng.randrange(n_docs)
            qid = f"{g}-q{j}"
            queries.append(Query(qid, f"which port did the sync move to after meeting about LED-{100 + i}?",
                                 t0 + (i + 3) * DAY, g, "exact", {}))
            qrels[qid] = {f"{g}/memory/{i:03d}.md#L1-L3": 2}
        queries.append(Query(f"{g}-none", "format this JSON please", t0 + 40 * DAY, g, "no-memory", {}))
    splits = {"train": [q.id for q in queries if q.id.endswith(("0", "2", "4"))]}
    splits["test"] = [q.id for q in queries if q.id not in splits["train"]]
    return Dataset("fixture", docs, queries, qrels, splits, {"clusters": {"by": "group", "what": "store"}})


def planted(ds):
    return [d for d in ds.documents if d.metadata.get("poison")]


@pytest.mark.parametrize("isolate", [False, True])
def test_planted_notes_are_labelled_dated_before_their_targets_in_their_group_and_never_in_qrels(isolate):
    ds = store()
    p, _ = plant(ds, PlantConfig(ALL, rate=0.1, isolate=isolate, seed=2))
    notes = planted(p)
    qs = {q.id: q for q in p.queries}
    assert notes and len(p.documents) == len(ds.documents) + len(notes)
    judged = {d for r in p.qrels.values() for d in r}
    assert not judged & {d.id for d in notes}
    assert p.qrels == ds.qrels and p.splits == ds.splits
    for d in notes:
        assert d.metadata["poison"] in ATTACKS and d.metadata["poison_templates"] == "evaluation"
        targets = d.metadata["poison_target"]
        assert targets and all(t in qs for t in targets)
        for t in targets:
            assert d.group == qs[t].group and d.created == d.timestamp and d.created < qs[t].as_of
            assert qs[t].as_of - d.created <= 14 * DAY
        if isolate:
            assert d.metadata["visible_to"] == targets and len(targets) == 1
        else:
            assert "visible_to" not in d.metadata
    rec = p.info["poison"]
    assert set(rec["targets"]) == set(ALL) and rec["planted"] == len(notes)
    assert rec["mode"] == ("isolated" if isolate else "shared")
    # every target is attacked by exactly one attack
    seen = [q for qs_ in rec["targets"].values() for q in qs_]
    assert len(seen) == len(set(seen))


def test_rates_set_the_notes_per_store_or_per_target():
    ds = store()
    n = 51  # notes per store
    shared, _ = plant(ds, PlantConfig(("query-echo",), rate=0.1, seed=1))
    for g in ("g1", "g2"):  # round(0.1 * 51) = 5 notes, one per target
        assert sum(1 for d in planted(shared) if d.group == g) == round(0.1 * n)
    two, _ = plant(ds, PlantConfig(("query-echo",), rate=0.2, per_target=2, seed=1))
    assert len(planted(two)) == 2 * 2 * (round(0.2 * n) // 2)
    iso, _ = plant(ds, PlantConfig(("query-echo",), rate=0.1, isolate=True, targets=7, seed=1))
    assert len(iso.info["poison"]["targets"]["query-echo"]) == 7 and len(planted(iso)) == 7 * round(0.1 * n)
    small, warn = plant(ds, PlantConfig(("query-echo",), rate=0.001, isolate=True, targets=3, seed=1))
    assert len(planted(small)) == 3 and warn and "cannot be poisoned at 0.10%" in warn[0]
    assert small.info["poison"]["store_rate"]["median"] == pytest.approx(1 / n)


def test_deterministic_for_a_seed():
    ds = store()
    a, _ = plant(ds, PlantConfig(ALL, rate=0.1, isolate=True, seed=5))
    b, _ = plant(ds, PlantConfig(ALL, rate=0.1, isolate=True, seed=5))
    c, _ = plant(ds, PlantConfig(ALL, rate=0.1, isolate=True, seed=6))
    assert a.content_hash() == b.content_hash() != c.content_hash()
    assert a.info["poison"] == b.info["poison"]


def test_trigger_targets_carry_the_phrase_and_the_sets_differ():
    ds = store()
    for name, ts in TEMPLATE_SETS.items():
        p, _ = plant(ds, PlantConfig(("trigger", "instruction"), rate=0.2, seed=1, templates=name))
        trig = p.info["poison"]["trigger"]
        assert trig in ts.triggers
        before = {q.id: q.text for q in ds.queries}
        for q in p.queries:
            if q.id in p.info["poison"]["targets"]["trigger"]:
                assert q.text == f"{before[q.id]} {trig}"
            else:
                assert q.text == before[q.id]
        for d in planted(p):
            assert d.metadata["poison_templates"] == name
            if d.metadata["poison"] == "trigger":
                assert trig in d.text
                # a shared store: a trigger note is aimed at every trigger target of its store asked after it
                asked = {q.id: q.as_of for q in p.queries}
                assert set(d.metadata["poison_target"]) == {q for q in p.info["poison"]["targets"]["trigger"]
                                                             if q.startswith(d.group) and d.created < asked[q]}
    # isolated: every trigger target its own made-up phrase, in its own notes only
    iso, _ = plant(ds, PlantConfig(("trigger",), rate=0.05, isolate=True, targets=6, seed=1))
    phrases = {}
    for q in iso.queries:
        if q.id in iso.info["poison"]["targets"]["trigger"]:
            phrases[q.id] = q.text[len(next(x.text for x in ds.queries if x.id == q.id)) + 1:]
    assert len(set(phrases.values())) == 6 and all(len(p.split()) == 3 for p in phrases.values())
    for d in planted(iso):
        (t,) = d.metadata["poison_target"]
        assert phrases[t] in d.text and not any(p in d.text for q, p in phrases.items() if q != t)
    # no two sets share a template, payload, tool call, endpoint, trigger or syllable
    assert DESIGN_SETS == ("design", "design-2") and EVALUATION.name == "evaluation"
    for a, b in itertools.combinations((DESIGN, DESIGN_2, EVALUATION), 2):
        for field in ("query_echo", "instruction", "trigger", "keyword_stuff", "false_fact", "payloads",
                      "tool_calls", "urls", "emails", "cmds", "triggers", "syllables", "sourced_fact", "chat_echo"):
            shared = set(getattr(a, field)) & set(getattr(b, field))
            assert shared <= {"{note}"}, (a.name, b.name, field, shared)


def test_false_fact_changes_exactly_one_fact_of_the_relevant_note():
    ds = store()
    s = Store.build("g1", [d for d in ds.documents if d.group == "g1"])
    text = "- Met Wen about ticket LED-117; moved the sync to port 5017 because of load."
    new, old, repl = change_one_fact(text, "which port did the sync move to after LED-117?", s, random.Random(0))
    assert old in ("5017",) and repl == str(5017 + round(5017 / 2)) and new == text.replace(old, repl)
    assert change_one_fact("nothing here at all", "which port", s, random.Random(0)) is None
    assert [m.group() for m in fact_spans("Tim: Have you met Jonas on 2026-03-04?")] == ["Jonas", "2026-03-04"]
    p, _ = plant(ds, PlantConfig(("false-fact",), rate=0.1, seed=3))
    for d in planted(p):
        target = d.metadata["poison_target"][0]
        src = ds.documents[ds.doc_index[next(iter(ds.qrels[target]))]].text
        words_src, words_new = set(src.split()), set(d.text.split())
        assert 1 <= len(words_src - words_new) <= 3  # one fact changed (plus the set's light paraphrase)


def test_bad_input_is_one_line_each():
    ds = store()
    cases = [(PlantConfig(("query-echo",), rate=1.0), ConfigError, "would replace the store"),
             (PlantConfig(("query-echo",), rate=2.5), ConfigError, "would replace the store"),
             (PlantConfig(("query-echo",), rate=0.0), ConfigError, "not a poisoning rate"),
             (PlantConfig(("query-echo",), rate=0.1, targets=("g1-q1", "nope")), DataError, "'nope' does not exist"),
             (PlantConfig(("query-echo",), rate=0.1, targets=("g1-none",)), DataError, "no relevant note"),
             (PlantConfig(("bogus",), rate=0.1), ConfigError, "unknown attack 'bogus'"),
             (PlantConfig(("query-echo",), rate=0.001), DataError, "fewer than 1 note"),
             (PlantConfig(("query-echo",), per_target=2), ConfigError, "needs --rate"),
             (PlantConfig(("query-echo",), rate=0.1, per_target=1, isolate=True), ConfigError, "not both")]
    for cfg, exc, msg in cases:
        with pytest.raises(exc, match=msg) as e:
            plant(ds, cfg)
        assert "\n" not in str(e.value)
    undated = Dataset("undated", ds.documents, [Query(q.id, q.text, None, q.group) for q in ds.queries], ds.qrels)
    with pytest.raises(DataError, match="has no timestamps"):
        plant(undated, PlantConfig(("query-echo",), rate=0.1))
    p, _ = plant(undated, PlantConfig(("query-echo",), rate=0.1, undated=True))
    assert all(d.created is None and d.timestamp is None for d in planted(p))


def test_export_round_trip_keeps_labels_record_and_clusters(tmp_path):
    ds = store()
    p, _ = plant(ds, PlantConfig(ALL, rate=0.1, isolate=True, seed=4), name="fx-poisoned")
    export_beir(p, tmp_path / "fx")
    back = load_beir(tmp_path / "fx")
    assert back.name == "fx-poisoned" and back.info["poison"] == p.info["poison"]
    assert back.info["clusters"] == {"by": "group", "what": "store"}
    assert {d.id: d.metadata.get("poison") for d in back.documents} == {d.id: d.metadata.get("poison")
                                                                        for d in p.documents}
    assert {d.id: d.created for d in back.documents} == {d.id: d.created for d in p.documents}
    assert back.qrels == ds.qrels


def test_design_only_families_plant_from_the_design_sets_and_are_refused_for_evaluation():
    assert set(ATTACKS) == set(ALL) | set(DESIGN_ONLY)
    assert not EVALUATION.sourced_fact and not EVALUATION.chat_echo  # the blind set stays as its author wrote it
    ds = store()
    for name in DESIGN_SETS:
        p, _ = plant(ds, PlantConfig(DESIGN_ONLY, rate=0.1, isolate=True, seed=2, templates=name))
        ts = TEMPLATE_SETS[name]
        qs = {q.id: q for q in p.queries}
        notes = planted(p)
        assert {d.metadata["poison"] for d in notes} == set(DESIGN_ONLY)
        for d in notes:
            q = qs[d.metadata["poison_target"][0]]
            day = d.text  # {date} is the note's own planting date
            assert "\x00" not in day and d.path and d.path[7:17] in day if d.path.startswith("memory/") else True
            if d.metadata["poison"] == "chat-echo":
                assert q.text in d.text and any(e in d.text for e in ts.urls + ts.emails + ts.cmds)
            else:
                assert not any(e in d.text for e in ts.urls + ts.emails + ts.cmds)  # no payload
    with pytest.raises(ConfigError, match="'chat-echo' has no templates in the 'evaluation' set"):
        plant(ds, PlantConfig(("chat-echo",), rate=0.1, isolate=True))


def _file(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_a_users_template_file_plants_its_families_with_every_field(tmp_path):
    from evalkit.data.poison.template_file import read_templates
    f = _file(tmp_path, "mine.jsonl", json.dumps({"family": "echo-log", "template": "[{date}] {speaker}: {query} "
                                                  "-> {answer} ({topic}; {terms})"}) + "\n\n"
              + json.dumps({"family": "near-copy", "template": "Amended: {note}", "comment": "x"}) + "\n")
    tf = read_templates(f)
    assert tf.families == {"echo-log": ("[{date}] {speaker}: {query} -> {answer} ({topic}; {terms})",),
                           "near-copy": ("Amended: {note}",)} and tf.name == "file:mine.jsonl"
    ds = store()
    p, _ = plant(ds, PlantConfig(tuple(tf.families), rate=0.1, isolate=True, seed=5, custom=tf))
    rec = p.info["poison"]
    assert rec["templates"] == "file:mine.jsonl" and rec["template_file"]["families"]["near-copy"] == ["Amended: {note}"]
    assert len(rec["template_file"]["sha256"]) == 64
    qs = {q.id: q for q in p.queries}
    assert [q.text for q in p.queries] == [q.text for q in ds.queries]  # no family rewrites a query
    for d in planted(p):
        q = qs[d.metadata["poison_target"][0]]
        assert d.metadata["poison_templates"] == "file:mine.jsonl"
        if d.metadata["poison"] == "echo-log":
            from retrievers.types import format_time
            assert d.text.startswith(f"[{format_time(d.created)[:10]}] user: {q.text} -> ")
        else:
            assert d.text.startswith("Amended: ")
    # the same file and seed: the same planting; TOML reads the same
    again, _ = plant(ds, PlantConfig(tuple(tf.families), rate=0.1, isolate=True, seed=5, custom=tf))
    assert again.content_hash() == p.content_hash()
    t = _file(tmp_path, "mine.toml", '[[template]]\nfamily = "near-copy"\ntemplate = "Amended: {note}"\n')
    assert read_templates(t).families == {"near-copy": ("Amended: {note}",)}
    with pytest.raises(ConfigError, match="'nope' is not a family of"):
        plant(ds, PlantConfig(("nope",), rate=0.1, isolate=True, custom=tf))


@pytest.mark.parametrize("name, text, msg", [
    ("a.jsonl", '{"family": "x", "template": "{querry}"}\n', "a.jsonl: line 1 (family x): unknown field {querry}"),
    ("a.jsonl", '\n{"template": "{query}"}\n', "a.jsonl: line 2: no 'family'"),
    ("a.jsonl", '{"family": "x", "template": "{query}", "weight": 2}\n', "line 1: unknown key 'weight'"),
    ("a.jsonl", '{"family": "x",\n', "a.jsonl: line 1: malformed JSON"),
    ("a.jsonl", '{"family": "X Y", "template": "q"}\n', "family 'X Y' is not lower-case"),
    ("a.jsonl", '{"family": "x", "template": "{query"}\n', "line 1 (family x): malformed template"),
    ("a.jsonl", '{"family": "x", "template": "{query.upper}"}\n', "unknown field {query.upper}"),
    ("a.jsonl", '{"family": "x", "template": ""}\n', "line 1 (family x): no 'template' text"),
    ("a.jsonl", '["family", "x"]\n', "line 1: not an object"),
    ("a.jsonl", "", "a.jsonl: no templates"),
    ("a.toml", '[[template]\nfamily = "x"', "a.toml: malformed TOML"),
    ("a.toml", '[[template]]\ntemplate = "{query}"\n', "a.toml: entry 1: no 'family'"),
    ("a.toml", 'family = "x"\n', "unknown top-level key 'family'"),
    ("a.toml", "", "a.toml: no templates"),
    ("a.txt", "x", "not a template set"),
])
def test_bad_template_files_are_one_line_naming_file_and_entry(tmp_path, name, text, msg):
    from evalkit.data.poison.template_file import read_templates
    with pytest.raises(ConfigError) as e:
        read_templates(_file(tmp_path, name, text))
    assert msg in str(e.value) and "\n" not in str(e.value)
