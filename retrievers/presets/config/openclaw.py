"""OpenClaw 2026.2.26 ``memorySearch`` config → a preset extending ``openclaw_core_2026_2_26`` (or its FTS-only
sibling), resolved as ``src/agents/memory-search.ts`` ``mergeConfig`` and ``src/memory/manager.ts`` ``search`` do
(PIPELINES.md §A.1, §A.2, Appendix D).

Accepted shapes: the whole ``openclaw.json`` (``agents.defaults.memorySearch``, merged key by key with
``agents.list[id = agent].memorySearch`` when an agent is named), ``{"memorySearch": {...}}``, or the block.

Resolution (each rule is printed with its citation):

* every key: ``override ?? default ?? built-in`` — null counts as absent (``mergeConfig``);
* ``enabled`` false → memory search is off (``resolveMemorySearchConfig`` returns null): an error, nothing to run;
* ``query.minScore`` → ``clamp(v, 0, 1)`` (§A.1);
* ``query.hybrid.vectorWeight``/``textWeight`` → each clamped to [0, 1], then divided by their sum; a sum that is
  not > 0 (both 0, or NaN) → 0.7/0.3 (§A.1);
* ``candidateMultiplier`` → ``clamp(floor(v), 1, 20)`` (§A.1); candidates per arm
  ``min(200, max(1, floor(maxResults × multiplier)))`` with ``maxResults`` raw (§A.2, Appendix D);
* ``mmr.lambda`` → clamp [0, 1] if ``Number.isFinite`` else 0.7; ``temporalDecay.halfLifeDays`` →
  ``max(1, floor(v))`` if ``Number.isFinite`` else 30 (§A.1) — a numeric *string* is not finite there;
* flags (``hybrid.enabled``, ``mmr.enabled``, ``temporalDecay.enabled``, ``store.vector.enabled``) → JS truthiness;
* ``maxResults`` is not clamped: the final ``slice(0, maxResults)`` truncates it (2.5 → 2); a value that is not a
  positive number cannot be expressed and is an error;
* no embedding provider (``provider = "none"`` passed on the command line: OpenClaw decides it at run time from
  the API keys it finds) → FTS-only mode (§A.9); FTS-only with ``hybrid.enabled`` false → nothing is ever returned
  (Appendix D), expressed as ``top_k = 0``;
* ``hybrid.enabled`` false with a provider → vector-only: the vector arm's rows with ``score ≥ minScore``, first
  ``maxResults``, vector order; no merge, no decay, no MMR (§A.2 step 5);
* ``store.vector.enabled`` false → the JS cosine fallback (§A.4): exact cosine over every stored chunk (run it with
  ``--backend exact``; in a candidate file, an arm ``{"compute": "openclaw_js_cosine"}``).

Values outside OpenClaw's zod schema (``MemorySearchSchema``: e.g. ``minScore`` above 1, a non-integer
``candidateMultiplier``) are resolved as above *and* noted: the gateway refuses to load such a file.
"""
from __future__ import annotations

import math
from typing import Any

from retrievers.presets.config.common import (DERIVED, MISSING, ConfigError, Resolution, check_keys, coalesce, get,
                                              is_finite_number, js_number, js_truthy, show)

SYSTEM = "openclaw"
CITE_MERGE = "PIPELINES.md §A.1 (memory-search.ts mergeConfig)"
CITE_SEARCH = "PIPELINES.md §A.2 (manager.ts search)"

DEFAULTS = {"maxResults": 6, "minScore": 0.35, "hybrid.enabled": True, "vectorWeight": 0.7, "textWeight": 0.3,
            "candidateMultiplier": 4, "mmr.enabled": False, "mmr.lambda": 0.7, "temporalDecay.enabled": False,
            "temporalDecay.halfLifeDays": 30, "store.vector.enabled": True}

_BLOCK_KEYS = {"enabled", "sources", "extraPaths", "experimental", "provider", "remote", "fallback", "model",
               "local", "store", "chunking", "sync", "query", "cache"}
_QUERY_KEYS = {"maxResults", "minScore", "hybrid"}
_HYBRID_KEYS = {"enabled", "vectorWeight", "textWeight", "candidateMultiplier", "mmr", "temporalDecay"}


