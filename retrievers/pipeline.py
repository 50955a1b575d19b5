"""A retriever is a config, not a class: arms → ordered stages → ranked list (+ injected block).

A preset (TOML in ``retrievers/presets/``) is a plain dict::

    name = "dense"
    description = "one line"
    [budget]            # the injection budget the system declares (see stages/budget.py)
    [[arms]]            # what to fetch from the shared backend (retrievers/candidates/arms.py)
    [[stages]]          # ordered stages, each {type = "<registered stage>", params…}

``extends = "other_preset"`` starts from another preset and applies ``[overrides]`` (stage label →
params) and/or appends ``[[after]]`` stages — how "fixed" siblings and chained systems are written.
The canonical dict (defaults filled, keys sorted) is hashed; the hash names the preset in caches,
run files and manifests.
"""
from __future__ import annotations

import copy
import hashlib
import json
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.candidates.arms import ArmSpec
from retrievers.candidates.table import CandidateSet, State
from retrievers.stages import REGISTRY, ConfigError, Context, Stage, build_stage
from retrievers.errors import did_you_mean

PRESET_DIR = Path(__file__).parent / "presets"
_TOP_KEYS = {"name", "description", "system", "fixes", "assumptions", "extends", "budget", "arms", "stages",
             "overrides", "after", "tags", "replace_stages"}


