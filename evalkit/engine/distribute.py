"""One run's work on a Dask cluster (`evalkit run --cluster local[:N]|tcp://HOST:PORT`): the corpus embedding and
the pipelines' stages, split by deterministic blocks, gathered in order — byte-identical metrics to one process.

* **Embedding**: the texts missing from the embedding cache are cut into fixed chunks (in the order one process
  would embed them); each worker loads the same model (folder, length, backend) itself once and embeds a chunk;
  the driver writes the vectors into the same content-hash cache in chunk order. The chunks are the ones one
  process embeds (:meth:`retrievers.embed.model.Embedder.encode`'s ``chunk``), each embedded by the same call
  (``model.encode`` with the same batch size), so the vectors are the same bits.
* **Stages**: the shared candidate set is computed on the driver (it needs the index: Chroma, bm25s and the
  on-disk candidate cache); it travels once per worker, and each worker runs every pipeline over contiguous
  query blocks (rows ``[a, b)`` of the set). The block States are concatenated in query order and padded, and the
  driver collects results, degenerate-stage warnings and the recall funnel from the full State as one process
  would. A stage is a function of its own query's row (view columns are chosen per row, so a block's column
  indices are the full view's), except a stage marked ``cross_query`` (a prompt cache answers a query from an
  earlier one): a pipeline with one stays on the driver, and so does one whose blocks cannot be merged without
  guessing (:class:`Unmergeable`: a gate skipped a whole block, so its later stages wrote nothing there).

Only numpy arrays and plain Python come back; the dataset, the index and every output stay on the driver.
``tests/system/test_cluster_run.py`` checks metrics.csv and per_query.csv byte for byte against one process.

Usage (what :func:`evalkit.engine.runner.run_quality` does with a ``client``)::

    with open_client("local:2") as client:
        states = run_states(client, cs, [(p.name, p, arm_map(p)) for p in pipelines if distributable(p)], ctx)
"""
from __future__ import annotations

import numpy as np

from evalkit.engine.cluster import Portable, map_shared, n_workers, slices_of
from retrievers.candidates.table import ArmHits, CandidateSet, State, view
from retrievers.embed.model import load_model

def rows(cs: CandidateSet, a: int, b: int) -> CandidateSet:
    """Queries ``[a, b)`` of ``cs`` as a candidate set of their own (same corpus, columns, arms, embeddings)."""
    qemb = cs.qemb_source()
    return CandidateSet(cs.corpus, cs.queries[a:b], cs.doc[a:b],
                        {k: ArmHits(h.score[a:b], h.rank[a:b]) for k, h in cs.arms.items()},
                        qemb=None if qemb is None or callable(qemb) else qemb[a:b], meta=dict(cs.meta))


def blocks_of(n: int, parts: int) -> list[tuple[int, int]]:
    """``range(n)`` cut into at most ``parts`` contiguous near-equal ``(a, b)`` blocks."""
    return [(s[0], s[-1] + 1) for s in slices_of(list(range(n)), parts)] if n else []


def distributable(p) -> bool:
    """Whether every stage of ``p`` decides a query from its own row (no ``Stage.cross_query`` stage, such as a
    prompt cache that answers a query from an earlier one)."""
    return not any(getattr(s, "cross_query", False) for s in p.stages)


def run_blocks(shared, block: tuple[int, int]) -> dict:
    """Worker side: every pipeline of ``shared`` = (cs, [(name, pipeline, arm map)], Portable) over one block."""
    cs, pipes, portable = shared
    ctx = portable.context()
    sub = rows(cs, *block)
    return {name: p.run(view(sub, amap), ctx) for name, p, amap in pipes}


class Unmergeable(ValueError):
    """Block States that cannot be put together without guessing (a stage wrote a key in some blocks only)."""


def merge_states(parts: list[State]) -> State:
    """Block States (in query order) as one: rows concatenated, (Q, K) arrays padded to the widest block. Every
    per-query value (an array or list of the block's length, in ``info``, ``extra`` and the trace) is
    concatenated; anything else must be equal in every block. :class:`Unmergeable` when a block lacks a key
    another has, or a value is neither per-query nor equal."""
    sizes = [len(s.skipped) for s in parts]
    trace = None
    if parts[0].trace is not None:
        if len({len(s.trace) for s in parts}) != 1:
            raise Unmergeable("the blocks ran different stages")
        trace = [tuple(_merge(list(x), sizes) for x in zip(*t)) for t in zip(*[s.trace for s in parts])]
    return State(_cat([s.col for s in parts]), _cat([s.score for s in parts]), _cat([s.skipped for s in parts]),
                 _merge([s.extra for s in parts], sizes), _merge([s.info for s in parts], sizes), trace)


