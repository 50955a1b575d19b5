"""The ``gate.*`` stages: decide per query whether to retrieve at all. A gate marks ``st.skipped[q]`` (the pipeline then
empties that query's list); every decision depends only on the query (text, context, embedding), so it is memoised
on the candidate set (``cs.memo``) and per text: a sweep and every preset sharing the queries pay once.

* ``gate.empty_query`` — OpenClaw: an empty / whitespace query returns nothing;
* ``gate.lancedb_skip`` — memory-lancedb-pro ``shouldSkipRetrieval``, the auto-recall gate;
* ``gate.hookclaw_skip`` — HookClaw's minimum prompt length and start-anchored skip patterns (§C.1 steps 1–2);
* ``gate.intent_prototype`` — seed 004 §2.3 intent gating by prototype embeddings;
* ``gate.topic_shift`` — seed 004 §1.4 topic-shift detection against the query's ``context``.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import Compared, ConfigError, Context, Stage, param, register
from retrievers.text import JS_WS_CLASS as W, js_trim, utf16_len


_I = re.IGNORECASE | re.ASCII  # JS regexes without the u flag: ASCII \b, ASCII-only case folding

_CRON = re.compile(rf"^\[cron:[^\]]+\][{W}]*", _I)

_HEADER = re.compile(r"^Conversation info \(untrusted metadata\):", _I)

_BLANK_LINE = re.compile(rf"\n[{W}]*\n")

FORCE_RETRIEVE = tuple(re.compile(p, _I) for p in (
    r"\b(remember|recall|forgot|memory|memories)\b",
    r"\b(last time|before|previously|earlier|yesterday|ago)\b",
    r"\b(my (name|email|phone|address|birthday|preference))\b",
    r"\b(what did (i|we)|did i (tell|say|mention))\b",
    r"(你记得|之前|上次|以前|还记得|提到过|说过)",
))

SKIP = tuple(re.compile(p, _I) for p in (
    rf"^(hi|hello|hey|good[{W}]*(morning|afternoon|evening|night)|greetings|yo|sup|howdy|what'?s up)\b",
    r"^/",
    r"^(run|build|test|ls|cd|git|npm|pip|docker|curl|cat|grep|find|make|sudo)\b",
    rf"^(yes|no|yep|nope|ok|okay|sure|fine|thanks|thank you|thx|ty|got it|understood|cool|nice|great|good|perfect"
    rf"|awesome|👍|👎|✅|❌)[{W}]*[.!]?\Z",
    rf"^(go ahead|continue|proceed|do it|start|begin|next|实施|开始|继续|好的|可以|行)[{W}]*[.!]?\Z",
    r"^HEARTBEAT",
    r"^\[System",
))

_CJK = re.compile(r"[\u4e00-\u9fff\u3040-\u309f\u30a0-\u30ff\uac00-\ud7af]")


@lru_cache(maxsize=1)
def _emoji_only():
    """``/^[\\p{Emoji}\\s]+$/u``: Python's ``re`` has no ``\\p{Emoji}``; the ``regex`` package implements the
    Unicode ``Emoji`` binary property (digits, ``#``, ``*`` have it too, so ``12345678`` matches)."""
    import regex  # noqa: PLC0415  (installed with transformers; to be listed in pyproject)  (lazy: startup)
    return regex.compile(rf"^[\p{{Emoji}}{W}]+\Z")


def normalize_lancedb_query(query: str) -> str:
    """lancedb-pro ``normalizeQuery``: trim; strip a leading ``[cron:…]`` tag; if the text starts with
    ``Conversation info (untrusted metadata):`` drop it and keep the part between the first and the second blank
    line (``\\n\\s*\\n``) when there is one; trim. Patterns are case-insensitive; trim/``\\s`` are JS's."""
    s = _CRON.sub("", js_trim(query), count=1)
    m = _HEADER.match(s)
    if m:
        rest = s[m.end():]
        parts = _BLANK_LINE.split(rest)
        s = parts[1] if len(parts) > 1 else rest
    return js_trim(s)


@lru_cache(maxsize=65536)
def lancedb_should_skip(query: str) -> bool:
    """memory-lancedb-pro @6a50220 ``shouldSkipRetrieval`` (§B.8). True = do not retrieve.

    Order: normalise → any force-retrieve pattern ⇒ retrieve → length < 5 (UTF-16) ⇒ skip → any skip pattern
    (greetings, ``/`` commands, shell verbs, affirmations, continuations, emoji-only, ``HEARTBEAT``,
    ``[System``) ⇒ skip → shorter than 6 (CJK present) / 15 UTF-16 units without ``?``/``？`` ⇒ skip → retrieve.
    """
    s = normalize_lancedb_query(query)
    if any(p.search(s) for p in FORCE_RETRIEVE):
        return False
    n = utf16_len(s)
    if n < 5:
        return True
    if any(p.search(s) for p in SKIP) or _emoji_only().match(s):
        return True
    min_len = 6 if _CJK.search(s) else 15
    if n < min_len and "?" not in s and "？" not in s:
        return True
    return False


def _gate(st: State, cs: CandidateSet, key: str, fn) -> State:
    mask = cs.memo(("gate", key), lambda: np.array([bool(fn(q.text)) for q in cs.queries], dtype=bool))
    return st.skip(mask)


@register
class LanceDBSkip(Stage):
    """memory-lancedb-pro auto-recall gate (``shouldSkipRetrieval``): greetings, commands, affirmations,
    emoji-only and short non-questions are not retrieved for, unless a memory/temporal/personal-field pattern
    forces retrieval (see :func:`lancedb_should_skip`). Memoised per query text. Used by ``lancedb_pro_6a50220``
    (auto-recall only; the ``memory_recall`` tool does not gate).
    """

    name = "gate.lancedb_skip"
    kind = "gate"

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return _gate(st, cs, "lancedb_skip", lancedb_should_skip)


@register
class EmptyQuery(Stage):
    """Skip queries whose JS-trimmed text is empty (OpenClaw ``search``: empty query → [] without searching)."""

    name = "gate.empty_query"
    kind = "gate"

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        return _gate(st, cs, "empty_query", lambda t: not js_trim(t))


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
    compiled = _compiled(tuple(patterns) if patterns else HOOKCLAW_SKIP_PATTERNS, on_invalid)
    if compiled == [None]:  # v2.0: user patterns are compiled while the hook registers, whatever
        return True         # enableSkipPatterns says; an invalid one throws there → the hook never runs
    if not enable_patterns:
        return False
    for p in compiled:
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
    skipped), ``"disable"`` (v2.0: ``new RegExp`` throws while the hook registers — the patterns are compiled
    whether or not ``enableSkipPatterns`` is on — so the plugin never injects: every query is skipped, also with
    ``enable_patterns = false``), ``"error"`` (reject the config). v1.1 had only the length gate
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