@dataclass
class Pipeline:
    """A retriever as data: ``arms`` (what to search: vector / lexical, depths) → ``stages`` (an ordered list of
    registered :class:`~retrievers.stages.Stage` values over the shared candidate table) → ``budget`` (what the
    packer may inject). Its identity is :meth:`canonical` (sorted, defaults filled) and :attr:`hash`, which name it
    in caches, run files and manifests. Build one from a preset (:func:`load_preset`), a dict
    (:func:`build_pipeline`), or derive one: :meth:`with_params`, :meth:`with_stage`.

    >>> from retrievers import load_preset
    >>> p = load_preset("bm25")
    >>> [a.kind for a in p.arms], [s.name for s in p.stages]
    (['lexical'], ['fuse.single', 'cutoff.top_k', 'budget.pack'])
    """

    name: str
    description: str
    arms: list[ArmSpec]
    stages: list[Stage]
    budget: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    # -- identity --------------------------------------------------------------------------------------
    def canonical(self) -> dict:
        return {
            "arms": [dict(a.identity(), name=a.name, depth=a.depth) for a in self.arms],
            "stages": [dict(s.params(), type=s.name) for s in self.stages],
            "budget": self.budget,
        }

    @property
    def hash(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def uses_vectors(self) -> bool:
        """Whether running this pipeline needs embeddings: a vector arm, or a stage that reads vectors or embeds
        text (:meth:`Stage.uses_vectors`).

        >>> from retrievers import load_preset
        >>> load_preset("bm25").uses_vectors(), load_preset("hybrid-rrf").uses_vectors()
        (False, True)
        """
        return any(a.kind == "vector" for a in self.arms) or any(s.uses_vectors() for s in self.stages)

    def query_logs(self) -> list[str]:
        """Every query-log path a stage of this pipeline learns from (the caller loads them, see
        ``Stage.query_log_param``), in stage order without repeats."""
        return list(dict.fromkeys(p for s in self.stages for p in s.query_logs()))

    # -- running -----------------------------------------------------------------------------------------
    def run(self, cs: CandidateSet, ctx: Context | None = None) -> State:
        """Run every stage over the batch. Skipped queries end with empty lists."""
        ctx = ctx or Context()
        st = State.empty(cs.Q)
        if ctx.trace:
            st.trace = []
        for stage in self.stages:
            if ctx.timings is not None:
                t0 = time.perf_counter()
                st = stage.apply(st, cs, ctx)
                ctx.timings.setdefault(stage.display, []).append(time.perf_counter() - t0)
            else:
                st = stage.apply(st, cs, ctx)
            if st.skipped.any() and st.col.size and (st.col[st.skipped] >= 0).any():
                st = st.skip(st.skipped)
            if st.trace is not None:
                st.trace.append((stage.display, st.col.copy(), st.score.copy(), st.skipped.copy(),
                                 {k: v.copy() for k, v in st.extra.items()}))
        return st

    def with_params(self, overrides: dict[str, dict], name: str | None = None) -> "Pipeline":
        """A copy with stage parameters replaced: ``{stage label or type: {param: value}}``; ``name``: the copy's
        name (default the same), so variants can run side by side.

        >>> from retrievers import load_preset
        >>> load_preset("bm25").with_params({"cutoff.top_k": {"k": 5}}, name="bm25_top5").stages[1].k
        5
        """
        stages = []
        for s in self.stages:
            upd = overrides.get(s.display) or overrides.get(s.name)
            if upd:
                p = s.params()
                p.update(upd)
                s = type(s).from_dict(p)
            stages.append(s)
        arms = self.arms
        return Pipeline(name or self.name, self.description, arms, stages, self.budget, self.meta)


    def with_stage(self, stage: "Stage | dict", *, before: str | None = None, after: str | None = None,
                   name: str | None = None) -> "Pipeline":
        """A copy with one more stage: ``stage`` (a :class:`~retrievers.stages.Stage` or its dict, ``{"type": …,
        param: value}``) inserted before or after the stage whose label or type is ``before`` / ``after`` (neither:
        at the end); ``name`` names the copy (default the same).

        >>> from retrievers import load_preset
        >>> p = load_preset("bm25").with_stage({"type": "score.importance"}, before="cutoff.top_k", name="bm25_imp")
        >>> p.name, [s.name for s in p.stages]
        ('bm25_imp', ['fuse.single', 'score.importance', 'cutoff.top_k', 'budget.pack'])
        """
        if before is not None and after is not None:
            raise ConfigError("with_stage: give before= or after=, not both")
        new = stage if isinstance(stage, Stage) else build_stage(dict(stage))
        at = len(self.stages)
        where = before if before is not None else after
        if where is not None:
            labels = [s.display for s in self.stages]
            hit = next((i for i, s in enumerate(self.stages) if where in (s.display, s.name)), None)
            if hit is None:
                raise ConfigError(f"with_stage: pipeline {self.name!r} has no stage {where!r} (stages: "
                                  f"{', '.join(labels)})" + did_you_mean(where, labels))
            at = hit if before is not None else hit + 1
        stages = [*self.stages[:at], new, *self.stages[at:]]
        return Pipeline(name or self.name, self.description, self.arms, stages, self.budget, self.meta)


# ---- preset loading ----------------------------------------------------------------------------------------

def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def _read_preset(name_or_path: str) -> tuple[dict, str]:
    p = Path(name_or_path)
    if p.suffix == ".toml" and p.exists():
        path = p
    else:
        path = PRESET_DIR / f"{name_or_path}.toml"
        if not path.exists():
            names = preset_names()
            hint = did_you_mean(name_or_path, names)
            listing = (f"{len(names)} presets: `evalkit presets` lists them" if hint else
                       f"presets: {', '.join(names)}")
            raise ConfigError(f"unknown retriever {name_or_path!r}{hint} ({listing})")
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh), str(path)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None