def openclaw_weights(vector_weight: Any, text_weight: Any) -> tuple[float, float]:
    """§A.1: clamp each weight to [0, 1] (``Math.max(0, Math.min(1, v))``, so NaN stays NaN), divide by the sum;
    a sum that is not > 0 (both 0, or NaN) → the defaults 0.7/0.3. 0.5/0.25 → 0.666667/0.333333."""
    vw = _clamp(js_number(vector_weight), 0.0, 1.0)
    tw = _clamp(js_number(text_weight), 0.0, 1.0)
    total = vw + tw
    if not total > 0:
        return 0.7, 0.3
    return vw / total, tw / total


def _clamp(v: float, lo: float, hi: float) -> float:
    """JS ``Math.max(lo, Math.min(hi, v))`` (NaN propagates)."""
    if math.isnan(v):
        return v
    return max(lo, min(hi, v))


def _floor(v: float) -> float:
    return v if not math.isfinite(v) else float(math.floor(v))


def _block(obj: Any, agent: str | None) -> tuple[Any, Any, str]:
    """(defaults block, agent override block, where) from the accepted shapes."""
    if not isinstance(obj, dict):
        raise ConfigError("openclaw config must be a JSON object")
    if "agents" in obj:
        defaults = get(obj, "agents", "defaults", "memorySearch")
        override = MISSING
        if agent:
            agents = get(obj, "agents", "list")
            match = [a for a in agents if isinstance(a, dict) and a.get("id") == agent] if isinstance(agents, list) else []
            if not match:
                raise ConfigError(f"openclaw config: no agent with id {agent!r} in agents.list")
            override = match[0].get("memorySearch", MISSING)
        return defaults, override, "agents.defaults.memorySearch"
    if agent:
        raise ConfigError("--agent needs the whole openclaw.json (with agents.list)")
    if "memorySearch" in obj:
        return obj["memorySearch"], MISSING, "memorySearch"
    return obj, MISSING, "memorySearch"


def _schema_notes(block: Any, where: str, res: Resolution) -> None:
    """Values OpenClaw's zod schema rejects (the gateway then refuses the file): noted, not fatal."""
    checks = [("query", "maxResults", "int>0"), ("query", "minScore", "0..1"),
              ("query.hybrid", "vectorWeight", "0..1"), ("query.hybrid", "textWeight", "0..1"),
              ("query.hybrid", "candidateMultiplier", "int>0"), ("query.hybrid.mmr", "lambda", "0..1"),
              ("query.hybrid.temporalDecay", "halfLifeDays", "int>0")]
    for parent, key, kind in checks:
        v = get(block, *parent.split("."), key)
        if v is MISSING or v is None:
            continue
        ok = is_finite_number(v) and (float(v).is_integer() and v > 0 if kind == "int>0" else 0 <= v <= 1)
        if not ok:
            want = "a positive integer" if kind == "int>0" else "a number in [0, 1]"
            res.notes.append(f"{where}.{parent}.{key} = {show(v)} is not {want}: OpenClaw's config schema "
                             f"(MemorySearchSchema) rejects it and the gateway refuses the file; resolved as "
                             f"mergeConfig would if the value reached it")
    for parent, key in (("query.hybrid", "enabled"), ("query.hybrid.mmr", "enabled"),
                        ("query.hybrid.temporalDecay", "enabled"), ("store.vector", "enabled"), ("", "enabled")):
        v = get(block, *[p for p in parent.split(".") if p], key)
        if v is not MISSING and v is not None and not isinstance(v, bool):
            res.notes.append(f"{where}.{parent + '.' if parent else ''}{key} = {show(v)} is not a boolean: the schema "
                             f"rejects it; resolved with JS truthiness → {'true' if js_truthy(v) else 'false'}")


