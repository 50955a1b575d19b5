"""Groups of dependent queries, and splits / folds that never cut a group (tuning and held-out must be independent).

A held-out query that shares its evidence with a tuning query, or belongs to the same conversation, tests what the
tuner has already seen: a by-query split overstates how a tuned pipeline generalises. Every split the harness
makes for tuning (``evalkit tune``, the loaders' ``train`` / ``heldout``, the memory-workspace generator) puts a
whole group on one side.

Rules (:data:`RULES`; combine them with ``+``: queries linked by any of the rules are one group)::

    group      the dataset's declared clusters (``info["clusters"]``: one LoCoMo conversation, one LongMemEval
               haystack) or, when none are declared, the queries' ``group`` (a BEIR folder's ``metadata.group``)
               when it holds at least two values
    evidence   queries whose sets of relevant documents (grade > 0) are identical are one group; documents are
               compared by content (sha256 of title + text), so one session copied into two haystacks is one piece
               of evidence. A query without a relevant document is a group of its own. (Linking every pair that
               merely *shares* a relevant document is too coarse on memory-style data: it chains most queries into
               one group.)
    query      near-duplicate query texts: token-set Jaccard ``|A ∩ B| / |A ∪ B|`` of the lower-cased word tokens
               (the replay's :func:`jaccard`) at least :data:`QUERY_JACCARD`, single linkage — for logged traffic,
               where the same question comes back re-worded
    auto       ``info["split_by"]`` when the dataset declares it, else ``group+evidence`` when it declares clusters
               or carries several query groups, else ``evidence``

:func:`query_groups` returns a :class:`Grouping` (the rule and each query's group label); :func:`group_split`
(a deterministic split by seeded hash of the group labels, balanced per stratum), :func:`group_folds`
(cross-validation folds; leave-one-group-out when ``k`` >= the number of groups), :func:`time_split` (before /
after a date) and :func:`split_summary` (group counts, sizes, the largest group's share, groups on both sides and
held-out queries whose evidence set equals a tuning query's) build on it.

Example::

    g = query_groups(ds, "auto")
    train, held = group_split(ds.splits["all"], g.of)
    assert not straddling(g.of, train, held)
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

import numpy as np

from retrievers.types import DataError, Dataset, parse_time

RULES = ("group", "evidence", "query")
QUERY_JACCARD = 0.6  # near-duplicate queries: token-set Jaccard at least this
GROUP_SEED = "evalkit-group-split-1"
_WORD = re.compile(r"\w+", re.UNICODE)


def jaccard(a: Iterable, b: Iterable) -> float:
    """|A ∩ B| / |A ∪ B| of two sets; two empty sets → NaN (nothing to compare)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    if not union:
        return float("nan")
    return len(sa & sb) / len(union)


@dataclass
class Grouping:
    """Each query's group under a rule. ``of``: query id → group label; ``rule``: the canonical rule text
    (``group(conversation)+evidence``); ``what``: what one group is, for people."""

    rule: str
    of: dict[str, str]
    what: str

    def sizes(self, ids: Iterable[str] | None = None) -> dict[str, int]:
        """Queries per group (over ``ids``, default every query)."""
        out: dict[str, int] = {}
        for q in (self.of if ids is None else ids):
            g = self.of[q]
            out[g] = out.get(g, 0) + 1
        return out


def _doc_key(d) -> str:
    return hashlib.sha256(f"{d.title}\0{d.text}".encode()).hexdigest()[:24]


def evidence_sets(ds: Dataset) -> dict[str, frozenset]:
    """Query id → the content keys of its relevant documents (grade > 0); empty for a query without one."""
    by_id = {d.id: d for d in ds.documents}
    keys: dict[str, str] = {}
    out = {}
    for q in ds.queries:
        rel = [d for d, g in ds.qrels.get(q.id, {}).items() if int(g) > 0 and d in by_id]
        out[q.id] = frozenset(keys.setdefault(d, _doc_key(by_id[d])) for d in rel)
    return out


def declared(ds: Dataset, key: str):
    """A dataset declaration (``info[key]``), also read from the ``info`` an exported folder's ``evalkit.json``
    carries (``info["exported_info"]``): an exported LoCoMo keeps its conversations, lockbox and rule."""
    v = ds.info.get(key)
    return v if v is not None else (ds.info.get("exported_info") or {}).get(key)


