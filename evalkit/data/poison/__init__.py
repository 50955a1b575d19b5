"""Poisoned memory: plant attacks into any dataset and write a new dataset folder (``evalkit poison``).

* :mod:`~evalkit.data.poison.templates` — the attack templates, a ``design`` set (what defences are built and tuned
  on) and an ``evaluation`` set (what they are judged on);
* :mod:`~evalkit.data.poison.attacks` — the attacks (query-echo, instruction, trigger, keyword-stuff, false-fact),
  each with its source;
* :mod:`~evalkit.data.poison.plant` — targets, notes per target, dates, places and labels (:func:`plant`).

>>> from evalkit.data.registry import load_dataset
>>> from evalkit.data.poison import PlantConfig, plant
>>> poisoned, warnings = plant(load_dataset("memory-workspace"),
...                            PlantConfig(("query-echo", "false-fact"), rate=0.01, isolate=True, seed=1))

The measures (``poison_rate@k``, ``poison_injected_rate`` …) read the labels a planted note carries in its metadata
(:mod:`evalkit.measures.poison`); nothing a retriever reads names them.
"""
from evalkit.data.poison.attacks import ATTACKS
from evalkit.data.poison.plant import POISON, POISON_TARGET, POISON_TEMPLATES, PlantConfig, plant
from evalkit.data.poison.templates import TEMPLATE_SETS

__all__ = ["ATTACKS", "POISON", "POISON_TARGET", "POISON_TEMPLATES", "PlantConfig", "TEMPLATE_SETS", "plant"]
