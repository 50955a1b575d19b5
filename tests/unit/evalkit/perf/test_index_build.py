"""Section 4's BM25-of-many-groups figures: what is timed is every group's index of each tokenizer, built twice by
``build_many``, on the dataset's real groups; a dataset that is not there is a note, not a failure."""
from __future__ import annotations

from evalkit.data.registry import load_dataset
from evalkit.perf.common import Section
from evalkit.perf.index_build import TOKENIZERS, build_groups_twice, many_groups
from retrievers.index.shared import SharedIndex


def test_build_groups_twice_times_every_group_of_each_tokenizer():
    idx = SharedIndex(load_dataset("locomo"))  # ten conversations: ten groups
    got = build_groups_twice("locomo")
    assert got["groups"] == len(idx.group_docs) > 1
    assert got["documents"] == sum(len(d) for d in idx.group_docs.values())
    assert got["characters"] == sum(len(idx.corpus.texts[d]) for docs in idx.group_docs.values() for d in docs)
    for tok in TOKENIZERS:
        assert len(got[tok]) == 2 and all(s > 0 for s in got[tok])


def test_a_missing_dataset_is_a_note_and_no_table():
    sec = Section(4, "Index build and reopen", log=lambda _: None)
    assert many_groups(sec, ["no-such-dataset"]) == {}
    assert sec.tables == [] and len(sec.notes) == 1 and sec.notes[0].startswith("no-such-dataset: skipped")