def groups_of_sets(sets: dict[str, frozenset]) -> dict[str, str]:
    """Query id → group label for the ``evidence`` rule over precomputed sets: queries with the same non-empty set
    share the label of the smallest id among them; a query with an empty set is its own group (``q:<id>``)."""
    first: dict[frozenset, str] = {}
    for q in sorted(sets):
        if sets[q]:
            first.setdefault(sets[q], q)
    return {q: f"q:{first[v]}" if v else f"q:{q}" for q, v in sets.items()}


def declared_groups(ds: Dataset) -> tuple[dict[str, str], str] | None:
    """(query id → declared group, what it is) or None: the dataset's ``info["clusters"]`` (by the query attribute it
    names), else the queries' ``group`` when at least two distinct values are present."""
    cl = declared(ds, "clusters")
    if cl:
        by = str(cl.get("by", "group"))
        of = {q.id: str(getattr(q, by, None) or q.metadata.get(by) or q.id) for q in ds.queries}
        return of, str(cl.get("what") or by)
    of = {q.id: str(q.group) for q in ds.queries if q.group}
    if len(set(of.values())) >= 2 and len(of) == len(ds.queries):
        return of, "group"
    return None


def _tokens(text: str) -> frozenset:
    return frozenset(t.lower() for t in _WORD.findall(text or ""))


def near_duplicate_pairs(texts: list[str], threshold: float = QUERY_JACCARD) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, whose token-set Jaccard is at least ``threshold`` (sparse products, so a
    log of tens of thousands of events is cheap). Two empty texts count as duplicates."""
    from scipy import sparse  # lazy: startup
    toks = [_tokens(t) for t in texts]
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, ts in enumerate(toks):
        for t in sorted(ts):
            rows.append(i)
            cols.append(vocab.setdefault(t, len(vocab)))
    n = len(texts)
    X = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n, max(1, len(vocab))))
    inter = sparse.triu(X @ X.T, k=1).tocoo()
    size = np.array([len(t) for t in toks], dtype=np.float64)
    union = size[inter.row] + size[inter.col] - inter.data
    keep = inter.data >= threshold * union - 1e-12
    out = sorted(zip(inter.row[keep].tolist(), inter.col[keep].tolist()))
    empty = [i for i, t in enumerate(toks) if not t]
    out += [(a, b) for k, a in enumerate(empty) for b in empty[k + 1:]]
    return sorted(set(out))


def _canonical(rule: str, ds: Dataset) -> list[str]:
    rule = (rule or "auto").strip().lower()
    if rule == "auto":
        rule_declared = declared(ds, "split_by")
        if rule_declared:
            rule = str(rule_declared)
        elif declared_groups(ds) is not None:
            rule = "group+evidence"
        else:
            rule = "evidence"
    parts = [p.strip() for p in rule.split("+") if p.strip()]
    bad = [p for p in parts if p not in RULES]
    if bad or not parts:
        raise DataError(f"unknown split rule {rule!r} (rules: {', '.join(RULES)}, combined with '+', or auto)")
    return list(dict.fromkeys(parts))


def query_groups(ds: Dataset, rule: str = "auto", threshold: float = QUERY_JACCARD) -> Grouping:
    """Each query's group under ``rule`` (see the module docstring). A component's label is its declared group
    name(s) when it has any (``conv-26``; ``a+b`` when evidence joins two), else ``q:<smallest query id>``."""
    from scipy.sparse import coo_matrix  # lazy: startup
    from scipy.sparse.csgraph import connected_components  # lazy: startup
    parts = _canonical(rule, ds)
    ids = [q.id for q in ds.queries]
    pos = {q: i for i, q in enumerate(ids)}
    n = len(ids)
    edges: list[tuple[int, int]] = []
    nodes = [n]  # query nodes 0..n-1, then one node per label (a label joins every query that carries it)

    def link(labels: dict) -> None:
        node: dict = {}
        for q, lab in labels.items():
            if lab not in node:
                node[lab] = nodes[0]
                nodes[0] += 1
            edges.append((pos[q], node[lab]))

    named: dict[str, str] = {}
    what = []
    if "group" in parts:
        dg = declared_groups(ds)
        if dg is None:
            raise DataError(f"dataset {ds.name!r} declares no query groups (no clusters, no metadata.group with two "
                            f"or more values): split by 'evidence' or 'query'")
        named, w = dg
        what.append(w)
        link(named)
    if "evidence" in parts:
        what.append("evidence set")
        link({q: ev for q, ev in evidence_sets(ds).items() if ev})
    if "query" in parts:
        what.append("near-duplicate query text")
        edges += near_duplicate_pairs([q.text for q in ds.queries], threshold)
    if edges:
        a, b = np.array(edges, dtype=np.int64).T
        graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(nodes[0], nodes[0]))
        _, comp = connected_components(graph, directed=False)
    else:
        comp = np.arange(nodes[0])
    members: dict[int, list[str]] = {}
    for i, q in enumerate(ids):
        members.setdefault(int(comp[i]), []).append(q)
    of: dict[str, str] = {}
    for qs in members.values():
        names = sorted({named[q] for q in qs if q in named})
        label = "+".join(names) if names else f"q:{min(qs)}"
        for q in qs:
            of[q] = label
    canon = "+".join(f"group({what[0]})" if p == "group" else p for p in parts)
    return Grouping(canon, of, " / ".join(what))


def _rank(label: str, seed: str) -> str:
    return hashlib.sha256(f"{seed}:{label}".encode()).hexdigest()


def group_split(ids: list[str], of: dict[str, str], fraction: float = 0.5, seed: str = GROUP_SEED,
                strata: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """``(first, second)``: a deterministic split of ``ids`` in which every group is whole. Groups are taken in
    order of ``sha256(seed:label)``; each goes to the first side while that side's share of its stratum (the most
    common ``strata`` value of its queries; one stratum when None) is at most ``fraction``, else to the second.
    Each side keeps the input order."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    groups: dict[str, list[str]] = {}
    for q in ids:
        groups.setdefault(of[q], []).append(q)
    count: dict[str, list[int]] = {}
    first: set[str] = set()
    for g in sorted(groups, key=lambda x: _rank(x, seed)):
        qs = groups[g]
        if strata:
            vals = [strata.get(q, "") for q in qs]
            st = max(sorted(set(vals)), key=vals.count)
        else:
            st = ""
        c = count.setdefault(st, [0, 0])
        if c[0] * (1.0 - fraction) <= c[1] * fraction:
            first.update(qs)
            c[0] += len(qs)
        else:
            c[1] += len(qs)
    return [q for q in ids if q in first], [q for q in ids if q not in first]


