"""Gates: decide per query whether (and how) to retrieve, before or around the ranking.

A gate sets ``st.skipped[q]`` (the pipeline then empties that query's list) or records a routing decision in
``st.info``. Every decision depends only on the query (text, context, embedding) so it is memoised on the
candidate set (``cs.memo``): a 1,000-config sweep evaluates each gate once per parameter setting.

Stages:

* ``gate.hookclaw_skip`` — HookClaw's minimum prompt length and start-anchored skip patterns (§C.1 steps 1–2).
* ``gate.intent_prototype`` — seed 004 §2.3 intent gating by prototype embeddings.
* ``gate.topic_shift`` — seed 004 §1.4 topic-shift detection against the query's ``context``.
* ``route.phase3`` — the Phase-3 mode router (§D1.2, [A1]–[A4]).

Pure decision functions used by ``fuse.phase3`` (stages/fuse/phase3.py): :func:`phase3_mode`,
:func:`mode_b_runs_vector` ([A11], [A12]), :func:`mode_c_runs_fts` ([A13], [A14]), :func:`early_stop` ([A17]–[A19]).
"""
from __future__ import annotations

import re

import numpy as np

from retrievers.candidates import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.text import js_trim, utf16_len

# ---- HookClaw skip gate ---------------------------------------------------------------------------------------

#: HookClaw v2.0/v2.1 DEFAULT_SKIP_PATTERNS (compiled case-insensitive; JS regexes without ``u``: ASCII ``\b``)
HOOKCLAW_SKIP_PATTERNS = (
    r"^(write|create|generate|imagine|compose)\b",
    r"^(format|convert|translate|calculate)\b",
    r"^(clear|reset|start over|help|thanks|ok|yes|no|sure)\b",
)


def compile_js_regex(pattern: str) -> re.Pattern:
    """``new RegExp(p, "i")`` approximated in Python: ASCII ``\\w``/``\\b``/``\\d`` (no ``u`` flag), ignore case.

    Raises ``re.error`` for patterns Python cannot compile (JS-only syntax is treated as invalid)."""
    return re.compile(pattern, re.IGNORECASE | re.ASCII)


def hookclaw_skip_decision(text: str, min_length: int = 20, patterns: tuple[str, ...] | None = None,
                           enable_patterns: bool = True, on_invalid: str = "ignore") -> bool:
    """True when HookClaw would not search for this prompt (one query; see :class:`HookClawSkip`)."""
    trimmed = js_trim(text or "")
    if not trimmed or utf16_len(trimmed) < min_length:
        return True
    if not enable_patterns:
        return False
    for p in _compiled(tuple(patterns) if patterns else HOOKCLAW_SKIP_PATTERNS, on_invalid):
        if p is None:  # v2.0: an invalid user pattern throws at registration → the hook never runs
            return True
        if p.search(trimmed):
            return True
    return False


_COMPILED: dict = {}


def _compiled(patterns: tuple[str, ...], on_invalid: str) -> list:
    key = (patterns, on_invalid)
    if key not in _COMPILED:
        out = []
        for p in patterns:
            try:
                out.append(compile_js_regex(p))
            except re.error as exc:
                if on_invalid == "error":
                    raise ConfigError(f"stage 'gate.hookclaw_skip': invalid skip pattern {p!r} ({exc})") from None
                if on_invalid == "disable":
                    out = [None]
                    break
                # "ignore" (v2.1): warned and skipped
        _COMPILED[key] = out
    return _COMPILED[key]


