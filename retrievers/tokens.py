"""LLM tokens: the one counter of how many tokens a text costs in a prompt (``cl100k_base`` of the PyPI package
``bpe-openai``, real and offline). The budget packer (:mod:`retrievers.stages.budget`) counts with it, and so does the
harness wherever it reports a token count (run metrics, live systems' answers, budget curves, the run manifest's
tokenizer line) — one tokenizer for all of them.

>>> count_tokens("Where is the staging database?") > 0
True
"""
from __future__ import annotations

from functools import lru_cache

from retrievers.memory import forgettable

TOKENIZER_NAME = "cl100k_base"


@lru_cache(maxsize=1)
def encoding():
    import bpe_openai  # lazy: startup
    return bpe_openai.get_encoding(TOKENIZER_NAME)


def tokenizer_info() -> dict:
    """Which tokenizer the budgets count with (for the run manifest)."""
    import bpe_openai  # lazy: startup
    return {"name": TOKENIZER_NAME, "package": "bpe-openai", "version": getattr(bpe_openai, "__version__", "?")}


#: counts by text; emptied between the bench's datasets (:func:`retrievers.memory.forgettable`)
_TOKEN_CACHE: dict[str, int] = forgettable({})
_TOKEN_CACHE_MAX = 400_000


def count_tokens(text: str) -> int:
    """BPE tokens of ``text`` (``cl100k_base``; special-token text is counted as ordinary text)."""
    if not text:
        return 0
    n = _TOKEN_CACHE.get(text)
    if n is None:
        if len(_TOKEN_CACHE) > _TOKEN_CACHE_MAX:
            _TOKEN_CACHE.clear()
        n = len(encoding().encode_ordinary(text))
        _TOKEN_CACHE[text] = n
    return n


def memoised() -> int:
    """How many texts' counts :func:`count_tokens` holds (emptied by :func:`retrievers.memory.release_memory`)."""
    return len(_TOKEN_CACHE)


__all__ = ["TOKENIZER_NAME", "encoding", "tokenizer_info", "count_tokens", "memoised"]