def group_folds(ids: list[str], of: dict[str, str], k: int, seed: str = GROUP_SEED) -> np.ndarray:
    """Fold index of each of ``ids`` (k folds, every group in one fold). ``k`` >= the number of groups:
    leave-one-group-out (a fold per group, numbered in seeded-hash order). Otherwise groups are placed largest
    first (ties in seeded-hash order) into the fold holding the fewest queries (ties: the lowest fold)."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(ids):
        groups.setdefault(of[q], []).append(i)
    out = np.empty(len(ids), dtype=np.int64)
    order = sorted(groups, key=lambda g: _rank(g, seed))
    if k >= len(groups):
        for f, g in enumerate(order):
            out[groups[g]] = f
        return out
    if k < 2:
        raise ValueError(f"folds must be >= 2, got {k}")
    load = [0] * k
    for g in sorted(order, key=lambda g: -len(groups[g])):  # stable: hash order among equal sizes
        f = min(range(k), key=lambda j: (load[j], j))
        out[groups[g]] = f
        load[f] += len(groups[g])
    return out


def n_folds(ids: list[str], of: dict[str, str], k: int) -> int:
    """The number of folds :func:`group_folds` makes."""
    n = len({of[q] for q in ids})
    return n if k >= n else k


def straddling(of: dict[str, str], a: Iterable[str], b: Iterable[str]) -> list[str]:
    """Group labels with queries on both sides (sorted)."""
    ga = {of[q] for q in a}
    return sorted(ga & {of[q] for q in b})


def same_evidence(ev: dict[str, frozenset], tuning: Iterable[str], held: Iterable[str]) -> int:
    """Held-out queries whose (non-empty) evidence set equals a tuning query's."""
    seen = {ev[q] for q in tuning if ev.get(q)}
    return sum(1 for q in held if ev.get(q) and ev[q] in seen)


