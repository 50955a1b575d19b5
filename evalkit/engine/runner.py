"""Replay labelled query sets through retrievers (quality mode) and collect what each returned and injected.

Quality mode: the arms every retriever needs are computed once (cached on disk) into one shared candidate set;
each retriever runs its stages over a view of it. Every query searches the store as of its own ``as_of`` under
the dataset's as-of visibility protocol (:mod:`retrievers.index.visibility`; ``IndexSettings.as_of_visibility``
overrides it). Results are plain Python data (ranked ids and scores per
query, the injected ids, budget accounting, skip flags) so they can be written, compared and re-scored.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field

import numpy as np

from evalkit.engine.degenerate import find_degenerate
from evalkit.engine.funnel import recall_funnel, threshold_sensitivity
from retrievers.candidates.search import build_candidates
from retrievers.candidates.table import CandidateSet, view
from retrievers.embed.model import batch_text_encoder
from retrievers.index.shared import SharedIndex
from retrievers.pipeline import Pipeline, injected_mask
from retrievers.stages import Context
from retrievers.types import Dataset, Query


@dataclass(init=False)
class QueryResult:
    """What one retriever returned for one query: ``ranked`` (id, score) pairs, the ``injected`` ids, whether the
    query was ``skipped``, the ``budget`` accounting (chunks / tokens / chars of the injected block) and the
    rendered ``block`` itself (or None).

    The block is held zlib-compressed (level 1, UTF-8) and decompressed when read: a run holds one per retriever
    and query until its folder is written — LongMemEval-S's 30 retrievers × 468 queries rendered 308 M characters,
    626 MB as Python strings (a non-ASCII character widens a whole string to 2–4 bytes a character), the largest
    object of the bench's peak. Reading ``.block`` gives the same string back.

    >>> r = QueryResult([("d1", 0.9)], ["d1"], False, {"chunks": 1}, "## Memory\\n- d1 ✓")
    >>> r.block
    '## Memory\\n- d1 ✓'
    """
    ranked: list[tuple[str, float]]
    injected: list[str]
    skipped: bool
    budget: dict
    packed: bytes | None  # the block, zlib level 1 over UTF-8 (surrogates kept)

    def __init__(self, ranked: list[tuple[str, float]], injected: list[str], skipped: bool,
                 budget: dict | None = None, block: str | None = None):
        self.ranked, self.injected, self.skipped = ranked, injected, skipped
        self.budget = {} if budget is None else budget
        self.packed = None if block is None else zlib.compress(block.encode("utf-8", "surrogatepass"), 1)

    @property
    def block(self) -> str | None:
        return None if self.packed is None else zlib.decompress(self.packed).decode("utf-8", "surrogatepass")


@dataclass
class RetrieverRun:
    name: str
    pipeline: Pipeline
    results: dict[str, QueryResult]
    seconds: float
    info: dict = field(default_factory=dict)



class ResultRows:
    """The rows of a run's ``results/<dataset>/<retriever>.jsonl`` — per query ``query_id``, ``ranked`` ([id, score
    rounded to 6 places] pairs), ``injected``, ``skipped``, ``budget`` and (``blocks``, when one was rendered) the
    ``injected_block`` — made from ``results`` each time they are read, not held.

    Why: a writer holds every retriever's rows until its folder is written; as lists of dicts they were a second copy
    of results the run holds anyway (LongMemEval-S's 30 retrievers: +420 MB at the bench's peak, measured), so the
    writer is given this view instead. ``results`` must not change before the rows are read (a run's results never
    do once recorded).

    >>> rows = ResultRows({"q1": QueryResult([("d1", 0.91234567)], ["d1"], False, {"chunks": 1})})
    >>> len(rows), list(rows)[0]["ranked"]
    (1, [['d1', 0.912346]])
    """

    def __init__(self, results: dict[str, QueryResult], blocks: bool = True):
        self.data, self.blocks = results, blocks

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self):
        for q, r in self.data.items():
            row = {"query_id": q, "ranked": [[d, round(s, 6)] for d, s in r.ranked], "injected": r.injected,
                   "skipped": r.skipped, "budget": r.budget}
            if self.blocks and r.packed is not None:
                row["injected_block"] = r.block
            yield row

def arm_map(p: Pipeline) -> dict[str, tuple[str, int]]:
    """Preset arm names → (shared arm key, depth), variant arms expanded."""
    m: dict[str, tuple[str, int]] = {}
    for a in p.arms:
        k = a.key()
        if a.query == "raw" and a.max_variants <= 1:
            m[a.name] = (k, a.depth)
        else:
            for i in range(a.max_variants):
                m[f"{a.name}#{i}"] = (f"{k}#{i}", a.depth)
    return m


def collect(p: Pipeline, cs: CandidateSet, st, render_blocks: bool = True) -> dict[str, QueryResult]:
    ids = cs.corpus.ids
    inj = injected_mask(st)
    budget = st.info.get("budget") or {}
    blocks = st.info.get("blocks")
    out = {}
    for qi, q in enumerate(cs.queries):
        row = st.col[qi]
        ok = row >= 0
        ranked = [(ids[cs.doc[qi, c]], float(s)) for c, s in zip(row[ok], st.score[qi][ok])]
        injected = [ids[cs.doc[qi, c]] for c, m in zip(row, inj[qi]) if c >= 0 and m]
        b = {k: int(v[qi]) for k, v in budget.items()} if budget else {
            "chunks": len(injected), "chars": sum(len(cs.corpus.texts[cs.doc[qi, c]]) for c, m in zip(row, inj[qi])
                                                  if c >= 0 and m)}
        out[q.id] = QueryResult(ranked, injected, bool(st.skipped[qi]), b,
                                blocks[qi] if (blocks is not None and render_blocks) else None)
    return out


def shared_candidates(index: SharedIndex, queries: list[Query], pipelines: list[Pipeline],
                      use_cache: bool = True, visibility: str | None = None) -> CandidateSet:
    specs = [a for p in pipelines for a in p.arms]
    return build_candidates(index, queries, specs, use_cache=use_cache, visibility=visibility)


def run_quality(dataset: Dataset, pipelines: list[Pipeline], index: SharedIndex, ctx: Context | None = None,
                use_cache: bool = True, progress=None, visibility: str | None = None,
                diagnose: bool = False, client=None, log=None, keep_lexical: bool = False) -> dict[str, RetrieverRun]:
    """Every pipeline over every query of ``dataset`` (already split), candidates shared. ``visibility``: the
    as-of protocol; None = what ``dataset`` declares (unless the index settings ask for one). Every pipeline runs
    traced and its degenerate stages are named in ``info["degenerate"]`` (:mod:`evalkit.engine.degenerate`: warning
    records). ``diagnose``: also record each pipeline's recall funnel and threshold sensitivity
    (``info["funnel"]``, :mod:`evalkit.engine.funnel`; read-only, results unchanged). ``client``: a Dask client;
    the stages of every pipeline without a gate run on its workers in contiguous query blocks
    (:mod:`evalkit.engine.distribute`; the same results byte for byte; ``log`` gets its progress lines).
    Once the candidates are built the index's bm25s indexes leave memory (every lexical search of the run is in
    them); ``keep_lexical`` keeps them for a caller that runs the same index again at once, one preset at a time (a
    release would re-read them for the next run: at 10^6 notes 0.7 GB more at the peak, measured)."""
    ctx = ctx or Context()
    queries = dataset.queries
    visibility = visibility or index.visibility(dataset).protocol
    cs = shared_candidates(index, queries, pipelines, use_cache=use_cache, visibility=visibility)
    if not keep_lexical:
        index.release_lexical()  # every lexical search of the run is in ``cs``: its bm25s indexes leave memory
    runs: dict[str, RetrieverRun] = {}
    # the trace is read-only: degenerate stages are named from it on every run, the funnel on diagnose
    traced = Context(ctx.embedder, True, ctx.timings, ctx.options)
    remote: dict = {}
    if client is not None:
        from evalkit.engine.distribute import distributable, run_states  # lazy: startup
        if any(p.uses_vectors() for p in pipelines):  # the workers get the vectors, not the index that makes them
            index.ensure_vectors()
            _ = cs.qemb
        remote = run_states(client, cs, [(p.name, p, arm_map(p)) for p in pipelines if distributable(p)], traced,
                            log=log)
    for p in pipelines:
        t0 = time.perf_counter()
        v = view(cs, arm_map(p))
        st = remote[p.name] if p.name in remote else p.run(v, traced)
        res = collect(p, v, st)
        runs[p.name] = RetrieverRun(p.name, p, res, time.perf_counter() - t0,
                                    info={k: v_ for k, v_ in st.info.items() if k not in ("injected", "blocks",
                                                                                        "budget")})
        runs[p.name].info["degenerate"] = find_degenerate(p.name, p, v, st, injected_mask(st))
        if diagnose:
            fun = recall_funnel(v, p.stages, st.trace, injected_mask(st), st.col, dataset.qrels)
            fun.thresholds = threshold_sensitivity(p, v, ctx, st.trace, dataset.qrels)
            runs[p.name].info["funnel"] = fun
        if progress:
            progress(p.name)
    return runs


def skip_rate(run: RetrieverRun) -> float:
    vals = [r.skipped for r in run.results.values()]
    return float(np.mean(vals)) if vals else 0.0


# ---- latency mode ----------------------------------------------------------------------------------------

@dataclass
class LatencyResult:
    """Per retriever: seconds per query, per stage (``embed_query``, ``arm:vector``, ``arm:lexical``,
    ``assemble``, ``view``, then every pipeline stage by label) and end to end (wall time from the query text to
    the packed block, so glue between the timed parts counts too) with / without the query embedding."""

    stages: dict[str, dict[str, list[float]]]
    threads: int
    repeats: int
    warmup: int


def run_latency(dataset: Dataset, pipelines: list[Pipeline], index: SharedIndex, repeats: int = 3,
                warmup: int = 5, threads: int = 1, ctx: Context | None = None, limit: int | None = None,
                progress=None) -> LatencyResult:
    """Latency mode: no shared cache. Each query goes through the full pipeline (embed → arms → stages)
    ``repeats`` times after ``warmup`` untimed queries; every stage is timed with ``perf_counter``.
    The thread count of torch and of the BLAS pools is fixed to ``threads`` and recorded."""
    import torch  # lazy: startup
    from threadpoolctl import threadpool_limits  # lazy: optional-dep

    queries = dataset.queries[:limit] if limit else dataset.queries
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    out: dict[str, dict[str, list[float]]] = {p.name: {} for p in pipelines}
    try:
        with threadpool_limits(limits=threads):
            encode_batch = batch_text_encoder(index.embedder.model)

            def encode_query(text: str):
                return encode_batch([text])

            embedder = ctx.embedder if ctx else index.embedder
            options = dict(ctx.options if ctx else {}, render_blocks=True)

            def one(p: Pipeline, arms: list, amap: dict, q: Query, record: bool) -> None:
                # arms / amap depend only on the pipeline: computed once per pipeline, not per query
                t: dict[str, list[float]] = {}
                t0 = time.perf_counter()
                qemb = encode_query(q.text)
                t["embed_query"] = [time.perf_counter() - t0]
                # query variants (Phase-3 expansions) are embedded (query embedding) and searched live, one at a time
                cs = build_candidates(index, [q], arms, use_cache=False, timings=t, qemb=qemb, encode=encode_batch)
                c2 = Context(embedder=embedder, timings=t, options=dict(options))
                t1 = time.perf_counter()
                v = view(cs, amap)
                t["view"] = [time.perf_counter() - t1]
                st = p.run(v, c2)
                wall = time.perf_counter() - t0  # end to end, incl. what no stage timer covers
                if record:
                    variants = t.pop("embed_variants", [])
                    searches = t.pop("search_variants", [])
                    used = variants_used(st, len(variants))
                    # expansion passes the early stop never ran: a live system would neither embed nor search them
                    unused = sum(variants[used:]) + sum(searches[used:])
                    t["embed_query"] = [sum(t["embed_query"]) + sum(variants[:used])]
                    if searches:
                        t["arm:vector"] = [sum(t["arm:vector"]) - sum(searches[used:])]
                    rec = out[p.name]
                    for k, vals in t.items():
                        rec.setdefault(k, []).append(float(sum(vals)))
                    rec.setdefault("total_with_embedding", []).append(wall - unused)
                    rec.setdefault("total", []).append(wall - unused - t["embed_query"][0])

            for p in pipelines:
                arms, amap = list(p.arms), arm_map(p)
                for q in queries[:warmup]:
                    one(p, arms, amap, q, False)
                for _ in range(repeats):
                    for q in queries:
                        one(p, arms, amap, q, True)
                if progress:
                    progress(p.name)
    finally:
        torch.set_num_threads(old)
    return LatencyResult(out, threads, repeats, warmup)


def variants_used(st, n_variants: int) -> int:
    """How many query variants (in order) the one query of ``st`` consumed: a stage that may stop its expansion
    passes early records it in ``info["variants_used"]`` (see :mod:`retrievers.stages.base`). Any other pipeline
    uses every variant it was given."""
    used = st.info.get("variants_used") if st.info else None
    if used is None or len(used) != 1:
        return n_variants
    return max(0, min(n_variants, int(used[0])))


def percentiles(vals: list[float]) -> dict[str, float]:
    a = np.asarray(vals, dtype=np.float64) * 1000.0
    if a.size == 0:
        return {}
    return {"p50_ms": float(np.percentile(a, 50)), "p90_ms": float(np.percentile(a, 90)),
            "p95_ms": float(np.percentile(a, 95)), "p99_ms": float(np.percentile(a, 99)),
            "mean_ms": float(a.mean()), "qps": float(1000.0 / a.mean()) if a.mean() > 0 else float("inf")}
