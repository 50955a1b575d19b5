"""The ``filter.*`` stages (and ``dedupe``, kind ``filter``): drop rows by score, path, content or date. Filters never
reorder rows.

* ``filter.min_score`` (also used, with a label, as lancedb-pro's ``hardMinScore``), ``filter.relaxed_min_score``
  (OpenClaw 2026.3.2 keyword floor), ``filter.noise`` (lancedb-pro ``isNoise``), ``filter.exclude_paths`` (glob
  exclusions), ``dedupe``;
* ``filter.hookclaw_adaptive`` — HookClaw's adaptive result count (§C.1 step 6);
* ``filter.secret_guard`` — never return or inject a document whose text holds a secret (seed 001 "never
  surface secrets"); detection from the text with the documented :data:`SECRET_PATTERNS`;
* ``filter.temporal_window`` — HookClaw's temporal window filter (§C.2 step 5), standalone (v2.1 fixed sibling).
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Compared, ConfigError, Context, Stage, param, register
from retrievers.stages.helpers.query_text import path_dates, temporal_windows
from retrievers.stages.helpers.signals import doc_flags
from retrievers.text import js_trim, utf16_len


@register
class MinScore(Stage):
    """Keep rows with ``score >= threshold`` (inclusive; NaN never passes), order unchanged.

    OpenClaw: ``minScore`` 0.35 after decay + MMR; lancedb-pro: ``minScore`` 0.3 after fusion and, labelled
    ``hard_min_score``, ``hardMinScore`` 0.35 after all multipliers; HookClaw passes 0.5 to OpenClaw.
    """

    name = "filter.min_score"
    kind = "filter"
    compares = {"threshold": Compared("rows", ">=")}
    threshold: float = param(0.35)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        with np.errstate(invalid="ignore"):
            return st.keep(st.score >= self.threshold)


@register
class Category(Stage):
    """memory-lancedb-pro ``retrieve({query, limit, category})`` (retriever.ts @6a50220): each arm's rows are
    filtered with ``entry.category === category`` right after the store search, before fusion (hybrid) or
    scoring (vector-only). Fusion scores each entry on its own, so keeping the rows of that category after the
    fusion stage gives the same list. ``category = ""`` (no filter, as auto-recall calls it) keeps every row.
    The vector-only store has already cut to ``limit`` rows, so a filter there can leave fewer than ``limit``
    (as the original does). Documents carry ``category`` (candidate files; dataset metadata). Order unchanged.
    """

    name = "filter.category"
    kind = "filter"
    category: str = param("", doc="the retrieve() call's category ('' = no filter)")

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if not self.category:
            return st
        cats = cs.corpus.cached(("category", self.category),
                                lambda: np.array([c == self.category for c in cs.corpus.category], dtype=bool))
        return st.keep(st.valid & cats[st.gather(cs.doc)])


@register
class RelaxedMinScore(Stage):
    """OpenClaw 2026.3.2 (#29112) threshold: ``score >= threshold``; if *nothing* passes for a query and the
    keyword arm returned anything, keep instead the rows that were keyword hits with
    ``score >= min(threshold, text_weight)`` (order unchanged). Fixes 2026.2.26's "keyword-only hits can never
    pass minScore" (they score exactly ``tw' = 0.3 < 0.35``). Defaults 0.35, text weight 0.3, arm ``fts``.
    """

    name = "filter.relaxed_min_score"
    kind = "filter"
    compares = {"threshold": Compared("rows", ">=")}
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


@register
class HookClawAdaptive(Stage):
    """HookClaw ``adaptiveFilter`` (PIPELINES.md §C.1 step 6; v1.1, v2.0, v2.1 with ``adaptiveResults`` on).

    ``top`` = the first row's score (the list is already sorted by the previous stage). Empty → [];
    ``top < low`` (0.4) → []; ``top > high`` (0.7) → the first ``min(strong_keep, max_results)`` (2); otherwise the
    first ``max_results`` (3). 0.4 and 0.7 themselves fall in the middle band. Order unchanged (no ties).
    """

    name = "filter.hookclaw_adaptive"
    kind = "filter"
    max_results: int = param(3, ge=0)
    low: float = param(0.4)
    high: float = param(0.7)
    strong_keep: int = param(2, ge=0)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if st.col.shape[1] == 0:
            return st
        has = st.col[:, 0] >= 0
        top = np.where(has, st.score[:, 0], np.nan)
        n = np.where(top > self.high, min(self.strong_keep, self.max_results), self.max_results)
        n = np.where(~has | (top < self.low), 0, n)
        n = np.where(np.isnan(top) & has, self.max_results, n)  # JS: NaN comparisons are false → middle band
        k = np.arange(st.col.shape[1])[None, :]
        return st.keep(k < n[:, None])


#: a value that is only a placeholder (``***``, ``xxxx``, ``<your-key>``, ``${VAR}``, ``{{var}}``) is not a secret
_NOT_PLACEHOLDER = r"(?![*xX.•…]+(?:[\s\"',;]|$))(?!<[^>\s]*>)(?!\$\{)(?!\{\{)"

#: name → regex. Documented, case-sensitive unless the pattern says ``(?i)``.
SECRET_PATTERNS: dict[str, str] = {
    # OpenAI / Anthropic style keys: sk-…, sk-proj-…, sk-ant-api03-…
    "openai_key": r"\bsk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?[A-Za-z0-9_\-]{20,}",
    # Stripe secret / restricted keys
    "stripe_key": r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}",
    # Jina AI keys (the lancedb-pro reranker provider)
    "jina_key": r"\bjina_[A-Za-z0-9_\-]{20,}",
    # GitHub classic (ghp_/gho_/ghu_/ghs_/ghr_) and fine-grained (github_pat_) tokens
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    # Slack bot / user / app tokens
    "slack_token": r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    # AWS access key ids
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    # Google API keys
    "google_api_key": r"\bAIza[0-9A-Za-z_\-]{35}",
    # generic assignments: api_key = …, secret-key: …, access_token=…, client_secret: … (value ≥ 12 chars)
    "generic_api_key": (r"(?i)(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret)"
                        r"[\"']?\s*[:=]\s*[\"']?" + _NOT_PLACEHOLDER + r"[^\s\"']{12,}"),
    # HTTP bearer tokens
    "bearer_token": r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*",
    # password: …, passwd=…, "PG password (app @ host): …" — the value is one token of >= 6 characters with a
    # digit or a symbol, or of >= 12 characters ("password: Fly secrets and 1Password" says where it lives)
    "password": (r"(?i)pass(?:word|wd)(?:\s*\([^)\n]{0,80}\))?[\"']?\s*[:=]\s*[\"']?" + _NOT_PLACEHOLDER
                 + r"(?:(?=[^\s\"']*[^A-Za-z\s\"'])[^\s\"']{6,}|[^\s\"']{12,})"),
    # credentials inside a URL: scheme://user:secret@host
    "url_credentials": r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+:[^\s@/]{3,}@",
    # PEM private keys (RSA, EC, OPENSSH, ENCRYPTED, plain)
    "private_key": r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
}

#: lower-case substrings one of which must occur for the pattern to be tried (a cheap C-speed pre-filter)
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "openai_key": ("sk-",), "stripe_key": ("k_live_", "k_test_"), "jina_key": ("jina_",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), "slack_token": ("xox",),
    "aws_access_key": ("akia", "asia"), "google_api_key": ("aiza",), "generic_api_key": ("key", "token", "secret"),
    "bearer_token": ("bearer",), "password": ("pass",), "url_credentials": ("://",), "private_key": ("private key",),
}
assert set(_TRIGGERS) == set(SECRET_PATTERNS)


def compiled_secret(names: tuple[str, ...], extra: tuple[str, ...]):
    pats = [(_TRIGGERS[n], re.compile(SECRET_PATTERNS[n])) for n in (names or tuple(SECRET_PATTERNS))]
    return pats, [re.compile(p) for p in extra]


def has_secret(text: str, pats, extra) -> bool:
    low = text.lower()
    for triggers, rx in pats:
        if any(t in low for t in triggers) and rx.search(text):
            return True
    return any(rx.search(text) for rx in extra)


def find_secrets(text: str, names: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> list[str]:
    """Names of the :data:`SECRET_PATTERNS` (and indexes ``extra[i]`` as ``"extra:i"``) that match ``text``."""
    out = [n for n in (names or tuple(SECRET_PATTERNS)) if re.search(SECRET_PATTERNS[n], text)]
    out += [f"extra:{i}" for i, p in enumerate(extra) if re.search(p, text)]
    return out


def secret_mask(cs: CandidateSet, names: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> np.ndarray:
    """(Q, C) True where the candidate's text (title + text) holds a secret. Each document is scanned once per
    pattern set (cached per corpus; only documents that appear as candidates are scanned); a pattern is only
    tried when one of its trigger substrings occurs in the lower-cased text."""
    pats, xs = compiled_secret(tuple(names), tuple(extra))
    texts = cs.corpus.texts
    return doc_flags(cs, ("secret_guard", tuple(names), tuple(extra)), lambda d: has_secret(texts[d], pats, xs))


@register
class SecretGuard(Stage):
    """Drop every row whose document text holds a secret (seed 001 "Safety by default: never surface secrets").

    Detection is from the text only (title + text), with the regexes of :data:`SECRET_PATTERNS`: API keys
    (``sk-…``, ``sk_live_…``, ``jina_…``, ``ghp_…``/``github_pat_…``, ``xox[bp]-…``, AWS ``AKIA…``, Google
    ``AIza…``, generic ``api_key = …`` with a value of ≥ 12 characters), bearer tokens, passwords
    (``password: …``, value of >= 6 characters with a digit or symbol, or >= 12 characters), credentials in
    URLs (``scheme://user:secret@host``), PEM private keys. A placeholder value (``***``, ``xxxx``, ``<your-key>``, ``${VAR}``,
    ``{{var}}``) is not a secret. The dataset's ``contains_secret`` label is never read here (it exists to
    *evaluate* this guard). ``patterns`` selects pattern names ([] = all); ``extra`` adds regexes.
    Writes ``st.info["secrets_blocked"]`` (Q,) = rows removed. Order of the rest unchanged.
    """

    name = "filter.secret_guard"
    kind = "filter"
    patterns: list = param([], doc="pattern names from SECRET_PATTERNS; [] = all")
    extra: list = param([], doc="additional regexes")

    def __post_init__(self):
        super().__post_init__()
        unknown = [p for p in self.patterns if p not in SECRET_PATTERNS]
        if unknown:
            raise ConfigError(f"stage {self.name!r}: unknown secret pattern(s) {unknown} "
                              f"(valid: {', '.join(SECRET_PATTERNS)})")
        for p in self.extra:
            try:
                re.compile(p)
            except (re.error, TypeError) as exc:
                raise ConfigError(f"stage {self.name!r}: invalid extra regex {p!r} ({exc})") from None

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        bad = st.gather(secret_mask(cs, tuple(self.patterns), tuple(self.extra)), fill=False).astype(bool)
        bad &= st.col >= 0
        st.info["secrets_blocked"] = st.info.get("secrets_blocked", 0) + bad.sum(axis=1)
        return st.keep(~bad)


def window_keep(dates: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """HookClaw's window test: drop a dated row when ``date < start`` or ``date > end``; undated rows (NaN) and
    NaN bounds (invalid JS dates) keep everything. ``dates`` (Q, K), ``windows`` (Q, 2)."""
    start, end = windows[:, :1], windows[:, 1:]
    with np.errstate(invalid="ignore"):
        drop = (dates < start) | (dates > end)
    return ~drop


@register
class TemporalWindow(Stage):
    """HookClaw's temporal window filter (§C.2 ``fuseResults`` step 5) as a standalone stage.

    Window = :func:`retrievers.stages.helpers.query_text.parse_temporal` of the query against its ``as_of`` (no window →
    nothing removed). Row date = the first ``\\d{4}-\\d{2}-\\d{2}`` of its path with V8 semantics
    (``date_source = "path"``); ``"path_or_timestamp"`` falls back to the document's own timestamp (path-less
    datasets; not HookClaw). Drops rows dated before the start or after the end; undated rows are kept. Used
    by ``hookclaw_v2_1_fts_fixed_temporal`` (v2.1 computes the window and discards it: its as-shipped preset
    carries this stage with ``enabled = false``). Order unchanged.
    """

    name = "filter.temporal_window"
    kind = "filter"
    enabled: bool = param(True)
    date_source: str = param("path", choices=("path", "path_or_timestamp"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if not self.enabled:
            return st
        w = temporal_windows(cs)
        if np.isnan(w).all():
            return st
        dates = path_dates(cs)
        if self.date_source == "path_or_timestamp":
            dates = np.where(np.isnan(dates), cs.doc_feature("timestamp"), dates)
        d = st.gather(dates)
        return st.keep(window_keep(d, w))


__all__ = ["Category", "DEFAULT_EXCLUDES", "Dedupe", "ExcludePaths", "HookClawAdaptive", "MinScore", "NOISE_BOILERPLATE",
           "NOISE_DENIALS", "NOISE_META", "Noise", "RelaxedMinScore", "SECRET_PATTERNS", "SecretGuard",
           "TemporalWindow", "compiled_secret", "find_secrets", "glob_to_regex", "has_secret", "is_noise",
           "path_excluded", "secret_mask", "window_keep"]
