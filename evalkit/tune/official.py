"""A dataset's official measures (``info["official_measures"]``) in a tune: which the sweep can compute, and each one
on the headline set for the tuned config and every compared preset, with the presets that beat it there."""
from __future__ import annotations

import math

from evalkit.data.groups import declared
from evalkit.measures import catalogue
from evalkit.measures.arrays import parse_metric
from retrievers.errors import ConfigError


ARRAYS_NAME = {"abstention_accuracy": "correct_abstention"}  # a harm measure's name in the sweep's engine
DISPLAY_NAME = {v: k for k, v in ARRAYS_NAME.items()}


def official_measures(ds, objective: str) -> list[str]:
    """The dataset's official measures (``info["official_measures"]``) in the sweep engine's names, the objective
    first; a measure the sweep cannot compute is left out."""
    out = [objective]
    for m in declared(ds, "official_measures") or []:
        m = ARRAYS_NAME.get(m, m)
        try:
            parse_metric(m)
        except ConfigError:
            continue
        out.append(m)
    return list(dict.fromkeys(out))


def official_report(s: dict, official: list[str], obj: str) -> dict:
    """Each official measure on the headline set (the lockbox when opened, else the held-out split, else the
    cross-validation) for the tuned config and every compared preset, and the presets that beat it there."""
    lock = s.get("lockbox")
    if lock:
        where, best, others = f"lockbox {lock['split']!r}", lock["best"], {
            f"{s['preset']} (as shipped)": lock["shipped"], **lock["baselines"]}
    elif s["heldout"] is not None and s["best"].get("heldout"):
        where, best = f"held-out {s['heldout']!r}", s["best"]["heldout"]
        others = {f"{s['preset']} (as shipped)": s["shipped"]["heldout"],
                  **{n: r.get("heldout") or {} for n, r in s["baselines"].items()}}
    else:
        oof = (s.get("cv") or {}).get("out_of_fold", {})
        where = "cross-validation (out-of-fold; run-level rates: the config chosen on all tuning queries)"
        best = {m: oof.get(m, s["best"]["train"].get(m)) for m in official}
        others = {f"{s['preset']} (as shipped)": s["shipped"]["train"],
                  **{n: r.get("train") or {} for n, r in s["baselines"].items()}}
    rows = []
    for m in official:
        v = best.get(m)
        hib = catalogue.parse(m).higher_is_better
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        beat = []
        for name, vals in others.items():
            o = vals.get(m) if vals else None
            if o is None or (isinstance(o, float) and math.isnan(o)) or hib is None:
                continue
            if (o > v + 1e-12) if hib else (o < v - 1e-12):
                beat.append((name, o))
        beat.sort(key=lambda x: -x[1] if hib else x[1])
        rows.append({"metric": DISPLAY_NAME.get(m, m), "value": v, "beaten_by": [n for n, _ in beat],
                     "best_other": ({"name": beat[0][0], "value": beat[0][1]} if beat else None),
                     "objective": m == obj})
    return {"where": where, "rows": rows}