@register
class HookClawCache(Stage):
    r"""HookClaw's prompt cache (``PromptCache``, hook-handler.js v2.0 a105310 / v2.1 4cc4583; PIPELINES.md §C.1
    step 3, Appendix D), modelled as data carried across queries in time order.

    A prompt that passes the skip gates looks up its trimmed text: an exact key younger than the TTL → the cached
    list (the entry moves to the end of the LRU); else, when ``fuzzy_threshold < 1``, every entry is visited in
    LRU order — entries strictly older than the TTL are deleted — and the one with the highest Jaccard of
    lower-cased ASCII ``\b\w+\b`` token sets, ``>= fuzzy_threshold`` and strictly above the earlier best,
    answers (v2.1, ``fuzzy_refresh``, also moves it to the end). A hit is answered with that entry's list —
    possibly the empty list: no injection — without searching. A miss searches and caches its final list under
    its trimmed prompt (time = its ``as_of``); past ``size`` entries the oldest is evicted. Time is each query's
    ``as_of`` (the hook's ``Date.now()``); a query without one neither reads nor writes the cache.

    A benchmark's queries are independent, so the stage acts only when the run is a log in time order:
    ``ctx.options["query_order"] == "log"`` (``evalkit replay`` sets it), or ``scope = "always"`` (a candidate
    file holding a session). It writes ``info["served_from"]`` (Q,) — the index of the query whose list answers
    this one, -1 for its own — and ``info["cache_hit"]`` ("exact" / "fuzzy" / ""). The answered list is put in
    place when its documents are candidates of the query (a candidate file that shares them); a replay puts the
    served query's results in place for every hit (``evalkit/workflows/replay.py``). Defaults: 20 entries, 5 min,
    threshold 0.85 (plugin defaults of both versions).
    """

    cross_query = True  # a hit is answered from an earlier query's cached list
    name = "gate.hookclaw_cache"
    kind = "gate"
    size: int = param(20, doc="cacheSize")
    ttl_ms: float = param(300000.0, doc="cacheTtlMs: an entry expires when strictly older")
    fuzzy_threshold: float = param(0.85, doc="fuzzyCacheThreshold; >= 1 turns the fuzzy lookup off")
    fuzzy_refresh: bool = param(False, doc="v2.1: a fuzzy hit moves its entry to the end of the LRU")
    scope: str = param("log", choices=("log", "always"))

    def served_from(self, cs: CandidateSet, skipped: np.ndarray) -> tuple[np.ndarray, list[str]]:
        Q = cs.Q
        served = np.full(Q, -1, dtype=np.int64)
        kind = [""] * Q
        order = sorted((q for q in range(Q) if np.isfinite(cs.as_of[q]) and not skipped[q]),
                       key=lambda q: (cs.as_of[q], q))
        lru: OrderedDict = OrderedDict()  # key -> (ts_ms, tokens, query index)
        for q in order:
            now = cs.as_of[q] * 1000.0
            key = js_trim(cs.queries[q].text or "")
            e = lru.get(key)
            if e is not None:
                if now - e[0] > self.ttl_ms:
                    del lru[key]
                else:
                    lru.move_to_end(key)
                    served[q], kind[q] = e[2], "exact"
                    continue
            if self.fuzzy_threshold < 1.0:
                toks = cache_tokens(key)
                best, best_key, best_sim = None, None, 0.0
                for k2, e2 in list(lru.items()):
                    if now - e2[0] > self.ttl_ms:
                        del lru[k2]
                        continue
                    sim = jaccard(toks, e2[1])
                    if sim >= self.fuzzy_threshold and sim > best_sim:
                        best, best_key, best_sim = e2, k2, sim
                if best is not None:
                    if self.fuzzy_refresh:
                        lru.move_to_end(best_key)
                    served[q], kind[q] = best[2], "fuzzy"
                    continue
            lru.pop(key, None)
            lru[key] = (now, cache_tokens(key), q)
            if len(lru) > self.size:
                lru.popitem(last=False)
        return served, kind

    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        if self.scope != "always" and ctx.options.get("query_order") != "log":
            return st
        served, kind = self.served_from(cs, st.skipped)
        st.info["served_from"] = served
        st.info["cache_hit"] = np.array(kind, dtype=object)
        hits = np.nonzero(served >= 0)[0]
        if not len(hits):
            return st
        col, score = st.col.copy(), st.score.copy()
        for q in hits:
            p = int(served[q])
            src = [(int(cs.doc[p, c]), s) for c, s in zip(st.col[p], st.score[p]) if c >= 0]
            where = {int(d): c for c, d in enumerate(cs.doc[q]) if d >= 0}
            if any(d not in where for d, _ in src):
                continue  # the served documents are not candidates of this query: left to the caller
            col[q] = -1
            score[q] = -np.inf
            for k, (d, s) in enumerate(src):
                col[q, k], score[q, k] = where[d], s
        return State(col, score, st.skipped, st.extra, st.info, st.trace)


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
        raise RuntimeError(f"stage {stage!r} needs ctx.embedder (retrievers.embed.model.Embedder) to embed text")
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
    vectors = True
    compares = {"threshold": Compared("info:intent_score", "<=")}  # skip when intent_score > threshold
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
    vectors = True
    compares = {"threshold": Compared("info:topic_similarity", ">=")}  # a shift (skip) when similarity < threshold
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


__all__ = ["DEFAULT_PROTOTYPES", "EmptyQuery", "FORCE_RETRIEVE", "HOOKCLAW_SKIP_PATTERNS", "HookClawSkip",
           "IntentPrototype", "LanceDBSkip", "SKIP", "TopicShift", "cache_tokens", "compile_js_regex",
           "hookclaw_skip_decision", "jaccard", "lancedb_should_skip", "normalize_lancedb_query",
           "prompt_similarity"]