def time_split(ds: Dataset, ids: list[str], when: str | None = None) -> tuple[list[str], list[str], str]:
    """``(before, after, date)``: queries asked before ``when`` (ISO 8601 date or time) and at or after it. Default
    ``when``: the median ``as_of`` (the first query at or past the middle, so about half is before). A query
    without ``as_of`` is an error (a temporal split needs every query's date)."""
    by = {q.id: q for q in ds.queries}
    missing = [q for q in ids if by[q].as_of is None]
    if missing:
        raise DataError(f"split by time: {len(missing)} queries have no as_of (e.g. {missing[0]!r})")
    if when:
        try:
            t = parse_time(when)
        except (DataError, ValueError) as exc:
            raise DataError(f"split date {when!r} is not an ISO 8601 date or time ({exc})") from None
    else:
        times = sorted(by[q].as_of for q in ids)
        if not times:
            raise DataError("split by time: no queries")
        t = times[len(times) // 2]
    stamp = datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = [q for q in ids if by[q].as_of < t]
    after = [q for q in ids if by[q].as_of >= t]
    return before, after, stamp


def split_summary(g: Grouping, sides: dict[str, list[str]], ev: dict[str, frozenset] | None = None) -> dict:
    """Per side: queries, groups, the largest group (queries and share of the side); over all sides: groups on
    more than one side (first 10 labels) and, with ``ev``, held-out queries (every side after the first) whose
    evidence set equals one of the first side's."""
    out: dict = {"rule": g.rule, "what": g.what, "sides": {}}
    names = list(sides)
    for name, ids in sides.items():
        sz = g.sizes(ids)
        big = max(sz.items(), key=lambda kv: (kv[1], kv[0])) if sz else (None, 0)
        out["sides"][name] = {"queries": len(ids), "groups": len(sz), "largest_group": big[0],
                              "largest_group_queries": big[1],
                              "largest_group_share": big[1] / len(ids) if ids else 0.0,
                              "singletons": sum(1 for v in sz.values() if v == 1)}
    across = set()
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            across.update(straddling(g.of, sides[a], sides[b]))
    out["straddling"] = len(across)
    out["straddling_examples"] = sorted(across)[:10]
    if ev is not None and len(names) >= 2:
        out["same_evidence"] = {b: same_evidence(ev, sides[names[0]], sides[b]) for b in names[1:]}
    return out


def summary_lines(s: dict) -> list[str]:
    """People's text of :func:`split_summary`: one line per side, then the cross-side counts."""
    lines = [f"split rule {s['rule']} (a group = {s['what']})"]
    for name, v in s["sides"].items():
        lines.append(f"  {name}: {v['queries']} queries in {v['groups']} groups ({v['singletons']} of one query); "
                     f"largest group {v['largest_group']} with {v['largest_group_queries']} queries "
                     f"({100 * v['largest_group_share']:.1f}%)")
    tail = f"  groups on both sides: {s['straddling']}"
    if s.get("same_evidence"):
        tail += "; held-out queries whose evidence set equals a tuning query's: " + ", ".join(
            f"{k} {v}" for k, v in s["same_evidence"].items())
    lines.append(tail)
    return lines


def split_check(full: Dataset, part: Dataset) -> dict:
    """How a view of ``full`` (one split, e.g. for ``evalkit ablate --split``) sits among the dataset's other split
    queries under the ``auto`` rule: its groups and the groups it shares with queries outside it (0 = nothing it is
    used to choose leaks into the rest)."""
    g = query_groups(full, "auto")
    mine = [q.id for q in part.queries]
    inside = set(mine)
    rest = [q for q in (full.splits.get("all") or [x.id for x in full.queries]) if q not in inside]
    shared = straddling(g.of, mine, rest)
    return {"rule": g.rule, "queries": len(mine), "groups": len({g.of[q] for q in mine}), "other_queries": len(rest),
            "shared_groups": len(shared), "shared_examples": shared[:5]}
