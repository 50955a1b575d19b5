"""How a tuning run splits its queries so that what it reports is really held out (``evalkit tune``).

The tuner selects a configuration on one set of queries and estimates how it does on others. The estimate is
honest only if the two sets share nothing the selection could exploit: no conversation, no haystack, no evidence
set, no near-duplicate question on both sides. :func:`resolve` decides, from the dataset and the options, which
queries are tuned on and how the estimate is made — one of three modes:

* ``cv`` — cross-validation **by group** over the tuning queries (:func:`evalkit.data.groups.group_folds`): each
  fold's configuration is selected on the other folds, each query is scored by the configuration selected without
  its fold; the out-of-fold mean is the estimate, the spread over folds beside it, and the configuration chosen on
  all tuning queries is the one written out. It is the default when the dataset has few groups (fewer than
  :data:`FEW_GROUPS`: LoCoMo's 10 conversations → leave-one-conversation-out over both of its splits), when the
  held-out split is the dataset's sealed lockbox, and with ``folds`` / ``--folds K`` (``loo``: one fold per group).
* ``heldout`` — tune on the space's ``split``, report on its ``heldout`` split. A declared split that puts one
  group on both sides is refused with one line naming the groups; ``--resplit`` re-splits the union by group
  (:func:`evalkit.data.groups.group_split`, same proportions) and says so in every output.
* ``time`` — ``--split-by time``: tune on the queries asked before a date (``--split-date``, default the median
  ``as_of``), hold out those asked at or after it: the protocol a single user's memory faces (tune on last month's
  traffic, run on next month's). Groups may straddle the date — that is the realistic case — and their count is
  reported.

A dataset may declare a **lockbox** (``info["lockbox"]``, or a split named ``lockbox``): a sealed split that
:func:`resolve` never puts in the tuning or held-out queries; only ``--final`` evaluates the chosen configuration on
it (:mod:`evalkit.tune.lockbox` counts the openings). Groups shared between the lockbox and the tuning queries are
refused (``--resplit`` drops those tuning queries instead; the lockbox never changes). What the tuner does read of
the lockbox is its queries' ids and evidence sets, only to prove that no group is shared: nothing is retrieved for
them and nothing is scored until ``--final``.

The grouping rule is ``split_by`` in the space or ``--split-by`` (``auto`` by default; rules in
:mod:`evalkit.data.groups`). Every decision is in :attr:`Protocol.notes`, :meth:`Protocol.splits_json` (the
``splits.json`` of the output folder) and the tuned file's header.

Example::

    proto = resolve(space, ds, Options(split_by="auto"))
    print("\\n".join(proto.describe()))
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalkit.data.groups import (
    Grouping,
    declared,
    evidence_sets,
    group_folds,
    group_split,
    n_folds,
    query_groups,
    same_evidence,
    split_summary,
    straddling,
    summary_lines,
    time_split,
)
from evalkit.tune.space import FOLDS_LOO
from retrievers.errors import ConfigError
from retrievers.types import Dataset

FEW_GROUPS = 30  # fewer groups than this: cross-validation by group is the estimate (a held-out half is too noisy)
DEFAULT_FOLDS = 5
LOO = FOLDS_LOO  # folds = "loo": one fold per group
SHOWN = 8  # group names listed in a refusal


@dataclass
class Options:
    """Command-line choices that override the space (``None`` = the space's value)."""

    split_by: str | None = None
    split_date: str | None = None
    folds: int | None = None
    resplit: bool = False
    final: bool = False


@dataclass
class Protocol:
    mode: str                      # "cv" | "heldout" | "time"
    grouping: Grouping
    split: str | None              # the tuning split's name (None: every query outside the lockbox)
    pool: list[str]                # tuning queries (dataset order)
    heldout_name: str | None       # the held-out split (or "after <date>"), None in cv mode
    heldout: list[str]             # held-out queries (dataset order), [] in cv mode
    folds: int = 0                 # cv: folds asked (LOO = leave-one-group-out)
    lockbox: str | None = None     # the dataset's sealed split
    lockbox_ids: list[str] = field(default_factory=list)
    resplit: bool = False
    time_date: str | None = None
    notes: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)

    def fold_of(self, ids: list[str]) -> np.ndarray:
        """Fold of each of ``ids`` (the judged tuning queries in sweep order), every group in one fold."""
        return group_folds(ids, self.grouping.of, self.folds or DEFAULT_FOLDS)

    def k(self, ids: list[str]) -> int:
        return n_folds(ids, self.grouping.of, self.folds or DEFAULT_FOLDS)

    def fold_text(self, ids: list[str]) -> str:
        k = self.k(ids)
        what = self.grouping.what.split(" / ")[0]
        if k == len({self.grouping.of[q] for q in ids}):
            return f"leave-one-{what}-out cross-validation ({k} folds)"
        return f"{k}-fold cross-validation by {what}"

    def fold_check(self, ds: Dataset, ids: list[str]) -> dict:
        """Over the folds of ``ids``: groups with queries in two folds (0 by construction) and queries whose
        evidence set equals one of another fold's queries (0 when no group is cut)."""
        f = self.fold_of(ids)
        ev = evidence_sets(ds)
        k = int(f.max()) + 1
        across = set()
        same = 0
        for j in range(k):
            mine = [q for q, x in zip(ids, f) if x == j]
            rest = [q for q, x in zip(ids, f) if x != j]
            across.update(straddling(self.grouping.of, mine, rest))
            same += same_evidence(ev, rest, mine)
        return {"folds": k, "groups_across_folds": len(across), "same_evidence": same}

    def describe(self) -> list[str]:
        """People's lines: the mode, the split summary, the notes."""
        return summary_lines(self.summary) + [f"  {n}" for n in self.notes]

    def splits_json(self, judged: list[str] | None = None, opened: bool = False) -> dict:
        """``splits.json``: the rule, each query's group, the ids of every split (and fold)."""
        ids = self.pool + self.heldout + (self.lockbox_ids if opened else [])
        out = {"rule": self.grouping.rule, "group_is": self.grouping.what, "mode": self.mode,
               "tuning_split": self.split, "heldout_split": self.heldout_name, "resplit": self.resplit,
               "time_split_date": self.time_date, "notes": list(self.notes), "summary": self.summary,
               "splits": {"tuning": list(self.pool), "heldout": list(self.heldout)},
               "lockbox": ({"split": self.lockbox, "queries": len(self.lockbox_ids), "opened": opened,
                            "ids": list(self.lockbox_ids)} if self.lockbox else None),
               "group_of": {q: self.grouping.of[q] for q in ids}}
        if self.mode == "cv" and judged is not None:
            f = self.fold_of(judged)
            out["folds"] = {"rule": self.fold_text(judged),
                            "ids": [[q for q, x in zip(judged, f) if x == k] for k in range(int(f.max()) + 1)]}
        return out


