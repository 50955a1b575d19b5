"""`evalkit perf` (`make perf`): measured numbers for evalkit's speed claims, one printed section each.

1. sweep throughput — 1,000+ configs per seed preset family over cached candidates, incl. metrics; ranx
   ``optimize_fusion`` vs evalkit's vectorised weighted-sum sweep on the same grid  (:mod:`.throughput`)
2. per-query latency of every local preset, latency mode, warm, one thread, per stage  (:mod:`.latency`)
3. embedding throughput: the backends vs sentence-transformers torch float32, ``Embedder.encode`` vs plain
   sentence-transformers; warm cache = zero model calls; start-up of a new process (cold vs warm compiled model)
   (:mod:`.embedding`)
4. building and reopening the shared index (Chroma + bm25s) in a temp cache  (:mod:`.index_build`)
5. HNSW recall@10/100 vs exact numpy search per dataset and ef_search, with latency  (:mod:`.exactness`)
6. scale: a synthetic dated store (:mod:`.scale_store`, a cost probe) of 10k / 100k / 1M notes, strict as-of —
   per-query time of bm25 / dense / hybrid-rrf against bm25s alone, index time, peak RSS, slope per 10×, the
   growth curve as a PNG; then Chroma HNSW and the arms alone up to 100k  (:mod:`.scale`)
7. live systems: adapter overhead per query and throughput at concurrency 4 against a loopback echo service
   (:mod:`.live`)
8. answers: the answer workflow's overhead per call and its share of a loopback chat endpoint's capacity at
   concurrency 8  (:mod:`.answer`)
9. cluster run: `evalkit run --cluster local:2` against one process, cold and warm cache, wall time and byte
   identity of metrics.csv / per_query.csv  (:mod:`.cluster`)

Every section prints the machine line (CPU, cores, RAM, package versions, torch threads, load average): on a
shared machine wall-clock figures are pessimistic, so sections add load-robust figures (best-of-N, per-query
minimum over repeats, CPU time). Speed targets are checked and printed, never asserted.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.data.registry import suite
from evalkit.perf.common import Section, loadavg, machine, machine_line, progress

SECTIONS = {1: "Sweep throughput", 2: "Per-query latency", 3: "Embedding", 4: "Index build and reopen",
            5: "Vector search exactness", 6: "Scale",
            7: "Live systems", 8: "Answers", 9: "Cluster run"}
#: what runs without --sections: all but the cluster run (eight `evalkit run` processes and a cluster; opt-in)
DEFAULT_SECTIONS = [n for n in sorted(SECTIONS) if n != 9]


@dataclass
class PerfOptions:
    quick: bool = False
    sections: list[int] = field(default_factory=lambda: list(DEFAULT_SECTIONS))
    sweep_dataset: str | None = None  # default: the first of the registry's perf.sweep suite with cached vectors
    configs: int | None = None
    latency_queries: int | None = None
    scale_sizes: list[int] | None = None
    scale_seed: int | None = None
    scale_queries: int | None = None
    json_out: Path | None = None

    def pick(self, quick_value, full_value):
        return quick_value if self.quick else full_value


def run_perf(opts: PerfOptions, log=print) -> dict:
    from evalkit.runfolder.claim import claim_file  # lazy: startup
    t_start = time.perf_counter()
    json_claim = claim_file(opts.json_out, "perf", "--json") if opts.json_out else None  # before any work
    m = machine()
    mode = "--quick" if opts.quick else "full"
    log(f"evalkit perf ({mode}); started {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {loadavg()}")
    log(machine_line(m))
    results: dict = {"machine": m, "mode": mode, "sections": {}}
    for number in opts.sections:
        sec = Section(number, SECTIONS[number], log)
        progress(f"section {number}: {SECTIONS[number]}")
        try:
            data = _run_section(number, sec, opts)
        except Exception as exc:  # noqa: BLE001 - one broken section must not hide the others' numbers
            sec.note(f"section failed: {type(exc).__name__}: {exc}")
            data = {"error": f"{type(exc).__name__}: {exc}"}
        log("")
        log(sec.render())
        results["sections"][number] = dict(sec.as_json(), data=data)
    total = time.perf_counter() - t_start
    log("")
    log(f"evalkit perf finished in {total:.0f}s ({mode}); load average at the end {loadavg()}")
    results["seconds"] = round(total, 1)
    if json_claim:
        written = json_claim.write_text(json.dumps(results, indent=1, default=str) + "\n")
        log(f"wrote {written}")
    return results


def _run_section(number: int, sec: Section, o: PerfOptions):
    # --quick (the test suite's smoke run) stays on the project's own small dataset (the registry's perf.quick
    # suite), so a cold cache embeds only it; the full run measures the real corpora (the perf.<section> suites)
    quick = suite("perf.quick")
    lat_sets = o.pick(quick, suite("perf.latency"))
    if number == 1:
        from evalkit.perf import throughput  # lazy: startup
        return throughput.run(sec, dataset=o.sweep_dataset, limit=o.configs or o.pick(200, None),
                              quick=o.quick, ranx_step=o.pick(0.05, 0.01))
    if number == 2:
        from evalkit.perf import latency  # lazy: startup
        return latency.run(sec, lat_sets, n_queries=o.latency_queries or o.pick(3, 40), repeats=o.pick(2, 3),
                           warmup=o.pick(1, 5))
    if number == 3:
        from evalkit.perf import embedding  # lazy: startup
        return embedding.run(sec, n_texts=o.pick(16, 128), trials=o.pick(3, 5), rounds=o.pick(1, 3), all_variants=not o.quick,
                             datasets=o.pick(quick, suite("perf.embedding")))
    if number == 4:
        from evalkit.perf import index_build  # lazy: startup
        return index_build.run(sec, o.pick(quick, suite("perf.index")), reopens=o.pick(1, 2),
                               groups=o.pick([], suite("perf.groups")))
    if number == 5:
        from evalkit.perf import exactness  # lazy: startup
        return exactness.run(sec, quick + o.pick([], suite("perf.exactness")),
                             n_queries=o.pick(10, 200), low_ef=o.pick([50], [10, 50, 100]),
                             high_ef=o.pick([400], [400, 800]),
                             sweep_datasets=o.pick(quick, None))
    if number == 6:
        from evalkit.perf import scale  # lazy: startup
        kw = {"seed": o.scale_seed} if o.scale_seed is not None else {}
        if o.json_out:  # the growth curve beside the JSON (else reports/perf/scale-growth.png)
            kw["picture_path"] = Path(o.json_out).with_name(Path(o.json_out).stem + "-scale-growth.png")
        return scale.run(sec, sizes=o.scale_sizes or o.pick([1000, 2000], [10_000, 100_000, 1_000_000]),
                         n_queries=o.scale_queries or o.pick(5, 200), detail=not o.quick, **kw)
    if number == 7:
        from evalkit.perf import live  # lazy: startup
        return live.run(sec, n_queries=o.pick(100, 400), repeats=o.pick(1, 3))
    if number == 8:
        from evalkit.perf import answer  # lazy: startup
        return answer.run(sec, n_questions=o.pick(50, 200), repeats=o.pick(1, 3))
    if number == 9:
        from evalkit.perf import cluster  # lazy: startup
        return cluster.run(sec, quick[0], limit=o.pick(20, None))
    raise ValueError(number)
