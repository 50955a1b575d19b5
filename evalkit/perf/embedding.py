"""Section 3 — corpus embedding throughput: the backends side by side, then ``Embedder.encode`` (cold cache) vs
plain sentence-transformers.

**Backends** (first table): the same texts, in the same process, through plain ``model.encode`` of
sentence-transformers on torch in float32 (the reference), the ``bf16`` encoder (:mod:`retrievers.embed.bf16`:
bfloat16 autocast, batches of one token length; the default without openvino on a CPU with native bfloat16), the
OpenVINO encoder (:mod:`retrievers.embed.openvino`: the same batching, bfloat16 or float32 as the CPU allows;
evalkit's default when openvino is installed), the same with its matrix products quantised to int8 by NNCF
(``openvino-int8``, opt-in) and the ONNX Runtime encoder (:mod:`retrievers.embed.onnx`, the ``O2``-fused
export, opt-in) — the last two in the full run only: ``--quick`` skips them because a cold cache would spend a
minute or more exporting or quantising — each at batch size 64. One round runs every variant once over all the
texts, the order rotating per round so a change in machine load hits every variant alike; a variant's speed-up is the
median over rounds of (torch seconds / its seconds) in the same round. Each row gives word pieces per second
(wall) and per CPU second (process CPU time, all threads: the load-robust figure on a shared machine); a note
compares int8 with the default per CPU second in the same rounds, and with torch (target >= 4x, issue 45). Vectors
are compared to torch's: the minimum cosine over the texts (target >= 0.9999 for the float precisions).

**Cache overhead** (second table): both sides encode the same unique texts with the same model object (the default
backend), batch size, ``max_seq_length`` (256) and normalisation. Trials alternate (plain, evalkit, plain, evalkit,
…) so a change in machine load hits both sides alike; each evalkit trial gets a fresh temporary cache directory
(cold). The verdict ("within 10 %") uses the median of the paired wall-time ratios, printed with the paired
CPU-time ratios and the best-trial ratio. Then the same texts go through a warm cache (the same Embedder, and a new
Embedder on the same cache folder, i.e. the next run): the model-call counter must not move.

**Start-up** (third table): a fresh Python process imports the embedding stack (numpy, openvino, torch,
transformers), then embeds one text it has never seen; "first text" is the time from the end of its imports to that
text's vector, "start to first text" all of it. The last column says whether sentence-transformers was imported: a
plain model folder such as the shipped one needs it only to convert the model (the cold process;
:mod:`retrievers.embed.folder_model`). Cold: an empty
``$EVALKIT_CACHE`` (the model is converted and compiled, then kept); warm: the next processes on that cache (the
compiled model imported from it, :func:`retrievers.embed.openvino.compiled_model`). Target: warm first text ≤ 2 s.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

from evalkit.data.registry import DEFAULT, load_dataset, locate
from evalkit.perf.common import Section, Table, loadavg, progress, temp_dir, timed
from retrievers.embed.model import (ONNX_LEVEL, Embedder, default_backend, load_model, model_path, onnx_available,
                              openvino_available)
from retrievers.embed.bf16 import cpu_has_bf16
from retrievers.embed.openvino import precision

TOLERANCE = 0.10
TARGET_SPEEDUP = 1.5
TARGET_COSINE = 0.9999
TARGET_INT8_SPEEDUP = 4.0  # issue 45 item 2: the fastest precision vs sentence-transformers torch float32
TARGET_FIRST_TEXT_S = 2.0
STARTUP_PROBE = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import numpy, openvino, torch, transformers  # noqa: F401 - the imports every embedding process needs, timed apart
from retrievers.embed.model import Embedder
t1, c1 = time.perf_counter(), time.process_time()
Embedder(backend=sys.argv[1], cache_dir=Path(sys.argv[2]), progress=False).encode([sys.argv[3]])
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"imports": t1 - t0, "first_text": t2 - t1, "first_text_cpu": c2 - c1, "cpu": c2,
                  "total": t2 - t0, "st": "sentence_transformers" in sys.modules}))
"""


def corpus_texts(n: int, datasets: list[str]) -> tuple[list[str], str]:
    """``n`` unique corpus texts from the first available dataset (the registry's default last), e.g. abstracts: a
    realistic 256-token load."""
    for name in datasets + [DEFAULT]:
        if locate(name) is None:
            continue
        ds = load_dataset(name)
        seen, out = set(), []
        for d in ds.documents:
            t = d.full_text
            if t not in seen:
                seen.add(t)
                out.append(t)
            if len(out) >= n:
                break
        return out, name
    raise RuntimeError("no dataset available for the embedding benchmark")


