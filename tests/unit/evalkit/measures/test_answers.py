"""Answer measures: SQuAD normalisation and F1 on worked examples, Cohen's kappa against scikit-learn's, the
decline test, the judge-reply parser and the attribution rules."""
import math
import random

import pytest

from evalkit.engine.answer import Prompt, attribute, expects_decline, grade
from evalkit.measures import answers as am
from retrievers.types import Query


def test_squad_normalisation_and_scores():
    assert am.normalize("The  Red, car!") == "red car"
    assert am.answer_exact("the red car.", "Red car") == 1.0
    assert am.answer_exact("red cars", "red car") == 0.0
    # 2 shared of 3 answer tokens and 2 gold tokens: P 2/3, R 1, F1 0.8
    assert am.answer_f1("red fast car", "red car") == pytest.approx(0.8)
    assert am.answer_f1("blue", "red car") == 0.0
    assert am.answer_f1("", "") == 1.0
    assert am.answer_in_context("7 May 2023", "She went on 7 May, 2023.") == 1.0
    assert am.answer_in_context("May 2", "on May 20") == 0.0   # token boundaries, not substrings
    assert am.answer_in_context(2022, "in 2022 they met") == 1.0   # LoCoMo has numeric gold answers


def test_kappa_agrees_with_scikit_learn():
    # imported here, not at the top: scikit-learn's import (~2 s) would otherwise be paid by every xdist worker
    # while it collects, for this one test
    from sklearn.metrics import cohen_kappa_score
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(2, 30)
        a = [rng.randint(0, 1) for _ in range(n)]
        b = [x if rng.random() < 0.7 else 1 - x for x in a]
        ref = cohen_kappa_score(a, b)
        ours = am.cohen_kappa(a, b)
        if math.isnan(ref):  # scikit-learn: 0/0 when both raters give one label to everything
            assert ours == 1.0 and len(set(a)) == len(set(b)) == 1
        else:
            assert ours == pytest.approx(ref)
    assert math.isnan(am.cohen_kappa([], []))


def test_declined_and_grade():
    assert am.declined("I don't know.") and am.declined("") and am.declined("Not mentioned in the notes")
    assert not am.declined("In May")
    assert grade("CORRECT") == (1, True) and grade("Incorrect.") == (0, True) and grade("wrong") == (0, True)
    assert grade("The answer is fine") == (0, False)


def test_prompts_are_versioned_files_with_hashes():
    p = Prompt.load("reader-v1")
    msgs = p.messages(notes="- a note", question="Why?")
    assert msgs[0]["role"] == "system" and "- a note" in msgs[1]["content"] and "Why?" in msgs[1]["content"]
    assert len(p.hash) == 12 and p.hash != Prompt.load("judge-v1").hash
    with pytest.raises(ValueError, match="prompt 'nope' not found"):
        Prompt.load("nope")


def test_decline_rules_are_the_dataset_s():
    rules = {"gold": "answer", "decline": {"category": ["adversarial"], "metadata": "abstention"}}
    assert expects_decline(Query("q", "x", category="adversarial"), rules)
    assert expects_decline(Query("q", "x", metadata={"abstention": True}), rules)
    assert not expects_decline(Query("q", "x", category="temporal", metadata={"abstention": False}), rules)


def test_attribution_order():
    base = {"verdict": "incorrect", "answer_correct": 0.0, "judges": {"a": 0}, "expects_decline": False,
            "evidence_in_context": 0.0}
    assert attribute(base) == "retrieval miss"
    assert attribute(dict(base, evidence_in_context=1.0)) == "reader miss"
    assert attribute(dict(base, judges={"a": 0, "b": 1})) == "judge dispute"
    assert attribute(dict(base, expects_decline=True)) == "reader miss"   # should have declined
    assert attribute(dict(base, verdict="correct", answer_correct=1.0)) == ""
    assert attribute(dict(base, verdict="fault")) == "fault"