def _ids(ds: Dataset, name: str) -> list[str]:
    keep = set(ds.splits[name])
    return [q.id for q in ds.queries if q.id in keep]


def _names(groups: list[str]) -> str:
    return ", ".join(groups[:SHOWN]) + (f" … ({len(groups)} in all)" if len(groups) > SHOWN else "")


def lockbox_of(ds: Dataset) -> str | None:
    """The dataset's sealed split: ``info["lockbox"]``, else a split named ``lockbox``, else None."""
    lb = declared(ds, "lockbox") or ("lockbox" if "lockbox" in ds.splits else None)
    if lb is not None and lb not in ds.splits:
        raise ConfigError(f"dataset {ds.name!r} declares lockbox split {lb!r}, which it does not have")
    return lb


def resolve(space, ds: Dataset, opts: Options | None = None) -> Protocol:
    """The tuning protocol for ``space`` on ``ds`` (see the module docstring). Raises ConfigError (one line)."""
    opts = opts or Options()
    where = space.path
    rule = opts.split_by or space.split_by or "auto"
    by_time = rule == "time"
    grouping = query_groups(ds, "auto" if by_time else rule)
    folds = opts.folds if opts.folds is not None else space.folds
    if by_time and folds:
        raise ConfigError(f"{where}: a time split is one held-out period; it cannot be combined with folds")
    lockbox = lockbox_of(ds)
    lock_ids = _ids(ds, lockbox) if lockbox else []
    if opts.final and not lockbox:
        raise ConfigError(f"{where}: --final opens the dataset's lockbox, and {ds.name!r} declares none (a split "
                          f"named 'lockbox', or info['lockbox'])")
    split = space.split or ("train" if "train" in ds.splits and "train" != lockbox else None)
    if split is not None and split not in ds.splits:
        raise ConfigError(f"{where}: dataset {ds.name!r} has no split {split!r} "
                          f"(splits: {', '.join(sorted(ds.splits))})")
    if split is not None and split == lockbox:
        raise ConfigError(f"{where}: split {split!r} is the dataset's sealed lockbox: tune on another split")
    sealed = set(lock_ids)
    pool0 = _ids(ds, split) if split else [q.id for q in ds.queries if q.id not in sealed]
    notes: list[str] = []
    held_name = None
    if not folds:
        held_name = space.heldout or next((s for s in ("heldout", "test") if s in ds.splits and s != split), None)
        if held_name is not None and held_name not in ds.splits:
            raise ConfigError(f"{where}: dataset {ds.name!r} has no split {held_name!r} "
                              f"(splits: {', '.join(sorted(ds.splits))})")
        if held_name == split:
            raise ConfigError(f"{where}: the held-out split {held_name!r} is the tuning split")
        if held_name is not None and held_name == lockbox:
            notes.append(f"the held-out split {held_name!r} is the dataset's sealed lockbox: not read "
                         f"(evalkit tune --final opens it); " + (
                             "the time split is made within the other queries" if by_time else
                             f"the estimate is cross-validation by group over {split or 'the tuning queries'!r}"))
            held_name = None
    held0 = [q for q in _ids(ds, held_name) if q not in sealed] if held_name else []
    overlap = set(pool0) & set(held0)
    if overlap:
        raise ConfigError(f"{where}: splits {split!r} and {held_name!r} share {len(overlap)} queries")
    resplit = False
    time_date = None
    if by_time:
        if not held0 and not split:
            raise ConfigError(f"{where}: a time split needs queries outside the lockbox")
        universe = [q.id for q in ds.queries if q.id in set(pool0) | set(held0)]
        pool, held, time_date = time_split(ds, universe, opts.split_date or space.split_date)
        if not pool or not held:
            raise ConfigError(f"{where}: the time split at {time_date} leaves {len(pool)} queries before and "
                              f"{len(held)} after it")
        mode, held_name = "time", f"after {time_date}"
        split = f"{split or 'all'} before {time_date}"
        notes.append(f"time split: tuned on the {len(pool)} queries asked before {time_date}, held out the "
                     f"{len(held)} asked at or after it")
    elif folds or held_name is None:
        mode, pool, held = "cv", pool0, []
    else:
        universe = [q.id for q in ds.queries if q.id in set(pool0) | set(held0)]
        n_groups = len({grouping.of[q] for q in universe})
        if n_groups < FEW_GROUPS:
            mode, pool, held = "cv", universe, []
            folds = LOO if n_groups <= 12 else DEFAULT_FOLDS
            notes.append(f"{n_groups} groups ({grouping.what.split(' / ')[0]}s) in {split!r} + {held_name!r}: "
                         f"too few for one held-out split; the estimate is cross-validation by group over both")
            split, held_name = f"{split}+{held_name}", None
        else:
            mode, pool, held = "heldout", pool0, held0
            both = straddling(grouping.of, pool, held)
            if both and not opts.resplit:
                raise ConfigError(f"{where}: the declared split puts {len(both)} groups ({grouping.rule}) on both "
                                  f"sides of {split!r} / {held_name!r}: {_names(both)} — re-split with --resplit")
            if both:
                frac = len(pool0) / len(universe)
                pool, held = group_split(universe, grouping.of, frac)
                resplit = True
                notes.append(f"--resplit: {len(both)} groups were on both sides of the declared {split!r} / "
                             f"{held_name!r}; re-split by group ({len(pool)} / {len(held)} queries)")
                split, held_name = f"{split} (re-split)", f"{held_name} (re-split)"
    if lock_ids:
        cross = straddling(grouping.of, pool + held, lock_ids)
        if cross and not opts.resplit:
            raise ConfigError(f"{where}: {len(cross)} groups ({grouping.rule}) have queries both in the lockbox "
                              f"{lockbox!r} and in the tuning queries: {_names(cross)} — --resplit drops those "
                              f"tuning queries")
        if cross:
            bad = set(cross)
            pool = [q for q in pool if grouping.of[q] not in bad]
            held = [q for q in held if grouping.of[q] not in bad]
            resplit = True
            notes.append(f"--resplit: dropped the tuning / held-out queries of {len(cross)} groups that the lockbox "
                         f"{lockbox!r} shares")
    if not pool:
        raise ConfigError(f"{where}: no tuning queries")
    sides = {"tuning": pool}
    if held:
        sides["held-out"] = held
    if lockbox:
        sides[f"lockbox {lockbox!r}"] = lock_ids
    summary = split_summary(grouping, sides, evidence_sets(ds))
    if mode == "cv" and not folds:
        folds = LOO if len({grouping.of[q] for q in pool}) <= 12 else DEFAULT_FOLDS
    return Protocol(mode, grouping, split, pool, held_name, held, folds, lockbox, lock_ids, resplit, time_date,
                    notes, summary)


def declared_clusters(ds: Dataset, ids: list[str]) -> list[str] | None:
    """The declared cluster of each of ``ids`` (``info["clusters"]``: the same rule ``evalkit compare`` uses for
    its tests and intervals), or None when the dataset declares none."""
    cl = declared(ds, "clusters")
    if not cl:
        return None
    by = cl.get("by", "group")
    q = {x.id: x for x in ds.queries}
    return [str(getattr(q[i], by, None) or q[i].id) for i in ids]
