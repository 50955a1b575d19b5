"""Section 3 — corpus embedding throughput: ``Embedder.encode`` (cold cache) vs plain sentence-transformers.

Both sides encode the same unique texts with the same model object, batch size, ``max_seq_length`` (256) and
normalisation, in the same process and thread count. Trials alternate (plain, evalkit, plain, evalkit, …) so a
change in machine load hits both sides alike; each evalkit trial gets a fresh temporary cache directory (cold).
Each trial is a back-to-back pair (which side goes first alternates), so both sides of a pair see about the same
machine load; the verdict ("within 10 %") uses the median of the paired wall-time ratios, printed with the
paired CPU-time ratios and the best-trial ratio (a single lucky trial moves the best-of figure on a loaded
machine). Then the same texts go through a warm cache (the same Embedder, and a new Embedder on
the same cache folder, i.e. the next run): the model-call counter must not move.
"""
from __future__ import annotations

import numpy as np

from evalkit.data.registry import DEFAULT, load_dataset, locate
from evalkit.perf.common import Section, Table, loadavg, progress, temp_dir, timed
from retrievers.embed import Embedder, load_model, model_path

TOLERANCE = 0.10


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


def run(section: Section, n_texts: int, trials: int, datasets: list[str], batch_size: int = 64) -> dict:
    import torch  # lazy: startup

    texts, src = corpus_texts(n_texts, datasets)
    progress(f"embedding: {len(texts)} {src} texts, {trials} trials per side")
    model = load_model(model_path(), 256)
    model.encode(texts[:8], batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)  # warm-up
    tok = model.tokenizer
    n_tok = [min(256, len(tok(t, add_special_tokens=True)["input_ids"])) for t in texts]
    plain_t, kit_t, plain_c, kit_c, ratios, cpu_ratios = [], [], [], [], [], []
    counters = {}
    with temp_dir("evalkit-perf-emb-") as root:
        for i in range(trials):
            cache = root / f"trial{i}"
            emb = Embedder(cache_dir=cache, batch_size=batch_size, max_seq_length=256, progress=False)
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
                emb2 = Embedder(cache_dir=cache, batch_size=batch_size, max_seq_length=256, progress=False)
                warm2 = timed(lambda: emb2.encode(texts), repeats=1)
                counters["warm_new"] = (emb2.model_calls, emb2.texts_embedded, warm2.wall[0])
                same = bool(np.array_equal(warm2.result, tk.result))
    n = len(texts)
    bp, bk = min(plain_t), min(kit_t)
    ratio = float(np.median(ratios))
    t = section.table(Table(f"cold embedding of {n} {src} texts (mean {np.mean(n_tok):.0f} tokens, "
                            f"batch {batch_size}, max_seq_length 256, normalised, torch threads "
                            f"{torch.get_num_threads()}); {trials} back-to-back pairs, order alternating",
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
    return {"texts": n, "plain_best_s": bp, "evalkit_best_s": bk, "ratio": ratio, "within_10pct": ok,
            "warm_model_calls": [counters["warm_same"][0], counters["warm_new"][0]]}
