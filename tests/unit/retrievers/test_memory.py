"""What the bench's step between datasets gives back (:func:`retrievers.memory.release_memory`): the LLM-token
counts memoised by whole text are emptied (they kept a whole corpus alive), and counting again gives the same
numbers."""
from __future__ import annotations

from retrievers import tokens
from retrievers.memory import release_memory


def test_release_memory_empties_the_token_counts_and_they_come_back_the_same():
    texts = ["Where is the staging database?", "a long note " * 400, "ünïcödé — 日本語"]
    release_memory()
    before = [tokens.count_tokens(t) for t in texts]
    assert tokens.memoised() == len(texts)
    release_memory()
    assert tokens.memoised() == 0
    assert [tokens.count_tokens(t) for t in texts] == before and before[1] > 400