def resolve(obj: Any, *, agent: str | None = None, provider: str | None = None, **_: Any) -> Resolution:
    defaults, override, where = _block(obj, agent)
    for blk, w in ((defaults, where), (override, f"agents.list[{agent}].memorySearch")):
        check_keys(blk, _BLOCK_KEYS, w)
        check_keys(get(blk, "query"), _QUERY_KEYS, f"{w}.query")
        check_keys(get(blk, "query", "hybrid"), _HYBRID_KEYS, f"{w}.query.hybrid")
        check_keys(get(blk, "query", "hybrid", "mmr"), {"enabled", "lambda"}, f"{w}.query.hybrid.mmr")
        check_keys(get(blk, "query", "hybrid", "temporalDecay"), {"enabled", "halfLifeDays"},
                   f"{w}.query.hybrid.temporalDecay")
    res = Resolution(system=SYSTEM, extends="openclaw_core_2026_2_26")
    _schema_notes(defaults, where, res)
    if override is not MISSING:
        _schema_notes(override, f"agents.list[{agent}].memorySearch", res)

    def pick(*path: str) -> Any:
        return coalesce(get(override, *path), get(defaults, *path), MISSING)

    enabled = pick("enabled")
    if enabled is not MISSING and not js_truthy(enabled):
        raise ConfigError(f"{where}.enabled is {show(enabled)}: OpenClaw's memory search is off "
                          f"(resolveMemorySearchConfig returns null), there is nothing to evaluate")

    # --- query.* -------------------------------------------------------------------------------------------
    raw_max = pick("query", "maxResults")
    max_results = js_number(DEFAULTS["maxResults"] if raw_max is MISSING else raw_max)
    if not (max_results > 0):
        raise ConfigError(f"{where}.query.maxResults = {show(raw_max)}: OpenClaw slices its results with it "
                          f"(slice(0, {show(max_results)})), which a top-k cannot express; use a positive number")
    res.rule("query.maxResults", raw_max, max_results if raw_max is not MISSING else DEFAULTS["maxResults"],
             "default 6; not clamped", CITE_MERGE)
    k = math.inf if math.isinf(max_results) else math.floor(max_results)
    if math.isinf(k):
        raise ConfigError(f"{where}.query.maxResults is Infinity: no top-k to express")
    res.rule("top-k (slice)", DERIVED, int(k), "slice(0, maxResults) truncates a non-integer", "PIPELINES.md Appendix D")

    raw_min = pick("query", "minScore")
    min_score = _clamp(js_number(DEFAULTS["minScore"] if raw_min is MISSING else raw_min), 0.0, 1.0)
    res.rule("query.minScore", raw_min, min_score, "default 0.35; clamp(v, 0, 1)", CITE_MERGE)

    # --- query.hybrid.* ------------------------------------------------------------------------------------
    raw_h = pick("query", "hybrid", "enabled")
    hybrid = True if raw_h is MISSING else js_truthy(raw_h)
    res.rule("query.hybrid.enabled", raw_h, hybrid, "default true; Boolean(v)", CITE_MERGE)
    raw_vw, raw_tw = pick("query", "hybrid", "vectorWeight"), pick("query", "hybrid", "textWeight")
    vw, tw = openclaw_weights(0.7 if raw_vw is MISSING else raw_vw, 0.3 if raw_tw is MISSING else raw_tw)
    res.rule("query.hybrid.vectorWeight", raw_vw, vw, "default 0.7; clamp [0, 1], / (vw + tw); sum not > 0 → 0.7",
             CITE_MERGE)
    res.rule("query.hybrid.textWeight", raw_tw, tw, "default 0.3; clamp [0, 1], / (vw + tw); sum not > 0 → 0.3",
             CITE_MERGE)
    raw_m = pick("query", "hybrid", "candidateMultiplier")
    mult = _clamp(_floor(js_number(4 if raw_m is MISSING else raw_m)), 1.0, 20.0)
    if math.isnan(mult):
        raise ConfigError(f"{where}.query.hybrid.candidateMultiplier = {show(raw_m)} is not a number: OpenClaw's "
                          f"candidate count becomes NaN (SQL LIMIT NaN), which cannot be expressed")
    res.rule("query.hybrid.candidateMultiplier", raw_m, int(mult), "default 4; clamp(floor(v), 1, 20)", CITE_MERGE)
    candidates = int(min(200, max(1, math.floor(max_results * mult))))
    res.rule("candidates per arm", DERIVED, candidates, "min(200, max(1, floor(maxResults × multiplier)))",
             CITE_SEARCH)
    raw_mmr = pick("query", "hybrid", "mmr", "enabled")
    mmr = False if raw_mmr is MISSING else js_truthy(raw_mmr)
    res.rule("query.hybrid.mmr.enabled", raw_mmr, mmr, "default false; Boolean(v)", CITE_MERGE)
    raw_lam = pick("query", "hybrid", "mmr", "lambda")
    lam = _clamp(float(raw_lam), 0.0, 1.0) if is_finite_number(raw_lam) else 0.7
    res.rule("query.hybrid.mmr.lambda", raw_lam, lam, "Number.isFinite(v) ? clamp(v, 0, 1) : 0.7", CITE_MERGE)
    raw_dec = pick("query", "hybrid", "temporalDecay", "enabled")
    decay = False if raw_dec is MISSING else js_truthy(raw_dec)
    res.rule("query.hybrid.temporalDecay.enabled", raw_dec, decay, "default false; Boolean(v)", CITE_MERGE)
    raw_hl = pick("query", "hybrid", "temporalDecay", "halfLifeDays")
    half_life = max(1, math.floor(raw_hl)) if is_finite_number(raw_hl) else 30
    res.rule("query.hybrid.temporalDecay.halfLifeDays", raw_hl, half_life,
             "max(1, floor(Number.isFinite(v) ? v : 30))", CITE_MERGE)
    raw_vec = pick("store", "vector", "enabled")
    sqlite_vec = True if raw_vec is MISSING else js_truthy(raw_vec)
    res.rule("store.vector.enabled", raw_vec, sqlite_vec, "default true; false → JS cosine fallback",
             "PIPELINES.md §A.4 (manager-search.ts searchVector)")
    if not sqlite_vec:
        res.notes.append("sqlite-vec off: OpenClaw scores every stored chunk with its JS cosine (exact, no "
                         "candidate pre-filter) — run with --backend exact, or give a candidate file the arm "
                         "{\"compute\": \"openclaw_js_cosine\"}")
    given_prov = pick("provider")
    prov = "none" if provider == "none" else ("auto" if given_prov is MISSING else given_prov)
    res.rule("provider", given_prov, prov, "which embedding API; whether one is available is decided at run time "
             "from the API keys OpenClaw finds (--provider none: none available → FTS-only)",
             "PIPELINES.md §A.2 step 3")

    # --- the preset ----------------------------------------------------------------------------------------
    if prov == "none":
        res.extends = "openclaw_core_2026_2_26_fts_only"
        res.arms = [{"name": "fts", "depth": candidates}]
        res.override("min_score", threshold=min_score)
        res.override("top_k", k=0 if not hybrid else int(k))
        res.override("budget", max_chunks=int(k))
        if not hybrid:
            res.notes.append("no embedding provider and hybrid.enabled false: FTS is enabled only with hybrid, "
                             "so OpenClaw returns nothing (PIPELINES.md Appendix D) — the preset keeps 0 rows")
        res.summary = (f"FTS-only (no provider), {candidates} rows per keyword, minScore {min_score:g}, "
                       f"top {0 if not hybrid else int(k)}")
        return res
    res.arms = [{"name": "vec", "depth": candidates}, {"name": "fts", "depth": candidates}]
    if hybrid:
        res.override("merge", vector_weight=vw, text_weight=tw)
        res.override("decay", enabled=decay, half_life_days=float(half_life))
        res.override("mmr", enabled=mmr, lam=lam)
        what = (f"hybrid {vw:g}/{tw:g}, decay {'on ' + str(half_life) + ' d' if decay else 'off'}, "
                f"MMR {'on λ ' + format(lam, 'g') if mmr else 'off'}")
    else:
        res.override("merge", type="fuse.single", label="merge", arm="vec", map="identity")
        res.override("decay", enabled=False)
        res.override("mmr", enabled=False)
        res.notes.append("hybrid.enabled false: no keyword arm, no merge, no temporal decay, no MMR — the vector "
                         "rows with score ≥ minScore in vector order (PIPELINES.md §A.2 step 5); decay/MMR "
                         "settings have no effect")
        what = "vector-only (hybrid off)"
    res.override("min_score", threshold=min_score)
    res.override("top_k", k=int(k))
    res.override("budget", max_chunks=int(k))
    res.summary = f"{what}, {candidates} candidates per arm, minScore {min_score:g}, top {int(k)}"
    return res


__all__ = ["resolve", "openclaw_weights", "DEFAULTS", "SYSTEM"]