LABELS = {"torch": "sentence-transformers, torch float32 (reference)",
          "bf16": "torch bfloat16 autocast, batches of one token length",
          "onnx": f"ONNX Runtime, {ONNX_LEVEL} transformer fusions (opt-in)",
          "openvino": f"OpenVINO {precision()}, batches of one token length",
          "openvino-int8": f"OpenVINO int8 (NNCF) + {precision()}, batches of one token length (opt-in)"}


def backend_variants(batch_size: int, all_variants: bool = True) -> list[tuple[str, object, int, str]]:
    """(label, model, batch size, backend) of every variant the backends table compares; torch first (the
    reference), the default backend's label marked "(evalkit default)"; ``all_variants=False`` (--quick): torch,
    bf16 and openvino only (no ONNX export or int8 quantisation on a cold cache)."""
    names = ["torch"] + (["bf16"] if cpu_has_bf16() or default_backend() == "bf16" else [])
    if openvino_available():
        names.append("openvino")
        if all_variants and importlib.util.find_spec("nncf") is not None:
            names.append("openvino-int8")
    if all_variants and onnx_available():
        names.append("onnx")
    default = default_backend()
    return [(LABELS[b] + (" (evalkit default)" if b == default else ""), load_model(model_path(), 256, b),
             batch_size, b) for b in names]


def compare_backends(section: Section, texts: list[str], src: str, rounds: int, batch_size: int,
                     n_tok: list[int], all_variants: bool = True) -> dict:
    variants = backend_variants(batch_size, all_variants)
    progress(f"embedding: {len(variants)} variants x {rounds} rounds over {len(texts)} {src} texts")
    for _, m, b, _ in variants:  # warm-up (first-call allocations, ORT session arena)
        m.encode(texts[:8], batch_size=b, normalize_embeddings=True, show_progress_bar=False)
    secs = {i: [] for i in range(len(variants))}
    cpus = {i: [] for i in range(len(variants))}
    vecs = {}
    for r in range(rounds):
        order = list(range(len(variants)))
        order = order[r % len(order):] + order[:r % len(order)]
        for i in order:
            _, m, b, _ = variants[i]
            c0, t0 = time.process_time(), time.perf_counter()
            v = m.encode(texts, batch_size=b, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)
            secs[i].append(time.perf_counter() - t0)
            cpus[i].append(time.process_time() - c0)
            vecs.setdefault(i, np.asarray(v, dtype=np.float64))
    ref = vecs[0]
    n, pieces = len(texts), int(sum(n_tok))
    t = section.table(Table(f"backends side by side: {n} {src} texts (mean {np.mean(n_tok):.0f} tokens, "
                            f"max_seq_length 256, normalised), {rounds} rounds, order rotating per round",
                            ["encoder", "batch", "best s", "median s", "texts/s (median)", "word pieces/s (median)",
                             "speed-up vs torch", "CPU s (median)", "word pieces per CPU s", "CPU speed-up",
                             "min cosine vs torch"]))
    rows = {}
    for i, (label, _, b, _) in enumerate(variants):
        speed = float(np.median([secs[0][r] / secs[i][r] for r in range(rounds)]))
        cpu_speed = float(np.median([cpus[0][r] / max(cpus[i][r], 1e-9) for r in range(rounds)]))
        cos = float(np.min(np.sum(vecs[i] * ref, axis=1) / (np.linalg.norm(vecs[i], axis=1)
                                                             * np.linalg.norm(ref, axis=1))))
        med = float(np.median(secs[i]))
        cpu = float(np.median(cpus[i]))
        t.add(label, b, min(secs[i]), med, n / med, pieces / med, speed, cpu, pieces / max(cpu, 1e-9), cpu_speed,
              f"{cos:.7f}")
        rows[label] = {"batch": b, "seconds": secs[i], "cpu_seconds": cpus[i], "speedup": speed,
                       "cpu_speedup": cpu_speed, "min_cosine": cos, "word_pieces_per_s": pieces / med,
                       "word_pieces_per_cpu_s": pieces / max(cpu, 1e-9)}
    default = next((k for k in rows if "evalkit default" in k), None)
    if default:
        d = rows[default]
        t.notes.append("speed-up = median over rounds of torch's wall seconds / the variant's in the same round; CPU "
                       "speed-up the same on process CPU time (all threads; counts work, not waiting for a core)")
        t.notes.append(f"default backend {default_backend()}: speed-up {d['speedup']:.2f}x (target "
                       f">= {TARGET_SPEEDUP}x: {'met' if d['speedup'] >= TARGET_SPEEDUP else 'NOT met'}), min cosine "
                       f"{d['min_cosine']:.7f} (target >= {TARGET_COSINE}: "
                       f"{'met' if d['min_cosine'] >= TARGET_COSINE else 'NOT met'}); load average {loadavg()}")
    else:
        t.notes.append(f"the default backend ({default_backend()}) is not among the variants")
    by_name = {v[3]: rows[v[0]] for v in variants}
    if "openvino" in by_name and "openvino-int8" in by_name:
        q, o = by_name["openvino-int8"], by_name["openvino"]
        per_cpu = float(np.median([c / max(q8, 1e-9) for c, q8 in zip(o["cpu_seconds"], q["cpu_seconds"])]))
        t.notes.append(f"int8 vs openvino {precision()}: {per_cpu:.2f}x the word pieces per CPU second (median of "
                       f"the paired rounds), {float(np.median(o['seconds'])) / float(np.median(q['seconds'])):.2f}x "
                       f"wall; vs torch float32 {q['speedup']:.2f}x wall, {q['cpu_speedup']:.2f}x CPU (target "
                       f">= {TARGET_INT8_SPEEDUP:.0f}x: "
                       f"{'met' if q['cpu_speedup'] >= TARGET_INT8_SPEEDUP else 'NOT met'} on CPU time); min "
                       f"cosine to float32 {q['min_cosine']:.5f}")
    return {"variants": rows, "default": default, "default_backend": default_backend()}


