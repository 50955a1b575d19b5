"""memory-lancedb-pro @6a50220 plugin config → a preset extending ``lancedb_pro_6a50220`` (hybrid) or
``lancedb_pro_6a50220_vector`` (``mode = "vector"``), resolved as ``index.ts`` and ``src/retriever.ts`` do
(PIPELINES.md §B.1–B.6).

Accepted shapes: OpenClaw's ``openclaw.json`` (``plugins.entries["memory-lancedb-pro"].config``), the plugin config
(``{"embedding": …, "retrieval": {…}, "autoRecall": …}``), or the ``retrieval`` block alone.

Resolution (each rule printed with its citation):

* ``retrieval = {...DEFAULT_RETRIEVAL_CONFIG, ...config.retrieval}`` — an absent key takes the default, but a key
  present with ``null`` *replaces* it with null (object spread), and null then acts as JS null does where it is
  used (``score >= null`` is ``score >= 0``; ``!null`` disables a stage) (§B.1, index.ts);
* values are used raw where the code uses them; numbers in strings are coerced by the arithmetic and comparisons
  that read them (``score >= "0.5"``); a value that is not a number makes every comparison false (``minScore``
  NaN → nothing passes) or its stage fall back to the unchanged score (``clamp01`` fallback, Appendix D);
* ``mode``: ``"vector"`` → vector-only pipeline (§B.6), anything else → hybrid (§B.3);
* ``rerank``: ``"none"`` → no rerank and no ``2·limit`` truncation; ``"cross-encoder"`` with ``rerankApiKey`` →
  the HTTP cross-encoder (the key itself is never written: the preset reads it from ``JINA_API_KEY``); any other
  value, or no key → the cosine fallback ``0.7·s + 0.3·cos`` (§B.4 step 5);
* recency (``!halfLife || halfLife <= 0 || !weight`` → off), length normalisation (``!anchor || anchor <= 0`` →
  off), time decay (``!halfLife || halfLife <= 0`` → off) (§B.4 steps 6–9);
* the call's ``limit`` → ``clampInt(limit, 1, 20)`` (non-finite → 1) (§B.1); auto-recall calls with 3 after the
  ``shouldSkipRetrieval`` gate; ``--limit`` evaluates the ``memory_recall`` tool instead (no gate);
* candidate pool per arm ``max(candidatePoolSize, 2·limit)``, which the store caps to ``clampInt(pool, 1, 20)``
  (§B.4 step 1, store.ts); vector-only: the store returns ``limit`` rows with ``score ≥ minScore`` (§B.6);
* ``category`` (``--category``) → ``filter.category``: the rows of other categories are dropped after each search;
* ``vectorWeight``/``bm25Weight`` are declared but unused at this commit (§B.1): noted, no effect.
"""
from __future__ import annotations

import math
from typing import Any

from retrievers.presets.config.common import (DERIVED, MISSING, ConfigError, Resolution, check_keys, get, js_number,
                                              js_truthy, show)

SYSTEM = "lancedb-pro"
CITE_B1 = "PIPELINES.md §B.1 (retriever.ts DEFAULT_RETRIEVAL_CONFIG, index.ts spread)"
CITE_B4 = "PIPELINES.md §B.4 (retriever.ts hybridRetrieval)"

DEFAULTS = {"mode": "hybrid", "vectorWeight": 0.7, "bm25Weight": 0.3, "minScore": 0.3, "rerank": "cross-encoder",
            "candidatePoolSize": 20, "recencyHalfLifeDays": 14, "recencyWeight": 0.1, "filterNoise": True,
            "rerankModel": "jina-reranker-v3", "rerankEndpoint": "https://api.jina.ai/v1/rerank",
            "lengthNormAnchor": 500, "hardMinScore": 0.35, "timeDecayHalfLifeDays": 60}
_RETRIEVAL_KEYS = set(DEFAULTS) | {"rerankApiKey", "rerankProvider"}
_PLUGIN_KEYS = {"embedding", "dbPath", "autoCapture", "autoRecall", "captureAssistant", "retrieval", "scopes",
                "enableManagementTools", "sessionMemory", "dimensions"}
PLUGIN_ID = "memory-lancedb-pro"


