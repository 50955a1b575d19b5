"""Loader for ``datasets/memory-workspace`` — the project's own agent-memory benchmark.

The files are a BEIR folder (read by :func:`evalkit.data.readers.beir.load_beir`); this loader adds what is specific
to the workspace:

* ``unit = "chunk"`` and the name ``memory-workspace``;
* ``info["workspace"]``: chunk counts per tier and language, the ids of chunks holding a secret and of junk
  chunks (for leakage / junk-rate reporting), query counts per category and split, and the path of the query
  log (``querylog.jsonl``, in the logged-query contract) when present;
* the ``strict`` as-of visibility protocol: a query (or a logged event) searches only the notes written by its
  ``as_of`` — a daily log is created on its date (its ``timestamp``); ``MEMORY.md`` and the topic briefs as they
  stood then (one version per day a line was added: ``created`` that day, ``retired`` when the next replaced it;
  :mod:`evalkit.data.workspace_generator.revisions`); a junk file from its ``mtime``. No document is undated;
* ``official_measures`` (nDCG@10, recall@10, secret_leak_rate, abstention_accuracy) and the split it declares:
  ``train`` / ``test`` are whole evidence groups (written by the generator), and ``test`` is the **lockbox** that
  ``evalkit tune`` never reads (``--final`` opens it, :mod:`evalkit.tune.lockbox`);
* a check that the folder is the workspace set (every document has a ``tier``), so a wrong folder fails with
  one clear line instead of a confusing report later.

Options: ``split`` ("train", "test" or "all") returns that view, as ``load_beir`` does; other keyword options
are passed on to ``load_beir`` (which ignores the ones it does not know).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evalkit.data.readers.beir import load_beir
from retrievers.types import DataError, Dataset, declare_visibility

NAME = "memory-workspace"
TIERS = ("curated", "topic", "daily", "junk")


def load_workspace(path: Path, split: str | None = None, **opts: Any) -> Dataset:
    """Read the memory-workspace folder at ``path`` (see the module docstring)."""
    path = Path(path)
    opts.pop("name", None)
    ds = load_beir(path, name=NAME, **opts)
    bad = [d.id for d in ds.documents if d.metadata.get("tier") not in TIERS]
    if bad:
        raise DataError(f"{path}: not a memory-workspace folder (document {bad[0]!r} has no workspace tier)")
    ds.unit = "chunk"
    # memory-style chunks keep MaxP (load_beir's plain-folder default is the MTEB truncation protocol)
    ds.info["representation"] = "maxp"
    ds.info["representation_why"] = "memory chunks: evidence deep in a long chunk stays reachable (MaxP)"
    declare_visibility(ds.info, "strict", "a memory folder holds only the notes written before the question "
                                          "(daily logs from their date on; MEMORY.md and topic briefs as they "
                                          "stood then)")

    tiers = Counter(d.metadata["tier"] for d in ds.documents)
    langs = Counter(d.metadata.get("lang") for d in ds.documents)
    by_cat: dict[str, dict[str, int]] = {}
    for q in ds.queries:
        s = q.metadata.get("split", "none")
        by_cat.setdefault(q.category or "none", {}).setdefault(s, 0)
        by_cat[q.category or "none"][s] += 1
    log = path / "querylog.jsonl"
    ds.info["workspace"] = {
        "chunks_per_tier": {t: tiers.get(t, 0) for t in TIERS},
        "chunks_per_lang": dict(sorted(langs.items(), key=lambda kv: str(kv[0]))),
        "secret_doc_ids": sorted(d.id for d in ds.documents if d.metadata.get("contains_secret")),
        "junk_doc_ids": sorted(d.id for d in ds.documents if d.metadata["tier"] == "junk"),
        "queries_per_category": {c: dict(sorted(v.items())) for c, v in sorted(by_cat.items())},
        "querylog": str(log) if log.is_file() else None,
    }
    # harm labels (evalkit.measures.harms): secrets, junk, and the superseded statement of each knowledge-update
    # query (its grade-0 rows: README "Label rules")
    ds.info["labels"] = {
        "secret": ds.info["workspace"]["secret_doc_ids"],
        "junk": ds.info["workspace"]["junk_doc_ids"],
        "superseded": {q.id: sorted(d for d, g in ds.qrels.get(q.id, {}).items() if int(g) == 0)
                       for q in ds.queries if q.category == "knowledge-update"},
    }
    # what a result on this set is judged by: ranking quality, no secret in the prompt, nothing injected when the
    # memory has no answer (the no-memory queries have no qrels: abstention_accuracy measures them)
    ds.info["official_measures"] = ["ndcg@10", "recall@10", "secret_leak_rate", "abstention_accuracy"]
    # train / test are whole evidence groups (the generator's split); test is sealed for tuning (evalkit tune
    # never reads it; evalkit tune --final opens it and counts the openings)
    ds.info["split_by"] = "evidence"
    ds.info["lockbox"] = "test"
    ds.info["rules"] = list(ds.info.get("rules", [])) + [
        "no-memory queries have no qrels: the right output is an empty injection",
        "junk and secret chunks are never judged; report leakage from info['workspace'] ids",
    ]
    if split is not None:
        return ds.split(split)
    return ds
