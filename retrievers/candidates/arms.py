"""Arm specifications: what a preset asks the shared backend for.

An arm is one candidate list per query: ``vector`` (Chroma or exact cosine over the shared embeddings)
or ``lexical`` (bm25s over the shared per-group index). Its identity — everything but ``name`` and
``depth`` — keys the candidate cache, so presets asking for the same arm at different depths share one
deeper result list and each keeps its own top ``depth`` (lists are exact and ranked, so truncation is
equal to asking for fewer).

Raw score conventions stored in the candidate set (stages map them to each system's convention):

* vector: cosine similarity in [-1, 1] (= 1 − cosine distance).
* lexical: the bm25s score (>= 0; larger is better). SQLite FTS5's rank convention is ``-score``.

Query transforms (``query``) can produce several query variants per query (OpenClaw's per-keyword FTS
passes, Phase-3 expansions); variant ``i`` is stored as arm ``"{name}#{i}"``.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Callable

from retrievers.errors import ConfigError
from retrievers.types import Query

QUERY_TRANSFORMS: dict[str, Callable[[Query], list[str]]] = {}
ARM_KINDS = {"vector": "cosine similarity over the shared embeddings (Chroma or exact numpy)",
             "lexical": "bm25s over the shared per-group BM25 index"}
LEXICAL_TOKENIZERS = ("stem_en", "unicode61")
LEXICAL_SCORERS = ("bm25s",)
_NOT_IDENTITY = frozenset({"name", "depth", "options"})
_NOT_IDENTITY_VECTOR = _NOT_IDENTITY | {"tokenizer", "match", "scorer", "k1", "b"}


def query_transform(name: str):
    """Register ``fn(query) -> list[str]`` (one entry per variant; [] = no search for that query)."""
    def deco(fn):
        QUERY_TRANSFORMS[name] = fn
        return fn
    return deco


@query_transform("raw")
def _raw(q: Query) -> list[str]:
    return [q.text]


@dataclass(frozen=True)
class ArmSpec:
    name: str
    kind: str  # "vector" | "lexical"
    depth: int = 100
    query: str = "raw"  # a registered query transform
    tokenizer: str = "stem_en"  # lexical only
    match: str = "any"  # lexical only: "any" (plain BM25) | "all" (every query token must occur: OpenClaw's AND)
    scorer: str = "bm25s"  # lexical only
    k1: float = 1.2
    b: float = 0.75
    max_variants: int = 1  # how many query variants the transform may produce (arms name#0..name#n-1)
    options: dict = field(default_factory=dict, compare=False, hash=False)

    def identity(self) -> dict:
        # the fields hold plain str / int / float, so reading them equals asdict() without its deep copies
        # (latency mode computes keys on every query)
        drop = _NOT_IDENTITY_VECTOR if self.kind == "vector" else _NOT_IDENTITY
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in drop}

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def variant_names(self) -> list[str]:
        if self.max_variants <= 1 and self.query == "raw":
            return [self.name]
        return [f"{self.name}#{i}" for i in range(self.max_variants)]

    @staticmethod
    def from_dict(d: dict) -> "ArmSpec":
        if not isinstance(d, dict):
            raise ConfigError(f"an arm must be a table ([[arms]] with name, kind, ...), got {d!r}")
        valid = {"name", "kind", "depth", "query", "tokenizer", "match", "scorer", "k1", "b", "max_variants"}
        unknown = sorted(set(d) - valid)
        if unknown:
            raise ConfigError(f"arm: unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(valid))})")
        if "name" not in d or "kind" not in d:
            raise ConfigError(f"an arm needs 'name' and 'kind' (got {d!r})")
        if d["kind"] not in ARM_KINDS:
            raise ConfigError(f"arm {d['name']!r}: unknown kind {d['kind']!r} (valid kinds: {', '.join(ARM_KINDS)})")
        spec = ArmSpec(**d)
        if not isinstance(spec.depth, int) or spec.depth < 1 or spec.depth > 10000:
            raise ConfigError(f"arm {spec.name!r}: depth must be an integer in [1, 10000], got {spec.depth!r}")
        if spec.query not in QUERY_TRANSFORMS:
            raise ConfigError(f"arm {spec.name!r}: unknown query transform {spec.query!r} "
                              f"(valid: {', '.join(sorted(QUERY_TRANSFORMS))})")
        if spec.kind == "lexical":
            if spec.tokenizer not in LEXICAL_TOKENIZERS:
                raise ConfigError(f"arm {spec.name!r}: tokenizer {spec.tokenizer!r} is not one of: "
                                  f"{', '.join(LEXICAL_TOKENIZERS)}")
            if spec.match not in ("any", "all"):
                raise ConfigError(f"arm {spec.name!r}: match {spec.match!r} is not one of: any, all")
            if spec.scorer not in LEXICAL_SCORERS:
                raise ConfigError(f"arm {spec.name!r}: scorer {spec.scorer!r} is not one of: "
                                  f"{', '.join(LEXICAL_SCORERS)}")
        if spec.max_variants < 1:
            raise ConfigError(f"arm {spec.name!r}: max_variants must be >= 1")
        return spec