def clamp_int(v: Any, lo: int, hi: int) -> int:
    """lancedb-pro ``clampInt``: ``Number.isFinite(v)`` (no coercion) else ``lo``; then floor and clamp."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return lo
    return int(min(hi, max(lo, math.floor(v))))


def _blocks(obj: Any) -> tuple[dict, Any]:
    """(plugin config or {}, retrieval block or MISSING)."""
    if not isinstance(obj, dict):
        raise ConfigError("lancedb-pro config must be a JSON object")
    entry = get(obj, "plugins", "entries", PLUGIN_ID, "config")
    if entry is not MISSING:
        obj = entry
        if not isinstance(obj, dict):
            raise ConfigError(f"plugins.entries[{PLUGIN_ID!r}].config must be an object")
    elif "plugins" in obj:
        raise ConfigError(f"openclaw.json has no plugins.entries[{PLUGIN_ID!r}].config")
    if set(obj) & (_PLUGIN_KEYS - {"retrieval"}) or "retrieval" in obj:
        check_keys(obj, _PLUGIN_KEYS, "plugin config")
        retrieval = obj.get("retrieval", MISSING)
        # index.ts parsePluginConfig: a retrieval that is not an object (or null) is dropped
        if not isinstance(retrieval, dict):
            retrieval = MISSING
        return obj, retrieval
    return {}, obj


def _use(res: Resolution, block: dict, key: str, rule: str, cite: str = CITE_B1) -> Any:
    """The value the spread leaves for ``key`` (absent → default; present null stays null), recorded."""
    given = block.get(key, MISSING)
    value = DEFAULTS.get(key) if given is MISSING else given
    return res.rule(f"retrieval.{key}", given, value, rule, cite)


def resolve(obj: Any, *, limit: Any = None, category: str | None = None, **_: Any) -> Resolution:
    plugin, block = _blocks(obj)
    block = {} if block is MISSING else block
    check_keys(block, _RETRIEVAL_KEYS, "retrieval")
    res = Resolution(system=SYSTEM, extends="lancedb_pro_6a50220")

    # --- the call ------------------------------------------------------------------------------------------
    auto = limit is None
    if auto:
        if get(plugin, "autoRecall") is False:
            raise ConfigError("autoRecall is false: nothing is injected automatically; pass --limit N to "
                              "evaluate the memory_recall tool instead")
        raw_limit = 3
    else:
        raw_limit = limit
    lim = clamp_int(raw_limit, 1, 20)
    res.rule("limit", MISSING if auto else raw_limit, lim,
             ("auto-recall calls retrieve with 3" if auto else "memory_recall tool") + "; clampInt(limit, 1, 20)",
             CITE_B1)

    mode = _use(res, block, "mode", "'vector' → vector-only, anything else → hybrid", "PIPELINES.md §B.3")
    vector_only = mode == "vector"
    if vector_only:
        res.extends = "lancedb_pro_6a50220_vector"
    for k in ("vectorWeight", "bm25Weight"):
        if k in block:
            res.notes.append(f"retrieval.{k} = {show(block[k])} is declared but not used at 6a50220 (PIPELINES.md "
                             f"§B.1): no effect")

    min_score = js_number(_use(res, block, "minScore", "raw; compared as score >= minScore"))
    hard_min = js_number(_use(res, block, "hardMinScore", "raw; score >= hardMinScore after all multipliers",
                              CITE_B4))
    for k, v in (("minScore", min_score), ("hardMinScore", hard_min)):
        if math.isnan(v):
            res.notes.append(f"retrieval.{k} is not a number: every comparison with NaN is false, nothing passes")
    pool_raw = _use(res, block, "candidatePoolSize", "max(candidatePoolSize, 2·limit), store caps 1–20", CITE_B4)
    pool = math.nan if (v := js_number(pool_raw)) != v else max(v, 2 * lim)
    depth = clamp_int(pool, 1, 20)
    res.rule("candidate pool per arm", DERIVED, depth, "clampInt(max(candidatePoolSize, 2·limit), 1, 20)",
             "PIPELINES.md §B.2/§B.4 step 1 (store.ts)")

    # rerank
    rerank = _use(res, block, "rerank", "'none' → off; 'cross-encoder' + rerankApiKey → HTTP; else cosine",
                  "PIPELINES.md §B.4 step 5")
    key = block.get("rerankApiKey")
    provider = block.get("rerankProvider") or "jina"
    model = block.get("rerankModel") or DEFAULTS["rerankModel"]
    endpoint = block.get("rerankEndpoint") or DEFAULTS["rerankEndpoint"]
    if rerank == "none":
        path = "none"
    elif rerank == "cross-encoder" and js_truthy(key):
        path = "cross-encoder"
        res.notes.append("rerankApiKey is set: the preset reads the key from the environment variable "
                         "JINA_API_KEY (the key itself is never written to the preset)")
    else:
        path = "cosine"
    res.rule("rerank path", DERIVED, path, "as retriever.ts rerankResults chooses", "PIPELINES.md §B.4 step 5")
    if provider not in ("jina", "siliconflow", "pinecone"):
        raise ConfigError(f"retrieval.rerankProvider = {show(provider)}: the original sends it the jina format; "
                          f"use jina, siliconflow or pinecone")

    # recency / length / decay — the stage switches are the original's `!x || x <= 0`
    rhl = _use(res, block, "recencyHalfLifeDays", "!v || v <= 0 → recency off", CITE_B4)
    rw = _use(res, block, "recencyWeight", "!v → recency off", CITE_B4)
    recency_on = js_truthy(rhl) and not (js_number(rhl) <= 0) and js_truthy(rw)
    if recency_on and (math.isnan(js_number(rhl)) or math.isnan(js_number(rw))):
        recency_on = False  # boost NaN → clamp01 falls back to the unchanged score (Appendix D)
        res.notes.append("recency half-life or weight is not a number: the boost is NaN and clamp01 keeps the "
                         "score unchanged — recency has no effect")
    anchor = _use(res, block, "lengthNormAnchor", "!v || v <= 0 → length normalisation off", CITE_B4)
    length_on = js_truthy(anchor) and not (js_number(anchor) <= 0)
    thl = _use(res, block, "timeDecayHalfLifeDays", "!v || v <= 0 → time decay off", CITE_B4)
    decay_on = js_truthy(thl) and not (js_number(thl) <= 0)
    for key, on, v, f in (("lengthNormAnchor", length_on, anchor, "0.3"), ("timeDecayHalfLifeDays", decay_on, thl,
                                                                          "0.5")):
        if on and math.isnan(js_number(v)):
            raise ConfigError(f"retrieval.{key} = {show(v)} is not a number: the original multiplies every score "
                              f"by {f} there (clamp01 fallback, PIPELINES.md Appendix D), which this preset "
                              f"cannot express")
    noise = _use(res, block, "filterNoise", "truthy → noise filter", CITE_B4)

    # --- the preset ----------------------------------------------------------------------------------------
    if vector_only:
        res.arms = [{"name": "vec", "depth": lim}]
    else:
        res.arms = [{"name": "vec", "depth": depth}, {"name": "fts", "depth": depth}]
        if path == "none":
            res.override("rerank", mode="none", limit=lim)
        elif path == "cosine":
            res.override("rerank", mode="lightweight", limit=lim)
        else:
            res.override("rerank", mode="cross-encoder", limit=lim, provider=provider, model=model,
                         endpoint=endpoint, api_key_env="JINA_API_KEY")
    if not auto:
        res.override("gate", disabled=True)
    res.override("min_score", threshold=_finite_or_inf(min_score))
    if recency_on:
        res.override("recency", half_life_days=js_number(rhl), weight=js_number(rw))
    else:
        res.override("recency", disabled=True)
    if length_on:
        res.override("length", anchor=js_number(anchor))
    else:
        res.override("length", disabled=True)
    if decay_on:
        res.override("decay", half_life_days=js_number(thl))
    else:
        res.override("decay", disabled=True)
    res.override("hard_min_score", threshold=_finite_or_inf(hard_min))
    if not js_truthy(noise):
        res.override("noise", disabled=True)
    res.override("limit", k=lim)
    res.override("budget", max_chunks=lim)
    if category is not None:
        if not isinstance(category, str) or not category:
            raise ConfigError(f"--category must be a non-empty string, got {category!r}")
        # filter.category right after the fusion / vector stage (equivalent to filtering each arm: see its docstring)
        res.insert_after.setdefault("vector" if vector_only else "fuse", []).append(
            {"label": "category", "type": "filter.category", "category": category})
        res.rule("category", category, category, "retrieve({category}): entry.category === category after each "
                 "search", "retriever.ts @6a50220 runVectorSearch/runBM25Search/vectorOnlyRetrieval")
    res.summary = (f"{'vector-only' if vector_only else 'hybrid'}, limit {lim}, pool {depth if not vector_only else lim}, "
                   f"rerank {'none (vector-only has no rerank)' if vector_only else path}, minScore {show(min_score)}, hardMinScore {show(hard_min)}"
                   + (f", category {category!r}" if category else ""))
    return res


def _finite_or_inf(v: float) -> float:
    """A threshold NaN makes ``score >= NaN`` false for every row: +inf has the same effect and is a valid TOML
    number."""
    return math.inf if math.isnan(v) else v


__all__ = ["resolve", "clamp_int", "DEFAULTS", "SYSTEM"]
