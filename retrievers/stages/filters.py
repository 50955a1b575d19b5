"""Filters and cutoffs: drop rows by score, path or content; keep the first K. Filters never reorder rows.

Stages: ``cutoff.top_k``, ``filter.min_score`` (also used, with a label, as lancedb-pro's ``hardMinScore``),
``filter.relaxed_min_score`` (OpenClaw 2026.3.2 keyword floor), ``filter.noise`` (lancedb-pro ``isNoise``),
``filter.exclude_paths`` (glob exclusions), ``dedupe``.
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.signals import doc_flags
from retrievers.text import js_trim, utf16_len


@register
class TopK(Stage):
    """Keep the first ``k`` rows (every system's final ``maxResults`` / ``limit``). Order unchanged."""

    name = "cutoff.top_k"
    kind = "cutoff"
    k: int = param(10, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return st.head(self.k)


@register
class MinScore(Stage):
    """Keep rows with ``score >= threshold`` (inclusive; NaN never passes), order unchanged.

    OpenClaw: ``minScore`` 0.35 after decay + MMR; lancedb-pro: ``minScore`` 0.3 after fusion and, labelled
    ``hard_min_score``, ``hardMinScore`` 0.35 after all multipliers; HookClaw passes 0.5 to OpenClaw.
    """

    name = "filter.min_score"
    kind = "filter"
    threshold: float = param(0.35)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        with np.errstate(invalid="ignore"):
            return st.keep(st.score >= self.threshold)


@register
class RelaxedMinScore(Stage):
    """OpenClaw 2026.3.2 (#29112) threshold: ``score >= threshold``; if *nothing* passes for a query and the
    keyword arm returned anything, keep instead the rows that were keyword hits with
    ``score >= min(threshold, text_weight)`` (order unchanged). Fixes 2026.2.26's "keyword-only hits can never
    pass minScore" (they score exactly ``tw' = 0.3 < 0.35``). Defaults 0.35, text weight 0.3, arm ``fts``.
    """

    name = "filter.relaxed_min_score"
    kind = "filter"
    threshold: float = param(0.35)
    text_weight: float = param(0.3, ge=0.0, le=1.0, doc="the renormalised text weight tw'")
    arm: str = param("fts", doc="the keyword arm")
    depth: int | None = param(None, ge=1)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        kw_cs = cs.arm(self.arm).present(self.depth)
        had_kw = kw_cs.any(axis=1)
        kw = st.gather(kw_cs) & st.valid
        with np.errstate(invalid="ignore"):
            passes = st.score >= self.threshold
            relaxed = kw & (st.score >= min(self.threshold, self.text_weight))
        any_pass = (passes & st.valid).any(axis=1)
        use_relaxed = ~any_pass & had_kw
        return st.keep(np.where(use_relaxed[:, None], relaxed, passes))


# ---- lancedb-pro noise filter ----------------------------------------------------------------------------

_FLAGS = re.IGNORECASE | re.ASCII  # JS non-unicode regexes: ASCII \b and ASCII-only case folding
NOISE_DENIALS = (r"i don'?t have (any )?(information|data|memory|record)", r"i'?m not sure about",
                 r"i don'?t recall", r"i don'?t remember", r"it looks like i don'?t", r"i wasn'?t able to find",
                 r"no (relevant )?memories found", r"i don'?t have access to")
NOISE_META = (r"\bdo you (remember|recall|know about)\b", r"\bcan you (remember|recall)\b",
              r"\bdid i (tell|mention|say|share)\b", r"\bhave i (told|mentioned|said)\b",
              r"\bwhat did i (tell|say|mention)\b")
NOISE_BOILERPLATE = (r"^(hi|hello|hey|good morning|good evening|greetings)", r"^fresh session", r"^new session",
                     r"^HEARTBEAT")
_NOISE = tuple(re.compile(p, _FLAGS) for p in NOISE_DENIALS + NOISE_META + NOISE_BOILERPLATE)
_NOISE_FIXED = _NOISE[:-4] + (re.compile(r"^(hi|hello|hey|good morning|good evening|greetings)\b", _FLAGS),) \
    + _NOISE[-3:]


def is_noise(text: str, word_boundary: bool = False) -> bool:
    """lancedb-pro @6a50220 ``isNoise``: JS-trimmed text shorter than 5 UTF-16 units, or any denial /
    meta-question / boilerplate pattern (case-insensitive). As shipped the greeting pattern has no word
    boundary (``High priority…`` and ``History…`` are noise); ``word_boundary=True`` adds ``\\b``."""
    t = js_trim(text)
    if utf16_len(t) < 5:
        return True
    pats = _NOISE_FIXED if word_boundary else _NOISE
    return any(p.search(t) for p in pats)


@register
class Noise(Stage):
    """lancedb-pro noise filter (``filterNoise``, on by default): drop rows whose entry text ``is_noise``.

    Patterns (§B.7): denials (``i don'?t have (any )?(information|data|memory|record)`` …), meta-questions
    (``\\bdo you (remember|recall|know about)\\b`` …), boilerplate anchored at the start *without* a word boundary
    (``^(hi|hello|hey|good morning|good evening|greetings)``, ``^fresh session``, ``^new session``,
    ``^HEARTBEAT``), and trimmed length < 5 (UTF-16 units, JS ``trim``). ``word_boundary = true`` is the fixed
    variant (greetings need ``\\b``). Order unchanged. Per-document decisions are memoised.
    """

    name = "filter.noise"
    kind = "filter"
    word_boundary: bool = param(False)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        texts = cs.corpus.raw_texts
        wb = self.word_boundary
        noise = doc_flags(cs, ("lancedb_noise", wb), lambda d: is_noise(texts[d], wb))
        return st.keep(~(st.gather(noise) & st.valid))


# ---- path exclusion --------------------------------------------------------------------------------------

DEFAULT_EXCLUDES = ("**/node_modules/**", "**/.git/**", "**/logs/**", "**/*.log")


def glob_to_regex(glob: str) -> re.Pattern:
    """A path glob as a regex: ``**/`` = zero or more directories (so ``**/x/**`` also matches a top-level
    ``x/…``), a trailing ``/**`` = anything below, ``*`` = any run without ``/``, ``?`` = one non-``/``."""
    out, i, n = [], 0, len(glob)
    while i < n:
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("^" + "".join(out) + r"\Z", re.DOTALL)


def path_excluded(path: str, patterns: tuple[re.Pattern, ...]) -> bool:
    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return bool(p) and any(r.match(p) for r in patterns)


@register
class ExcludePaths(Stage):
    """Drop rows whose document path matches any glob (Phase-3 pre-filter, §D1.1). Defaults
    ``**/node_modules/**``, ``**/.git/**``, ``**/logs/**``, ``**/*.log``; ``**`` also matches zero directories,
    so top-level ``node_modules/x`` is excluded too. ``exclude_secret = true`` also drops documents flagged
    ``contains_secret`` (the "sensitive tier" as a stored attribute, e.g. from a candidate file). Caution: on
    memory-workspace that flag is the leakage *label* the report checks, so a preset using it there grades itself;
    the seed presets detect secrets from the text instead (``filter.secret_guard``, ``fuse.phase3``'s
    ``exclude_secrets``). Order unchanged; per-document decisions memoised.
    """

    name = "filter.exclude_paths"
    kind = "filter"
    patterns: list = param(list(DEFAULT_EXCLUDES))
    exclude_secret: bool = param(False)

    def __post_init__(self):
        super().__post_init__()
        if not all(isinstance(p, str) and p for p in self.patterns):
            raise ConfigError(f"stage {self.name!r} parameter 'patterns' must be a list of non-empty glob strings")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        pats = tuple(glob_to_regex(g) for g in self.patterns)
        paths, secret = cs.corpus.paths, cs.corpus.secret
        xs = self.exclude_secret
        bad = doc_flags(cs, ("exclude_paths", tuple(self.patterns), xs),
                        lambda d: path_excluded(paths[d], pats) or (xs and bool(secret[d])))
        return st.keep(~(st.gather(bad) & st.valid))


# ---- dedupe ----------------------------------------------------------------------------------------------

def _dedupe_codes(corpus, key: str) -> np.ndarray:
    def build():
        seen: dict = {}
        codes = np.empty(corpus.n, dtype=np.int64)
        for d in range(corpus.n):
            if key == "text":
                k = corpus.raw_texts[d]
            elif key == "lines":
                path, s, e = corpus.paths[d], int(corpus.start_line[d]), int(corpus.end_line[d])
                k = (path, s, e) if path else ("id", corpus.ids[d])
            else:  # hookclaw: path, else the first 100 characters of the text
                k = corpus.paths[d] or ("text", corpus.raw_texts[d][:100])
            codes[d] = seen.setdefault(k, len(seen))
        return codes
    return corpus.cached(("dedupe_codes", key), build)


@register
class Dedupe(Stage):
    """Keep the first row of each duplicate group (order unchanged). ``key``: ``text`` (identical content,
    the Phase-3 "chunk hash"), ``lines`` ((path, start_line, end_line); documents without a path are never
    merged) or ``hookclaw`` (path if non-empty, else the first 100 characters: collapses chunks of one file).
    Run it after a sort so the kept row is the best-scored one.
    """

    name = "dedupe"
    kind = "filter"
    key: str = param("text", choices=("text", "lines", "hookclaw"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        K = st.col.shape[1]
        if K == 0:
            return st
        codes = _dedupe_codes(cs.corpus, self.key)
        per_col = cs.memo(("dedupe_codes", self.key),
                          lambda: np.where(cs.valid, codes[np.where(cs.valid, cs.doc, 0)], -1))
        c = np.take_along_axis(per_col, np.where(st.valid, st.col, 0), axis=1)
        c = np.where(st.valid, c, -1 - np.arange(K))  # empty slots never collide
        perm = np.argsort(c, axis=1, kind="stable")
        sc = np.take_along_axis(c, perm, axis=1)
        first_sorted = np.concatenate([np.ones((c.shape[0], 1), bool), sc[:, 1:] != sc[:, :-1]], axis=1)
        first = np.empty_like(first_sorted)
        np.put_along_axis(first, perm, first_sorted, axis=1)
        return st.keep(first)


__all__ = ["TopK", "MinScore", "RelaxedMinScore", "Noise", "ExcludePaths", "Dedupe", "is_noise", "glob_to_regex",
           "path_excluded", "DEFAULT_EXCLUDES"]
