"""`evalkit train-guard`: fit the learned payload guard (``guard.classifier``,
:mod:`retrievers.stages.guard.learned`) on plantings of the *design* attack templates (``design``, ``design-2``:
:data:`evalkit.data.poison.templates.DESIGN_SETS`), and write its model file.

What it learns from, sentence by sentence (:func:`~retrievers.stages.guard.learned.sentences`):

* positives — the planted notes of the payload attacks (``instruction``, ``trigger``, ``keyword-stuff``) whose
  targets are in the training split, and the defender's own examples
  (:data:`evalkit.data.poison.defence_examples.PAYLOADS`, ``{topic}`` filled with words of the training stores);
* negatives — every unplanted note of a store (group) that holds a training query, and
  :data:`~evalkit.data.poison.defence_examples.ORDINARY`.

``query-echo`` and ``false-fact`` notes are left out: one is ``guard.query_echo``'s job, the other says nothing to
the agent (``guard.conflict``'s). A planting from the ``evaluation`` templates is refused — the guard is judged on it.
The model is a standardised logistic regression (scikit-learn, ``class_weight="balanced"``, L2 with ``C``); its
threshold is the ``quantile`` of the training negatives' note scores, so about ``1 − quantile`` of a store's own
notes score above it. Same inputs, same file (no clock, seeded draws, a deterministic solver).

Usage (a design planting must exist first, so not a doctest; ``tests/system/test_train_guard_cli.py`` runs it)::

    r = train_guard(["poison/ws-design"], Path("my_guard.json"))
    print(r.to_text())
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalkit.data.poison.defence_examples import ORDINARY, PAYLOADS
from evalkit.data.poison.templates import DESIGN_SETS
from evalkit.data.registry import load_dataset
from evalkit.report.attacks import guard_fit_text
from retrievers.errors import ConfigError

#: the attacks whose notes carry a payload for the agent (the guard's positives)
PAYLOAD_ATTACKS = ("instruction", "trigger", "keyword-stuff", "chat-echo")
_SPEAKER = re.compile(r"^([A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?): ")
_CONTENT = re.compile(r"[A-Za-z]{4,}")


@dataclass
class TrainGuardResult:
    """What ``evalkit train-guard`` fitted and wrote."""

    out: Path
    spec: dict

    def to_text(self) -> str:
        return guard_fit_text(self.spec, self.out)


def _examples(stores_words: list[str], speakers: list[str], rng: random.Random) -> tuple[list[str], list[str]]:
    pos = []
    for text in PAYLOADS:
        for prefix in ("", rng.choice(speakers) + ": " if speakers else ""):
            topic = " ".join(rng.sample(stores_words, 2)) if len(stores_words) >= 2 else "this"
            pos.append(prefix + text.format(topic=topic))
    neg = [p for t in map(str.format, ORDINARY) for p in (t, (rng.choice(speakers) + ": " + t) if speakers else t)]
    return pos, neg


def train_guard(datasets: list[str], out: Path, split: str = "train", C: float = 0.1, quantile: float = 0.998,
                seed: int = 0, embedder=None, exclude: tuple[str, ...] = ()) -> TrainGuardResult:
    """Fit and write the model (see the module docstring). ``exclude``: attack families whose planted notes are
    left out (a leave-one-family-out fold, :mod:`evalkit.workflows.lofo`). ConfigError / DataError (one line) for
    bad input; nothing is written then."""
    from sklearn.linear_model import LogisticRegression  # lazy: startup
    from sklearn.preprocessing import StandardScaler  # lazy: startup

    from retrievers.embed.model import Embedder  # lazy: startup
    from retrievers.stages.guard.learned import HAND_FEATURES, features, sentences  # lazy: startup

    if not datasets:
        raise ConfigError("train-guard: give at least one --dataset (a planting from `evalkit poison --templates "
                          "design`)")
    if not 0.5 <= quantile < 1:
        raise ConfigError(f"train-guard: --quantile {quantile} must be in [0.5, 1)")
    if C <= 0:
        raise ConfigError(f"train-guard: --C {C} must be > 0")
    pos_notes, neg_notes, words, speakers, used, template_sets = [], [], set(), set(), [], set()
    learned: set[str] = set()
    for ref in datasets:
        ds = load_dataset(ref)
        if split not in ds.splits:
            raise ConfigError(f"train-guard: dataset {ds.name!r} has no split {split!r} (available: "
                              f"{', '.join(sorted(ds.splits)) or 'none'})")
        train = set(ds.splits[split])
        groups = {q.group for q in ds.queries if q.id in train}
        planted = [d for d in ds.documents if d.metadata.get("poison")]
        if not planted:
            raise ConfigError(f"train-guard: dataset {ds.name!r} has no planted notes (make one with `evalkit poison "
                              f"--templates design`)")
        sets = sorted({str(d.metadata.get("poison_templates")) for d in planted})
        if not set(sets) <= set(DESIGN_SETS):
            raise ConfigError(f"train-guard: dataset {ds.name!r} was planted from the {'/'.join(sets)} templates; "
                              f"train on a planting of {' or '.join(DESIGN_SETS)} (the evaluation templates are "
                              f"what the guard is judged on)")
        template_sets.update(sets)
        n0, m0 = len(pos_notes), len(neg_notes)
        for d in ds.documents:
            attack = d.metadata.get("poison")
            if attack:
                if attack in PAYLOAD_ATTACKS and attack not in exclude and \
                        train & set(d.metadata.get("poison_target") or ()):
                    pos_notes.append(d.text)
                    learned.add(attack)
            elif d.group in groups:
                neg_notes.append(d.text)
                if (m := _SPEAKER.match(d.text)):
                    speakers.add(m.group(1))
                words.update(w.lower() for w in _CONTENT.findall(d.text[:200]))
        used.append({"name": ds.name, "content_hash": ds.content_hash(), "positive_notes": len(pos_notes) - n0,
                     "negative_notes": len(neg_notes) - m0})
    if not pos_notes or not neg_notes:
        raise ConfigError(f"train-guard: split {split!r} gives {len(pos_notes)} planted payload notes and "
                          f"{len(neg_notes)} unplanted notes; both are needed")
    rng = random.Random(f"train-guard:{seed}")
    own_pos, own_neg = _examples(sorted(words), sorted(speakers), rng)
    texts, labels, owner = [], [], []
    notes = pos_notes + neg_notes + own_pos + own_neg
    note_label = [1] * len(pos_notes) + [0] * len(neg_notes) + [1] * len(own_pos) + [0] * len(own_neg)
    for i, (t, y) in enumerate(zip(notes, note_label)):
        for s in sentences(t):
            texts.append(s)
            labels.append(y)
            owner.append(i)
    embedder = embedder or Embedder()
    X = features(texts, embedder)
    y = np.asarray(labels)
    scaler = StandardScaler().fit(X)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    clf = LogisticRegression(C=C, max_iter=5000, class_weight="balanced").fit((X - scaler.mean_) / scale, y)
    z = ((X - scaler.mean_) / scale) @ clf.coef_[0] + clf.intercept_[0]
    note_score = np.full(len(notes), -np.inf)
    np.maximum.at(note_score, np.asarray(owner), z)
    P, N = len(pos_notes), len(neg_notes)
    threshold = float(np.quantile(note_score[P:P + N], quantile))
    spec = {
        "format": "evalkit payload guard 1",
        "embedder": embedder.model_name, "dim": int(embedder.dim), "hand": list(HAND_FEATURES),
        "threshold": threshold,
        "trained_on": {"datasets": used, "split": split, "templates": sorted(template_sets),
                       "attacks": [a for a in PAYLOAD_ATTACKS if a in learned], "positive_notes": P, "negative_notes": N, "own_positive": len(own_pos),
                       "own_negative": len(own_neg), "sentences": len(texts), "C": C, "quantile": quantile,
                       "seed": seed, "training_recall": float((note_score[:P] > threshold).mean()),
                       "training_false_positive": float((note_score[P:P + N] > threshold).mean())},
        "mean": [float(v) for v in scaler.mean_], "scale": [float(v) for v in scale],
        "coef": [float(v) for v in clf.coef_[0]], "intercept": float(clf.intercept_[0]),
    }
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"train-guard: --out {out} is a folder; give a .json file path")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(spec, indent=1) + "\n")
    tmp.replace(out)
    return TrainGuardResult(out, spec)


__all__ = ["PAYLOAD_ATTACKS", "TrainGuardResult", "train_guard"]
