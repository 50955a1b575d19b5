"""HookClaw plugin config → a preset extending ``hookclaw_v2_0_rrf`` (v2.0, a105310) or ``hookclaw_v2_1_fts``
(v2.1, 4cc4583), resolved as ``index.js`` and ``src/hook-handler.js`` do (PIPELINES.md §C.1–C.3, Appendix D).

Accepted shapes: ``openclaw.json`` (``plugins.entries.hookclaw.config``) or the plugin config itself.

Resolution (each rule printed with its citation):

* ``config = {...DEFAULTS, ...userConfig}`` (index.js ``resolveConfig``): an absent key takes the plugin default
  of *that version* (v2.0 ``halfLifeHours`` 24, v2.1 168; v2.1 ``enableFts`` true); a key present with null
  replaces it with null; ``cacheSize``, ``cacheTtlMs`` and ``adaptiveResults`` are not in DEFAULTS, so the
  handler's destructuring defaults apply to them (20, 300000, true) (§C.1);
* numbers are used raw where the code uses them: ``maxResults`` goes to OpenClaw per call (not clamped; a
  non-integer is truncated by ``slice`` but multiplied raw for OpenClaw's candidate count, Appendix D) and
  bounds the adaptive filter and MMR; ``minScore`` goes to OpenClaw raw; ``skipShortPrompts`` is compared as
  ``length < v``; ``halfLifeHours <= 0`` turns the decay off (§C.1 step 5);
* flags are JS truthiness; ``formatTemplate`` ``"markdown"`` → Markdown, anything else → XML;
* ``skipPatterns``: null → the defaults; an array of strings replaces them; an invalid regex stops the hook from
  registering in v2.0 — nothing is ever injected, whatever ``enableSkipPatterns`` says — and is skipped in v2.1;
* v2.0: RRF runs when ``enableRrf`` and (BM25 found something or the query enricher ran); the enricher runs when
  ``enableTemporalParsing`` **or** ``enableBm25``, and its temporal window reaches RRF whenever it ran (§C.2);
  ``rrfWeights`` entries are read as ``w || 0``; ``rrfWeights`` null makes ``fuseResults`` throw, which the hook
  catches: the OpenClaw list passes unchanged;
* v2.1: ``enableFts`` → the FTS boost (``ftsBoostWeight`` raw, ``2·maxResults`` rows kept of ``2·(2·maxResults)``);
  ``enableTemporalParsing`` is computed and discarded (§C.3);
* the fuzzy LRU prompt cache (``cacheSize``, ``cacheTtlMs``, ``fuzzyCacheThreshold``) → ``gate.hookclaw_cache``,
  which a replay applies across events in time order;
* OpenClaw's own ``memorySearch`` settings are those of the as-shipped OpenClaw preset (defaults): give them with
  ``--system openclaw`` separately.
"""
from __future__ import annotations

import math
import re
from typing import Any

from retrievers.presets.config.common import (DERIVED, MISSING, ConfigError, Resolution, get, js_number, js_truthy, show)
from retrievers.stages.gate import compile_js_regex

CITE_C1 = "PIPELINES.md §C.1 (index.js resolveConfig, hook-handler.js createHandler)"
CITE_C2 = "PIPELINES.md §C.2 (hook-handler.js a105310)"
CITE_C3 = "PIPELINES.md §C.3 (hook-handler.js 4cc4583)"

COMMON = {"maxResults": 3, "minScore": 0.5, "maxContextChars": 2000, "timeoutMs": 2000, "logInjections": True,
          "formatTemplate": "xml", "skipShortPrompts": 20, "skipPatterns": None, "enableSkipPatterns": True,
          "enableTemporalParsing": False, "enableFeedbackLoop": False, "mmrLambda": 0.7, "enableMmr": True,
          "fuzzyCacheThreshold": 0.85}
