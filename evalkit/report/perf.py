"""`evalkit perf` rendered: each section as text on the terminal (:func:`text_section`, :func:`text_table`), and
the README's performance table from the results of a run (never typed): one row per section that produced numbers
(a section that did not run, or failed, leaves its row out); written between the markers by
:mod:`evalkit.perf.readme`.

>>> render({"sections": {}})
'_No section of this `evalkit perf` run produced numbers._'
"""
from __future__ import annotations

from evalkit.data.registry import label, suite
from numbers import Real

from evalkit.report.format import fmt_auto, fmt_kilo


def _is_num(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) or v in ("-", None)


def text_table(title: str, columns: list[str], rows: list[list], notes: list[str]) -> str:
    """A perf table as text: the title, the header, a rule, the rows (numbers formatted by
    :func:`evalkit.report.format.fmt_auto`, a column right-aligned when every cell of it is a number), the notes.

    >>> print(text_table("sizes", ["docs", "s"], [[10, 0.5], [100, 2.25]], ["a note"]))
    -- sizes
    docs      s
    ----  -----
      10  0.500
     100   2.25
       a note
    """
    cells = [[fmt_auto(c) for c in r] for r in rows]
    width = [max([len(h)] + [len(r[i]) for r in cells if i < len(r)]) for i, h in enumerate(columns)]
    numeric = [all(_is_num(r[i]) for r in rows if i < len(r)) and rows for i in range(len(width))]

    def line(vals):
        return "  ".join((v.rjust(w) if numeric[i] else v.ljust(w))
                         for i, (v, w) in enumerate(zip(vals, width))).rstrip()

    out = [f"-- {title}", line(columns), line(["-" * w for w in width])]
    out += [line(r + [""] * (len(width) - len(r))) for r in cells]
    out += [f"   {n}" for n in notes]
    return "\n".join(out)


def text_section(number: int, title: str, machine: str, seconds: float, tables: list[str], notes: list[str]) -> str:
    """A perf section as text: its heading, the machine line, its time, its rendered tables and its notes."""
    lines = [f"== {number}. {title} ==", machine, f"section time {seconds:.1f}s"]
    for t in tables:
        lines += ["", t]
    if notes:
        lines.append("")
        lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def _data(results: dict, number: int) -> dict | None:
    sec = (results.get("sections") or {}).get(number) or (results.get("sections") or {}).get(str(number))
    data = (sec or {}).get("data")
    return data if isinstance(data, dict) and "error" not in data else None


def _sweep(d: dict) -> str | None:
    fam = d.get("families") or {}
    if not fam:
        return None
    rates = {n: f["evals_per_s"] for n, f in fam.items()}
    lo, hi = min(rates, key=rates.get), max(rates, key=rates.get)
    text = (f"{fmt_kilo(rates[lo])} ({lo}) – {fmt_kilo(rates[hi])} ({hi}) query-pipeline evaluations/s; fewest "
            f"configs per family {min(f['configs'] for f in fam.values()):,}")
    rx = d.get("ranx") or {}
    if rx.get("ranx_seconds") and rx.get("evalkit_seconds"):
        fastest = min(rx["ranx_seconds"].values())
        same = all(w in rx.get("evalkit_best", []) for w in (rx.get("ranx_best") or {}).values())
        text += (f"; the {rx.get('weights')}-weight fusion grid in {rx['evalkit_seconds']:.2f} s vs "
                 f"{fastest:.1f} s for `ranx.optimize_fusion` ({'same best weight' if same else 'best weight differs'})")
    return f"| sweep, {d.get('dataset')} ({d.get('queries')} queries, candidates cached, metrics included) | {text} |"


def _latency(d: dict) -> str | None:
    rows = [(ds, p, v) for ds, per in d.items() if isinstance(per, dict) for p, v in per.items()
            if isinstance(v, dict) and "best_p95_ms" in v]
    if not rows:
        return None
    ex = max(rows, key=lambda r: r[2]["best_p95_ms"])
    inc = max(rows, key=lambda r: r[2]["best_p95_with_embedding_ms"])
    lo = min(rows, key=lambda r: r[2]["best_p95_ms"])
    sets = ", ".join(sorted({r[0] for r in rows}))
    return (f"| per-query latency, {sets} (latency mode, warm, one thread; {len({r[1] for r in rows})} presets) | "
            f"best p95 without the query embedding {lo[2]['best_p95_ms']:.1f} ms ({lo[1]}) … "
            f"{ex[2]['best_p95_ms']:.1f} ms ({ex[1]}, {ex[0]}); with it at most "
            f"{inc[2]['best_p95_with_embedding_ms']:.1f} ms ({inc[1]}, {inc[0]}) |")