def _merge(vals: list, sizes: list[int]):
    v0 = vals[0]
    if isinstance(v0, dict):
        if any(set(v) != set(v0) for v in vals):
            raise Unmergeable(f"keys differ between blocks: {sorted(set().union(*vals) - set(v0) or set(v0))}")
        return {k: _merge([v[k] for v in vals], sizes) for k in v0}
    if isinstance(v0, np.ndarray) and v0.ndim >= 1 and all(
            isinstance(v, np.ndarray) and v.ndim == v0.ndim and len(v) == n for v, n in zip(vals, sizes)):
        return _cat(vals)
    if isinstance(v0, list) and all(isinstance(v, list) and len(v) == n for v, n in zip(vals, sizes)):
        return [x for v in vals for x in v]
    if all(_same(v, v0) for v in vals) and not isinstance(v0, (list, np.ndarray)):
        return v0  # a value every block agrees on (a stage label, a setting)
    raise Unmergeable(f"a value that is not per query differs between blocks: {type(v0).__name__}")


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:  # noqa: BLE001 - incomparable objects
        return a is b


def _cat(arrs: list[np.ndarray]) -> np.ndarray:
    if arrs[0].ndim == 1:
        return np.concatenate(arrs)
    width = max(a.shape[1] for a in arrs)
    out = []
    for a in arrs:
        if a.shape[1] < width:
            pad = [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2)
            a = np.pad(a, pad, constant_values=_fill(a.dtype))
        out.append(a)
    return np.concatenate(out)


def _fill(dtype):
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "iu":
        return -1
    if dtype.kind == "b":
        return False
    return None


def run_states(client, cs: CandidateSet, pipes: list[tuple], ctx, per_worker: int = 2, log=None) -> dict[str, State]:
    """Driver side: ``{name: full State}`` of every ``(name, pipeline, arm map)`` in ``pipes`` over ``cs``, computed
    on the workers in contiguous query blocks and merged in query order. A pipeline whose blocks cannot be merged
    without guessing (:class:`Unmergeable`) is left out (and said in ``log``): the caller runs it itself."""
    if not pipes or cs.Q == 0:
        return {}
    blocks = blocks_of(cs.Q, n_workers(client) * per_worker)
    parts = map_shared(client, (cs, pipes, Portable(ctx)), run_blocks, blocks, log=log, what="query blocks")
    out = {}
    for name, _, _ in pipes:
        try:
            out[name] = merge_states([b[name] for b in parts])
        except Unmergeable as exc:
            if log:
                log(f"  cluster: {name} runs on this machine ({exc})")
    return out


def embed_remote(recipe, texts: list[str]) -> np.ndarray:
    """Worker side: ``texts`` embedded by the model ``recipe`` = (folder, max length, backend, batch size), loaded
    once per worker process (:func:`retrievers.embed.model.load_model` keeps it), exactly as
    :meth:`~retrievers.embed.model.Embedder.encode` calls it."""
    path, seq, backend, batch = recipe
    model = load_model(path, seq, backend)
    return np.asarray(model.encode(texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False), dtype=np.float32)


def cluster_encoder(client, log=None):
    """An ``encode_missing(embedder, texts, chunk) -> [(n, dim) array per chunk]`` that embeds on ``client``'s
    workers, one task per ``chunk`` texts (the chunks one process embeds): an Embedder's ``remote``.

    Usage (it needs a running cluster, so not a doctest; tests/system/test_cluster_run.py runs it)::

        embedder.remote = cluster_encoder(client)
    """
    def encode_missing(embedder, texts: list[str], chunk: int) -> list[np.ndarray]:
        chunks = [texts[i:i + chunk] for i in range(0, len(texts), chunk)]
        recipe = (embedder.path, embedder.max_seq_length, embedder.backend, embedder.batch_size)
        return map_shared(client, recipe, embed_remote, chunks, log=log, what="embedding chunks")
    return encode_missing


__all__ = ["Unmergeable", "rows", "blocks_of", "distributable", "run_blocks", "merge_states", "run_states",
           "embed_remote", "cluster_encoder"]