DEFAULTS = {
    "hookclaw-v2.0": dict(COMMON, halfLifeHours=24, enableBm25=False, enableRrf=False,
                          rrfWeights={"vector": 0.4, "bm25": 0.3, "recency": 0.2, "entity": 0.1}, rrfK=60),
    "hookclaw-v2.1": dict(COMMON, halfLifeHours=168, enableFts=True, ftsBoostWeight=0.3, ftsDbPath=None,
                          ftsAgentId="main"),
}
HANDLER_ONLY = {"cacheSize": 20, "cacheTtlMs": 300000, "adaptiveResults": True}
EXTENDS = {"hookclaw-v2.0": "hookclaw_v2_0_rrf", "hookclaw-v2.1": "hookclaw_v2_1_fts"}


def _plugin_block(obj: Any) -> dict:
    if not isinstance(obj, dict):
        raise ConfigError("hookclaw config must be a JSON object")
    entry = get(obj, "plugins", "entries", "hookclaw", "config")
    if entry is not MISSING:
        if not isinstance(entry, dict):
            raise ConfigError("plugins.entries.hookclaw.config must be an object")
        return entry
    if "plugins" in obj:
        raise ConfigError("openclaw.json has no plugins.entries.hookclaw.config")
    return obj


def _positive(res: Resolution, key: str, v: Any, what: str) -> float:
    x = js_number(v)
    if not (x > 0) or math.isinf(x):
        raise ConfigError(f"hookclaw {key} = {show(v)}: {what}; use a positive finite number")
    return x


