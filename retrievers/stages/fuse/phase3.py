"""``fuse.phase3`` — the Phase-3 policy (seed 001, §D1.2–D1.5): modes A/B/C, max-of-normalised scores, tier
boosts, expansion passes with early stop. The decision rules it applies live in :mod:`retrievers.stages.route`.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone

import numpy as np

from retrievers.candidates.table import CandidateSet, State, flat_index, take_rows
from retrievers.kernels.registry import jit_kernel, kernel_example
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.ages import counts_ages, record_ages
from retrievers.stages.filter import DEFAULT_EXCLUDES, glob_to_regex, path_excluded
from retrievers.stages.filter import secret_mask
from retrievers.stages.route import early_stop, has_rare_token, mode_b_runs_vector, mode_c_runs_fts, phase3_mode
from retrievers.stages.helpers.signals import (
    arm_effective_rank,
    doc_flags,
    file_ids,
    id_rank,
    path_rank,
    resolve_arm_name,
    rows_by_keys,
    sort_desc_by,
    take_cols,
    tie_perm,
)

DAY = 86400.0
_P3_HISTORICAL = r"\b(history|historical|originally|back in|last year|years? ago|in (19|20)\d\d)\b"
_FILENAME_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def _norm_path(p: str) -> str:
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def _filename_ts(path: str) -> float:
    """[A7] a real calendar ``YYYY-MM-DD`` in the file name (last path segment) → 00:00 UTC, else NaN."""
    m = _FILENAME_DATE.search(_norm_path(path).rsplit("/", 1)[-1])
    if not m:
        return math.nan
    try:
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=timezone.utc).timestamp()
    except ValueError:
        return math.nan


def phase3_doc_features(cs: CandidateSet, use_timestamp: bool) -> tuple[np.ndarray, np.ndarray]:
    """(Q, C) tier code (1 under ``memory/topics/``, 2 exactly ``MEMORY.md``, else 0: the stage turns it into its
    ``topics_boost`` / ``curated_boost``) and age timestamp ([A7]: file-name date, else mtime, else — only with
    ``use_timestamp`` — the document timestamp)."""
    def build():
        corpus = cs.corpus

        def per_corpus():
            paths = [_norm_path(p) for p in corpus.paths]
            tier = np.array([1 if p.startswith("memory/topics/") else (2 if p == "MEMORY.md" else 0)
                             for p in paths], dtype=np.int8)
            ts = np.array([_filename_ts(p) for p in corpus.paths])
            return tier, ts
        tier, ts = corpus.cached(("phase3.doc",), per_corpus)
        ts = np.where(np.isnan(ts), corpus.mtime, ts)
        if use_timestamp:
            ts = np.where(np.isnan(ts), corpus.timestamp, ts)
        idx = np.where(cs.valid, cs.doc, 0)
        return np.where(cs.valid, tier[idx], 0), np.where(cs.valid, ts[idx], np.nan)
    return cs.memo(("phase3.features", use_timestamp), build)


@register
class Phase3Fusion(Stage):
    """Phase-3 hybrid retrieval policy (seed 001; PIPELINES.md §D1, every [A#] listed in ``phase3_policy``).

    Pre-filter (§D1.1): candidates whose path matches ``exclude`` (default ``**/node_modules/**``,
    ``**/.git/**``, ``**/logs/**``, ``**/*.log``) — and, with ``exclude_secrets``, whose text holds a secret
    (``filter.secret_guard`` patterns; "never surface secrets") — are removed *before* any top-k, so the arms'
    ranks are recomputed among the rest.
    Mode per query: ``st.info["phase3_mode"]`` from ``route.phase3``, else :func:`phase3_mode` ([A1]–[A4]).
    Per pass (main = arms ``vec_arm``/``fts_arm``; expansion pass i = ``{vec_expansion_arm}#i`` /
    ``{fts_expansion_arm}#i``, query transform ``phase3_expansions``):

    * **A**: vector top 12 + FTS top 12.
    * **B**: FTS top 20; "strong" = ``nf >= 0.5`` [A11]; ``mode_b = "literal"`` [A12]: vector top 6 only when
      there are ``>= 3`` strong hits; ``"fallback"``: vector top 6 when there are fewer.
    * **C**: vector top 20; FTS top 8 iff the vector scores are flat (``top1 − top5 < 0.05``, the last score if
      fewer than 5 [A13]; no vector hit counts as flat) or the query has a rare token [A14].

    Scores: ``nv = clamp(cos, 0, 1)`` [A5]; ``nf = rel/(1 + rel)``, ``rel`` = raw BM25 score (= −FTS5 rank; 0 if
    ≤ 0) [A6]; a component the pass did not retrieve is 0; ``base = max(nv, nf)``; passes merge per document
    keeping the max base ("dedupe by chunk hash": the document id; ``dedupe = "path_lines"`` merges documents
    with the same (path, start_line, end_line) into the first). ``score = base + 0.10·[memory/topics/] +
    0.05·[MEMORY.md] − 0.10·[older than 365 days [A7] and the query is not historical [A8]]``, no clamping [A9].
    A chunk dated after the query's ``as_of`` (negative age) is never "older than 365 days": no penalty
    (PIPELINES.md §D1.3); the candidates scored with a negative age are counted
    (:func:`retrievers.stages.decay.record_ages`).
    Order: score desc, base desc, path asc, start_line asc [A10], then document id asc.
    Early stop (checked after each pass [A17]; τ = 0.5 [A18]; ``early_stop`` rule, see
    :func:`retrievers.stages.route.early_stop`): when true no further expansion pass runs.
    Writes ``st.info["phase3"] = {"mode", "passes", "early_stop", "vector_ran", "fts_ran"}`` (per query arrays),
    ``st.info["variants_used"]`` (``passes − 1``: the base pass needs no variant; see :mod:`retrievers.stages.base`)
    and extra columns ``nv``, ``nf``, ``base``. All rows are kept (the packer enforces ≤ 6 chunks / 1,200 tokens).
    Example D1-1: [c5 0.90, c1 0.88, c2 0.80, c4 0.66, c3 0.64].
    """

    name = "fuse.phase3"
    kind = "fusion"
    vec_arm: str = param("vec")
    fts_arm: str = param("fts")
    vec_expansion_arm: str = param("vecx", doc="variant arms vecx#0.. ('' = no expansion passes)")
    fts_expansion_arm: str = param("ftsx")
    max_expansions: int = param(4, ge=0, le=4, doc="[A15]")
    a_vec: int = param(12, ge=0)
    a_fts: int = param(12, ge=0)
    b_fts: int = param(20, ge=0)
    b_vec: int = param(6, ge=0)
    b_min_strong: int = param(3, ge=0)
    strong_nf: float = param(0.5, doc="[A11]")
    mode_b: str = param("literal", choices=("literal", "fallback"), doc="[A12]")
    c_vec: int = param(20, ge=0)
    c_fts: int = param(8, ge=0)
    flat_spread: float = param(0.05, doc="[A13]")
    flat_at: int = param(5, ge=1)
    topics_boost: float = param(0.10, doc="added under memory/topics/")
    curated_boost: float = param(0.05, doc="added to exactly MEMORY.md")
    old_penalty: float = param(0.10)
    old_days: float = param(365.0)
    historical: str = param(_P3_HISTORICAL, doc="[A8] regex (case-insensitive); metadata.historical also counts")
    age_timestamp: bool = param(False, doc="[A7] fall back to the document timestamp (not in the spec)")
    tau: float = param(0.5, doc="[A18]")
    early_stop: str = param("converge_or_evidence", choices=("converge_or_evidence", "converge", "evidence", "off"))
    exclude: list = param(list(DEFAULT_EXCLUDES))
    exclude_secrets: bool = param(True)
    dedupe: str = param("id", choices=("id", "path_lines"))

    def __post_init__(self):
        super().__post_init__()
        try:
            re.compile(self.historical)
        except re.error as exc:
            raise ConfigError(f"stage {self.name!r} parameter 'historical': invalid regex ({exc})") from None

    # -- per candidate set ------------------------------------------------------------------------------------
    def _excluded(self, cs: CandidateSet) -> np.ndarray:
        pats = tuple(glob_to_regex(g) for g in self.exclude)
        paths = cs.corpus.paths
        bad = doc_flags(cs, ("exclude_paths", tuple(self.exclude), False), lambda d: path_excluded(paths[d], pats))
        if self.exclude_secrets:
            bad = bad | secret_mask(cs)
        return bad | ~cs.valid

    def _historical(self, cs: CandidateSet) -> np.ndarray:
        return cs.memo(("phase3.historical", self.historical), lambda: np.array(
            [bool(q.metadata.get("historical")) or re.search(self.historical, q.text, re.IGNORECASE) is not None
             for q in cs.queries], dtype=bool))

    def _groups(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) representative column of each candidate's dedupe group."""
        if self.dedupe == "id":
            return np.broadcast_to(np.arange(cs.C)[None, :], (cs.Q, cs.C))

        def build():
            corpus = cs.corpus
            out = np.broadcast_to(np.arange(cs.C)[None, :], (cs.Q, cs.C)).copy()
            for q in range(cs.Q):
                seen: dict = {}
                for c in np.nonzero(cs.valid[q])[0]:
                    d = cs.doc[q, c]
                    p, s, e = corpus.paths[d], int(corpus.start_line[d]), int(corpus.end_line[d])
                    if p and s >= 0 and e >= 0:
                        out[q, c] = seen.setdefault((p, s, e), int(c))
            return out
        return cs.memo(("phase3.groups",), build)

    def _keep(self, cs: CandidateSet) -> tuple[tuple, np.ndarray]:
        """(key, mask): the rows the pre-filter keeps, memoised per exclusion settings."""
        key = ("phase3.keep", tuple(self.exclude), self.exclude_secrets)
        return key, cs.memo(key, lambda: ~self._excluded(cs))

    def _pass_params(self) -> tuple:
        return (self.a_vec, self.a_fts, self.b_fts, self.b_vec, self.b_min_strong, self.strong_nf, self.mode_b,
                self.c_vec, self.c_fts, self.flat_spread, self.flat_at)

    def _pass(self, cs: CandidateSet, vec: str | None, fts: str | None, modes: np.ndarray, rare: np.ndarray):
        """One pass over arms ``vec`` / ``fts`` (arm keys or None): (present (Q,C), nv, nf, vector_ran (Q,),
        fts_ran (Q,)). A function of the candidate set, the modes and the pass parameters only, so it is memoised
        (bounded): a sweep over τ, boosts or age penalties reuses every pass. The arrays are shared: never
        written."""
        keep_key, keep = self._keep(cs)
        key = (vec, fts, keep_key, modes.tobytes(), *self._pass_params())
        return cs.memo_lru("phase3.pass", key, lambda: self._pass_arrays(cs, vec, fts, keep_key, keep, modes, rare),
                           size=32)

    def _passes(self, cs: CandidateSet, pass_arms: list, modes: np.ndarray, rare: np.ndarray, groups: np.ndarray):
        """Every pass stacked for :func:`merge_passes`: (present, nv, nf) as (P, Q, C) arrays (dedupe groups
        merged) and the first pass's (vector_ran, fts_ran); memoised like :meth:`_pass`. Never written."""
        def build():
            ps, nvs, nfs = [], [], []
            for va, fa in pass_arms:
                p, nv, nf, _, _ = self._pass(cs, va, fa, modes, rare)
                if self.dedupe == "path_lines":
                    p, nv, nf = _group_max(groups, p, nv, nf)
                ps.append(p)
                nvs.append(nv)
                nfs.append(nf)
            first = self._pass(cs, *pass_arms[0], modes, rare)
            return np.stack(ps), np.stack(nvs), np.stack(nfs), first[3], first[4]
        key = (tuple(pass_arms), self._keep(cs)[0], modes.tobytes(), self.dedupe, *self._pass_params())
        return cs.memo_lru("phase3.passes", key, build, size=8)

    def _pass_arrays(self, cs: CandidateSet, vec_key: str | None, fts_key: str | None, keep_key, keep, modes, rare):
        Q, C = cs.Q, cs.C
        zeros = np.zeros((Q, C))
        vec = cs.arms[vec_key] if vec_key is not None else None
        fts = cs.arms[fts_key] if fts_key is not None else None
        if vec is not None:
            vrank = arm_effective_rank(cs, vec_key, keep_key, lambda: keep)
            cos = np.where(vrank > 0, vec.score, np.nan)
        else:
            vrank, cos = np.zeros((Q, C), dtype=np.int32), np.full((Q, C), np.nan)
        if fts is not None:
            frank = arm_effective_rank(cs, fts_key, keep_key, lambda: keep)
            rel = np.where(frank > 0, np.where(np.isfinite(fts.score), fts.score, 0.0), 0.0)
            rel = np.maximum(rel, 0.0)
            nf_all = rel / (1.0 + rel)
        else:
            frank, nf_all = np.zeros((Q, C), dtype=np.int32), zeros
        is_a, is_b, is_c = modes == "A", modes == "B", modes == "C"
        # mode B: strong FTS hits among the FTS top b_fts
        in_b_fts = (frank > 0) & (frank <= self.b_fts)
        n_strong = (in_b_fts & (nf_all >= self.strong_nf)).sum(axis=1)
        b_vec = mode_b_runs_vector(n_strong, self.b_min_strong, self.mode_b)
        # mode C: flat vector confidence or a rare token
        top = np.full((Q, max(self.c_vec, 1)), np.nan)
        in_c = (vrank > 0) & (vrank <= self.c_vec)
        qi, ci = np.nonzero(in_c)
        top[qi, vrank[qi, ci] - 1] = cos[qi, ci]
        c_fts = mode_c_runs_fts(top, rare, self.flat_spread, self.flat_at)
        vdepth = np.where(is_a, self.a_vec, np.where(is_b, np.where(b_vec, self.b_vec, 0), self.c_vec))
        fdepth = np.where(is_a, self.a_fts, np.where(is_b, self.b_fts, np.where(c_fts, self.c_fts, 0)))
        in_v = (vrank > 0) & (vrank <= vdepth[:, None])
        in_f = (frank > 0) & (frank <= fdepth[:, None])
        nv = np.where(in_v, np.clip(np.nan_to_num(cos, nan=0.0), 0.0, 1.0), 0.0)
        nf = np.where(in_f, nf_all, 0.0)
        vector_ran = np.where(is_b, b_vec, True) & (vec is not None)
        fts_ran = np.where(is_c, c_fts, True) & (fts is not None)
        return in_v | in_f, nv, nf, vector_ran & (vdepth > 0), fts_ran & (fdepth > 0)

    def _tie(self, cs: CandidateSet) -> tuple[np.ndarray, np.ndarray]:
        """[A10] tie order after score and base: path asc, start_line asc, document id asc (then column)."""
        def keys():
            start = np.where(cs.valid, cs.corpus.start_line[np.where(cs.valid, cs.doc, 0)], -1)
            return id_rank(cs), start, path_rank(cs)
        return tie_perm(cs, ("phase3",), keys)

    def _boost(self, cs: CandidateSet) -> np.ndarray:
        """(Q, C) ``topics_boost`` / ``curated_boost`` by tier minus ``old_penalty`` where the chunk is older than
        ``old_days`` [A7] and the query is not historical [A8]: a function of the candidate set and those
        parameters only, so it is memoised (bounded; keyed by the parameters' reprs, so 0.0 and −0.0 stay apart):
        a sweep over τ or ``strong_nf`` reuses it. C-contiguous for the kernels; shared: never written."""
        def build():
            tier_code, ts = phase3_doc_features(cs, self.age_timestamp)
            tier = np.where(tier_code == 1, self.topics_boost, np.where(tier_code == 2, self.curated_boost, 0.0))
            age = cs.as_of[:, None] - ts
            old = age / DAY > self.old_days
            old = np.where(np.isnan(ts) | np.isnan(cs.as_of)[:, None], False, old) & ~self._historical(cs)[:, None]
            return np.ascontiguousarray(tier - np.where(old, self.old_penalty, 0.0))
        key = repr((self.topics_boost, self.curated_boost, self.old_penalty, self.old_days, self.historical,
                    self.age_timestamp))
        return cs.memo_lru("phase3.boost", key, build, size=16)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        Q, C = cs.Q, cs.C
        modes = st.info.get("phase3_mode")
        if modes is None or len(modes) != Q:
            modes = cs.memo(("phase3.modes_default",), lambda: np.array([phase3_mode(q.text) for q in cs.queries],
                                                                      dtype="<U1"))
        modes = np.asarray(modes)
        rare = cs.memo(("phase3.rare",), lambda: np.array([has_rare_token(q.text) for q in cs.queries], dtype=bool))
        boost = self._boost(cs)
        groups = self._groups(cs)
        tie = self._tie(cs)
        files = file_ids(cs)

        pass_arms = [(resolve_arm_name(cs, self.vec_arm), resolve_arm_name(cs, self.fts_arm))]
        for i in range(self.max_expansions):
            va = f"{self.vec_expansion_arm}#{i}" if self.vec_expansion_arm else None
            fa = f"{self.fts_expansion_arm}#{i}" if self.fts_expansion_arm else None
            va, fa = (va if va in cs.arms else None), (fa if fa in cs.arms else None)
            if va is None and fa is None:
                continue
            pass_arms.append((va, fa))
        P, NV, NF, vr0, fr0 = self._passes(cs, pass_arms, modes, rare, groups)
        rule = _RULES[self.early_stop]
        *merged, ok = jit_kernel(merge_passes)(P, NV, NF, boost, tie[1], files, float(self.tau), rule)
        if not ok:  # a non-finite score where the early stop reads it: the general order, pass by pass
            merged = merge_passes_numpy(P, NV, NF, boost, tie, files, self.tau, self.early_stop)
        present, best_nv, best_nf, best_base, stopped, passes = merged
        vector_ran, fts_ran = vr0.copy(), fr0.copy()
        rows = order_rows(present, best_nv, best_nf, best_base, boost, tie[1])
        if rows is None:  # a non-finite score or base: the general order
            rows = order_rows_numpy(present, best_nv, best_nf, best_base, boost, tie)
        col, score_k, nv_k, nf_k, base_k = rows
        out = State(col, score_k, st.skipped, {"nv": nv_k, "nf": nf_k, "base": base_k}, st.info, st.trace)
        st.info["phase3"] = {"mode": modes, "passes": passes, "early_stop": stopped, "vector_ran": vector_ran,
                             "fts_ran": fts_ran}
        st.info["variants_used"] = passes - 1
        if counts_ages(ctx):
            age = cs.as_of[:, None] - phase3_doc_features(cs, self.age_timestamp)[1]
            record_ages(out, age, present & np.isfinite(age))
        return out

    @staticmethod
    def _order(present, score, base, tie) -> np.ndarray:
        """Per row: the present columns by score desc, base desc, then the ``tie`` order (path, start line,
        document id, column); the other columns after them."""
        perm, rank = tie
        order = sort_desc_by([score, base], present, perm)
        if order is not None:
            return order
        # non-finite scores (e.g. an infinite old_penalty): one general lexsort, NaN after every number
        Q, C = present.shape
        qq = np.repeat(np.arange(Q), C)
        key_s = np.where(present, score, -np.inf).ravel()
        key_b = np.where(present, base, -np.inf).ravel()
        order = np.lexsort((rank.ravel(), -key_b, -key_s, ~present.ravel(), qq))
        return (order.reshape(Q, C) - (np.arange(Q) * C)[:, None]).astype(np.int64)


@kernel_example(lambda: (np.ones((1, 2), dtype=np.bool_), np.zeros((1, 2)), np.zeros((1, 2)),
                         np.zeros((1, 2), dtype=np.int64), np.zeros((1, 2), dtype=np.int64), 3))
def early_stop_rows(present, base, boost, rank, files, k):  # pragma: no cover - jitted
    """What the early-stop rule reads, per row: ``(scores, files, ok)`` with the ``k`` best present rows first
    in the Phase-3 order (score = base + boost desc, base desc, ``rank`` asc), then the other present rows in
    column order, then NaN / -1. ``ok`` is False (and nothing else meaningful) when a present row has a
    non-finite score or base."""
    Q, C = present.shape
    s_out = np.empty((Q, C))
    f_out = np.empty((Q, C), dtype=np.int64)
    sc = np.empty(C)
    top = np.empty(k, dtype=np.int64)
    for q in range(Q):
        m = 0  # present rows seen; the best min(m, k) of them are top[0..], best first
        for c in range(C):
            if not present[q, c]:
                continue
            b = base[q, c]
            x = b + boost[q, c]
            if not (np.isfinite(b) and np.isfinite(x)):
                return s_out, f_out, False
            sc[c] = x
            # insertion into the top list: c goes above an entry it beats (ties: the entry stays above)
            j = min(m, k)
            while j > 0:
                t = top[j - 1]
                if x > sc[t] or (x == sc[t] and (b > base[q, t] or (b == base[q, t] and rank[q, c] < rank[q, t]))):
                    if j < k:
                        top[j] = t
                    j -= 1
                else:
                    break
            if j < k:
                top[j] = c
            m += 1
        ntop = min(m, k)  # top[0..ntop) was written for this row; entries past it are stale or out of bounds
        for i in range(ntop):
            s_out[q, i] = sc[top[i]]
            f_out[q, i] = files[q, top[i]]
        n = ntop
        for c in range(C):
            if present[q, c]:
                intop = False
                for i in range(ntop):
                    if top[i] == c:
                        intop = True
                if not intop:
                    s_out[q, n] = sc[c]
                    f_out[q, n] = files[q, c]
                    n += 1
        for i in range(n, C):
            s_out[q, i] = np.nan
            f_out[q, i] = -1
    return s_out, f_out, True


def merge_passes_numpy(P, NV, NF, boost, tie, files, tau: float, rule: str):
    """:func:`merge_passes` written with numpy, pass by pass over every query (its reference, and the route
    when a score the early stop reads is not finite: the general order then sorts them): (present, best_nv,
    best_nf, best_base, stopped, passes). ``tie`` = (perm, rank) of :meth:`Phase3Fusion._tie`; ``rule`` an
    ``early_stop`` name."""
    _, Q, C = P.shape
    boost_c = np.ascontiguousarray(boost)
    present = np.zeros((Q, C), dtype=bool)
    best_nv, best_nf, best_base = np.zeros((Q, C)), np.zeros((Q, C)), np.full((Q, C), -np.inf)
    stopped = np.zeros(Q, dtype=bool)
    passes = np.zeros(Q, dtype=np.int64)
    for p, nv, nf in zip(P, NV, NF):
        active = ~stopped
        if not active.any():
            break
        p = p & active[:, None]
        base = np.maximum(nv, nf)
        present |= p
        best_nv = np.where(p, np.maximum(best_nv, nv), best_nv)
        best_nf = np.where(p, np.maximum(best_nf, nf), best_nf)
        best_base = np.where(p, np.maximum(best_base, base), best_base)
        passes += active
        if rule == "off":
            continue
        # the rule reads the first 3 rows in order and the set of the others: only the top 3 are sorted
        s_sorted, f_sorted, ok = jit_kernel(early_stop_rows)(present, best_base, boost_c, tie[1], files, 3)
        if not ok:  # a non-finite score: the general order
            score = np.where(present, best_base + boost, -np.inf)
            order = Phase3Fusion._order(present, score, best_base, tie)
            s_sorted = take_rows(np.where(present, score, np.nan), order)
            f_sorted = take_rows(np.where(present, files, -1), order)
        stopped |= active & early_stop(s_sorted, f_sorted, tau, rule)
    return present, best_nv, best_nf, best_base, stopped, passes


_RULES = {"off": 0, "converge": 1, "evidence": 2, "converge_or_evidence": 3}


@kernel_example(lambda: (np.ones((1, 1, 2), dtype=np.bool_), np.zeros((1, 1, 2)), np.zeros((1, 1, 2)),
                         np.zeros((1, 2)), np.zeros((1, 2), dtype=np.int64), np.zeros((1, 2), dtype=np.int64), 0.5, 3))
def merge_passes(P, NV, NF, boost, rank, files, tau, rule):  # pragma: no cover - jitted
    """Every query's passes merged, the early stop checked after each: one loop per query instead of a dozen
    (Q, C) numpy passes per pass (the sweep's Phase-3 cost). ``P``, ``NV``, ``NF`` (passes, Q, C): each pass's
    rows and components; ``boost`` (Q, C); ``rank`` (Q, C) the tie order; ``files`` (Q, C) file ids; ``rule``
    0 off, 1 converge, 2 evidence, 3 either (:func:`retrievers.stages.route.early_stop`).

    Per query, while it has not stopped: pass rows are merged keeping each component's maximum (as numpy's
    ``maximum`` does it: NaN propagated, the second argument on equality — 0.0 vs −0.0), ``base = max(nv, nf)``;
    then, unless the rule
    is off, the 3 best present rows in the Phase-3 order (score = base + boost desc, base desc, ``rank`` asc —
    the insertion of :func:`early_stop_rows`) decide ``converge`` (3 rows, each > τ, from ≤ 2 files) and every
    present row decides ``evidence`` (a row > τ from another file than the best row's). Returns (present,
    best_nv, best_nf, best_base, stopped, passes, ok); ``ok`` False (nothing else meaningful) when a score the
    rule reads is not finite — :func:`merge_passes_numpy` then takes the general order."""
    n_pass, Q, C = P.shape
    present = np.zeros((Q, C), dtype=np.bool_)
    bnv = np.zeros((Q, C))
    bnf = np.zeros((Q, C))
    bbase = np.full((Q, C), -np.inf)
    stopped = np.zeros(Q, dtype=np.bool_)
    passes = np.zeros(Q, dtype=np.int64)
    sc = np.empty(C)
    top = np.empty(3, dtype=np.int64)
    for q in range(Q):
        for pi in range(n_pass):
            if stopped[q]:
                break
            for c in range(C):
                if P[pi, q, c]:
                    present[q, c] = True
                    nv = NV[pi, q, c]
                    nf = NF[pi, q, c]
                    a = bnv[q, c]
                    bnv[q, c] = a if (a > nv or a != a) else nv
                    a = bnf[q, c]
                    bnf[q, c] = a if (a > nf or a != a) else nf
                    base = nv if (nv > nf or nv != nv) else nf
                    a = bbase[q, c]
                    bbase[q, c] = a if (a > base or a != a) else base
            passes[q] += 1
            if rule == 0:
                continue
            m = 0
            for c in range(C):
                if not present[q, c]:
                    continue
                b = bbase[q, c]
                x = b + boost[q, c]
                if not (np.isfinite(b) and np.isfinite(x)):
                    return present, bnv, bnf, bbase, stopped, passes, False
                sc[c] = x
                j = min(m, 3)
                while j > 0:
                    t = top[j - 1]
                    if x > sc[t] or (x == sc[t] and (b > bbase[q, t] or (b == bbase[q, t] and rank[q, c] < rank[q, t]))):
                        if j < 3:
                            top[j] = t
                        j -= 1
                    else:
                        break
                if j < 3:
                    top[j] = c
                m += 1
            conv = False
            if m >= 3 and C >= 3 and sc[top[0]] > tau and sc[top[1]] > tau and sc[top[2]] > tau:
                f0, f1, f2 = files[q, top[0]], files[q, top[1]], files[q, top[2]]
                distinct = 1 + (1 if f1 != f0 else 0) + (1 if (f2 != f0 and f2 != f1) else 0)
                conv = distinct <= 2
            evid = False
            if m > 0 and sc[top[0]] > tau:
                first = files[q, top[0]]
                for c in range(C):
                    if present[q, c] and sc[c] > tau and files[q, c] != first:
                        evid = True
                        break
            if (rule == 1 and conv) or (rule == 2 and evid) or (rule == 3 and (conv or evid)):
                stopped[q] = True
    return present, bnv, bnf, bbase, stopped, passes, True


def order_rows_numpy(present, nv, nf, base, boost, tie):
    """:func:`order_rows` with numpy (its reference, and the route for non-finite scores: the general order of
    :meth:`Phase3Fusion._order`): (col, score, nv, nf, base)."""
    C = present.shape[1]
    score = np.where(present, base + boost, -np.inf)
    order = Phase3Fusion._order(present, score, base, tie)
    n = int(present.sum(axis=1).max()) if present.size else 0
    order = order[:, :n]
    flat = flat_index(order, C)
    ok = np.take(present, flat)
    col = np.where(ok, order, -1).astype(np.int64)
    take = lambda a, fill: np.where(ok, np.take(a, flat), fill)  # noqa: E731
    return col, take(score, -np.inf), take(nv, np.nan), take(nf, np.nan), take(base, np.nan)


def order_rows(present, nv, nf, base, boost, rank):
    """The stage's output rows, per query: the present columns by score = base + boost desc, base desc, ``rank``
    asc (:meth:`Phase3Fusion._order`, a total order; the compiled insertion of
    :func:`retrievers.stages.helpers.signals.order_present`), as (col, score, nv, nf, base) of width = the most
    present columns of any query (padding −1, −inf, NaN, NaN, NaN); None when a present score or base is not
    finite (:func:`order_rows_numpy`, the general order, then places it)."""
    score = base + boost
    col = rows_by_keys(present, score, base, rank)
    if col is None:
        return None
    return (col, *take_cols(col, [(score, -np.inf), (nv, np.nan), (nf, np.nan), (base, np.nan)]))


def _group_max(groups: np.ndarray, p: np.ndarray, nv: np.ndarray, nf: np.ndarray):
    """Merge members of a dedupe group into its representative column (max of each component)."""
    Q, C = p.shape
    gp = np.zeros_like(p)
    gnv, gnf = np.zeros_like(nv), np.zeros_like(nf)
    qi = np.repeat(np.arange(Q)[:, None], C, axis=1)
    np.logical_or.at(gp, (qi, groups), p)
    np.maximum.at(gnv, (qi, groups), np.where(p, nv, 0.0))
    np.maximum.at(gnf, (qi, groups), np.where(p, nf, 0.0))
    return gp, gnv, gnf


# ---- two-stage recall + hybrid (seed 003) ---------------------------------------------------------------------