@register
class HookClawSkip(Stage):
    """HookClaw's pre-search gate (PIPELINES.md §C.1 steps 1–2; hook-handler.js v2.0 a105310 / v2.1 4cc4583).

    ``trimmed = trim(prompt)`` (JavaScript ``trim``); skip when empty or ``len(trimmed) < min_length`` (UTF-16
    units; plugin default ``skipShortPrompts`` = 20). Then, if ``enable_patterns``, skip when any pattern
    matches ``trimmed`` (``RegExp(p, "i")``; defaults: ``^(write|create|generate|imagine|compose)\\b``,
    ``^(format|convert|translate|calculate)\\b``, ``^(clear|reset|start over|help|thanks|ok|yes|no|sure)\\b``).
    User ``patterns`` *replace* the defaults. Invalid patterns: ``on_invalid = "ignore"`` (v2.1: warned and
    skipped), ``"disable"`` (v2.0: ``new RegExp`` throws while the hook registers, so the plugin never injects —
    every query is skipped), ``"error"`` (reject the config). v1.1 had only the length gate
    (``enable_patterns = false``). Test vectors (§C.1): ``Write a poem about logs`` T; ``help me debug the
    deploy`` T; ``Thanks, that fixed it`` T; ``Tell me about the okta migration`` F; ``okay so what did we
    decide`` F; ``Create the migration for users table`` T. Decisions are per query (no ties).
    """

    name = "gate.hookclaw_skip"
    kind = "gate"
    min_length: int = param(20, ge=0, doc="skipShortPrompts: minimum trimmed length (UTF-16 units)")
    enable_patterns: bool = param(True, doc="enableSkipPatterns (v2.0+); false for v1.1")
    patterns: list = param([], doc="user skipPatterns (replace the defaults); [] = defaults")
    on_invalid: str = param("ignore", choices=("ignore", "disable", "error"))

    def __post_init__(self):
        super().__post_init__()
        if not all(isinstance(p, str) for p in self.patterns):
            raise ConfigError("stage 'gate.hookclaw_skip' parameter 'patterns' must be a list of strings")
        _compiled(tuple(self.patterns) or HOOKCLAW_SKIP_PATTERNS, self.on_invalid)  # "error" fails here

    def decisions(self, cs: CandidateSet) -> np.ndarray:
        key = ("gate.hookclaw_skip", self.min_length, self.enable_patterns, tuple(self.patterns), self.on_invalid)
        pats = tuple(self.patterns) or None
        return cs.memo(key, lambda: np.array(
            [hookclaw_skip_decision(q.text, self.min_length, pats, self.enable_patterns, self.on_invalid)
             for q in cs.queries], dtype=bool))

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        skip = self.decisions(cs)
        st.info.setdefault("gates", {})[self.display] = skip
        return st.skip(skip)


# ---- prompt similarity (HookClaw fuzzy cache) -----------------------------------------------------------------

_CACHE_TOKEN = re.compile(r"\b\w+\b", re.ASCII)


def cache_tokens(text: str) -> frozenset[str]:
    """HookClaw cache/MMR tokens: the set of lower-cased ``\\b\\w+\\b`` (ASCII ``\\w``: ``café`` → ``caf``)."""
    return frozenset(_CACHE_TOKEN.findall(text.lower()))