def resolve(obj: Any, *, system: str = "hookclaw-v2.1", **_: Any) -> Resolution:
    user = _plugin_block(obj)
    defaults = DEFAULTS[system]
    v20 = system == "hookclaw-v2.0"
    res = Resolution(system=system, extends=EXTENDS[system])
    known = set(defaults) | set(HANDLER_ONLY)
    for k in sorted(set(user) - known):
        res.notes.append(f"{k} is not a {system} setting: the plugin ignores it")
    if v20 and "enableFts" in user:
        res.notes.append("enableFts is a v2.1 setting: v2.0 ignores it")

    def use(key: str, rule: str, cite: str = CITE_C1) -> Any:
        given = user.get(key, MISSING)
        value = (defaults.get(key, HANDLER_ONLY.get(key)) if given is MISSING else given)
        return res.rule(key, given, value, rule, cite)

    # --- front end: gates, cache ---------------------------------------------------------------------------
    max_results = _positive(res, "maxResults", use("maxResults", "raw; OpenClaw per-call maxResults"),
                            "OpenClaw and the adaptive filter slice with it, which a top-k cannot express")
    k = math.floor(max_results)
    if k < 1:
        raise ConfigError(f"hookclaw maxResults = {show(user.get('maxResults'))}: slice(0, {show(max_results)}) "
                          f"keeps nothing; use a number >= 1")
    candidates = int(min(200, max(1, math.floor(max_results * 4))))
    res.rule("OpenClaw candidates per arm", DERIVED, candidates,
             "min(200, max(1, floor(maxResults × 4))) with OpenClaw's default multiplier", "PIPELINES.md §A.2")
    ms = use("minScore", "OpenClaw per-call minScore, raw (not clamped); null → opts.minScore ?? OpenClaw's 0.35",
             "PIPELINES.md §A.2 step 2, Appendix D")
    min_score = 0.35 if ms is None else js_number(ms)
    if math.isnan(min_score):
        res.notes.append("minScore is not a number: OpenClaw's score >= NaN is false, nothing is returned")
    short = js_number(use("skipShortPrompts", "trimmed.length < v → skip"))
    min_length = 0 if (math.isnan(short) or short <= 0) else int(math.ceil(short))
    pats = use("skipPatterns", "null → the 3 defaults; an array replaces them")
    if pats is not None and (not isinstance(pats, list) or not all(isinstance(p, str) for p in pats)):
        raise ConfigError(f"hookclaw skipPatterns = {show(pats)}: must be null or an array of strings (the "
                          f"original throws while registering otherwise)")
    enable_pats = js_truthy(use("enableSkipPatterns", "Boolean(v)"))
    if pats == []:
        res.notes.append("skipPatterns is an empty array: it replaces the defaults with no pattern at all")
        enable_pats = False
    res.override("gate", min_length=min_length, enable_patterns=enable_pats, patterns=list(pats or []),
                 on_invalid="disable" if v20 else "ignore")
    if v20 and pats:
        bad = []
        for p in pats:
            try:
                compile_js_regex(p)
            except re.error:
                bad.append(p)
        if bad:
            res.notes.append(f"skipPatterns {bad!r} do not compile: v2.0 compiles them while the hook registers "
                             f"(whatever enableSkipPatterns says) and the registration throws — nothing is ever "
                             f"injected")
    size = js_number(use("cacheSize", "handler default 20 (not in DEFAULTS); evict past it"))
    ttl = js_number(use("cacheTtlMs", "handler default 300000 (not in DEFAULTS); expired when strictly older"))
    thr = js_number(use("fuzzyCacheThreshold", "fuzzy lookup only when < 1; hit when Jaccard >= it"))
    for key, x in (("cacheSize", size), ("cacheTtlMs", ttl), ("fuzzyCacheThreshold", thr)):
        if math.isnan(x):
            raise ConfigError(f"hookclaw {key} = {show(user.get(key))} is not a number: the cache's comparisons "
                              f"with NaN cannot be expressed")
    res.after.append({"label": "prompt_cache", "type": "gate.hookclaw_cache",
                      "size": int(max(0, math.floor(size))) if math.isfinite(size) else 10 ** 9,
                      "ttl_ms": ttl, "fuzzy_threshold": thr, "fuzzy_refresh": not v20})

    # --- OpenClaw call ------------------------------------------------------------------------------------
    res.arms = [{"name": "vec", "depth": candidates}, {"name": "fts", "depth": candidates}]
    res.override("min_score", threshold=math.inf if math.isnan(min_score) else min_score)
    res.override("top_k", k=k)

    # --- middle ----------------------------------------------------------------------------------------------
    if v20:
        bm25 = js_truthy(use("enableBm25", "Boolean(v); BM25 index never populated → always []", CITE_C2))
        rrf = js_truthy(use("enableRrf", "Boolean(v)", CITE_C2))
        temporal = js_truthy(use("enableTemporalParsing", "Boolean(v)", CITE_C2))
        enrichment = temporal or bm25
        res.rule("query enricher runs", DERIVED, enrichment, "enableTemporalParsing || enableBm25", CITE_C2)
        res.rule("temporal window reaches RRF", DERIVED, enrichment and rrf,
                 "whenever the enricher ran and RRF runs (enrichQuery always parses it)", CITE_C2)
        weights = use("rrfWeights", "each read as w || 0", CITE_C2)
        rk = use("rrfK", "raw k in w/(k + rank)", CITE_C2)
        if not rrf or weights is None:
            if rrf:
                res.notes.append("rrfWeights is null: fuseResults throws on weights.vector, the hook catches it and "
                                 "keeps the OpenClaw list — RRF never changes anything")
            res.override("rrf", disabled=True)
            res.override("enrich", disabled=True)
        else:
            if not isinstance(weights, dict):
                weights = {}
            w = []
            for name in ("vector", "bm25", "recency", "entity"):
                x = weights.get(name)
                x = js_number(x) if js_truthy(x) else 0.0
                if math.isnan(x):
                    raise ConfigError(f"hookclaw rrfWeights.{name} = {show(weights.get(name))} is not a number: "
                                      f"every RRF score becomes NaN")
                w.append(x)
            if not (isinstance(rk, (int, float)) and not isinstance(rk, bool) and math.isfinite(rk)):
                raise ConfigError(f"hookclaw rrfK = {show(rk)} must be a finite number (k + rank would not be "
                                  f"the number it looks like)")
            res.override("rrf", weights=w, k=float(rk), max_results=k, enrichment=enrichment, temporal=enrichment)
    else:
        fts = js_truthy(use("enableFts", "Boolean(v)", CITE_C3))
        boost = js_number(use("ftsBoostWeight", "raw; score = min(1, score + w·fts)", CITE_C3))
        use("enableTemporalParsing", "computed and discarded in v2.1", CITE_C3)
        if not fts:
            res.override("fts_boost", disabled=True)
        else:
            if math.isnan(boost):
                raise ConfigError(f"hookclaw ftsBoostWeight = {show(user.get('ftsBoostWeight'))} is not a number: "
                                  f"every boosted score becomes NaN")
            res.override("fts_boost", weight=boost, fetch=2 * (2 * k), keep=2 * k)
            res.arms.append({"name": "hcfts", "depth": 2 * (2 * k)})

    # --- tail ------------------------------------------------------------------------------------------------
    hl = js_number(use("halfLifeHours", f"default {defaults['halfLifeHours']} h in this version; <= 0 → off"))
    if math.isnan(hl):
        raise ConfigError(f"hookclaw halfLifeHours = {show(user.get('halfLifeHours'))} is not a number: the decay "
                          f"makes every dated score NaN and the sort order engine-defined")
    res.override("hc_decay", half_life_hours=hl)
    adaptive = js_truthy(use("adaptiveResults", "handler default true (not in DEFAULTS)"))
    if adaptive:
        res.override("adaptive", max_results=k)
    else:
        res.override("adaptive", disabled=True)
    lam = js_number(use("mmrLambda", "raw λ on raw scores"))
    if js_truthy(use("enableMmr", "Boolean(v)")):
        if math.isnan(lam):
            raise ConfigError(f"hookclaw mmrLambda = {show(user.get('mmrLambda'))} is not a number")
        res.override("hc_mmr", lam=lam, k=k)
    else:
        res.override("hc_mmr", disabled=True)
    fmt = use("formatTemplate", "'markdown' → Markdown, anything else → XML")
    max_chars = js_number(use("maxContextChars", "raw; HookClaw's per-entry estimate"))
    if math.isnan(max_chars):
        raise ConfigError(f"hookclaw maxContextChars = {show(user.get('maxContextChars'))} is not a number")
    if math.isinf(max_chars) or max_chars < 0:
        raise ConfigError(f"hookclaw maxContextChars = {show(user.get('maxContextChars'))}: use a number >= 0")
    chars = int(math.floor(max_chars))  # compared with integer lengths: floor(v) gives the same decisions
    res.override("hc_budget", format="hookclaw_markdown" if fmt == "markdown" else "hookclaw_xml", max_chars=chars)
    res.budget = {"max_chunks": k, "max_chars": chars}
    for key in ("timeoutMs", "enableFeedbackLoop", "logInjections"):
        if key in user:
            res.notes.append(f"{key} has no effect offline (timeouts never fire; the feedback loop is inert: no "
                             f"recordInjection caller, §C.4)" if key != "logInjections" else f"{key}: logging only")
    res.summary = (f"maxResults {show(max_results)}, minScore {show(min_score)}, half-life {show(hl)} h, "
                   f"{'adaptive, ' if adaptive else ''}format {'markdown' if fmt == 'markdown' else 'xml'}, "
                   f"prompt cache {int(size) if math.isfinite(size) else size}/{show(ttl)} ms/{show(thr)}")
    return res


def resolve_v20(obj: Any, **kw: Any) -> Resolution:
    return resolve(obj, system="hookclaw-v2.0", **kw)


def resolve_v21(obj: Any, **kw: Any) -> Resolution:
    return resolve(obj, system="hookclaw-v2.1", **kw)


__all__ = ["resolve", "resolve_v20", "resolve_v21", "DEFAULTS", "HANDLER_ONLY"]