def resolve_preset(name_or_path: str, _seen: tuple = ()) -> dict:
    """The preset dict with ``extends`` applied (stages from the base, overrides, appended stages)."""
    raw, where = _read_preset(name_or_path)
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(_TOP_KEYS))})")
    if "extends" in raw:
        base_name = raw["extends"]
        if base_name in _seen:
            raise ConfigError(f"{where}: 'extends' cycle through {base_name!r}")
        base = resolve_preset(base_name, _seen + (base_name,))
        out = copy.deepcopy(base)
        out.pop("fixes", None)
        out.pop("assumptions", None)
        for k in ("name", "description", "system", "fixes", "assumptions", "tags"):
            if k in raw:
                out[k] = raw[k]
        if "budget" in raw:
            out["budget"] = dict(out.get("budget", {}), **raw["budget"])
        if "arms" in raw:
            by = {a["name"]: a for a in out.get("arms", [])}
            for a in raw["arms"]:
                by[a["name"]] = dict(by.get(a["name"], {}), **a)
            out["arms"] = list(by.values())
        if "replace_stages" in raw:
            out["stages"] = copy.deepcopy(raw["replace_stages"])
        labels = {(s.get("label") or s["type"]) for s in out.get("stages", [])}
        for lbl, upd in (raw.get("overrides") or {}).items():
            if lbl not in labels:
                raise ConfigError(f"{where}: override for unknown stage {lbl!r} (stages: {', '.join(sorted(labels))})"
                                  + did_you_mean(lbl, labels))
            for s in out["stages"]:
                if (s.get("label") or s["type"]) == lbl:
                    if upd.get("type") and upd["type"] != s["type"]:
                        s.clear()
                    s.update(upd)
        out["stages"] = [s for s in out.get("stages", []) if not s.get("disabled")]
        out["stages"] = out["stages"] + list(raw.get("after", []))
        out.pop("extends", None)
        return out
    raw.setdefault("name", Path(where).stem)
    raw["stages"] = [s for s in raw.get("stages", []) if not s.get("disabled")]
    return raw


def build_pipeline(cfg: dict) -> Pipeline:
    """A :class:`Pipeline` from its plain-dict form — the shape of a preset TOML: ``name``, ``description``,
    ``arms`` (``[{"name", "kind": "vector" | "lexical", "depth", …}]``), ``stages`` (``[{"type": <stage name>,
    param: value, …}]``, in order) and ``budget``; ConfigError (one line) names the preset and the stage at fault.

    >>> from retrievers import build_pipeline
    >>> p = build_pipeline({"name": "bm25_top3", "arms": [{"name": "bm25", "kind": "lexical"}],
    ...                     "stages": [{"type": "fuse.single", "arm": "bm25"}, {"type": "cutoff.top_k", "k": 3}]})
    >>> p.name, p.stages[1].k
    ('bm25_top3', 3)
    """
    name = cfg.get("name", "unnamed")
    arms = []  # arms first: a preset whose arm is wrong is reported for that, not for what follows it
    for a in cfg.get("arms", []):
        try:
            arms.append(ArmSpec.from_dict(a))
        except ConfigError as exc:
            raise ConfigError(f"preset {name!r}: {exc}") from None
    if not cfg.get("stages"):
        raise ConfigError(f"preset {name!r} has no stages (add [[stages]] tables after its [[arms]])")
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise ConfigError(f"preset {name!r}: duplicate arm names {names}")
    stages = []
    for i, s in enumerate(cfg["stages"]):
        try:
            stages.append(build_stage({k: v for k, v in s.items() if k != "disabled"}))
        except ConfigError as exc:
            raise ConfigError(f"preset {name!r} stage {i + 1}: {exc}") from None
    meta = {k: cfg[k] for k in ("system", "fixes", "assumptions", "tags") if k in cfg}
    return Pipeline(name=name, description=cfg.get("description", ""), arms=arms, stages=stages,
                    budget=dict(cfg.get("budget", {})), meta=meta)


def load_preset(name_or_path: str) -> Pipeline:
    return build_pipeline(resolve_preset(name_or_path))


def ranked(st: State, cs: CandidateSet, q: int) -> list[tuple[str, float]]:
    cols, scores = st.rows(q)
    ids = cs.corpus.ids
    return [(ids[cs.doc[q, c]], float(s)) for c, s in zip(cols, scores)]


def injected_mask(st: State) -> np.ndarray:
    """Rows that would actually be injected (the budget packer's decision; all rows if none ran)."""
    m = st.info.get("injected")
    if m is None or m.shape != st.col.shape:
        return st.col >= 0
    return m & (st.col >= 0)


__all__ = ["Pipeline", "load_preset", "build_pipeline", "resolve_preset", "preset_names", "ranked",
           "injected_mask", "REGISTRY", "Any"]