def jaccard(a: frozenset, b: frozenset) -> float:
    """HookClaw ``jaccardSimilarity``: both empty → 1; one empty → 0; else |A∩B| / (|A| + |B| − |A∩B|)."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def prompt_similarity(a: str, b: str) -> float:
    """The fuzzy-cache similarity of two prompts (§C.1 step 3): Jaccard of :func:`cache_tokens`.

    Not a stage: a fuzzy hit serves *another* prompt's results, which a per-query candidate table cannot
    represent (the cached documents need not be candidates of this query). The exact-match LRU (v1.1) returns
    the same results for the same prompt, so it never changes rankings offline."""
    return jaccard(cache_tokens(a), cache_tokens(b))


# ---- intent gating by prototype embeddings (seed 004 §2.3) -----------------------------------------------------

#: Example prompts per intent (seed 004 §2.3 table: recall / lookup / continuation need memory; creative,
#: procedural and meta/system prompts do not).
DEFAULT_PROTOTYPES = {
    "needs_memory": [
        "What did we decide about the database schema?",
        "What was the fix for the login bug last week?",
        "Show me the logging config we set up",
        "Where did we put the deployment notes?",
        "Tell me more about that",
        "What did I say about my travel plans?",
    ],
    "no_memory": [
        "Write a poem about the ocean",
        "Generate a short story about a dragon",
        "Set a timer for ten minutes",
        "Format this JSON",
        "Convert this text to uppercase",
        "Clear the context",
        "Start over",
        "Thanks, that's all",
    ],
}


def _need_embedder(ctx: Context, stage: str):
    if ctx is None or ctx.embedder is None:
        raise RuntimeError(f"stage {stage!r} needs ctx.embedder (retrievers.embed.Embedder) to embed text")
    return ctx.embedder


@register
class IntentPrototype(Stage):
    """Intent gating by prototype embeddings (seed 004 §2.3, "zero-shot approach").

    A few example prompts per intent are embedded once (``ctx.embedder.encode``, unit norm); each query prompt
    (JS-trimmed) is embedded with the same model. ``s_no = max cos(query, no_memory prototypes)``. Rule
    ``"threshold"`` (seed): skip when ``s_no > threshold`` (0.75). Rule ``"nearest"``: additionally require
    ``s_no > max cos(query, needs_memory prototypes)``. ``prototypes`` maps intent → examples; intents named in
    ``skip_intents`` count as "no_memory" (default: the seed's table). Writes ``st.info["intent_score"]`` (Q,).
    Used by the seed's "Dream Architecture" (not by any shipped HookClaw version). No ties (a threshold).
    """

    name = "gate.intent_prototype"
    kind = "gate"
    threshold: float = param(0.75, ge=-1.0, le=1.0)
    rule: str = param("threshold", choices=("threshold", "nearest"))
    prototypes: dict = param({}, doc="intent -> example prompts; {} = DEFAULT_PROTOTYPES")
    skip_intents: list = param(["no_memory"])

    def _protos(self) -> dict:
        protos = self.prototypes or DEFAULT_PROTOTYPES
        if not any(k in protos for k in self.skip_intents):
            raise ConfigError(f"stage {self.name!r}: no prototypes for skip intents {self.skip_intents}")
        return protos

    def scores(self, cs: CandidateSet, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
        protos = self._protos()
        key = ("gate.intent_prototype", tuple((k, tuple(v)) for k, v in sorted(protos.items())),
               tuple(self.skip_intents), getattr(ctx.embedder, "model_id", id(ctx.embedder)))

        def build():
            emb = _need_embedder(ctx, self.name)
            names, texts = [], []
            for intent, ex in protos.items():
                for t in ex:
                    names.append(intent in self.skip_intents)
                    texts.append(t)
            P = np.asarray(emb.encode(texts), dtype=np.float32)
            Qv = np.asarray(emb.encode([js_trim(q.text) or " " for q in cs.queries]), dtype=np.float32)
            sim = Qv @ P.T  # (Q, P)
            neg = np.asarray(names)
            s_no = np.where(neg[None, :], sim, -np.inf).max(axis=1)
            s_yes = np.where(~neg[None, :], sim, -np.inf).max(axis=1) if (~neg).any() else np.full(cs.Q, -np.inf)
            return s_no.astype(np.float64), s_yes.astype(np.float64)
        return cs.memo(key, build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        s_no, s_yes = self.scores(cs, ctx)
        skip = s_no > self.threshold
        if self.rule == "nearest":
            skip &= s_no > s_yes
        st.info["intent_score"] = s_no
        st.info.setdefault("gates", {})[self.display] = skip
        return st.skip(skip)


# ---- topic shift (seed 004 §1.4) -------------------------------------------------------------------------------

@register
class TopicShift(Stage):
    """Topic-shift detection (seed 004 §1.4).

    ``sim = cos(e(prompt), normalise(mean(e(m) for m in the last `window` context messages)))`` with
    ``ctx.embedder`` (unit-norm vectors; empty messages ignored). ``sim < threshold`` (0.75) ⇒ new topic.
    Queries without context never shift. ``action = "skip"`` (option A, default): skip injection for shifted
    queries. ``action = "no_decay"`` (option B, "search with no temporal boost"): keep the results and record
    ``st.info["topic_shift"]`` (Q,) bool, which ``decay.hookclaw`` honours (no decay for those queries).
    Writes ``st.info["topic_similarity"]`` (Q,; NaN = no context). Seed: DEFERRED (not in any shipped version).
    """

    name = "gate.topic_shift"
    kind = "gate"
    threshold: float = param(0.75, ge=-1.0, le=1.0)
    window: int = param(5, ge=1, le=50, doc="last N context messages (seed: 3-5)")
    action: str = param("skip", choices=("skip", "no_decay"))

    def similarity(self, cs: CandidateSet, ctx: Context) -> np.ndarray:
        key = ("gate.topic_shift", self.window, getattr(ctx.embedder, "model_id", id(ctx.embedder)))

        def build():
            out = np.full(cs.Q, np.nan)
            msgs = [[m for m in q.context[-self.window:] if m and m.strip()] for q in cs.queries]
            need = [i for i, m in enumerate(msgs) if m]
            if not need:
                return out
            emb = _need_embedder(ctx, self.name)
            flat = [m for i in need for m in msgs[i]]
            E = np.asarray(emb.encode(flat), dtype=np.float64)
            P = np.asarray(emb.encode([js_trim(cs.queries[i].text) or " " for i in need]), dtype=np.float64)
            pos = 0
            for j, i in enumerate(need):
                n = len(msgs[i])
                mean = E[pos:pos + n].mean(axis=0)
                pos += n
                norm = np.linalg.norm(mean)
                out[i] = float(P[j] @ mean / norm) if norm > 0 else 0.0
            return out
        return cs.memo(key, build)

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        sim = self.similarity(cs, ctx)
        shifted = np.where(np.isnan(sim), False, sim < self.threshold)
        st.info["topic_similarity"] = sim
        st.info["topic_shift"] = shifted
        if self.action == "skip":
            st.info.setdefault("gates", {})[self.display] = shifted
            return st.skip(shifted)
        return st


# ---- Phase-3 routing (§D1.2) and its score-dependent decisions -------------------------------------------------

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


__all__ = ["HOOKCLAW_SKIP_PATTERNS", "hookclaw_skip_decision", "prompt_similarity", "cache_tokens", "jaccard",
           "DEFAULT_PROTOTYPES", "phase3_mode", "has_rare_token", "mode_b_runs_vector", "mode_c_runs_fts",
           "early_stop", "HookClawSkip", "IntentPrototype", "TopicShift", "Phase3Route"]