def startup(section: Section, warm_runs: int = 2) -> dict:
    """The start-up table (module docstring): one cold process on an empty cache, then ``warm_runs`` warm ones."""
    backend = default_backend()
    rows = []
    with temp_dir("evalkit-perf-startup-") as root:
        env = dict(os.environ, EVALKIT_CACHE=str(root / "cache"), EVALKIT_PROGRESS="0")
        for i in range(1 + warm_runs):
            progress(f"embedding: start-up process {i + 1} of {1 + warm_runs} ({'cold' if i == 0 else 'warm'})")
            proc = subprocess.run([sys.executable, "-c", STARTUP_PROBE, backend, str(root / f"vectors{i}"),
                                   f"start-up probe {i}: the first text this process embeds"],
                                  env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise RuntimeError(f"start-up probe failed: {proc.stderr.strip()[-500:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    t = section.table(Table(f"start-up: a new process embeds its first text ({backend} backend, load {loadavg()})",
                            ["process", "imports s", "first text s (after imports)", "its CPU s",
                             "start to first text s", "CPU s (whole process)", "sentence-transformers"]))
    for i, r in enumerate(rows):
        t.add("cold: empty cache (convert + compile, then kept)" if i == 0 else f"warm {i}: compiled model from the "
              "cache", r["imports"], r["first_text"], r["first_text_cpu"], r["total"], r["cpu"],
              "imported" if r["st"] else "not imported")
    warm = min(r["first_text"] for r in rows[1:]) if rows[1:] else float("nan")
    t.notes.append(f"warm first text {warm:.2f} s (best of {warm_runs}; target <= {TARGET_FIRST_TEXT_S:.0f} s: "
                   f"{'met' if warm <= TARGET_FIRST_TEXT_S else 'NOT met'}; its CPU time "
                   f"{min(r['first_text_cpu'] for r in rows[1:]):.2f} s, the load-robust figure); cold / warm "
                   f"{rows[0]['first_text'] / warm:.1f}x")
    return {"backend": backend, "processes": rows, "warm_first_text_s": warm}


