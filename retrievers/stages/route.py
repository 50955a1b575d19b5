"""The ``route.*`` stages: record a per-query routing decision in ``st.info`` for a later stage.

* ``route.phase3`` — the Phase-3 mode router (§D1.2, [A1]–[A4]), read by ``fuse.phase3``.

Also the pure Phase-3 decision functions ``fuse.phase3`` applies: :func:`phase3_mode`, :func:`has_rare_token`,
:func:`mode_b_runs_vector`, :func:`mode_c_runs_fts`, :func:`early_stop`.
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register


#: [A1] backticks or a double-quoted / curly-quoted string (single quotes ignored: apostrophes)
P3_QUOTED = r"`|\"[^\"]+\"|“[^”]+”|„[^“”]+[“”]"

#: [A2] error-code-like tokens: SQLITE_BUSY, EADDRINUSE, HTTP statuses
P3_ERROR_CODE = r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\bE[A-Z]{4,}\b|\b[1-5]\d\d\b"

#: [A3] a path or a file extension
P3_PATH = (r"(^|\s)(~|\.{1,2})?/[\w./-]+|"
           r"\b[\w-]+\.(md|json|jsonl|ts|js|py|ya?ml|toml|txt|log|sh|sqlite)\b")

#: [A4] broad recall questions (case-insensitive)
P3_BROAD = r"\b(what was|that thing|something about|the one (where|with)|remember when|whatever)\b"

#: [A14] a rare token: a digit, an underscore, an internal capital, or length >= 12
_P3_TOKEN = re.compile(r"[^\s`\"'“”„()\[\]{},;:!?]+")


def phase3_mode(text: str, quoted: str = P3_QUOTED, error_code: str = P3_ERROR_CODE, path: str = P3_PATH,
                broad: str = P3_BROAD) -> str:
    """Phase-3 routing (§D1.2): ``"B"`` (exact-first) if the query has backticks or a double/curly-quoted
    string [A1], an error-code-like token [A2] or a path/extension [A3]; else ``"C"`` (semantic-first) if it is
    a broad recall question [A4, case-insensitive]; else ``"A"``. [A2] and [A3] are case-sensitive as written.
    ``why does `openclaw.json` throw EADDRINUSE`` → B; ``what was that thing about the printer?`` → C."""
    if re.search(quoted, text) or re.search(error_code, text) or re.search(path, text):
        return "B"
    if re.search(broad, text, re.IGNORECASE):
        return "C"
    return "A"


def has_rare_token(text: str) -> bool:
    """[A14]: some token (a run of non-space, non-quote/bracket characters, stripped of trailing punctuation
    ``.``/``-``) contains a digit or an underscore, has a capital letter after its first character, or has at
    least 12 characters."""
    for tok in _P3_TOKEN.findall(text):
        tok = tok.strip(".-")
        if not tok:
            continue
        if len(tok) >= 12 or re.search(r"[0-9_]", tok) or re.search(r".[A-Z]", tok):
            return True
    return False


def mode_b_runs_vector(n_strong: np.ndarray, min_strong: int = 3, reading: str = "literal") -> np.ndarray:
    """Mode B's vector augmentation ([A11], [A12]): ``literal`` (seed as written) runs vector top 6 only when
    FTS found ``>= min_strong`` strong hits (nf >= 0.5); ``fallback`` runs it when fewer were found."""
    enough = np.asarray(n_strong) >= min_strong
    return enough if reading == "literal" else ~enough


def mode_c_runs_fts(vec_sorted: np.ndarray, rare: np.ndarray, spread: float = 0.05, at: int = 5) -> np.ndarray:
    """Mode C's FTS trigger ([A13], [A14]), vectorised over queries.

    ``vec_sorted`` (Q, K): each query's vector scores in rank order (NaN padding). Flat confidence when
    ``top1 − top_at < spread`` (top_at = the ``at``-th score, or the last one if fewer); a query with no vector
    hit counts as flat (no confidence at all — an assumption beyond the spec). Runs FTS when flat or ``rare``.
    """
    v = np.asarray(vec_sorted, dtype=np.float64)
    n = (~np.isnan(v)).sum(axis=1)
    top1 = np.where(n > 0, v[:, 0] if v.shape[1] else np.nan, np.nan)
    idx = np.clip(np.minimum(n, at) - 1, 0, None)
    top_k = np.take_along_axis(v, idx[:, None], axis=1)[:, 0] if v.shape[1] else np.full(len(n), np.nan)
    flat = np.where(n > 0, (top1 - top_k) < spread, True)
    return flat | np.asarray(rare, dtype=bool)


def early_stop(scores: np.ndarray, files: np.ndarray, tau: float = 0.5, rule: str = "converge_or_evidence"
               ) -> np.ndarray:
    """Phase-3 early stop ([A17]–[A19]) for lists sorted by score (Q, K; NaN padding; ``files`` (Q, K) int file
    ids, −1 padding). ``converge``: the top 3 come from ≤ 2 distinct files and each has score > τ (seed Mode A
    step 4; a list shorter than 3 cannot converge). ``evidence`` [A19]: ≥ 2 snippets from distinct files have
    score > τ. ``converge_or_evidence`` (§D1.5 as written): either. ``off``: never."""
    Q = scores.shape[0]
    if rule == "off" or scores.shape[1] == 0:
        return np.zeros(Q, dtype=bool)
    s = np.where(np.isnan(scores), -np.inf, scores)
    top = s[:, :3]
    f3 = files[:, :3]
    conv = np.zeros(Q, dtype=bool)
    if top.shape[1] == 3:
        distinct3 = 1 + (f3[:, 1] != f3[:, 0]) + ((f3[:, 2] != f3[:, 0]) & (f3[:, 2] != f3[:, 1]))
        conv = (top > tau).all(axis=1) & (distinct3 <= 2)
    strong = s > tau
    # distinct files among strong rows: a strong row whose file differs from the first strong row's file
    first_file = np.where(strong.any(axis=1), np.take_along_axis(files, np.argmax(strong, axis=1)[:, None],
                                                                 axis=1)[:, 0], -2)
    evid = (strong & (files != first_file[:, None])).any(axis=1)
    if rule == "converge":
        return conv
    if rule == "evidence":
        return evid
    return conv | evid


@register
class Phase3Route(Stage):
    """Phase-3 mode routing (§D1.2, seed 001 "Retrieval modes") → ``st.info["phase3_mode"]`` ((Q,) array of
    ``"A"``/``"B"``/``"C"``), read by ``fuse.phase3``. Regexes default to [A1]–[A4] (see :func:`phase3_mode`);
    ``force_mode`` pins every query to one mode (ablations). Memoised per candidate set. No ties.
    """

    name = "route.phase3"
    kind = "gate"
    # fuse.phase3 re-derives the same modes when the router is missing, so removing it would be a no-op;
    # routing off = every query in the default hybrid mode A.
    ablation_off = {"force_mode": "A"}
    force_mode: str = param("auto", choices=("auto", "A", "B", "C"))
    quoted: str = param(P3_QUOTED, doc="[A1] regex")
    error_code: str = param(P3_ERROR_CODE, doc="[A2] regex")
    path: str = param(P3_PATH, doc="[A3] regex")
    broad: str = param(P3_BROAD, doc="[A4] regex (case-insensitive)")

    def __post_init__(self):
        super().__post_init__()
        for f in ("quoted", "error_code", "path", "broad"):
            try:
                re.compile(getattr(self, f))
            except re.error as exc:
                raise ConfigError(f"stage {self.name!r} parameter {f!r}: invalid regex ({exc})") from None

    def modes(self, cs: CandidateSet) -> np.ndarray:
        if self.force_mode != "auto":
            return np.full(cs.Q, self.force_mode, dtype="<U1")
        key = ("route.phase3", self.quoted, self.error_code, self.path, self.broad)
        return cs.memo(key, lambda: np.array(
            [phase3_mode(q.text, self.quoted, self.error_code, self.path, self.broad) for q in cs.queries],
            dtype="<U1"))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        st.info["phase3_mode"] = self.modes(cs)
        return st


__all__ = ["P3_BROAD", "P3_ERROR_CODE", "P3_PATH", "P3_QUOTED", "Phase3Route", "early_stop", "has_rare_token",
           "mode_b_runs_vector", "mode_c_runs_fts", "phase3_mode"]