def _embedding(d: dict) -> str | None:
    if "ratio" not in d:
        return None
    calls = d.get("warm_model_calls") or []
    b = d.get("backends") or {}
    best = (b.get("variants") or {}).get(b.get("default") or "")
    onnx = (f"default backend {b.get('default_backend', 'onnx')}: {best['speedup']:.2f}× the texts/s of "
            f"sentence-transformers on torch float32, min cosine {best['min_cosine']:.6f}; " if best else "")
    return (f"| embedding ({d.get('texts')} texts) | {onnx}evalkit's cached `Embedder` / plain `model.encode` "
            f"wall-time ratio {d['ratio']:.3f}; a warm cache makes {max(calls) if calls else '?'} model calls |")


def _index(d: dict) -> str | None:
    build = d.get("build (this process)")
    again = d.get("reopen #1 (new process)")
    if not build or not again:
        return None
    total = lambda x: x["units_and_vectors_s"] + x["chroma_s"] + x["bm25s_s"]  # noqa: E731
    work = "no re-embedding or re-indexing" if d.get("reopen_does_no_work") else "REBUILT something"
    return (f"| shared index, {label(suite('perf.index')[0])} | build {total(build):.1f} s, reopen "
            f"{total(again):.2f} s in a new process ({work}) |")


def _exactness(d: dict) -> str | None:
    r = {n: v["shared"]["r100"] for n, v in d.items() if isinstance(v, dict) and "shared" in v}
    if not r:
        return None
    return ("| HNSW (the default `ef_search`) vs exact search | recall@100 " +
            ", ".join(f"{n} {v:.3f}" for n, v in r.items()) + " |")


def _scale(d: dict) -> str | None:
    sizes = d.get("sizes") or []
    grow = d.get("growth") or []
    line = None
    if grow:
        sl = " / ".join(f"{g['docs']:,}" for g in grow)
        per = "; ".join(f"{name} " + " / ".join(f"{g[name + '_cpu_ms']:.1f}" for g in grow)
                        for name in ("bm25", "dense", "hybrid-rrf") if all(name + "_cpu_ms" in g for g in grow))
        line = (f"| scale (synthetic dated store, strict as-of, {sl} notes; generated vectors) | CPU ms per query: "
                f"{per}; BM25 / bm25s alone ×" + " / ×".join(f"{g['bm25_vs_bm25s']:.1f}" for g in grow) +
                f"; peak RSS {grow[-1]['peak_rss_mb'] / 1024:.1f} GB |")
    if not sizes:
        return line
    sl = " / ".join(f"{s['docs']:,}" for s in sizes)
    col = lambda key, fmt: " / ".join(fmt.format(s[key]) for s in sizes if key in s)  # noqa: E731
    return (f"| scale (generated vectors, {sl} documents) | Chroma build {col('chroma_s', '{:.1f}')} s; vector arm p50 "
            f"{col('vector_arm_chroma_ms', '{:.1f}')} ms; hybrid-rrf end to end {col('preset:hybrid-rrf', '{:.1f}')} ms |"
            + (f"\n{line}" if line else ""))


def render(results: dict) -> str:
    m = results.get("machine") or {}
    machine = f"{m.get('cpu', 'this machine')}, {m.get('cores', '?')} cores, {m.get('ram_gb', '?')} GB RAM"
    rows = [f(_data(results, n)) for n, f in ((1, _sweep), (2, _latency), (3, _embedding), (4, _index),
                                                (5, _exactness), (6, _scale)) if _data(results, n)]
    rows = [r for r in rows if r]
    if not rows:
        return "_No section of this `evalkit perf` run produced numbers._"
    return "\n".join([f"Measured by `evalkit perf` ({results.get('mode', 'full')}) on {machine}.", "",
                      "| what | figure |", "|---|---|", *rows])