def run(section: Section, n_texts: int, trials: int, datasets: list[str], batch_size: int = 64,
        rounds: int = 3, all_variants: bool = True) -> dict:
    import torch  # lazy: startup

    texts, src = corpus_texts(n_texts, datasets)
    model0 = load_model(model_path(), 256, "torch")
    tok = model0.tokenizer
    n_tok = [min(256, len(tok(t, add_special_tokens=True)["input_ids"])) for t in texts]
    backends = compare_backends(section, texts, src, rounds, batch_size, n_tok, all_variants)
    backend = default_backend()
    progress(f"embedding: {len(texts)} {src} texts, {trials} trials per side ({backend} backend)")
    model = load_model(model_path(), 256, backend)
    model.encode(texts[:8], batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)  # warm-up
    plain_t, kit_t, plain_c, kit_c, ratios, cpu_ratios = [], [], [], [], [], []
    counters = {}
    with temp_dir("evalkit-perf-emb-") as root:
        for i in range(trials):
            cache = root / f"trial{i}"
            emb = Embedder(cache_dir=cache, batch_size=batch_size, max_seq_length=256, progress=False,
                           backend=backend)
            plain = lambda: model.encode(texts, batch_size=batch_size, normalize_embeddings=True,  # noqa: E731
                                         convert_to_numpy=True, show_progress_bar=False)
            if i % 2 == 0:  # alternate which side goes first, so a load drift hits both alike
                tp, tk = timed(plain, repeats=1), timed(lambda: emb.encode(texts), repeats=1)
            else:
                tk, tp = timed(lambda: emb.encode(texts), repeats=1), timed(plain, repeats=1)
            plain_t.append(tp.wall[0])
            kit_t.append(tk.wall[0])
            plain_c.append(tp.cpu[0])
            kit_c.append(tk.cpu[0])
            ratios.append(tk.wall[0] / tp.wall[0])
            cpu_ratios.append(tk.cpu[0] / max(tp.cpu[0], 1e-9))
            if i == 0:
                diff = float(np.abs(tk.result - tp.result.astype(np.float32)).max())
                counters["cold"] = (emb.model_calls, emb.texts_embedded)
                warm = timed(lambda: emb.encode(texts), repeats=1)
                counters["warm_same"] = (emb.model_calls - counters["cold"][0],
                                         emb.texts_embedded - counters["cold"][1], warm.wall[0])
                emb2 = Embedder(cache_dir=cache, batch_size=batch_size, max_seq_length=256, progress=False,
                                backend=backend)
                warm2 = timed(lambda: emb2.encode(texts), repeats=1)
                counters["warm_new"] = (emb2.model_calls, emb2.texts_embedded, warm2.wall[0])
                same = bool(np.array_equal(warm2.result, tk.result))
    n = len(texts)
    bp, bk = min(plain_t), min(kit_t)
    ratio = float(np.median(ratios))
    t = section.table(Table(f"cache overhead: cold embedding of {n} {src} texts on the {backend} backend (batch "
                            f"{batch_size}, torch threads {torch.get_num_threads()}); {trials} back-to-back pairs, "
                            "order alternating",
                            ["encoder", "best s", "median s", "texts/s (best)", "tokens/s (best)", "CPU s (median)",
                             "model calls", "load"]))
    t.add("sentence-transformers model.encode", bp, float(np.median(plain_t)), n / bp, sum(n_tok) / bp,
          float(np.median(plain_c)), "-", loadavg().split()[0])
    t.add("evalkit Embedder.encode (cold cache)", bk, float(np.median(kit_t)), n / bk, sum(n_tok) / bk,
          float(np.median(kit_c)), counters["cold"][0], loadavg().split()[0])
    ok = ratio <= 1 + TOLERANCE
    t.notes.append(f"evalkit / plain: median of the paired wall-time ratios {ratio:.3f} (pairs: "
                   f"{', '.join(f'{r:.2f}' for r in ratios)}), of the paired CPU-time ratios "
                   f"{np.median(cpu_ratios):.3f}, of the best trials {bk / bp:.3f}: "
                   f"{'within' if ok else 'NOT within'} {TOLERANCE:.0%} (verdict on the paired median); max "
                   f"|difference| of the vectors {diff:.1e}")
    w = section.table(Table("warm cache (the same texts again)",
                            ["run", "model calls", "texts embedded", "seconds", "texts/s"]))
    w.add("same Embedder, second call", counters["warm_same"][0], counters["warm_same"][1], counters["warm_same"][2],
          n / counters["warm_same"][2])
    w.add("new Embedder on the same cache folder", counters["warm_new"][0], counters["warm_new"][1],
          counters["warm_new"][2], n / counters["warm_new"][2])
    w.notes.append(f"warm vectors identical to the cold ones: {'yes' if same else 'NO'}")
    starting = startup(section)
    return {"texts": n, "backend": backend, "backends": backends, "startup": starting, "plain_best_s": bp,
            "evalkit_best_s": bk, "ratio": ratio, "within_10pct": ok,
            "warm_model_calls": [counters["warm_same"][0], counters["warm_new"][0]]}
