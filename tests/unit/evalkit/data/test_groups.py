"""evalkit.data.groups: splits and folds never cut a group — identical evidence sets, declared conversations /
haystacks, near-duplicate questions — while a split by query does (issue 31)."""
from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import pytest

from evalkit.data.groups import (
    QUERY_JACCARD,
    evidence_sets,
    group_folds,
    group_split,
    near_duplicate_pairs,
    query_groups,
    same_evidence,
    split_summary,
    straddling,
    time_split,
)
from retrievers.types import DataError, Dataset, Document, Query


def _by_query(ids: list[str], seed: str) -> tuple[list[str], list[str]]:
    """The split the tuner used to make: queries ranked by a seeded hash of their own id, first half = train."""
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    first = set(ranked[: (len(ranked) + 1) // 2])
    return [i for i in ids if i in first], [i for i in ids if i not in first]


def _paraphrase_set(seed: int = 0, sets: int = 40) -> Dataset:
    """``sets`` evidence sets of 1-3 documents, each asked by 1-5 paraphrased questions; two document ids carry
    the same text (one note copied into two places), so only content comparison sees those sets as one."""
    rng = random.Random(seed)
    docs = [Document(id=f"d{i}", text=f"note number {i} about topic {i % 7} and detail {i * 13 % 17}")
            for i in range(60)]
    docs.append(Document(id="copy-of-d3", text=docs[3].text))
    queries, qrels = [], {}
    for s in range(sets):
        rel = rng.sample(range(60), rng.randint(1, 3))
        for p in range(rng.randint(1, 5)):
            qid = f"s{s}-p{p}"
            queries.append(Query(id=qid, text=f"question {p} about set {s}"))
            qrels[qid] = {f"d{r}": 1 for r in rel}
    # the copy of d3 stands in for the original: the same evidence by content, under another id
    queries += [Query(id="copy-a", text="where is note three"), Query(id="copy-b", text="note three, where?")]
    qrels["copy-a"], qrels["copy-b"] = {"d3": 1, "d5": 1}, {"copy-of-d3": 1, "d5": 1}
    queries.append(Query(id="no-memory-1", text="hello"))
    queries.append(Query(id="no-memory-2", text="hello"))
    return Dataset("paraphrases", docs, queries, qrels, splits={"all": [q.id for q in queries]})


def test_group_split_never_puts_an_evidence_set_on_both_sides_where_a_split_by_query_does():
    ds = _paraphrase_set()
    ids = [q.id for q in ds.queries]
    ev = evidence_sets(ds)
    g = query_groups(ds, "evidence")
    leaks = []
    for seed in range(20):
        tr, he = _by_query(ids, f"seed{seed}")
        leaks.append(same_evidence(ev, tr, he))
        gtr, ghe = group_split(ids, g.of, seed=f"seed{seed}")
        assert same_evidence(ev, gtr, ghe) == 0 and not straddling(g.of, gtr, ghe)
        assert sorted(gtr + ghe) == sorted(ids) and abs(len(gtr) - len(ghe)) <= 5
    assert min(leaks) > 0  # every by-query split leaks some evidence set
    # content, not ids: the question naming the copy of d3 is in the group of the one naming d3
    assert g.of["copy-a"] == g.of["copy-b"]
    assert len({g.of[q] for q in ids if q.startswith("s0-")}) == 1
    # a query without a relevant document is a group of its own, whatever its text
    assert g.of["no-memory-1"] != g.of["no-memory-2"]


def test_group_folds_keep_groups_whole_and_leave_one_out():
    ids = [f"q{i}" for i in range(50)]
    of = {q: f"g{i % 7}" for i, q in enumerate(ids)}
    f = group_folds(ids, of, 3)
    for g in set(of.values()):
        assert len({int(f[i]) for i, q in enumerate(ids) if of[q] == g}) == 1
    sizes = np.bincount(f)
    assert len(sizes) == 3 and sizes.max() - sizes.min() <= 8  # balanced up to the largest group (8 queries)
    loo = group_folds(ids, of, 50)
    assert len(set(loo.tolist())) == 7
    assert all(len({of[q] for q, x in zip(ids, loo) if x == k}) == 1 for k in range(7))
    assert (group_folds(ids, of, 3) == f).all()  # deterministic


def test_declared_groups_and_auto_rule():
    ds = _paraphrase_set()
    assert query_groups(ds).rule == "evidence"  # no clusters, no store groups: identical evidence sets
    for i, q in enumerate(ds.queries):
        q.group = f"conv-{i % 4}"
    g = query_groups(ds)
    assert g.rule == "group(group)+evidence"
    # a conversation split puts no conversation on both sides; evidence of two conversations joins them
    tr, he = group_split([q.id for q in ds.queries], g.of)
    assert not straddling(g.of, tr, he)
    ds.info["clusters"] = {"by": "group", "what": "conversation"}
    assert query_groups(ds, "group").rule == "group(conversation)"
    with pytest.raises(DataError, match="unknown split rule"):
        query_groups(ds, "by-moon")
    solo = _paraphrase_set()
    with pytest.raises(DataError, match="declares no query groups"):
        query_groups(solo, "group")


def test_near_duplicate_questions_are_one_group():
    texts = ["what did I decide about the invoice numbering?", "remind me: what did I decide about the invoice "
             "numbering?", "what did I decide about the invoice numbering again?", "which port does the dev server "
             "use?", "hey", "hey"]
    pairs = near_duplicate_pairs(texts)
    assert (0, 1) in pairs and (0, 2) in pairs and (4, 5) in pairs
    assert not any(3 in p for p in pairs)
    # the sparse computation is the replay's set Jaccard over lower-cased word tokens, pair by pair
    import re
    from evalkit.workflows.replay import jaccard
    tok = [set(re.findall(r"\w+", t.lower())) for t in texts]
    want = {(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if jaccard(tok[i], tok[j]) >= QUERY_JACCARD}
    assert set(pairs) == want
    docs = [Document(id="d", text="x")]
    ds = Dataset("log", docs, [Query(id=f"e{i}", text=t) for i, t in enumerate(texts)], {}, {})
    g = query_groups(ds, "query")
    assert g.of["e0"] == g.of["e1"] == g.of["e2"] != g.of["e3"]


def test_time_split_and_summary():
    qs = [Query(id=f"q{i}", text="t", as_of=1_700_000_000 + 86400 * i) for i in range(10)]
    ds = Dataset("t", [Document(id="d", text="x")], qs, {q.id: {"d": 1} for q in qs}, {})
    before, after, date = time_split(ds, [q.id for q in qs])
    assert before == [f"q{i}" for i in range(5)] and after == [f"q{i}" for i in range(5, 10)]
    assert date.startswith("2023-11-")
    b2, a2, _ = time_split(ds, [q.id for q in qs], "2023-11-20")
    assert len(b2) + len(a2) == 10 and all(ds.queries[int(q[1:])].as_of < 1_700_438_400 for q in b2)
    s = split_summary(query_groups(ds, "evidence"), {"tuning": before, "held-out": after}, evidence_sets(ds))
    assert s["straddling"] == 1 and s["same_evidence"] == {"held-out": 5}  # every query asks about d
    with pytest.raises(DataError, match="not an ISO 8601"):
        time_split(ds, [q.id for q in qs], "next tuesday")
    ds.queries[0].as_of = None
    with pytest.raises(DataError, match="no as_of"):
        time_split(ds, [q.id for q in qs])


def _real(name: str) -> Path | None:
    from evalkit.data.registry import locate
    return locate(name)


@pytest.mark.skipif(_real("longmemeval-oracle") is None, reason="LongMemEval data not in EVALKIT_DATA")
def test_longmemeval_split_joins_haystacks_that_share_evidence():
    """Haystacks are separate stores, but a few question pairs ask about the same evidence session (copied into
    both haystacks): the loader's train / heldout keep each pair together; a split by question does not."""
    from evalkit.data.registry import load_dataset
    ds = load_dataset("longmemeval-oracle")
    ev = evidence_sets(ds)
    tr, he = ds.splits["train"], ds.splits["heldout"]
    assert same_evidence(ev, tr, he) == 0
    g = query_groups(ds)
    assert g.rule == "group(haystack)+evidence" and not straddling(g.of, tr, he)
    assert len(set(g.of.values())) < len(tr) + len(he)  # some haystacks were joined
    btr, bhe = _by_query(tr + he, "evalkit-split-1")
    assert same_evidence(ev, btr, bhe) > 0


def test_datasets_splits_command_prints_the_group_summary(capsys):
    """`evalkit datasets --splits NAME`: the committed memory-workspace split cuts no evidence group."""
    from evalkit.cli import main
    assert main(["datasets", "--splits", "memory-workspace"]) == 0
    out = capsys.readouterr().out
    assert "split rule evidence" in out and "test (lockbox): 213 queries in " in out
    assert "groups on both sides: 0; held-out queries whose evidence set equals a tuning query's: test (lockbox) 0" \
        in out
    assert main(["datasets", "--splits", "memory-workspace", "--split-by", "evidence+query"]) == 0
    assert "split rule evidence+query" in capsys.readouterr().out
