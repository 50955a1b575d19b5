"""Guards: filters that decide what may be returned or injected.

* ``filter.hookclaw_adaptive`` — HookClaw's adaptive result count (§C.1 step 6).
* ``filter.secret_guard`` — never return or inject a document whose text holds a secret (seed 001 "never
  surface secrets"); detection from the text with the documented :data:`SECRET_PATTERNS`.
* ``filter.temporal_window`` — HookClaw's temporal window filter (§C.2 step 5), standalone (v2.1 fixed sibling).

All keep the order of the surviving rows.
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.stages.enrich import path_dates, temporal_windows
from retrievers.stages.helpers.signals import doc_flags


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


# ---- secret guard -----------------------------------------------------------------------------------------------

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


def _compiled_secret(names: tuple[str, ...], extra: tuple[str, ...]):
    pats = [(_TRIGGERS[n], re.compile(SECRET_PATTERNS[n])) for n in (names or tuple(SECRET_PATTERNS))]
    return pats, [re.compile(p) for p in extra]


def _has_secret(text: str, pats, extra) -> bool:
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
    pats, xs = _compiled_secret(tuple(names), tuple(extra))
    texts = cs.corpus.texts
    return doc_flags(cs, ("secret_guard", tuple(names), tuple(extra)), lambda d: _has_secret(texts[d], pats, xs))


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


# ---- temporal window ------------------------------------------------------------------------------------------

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

    Window = :func:`retrievers.stages.enrich.parse_temporal` of the query against its ``as_of`` (no window →
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


__all__ = ["SECRET_PATTERNS", "find_secrets", "secret_mask", "window_keep", "HookClawAdaptive", "SecretGuard",
           "TemporalWindow"]
