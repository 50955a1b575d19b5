"""bm25 vs hybrid-rrf on SciFact: the p-values `evalkit compare` reports agree with an independent computation.

The run uses a real slice of SciFact (its 300 test queries, every document they judge, and the first unjudged
documents in corpus order up to 1,000 documents; ~20 % of the corpus), so a cold cache embeds a fifth of the
corpus here. The full-corpus parity with the published numbers is `make bench` / `evalkit reference`'s job and
the CI gate runs the full SciFact.

Independent means nothing of evalkit's metric or statistics code is reused: per-query nDCG@10 is recomputed here
from the TREC run files and SciFact's own qrels file (trec_eval's definition: linear gain, log2 discount, ideal
DCG over the judged documents), the paired t-test comes from scipy.stats, and the sign-flip randomisation test
is a plain numpy loop with its own random generator and 20x the permutations evalkit uses.
"""
from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from evalkit.cli import main


def _scifact_dir() -> Path:
    root = os.environ.get("EVALKIT_DATA")
    path = Path(root) / "scifact" if root else None
    if path is None or not (path / "qrels" / "test.tsv").exists():
        pytest.skip("real SciFact not present (set EVALKIT_DATA)")
    return path


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(dict)
    with open(path, encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out[row["query-id"]][row["corpus-id"]] = int(row["score"])
    return out


def _trec(path: Path) -> dict[str, list[str]]:
    ranked: dict[str, list[tuple[int, str]]] = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            qid, _, doc, rank, _score, _tag = line.split()
            ranked[qid].append((int(rank), doc))
    return {q: [d for _, d in sorted(rows)] for q, rows in ranked.items()}


def _ndcg10(ranking: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _sign_flip_p(d: np.ndarray, n: int, seed: int) -> float:
    rng = np.random.Generator(np.random.MT19937(seed))  # not evalkit's generator or seed
    obs = abs(d.sum())
    hits, done = 0, 0
    while done < n:
        m = min(20_000, n - done)
        signs = rng.choice([-1.0, 1.0], size=(m, len(d)))
        hits += int((np.abs(signs @ d) >= obs - 1e-12).sum())
        done += m
    return (1 + hits) / (1 + n)


SLICE_DOCS = 1000


def _slice(src: Path, dst: Path, n_docs: int = SLICE_DOCS) -> Path:
    """A BEIR folder with SciFact's test queries, the documents they judge and the first other documents."""
    qrels = _qrels(src / "qrels" / "test.tsv")
    judged = {d for rel in qrels.values() for d in rel}
    docs = [json.loads(line) for line in (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    keep = [d for d in docs if d["_id"] in judged]
    keep += [d for d in docs if d["_id"] not in judged][:max(0, n_docs - len(keep))]
    queries = [line for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if line and json.loads(line)["_id"] in qrels]
    (dst / "qrels").mkdir(parents=True)
    (dst / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in keep), encoding="utf-8")
    (dst / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (dst / "qrels" / "test.tsv").write_bytes((src / "qrels" / "test.tsv").read_bytes())
    return dst


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    base = tmp_path_factory.mktemp("sig")
    data = _slice(_scifact_dir(), base / "scifact")
    run = base / "run"
    assert main(["run", "--dataset", str(data), "--retrievers", "bm25,hybrid-rrf", "--out", str(run),
                 "--representation", "truncate"]) == 0  # SciFact's protocol; shares the cache with the full corpus
    cmp_dir = base / "cmp"
    assert main(["compare", str(run), "--baseline", "bm25", "--metrics", "ndcg@10", "--out", str(cmp_dir),
                 "--formats", "json"]) == 0
    rows = json.loads((cmp_dir / "compare.json").read_text())["rows"]
    assert len(rows) == 1
    return data, run, rows[0]


def test_bm25_vs_hybrid_scifact_pvalues_match_independent_computation(comparison):
    data, run, row = comparison
    qrels = _qrels(data / "qrels" / "test.tsv")
    runs = {name: _trec(run / "runs" / data.name / f"{name}.trec") for name in ("bm25", "hybrid-rrf")}
    qids = sorted(qrels)
    a = np.array([_ndcg10(runs["bm25"].get(q, []), qrels[q]) for q in qids])
    b = np.array([_ndcg10(runs["hybrid-rrf"].get(q, []), qrels[q]) for q in qids])
    assert row["a_retriever"] == "bm25" and row["b_retriever"] == "hybrid-rrf"
    assert row["n"] == len(qids) == 300
    # the metric values themselves (evalkit via ranx vs the hand-written nDCG above)
    assert row["mean_a"] == pytest.approx(a.mean(), abs=1e-6)
    assert row["mean_b"] == pytest.approx(b.mean(), abs=1e-6)
    # paired t-test: deterministic. Saved runs keep per-query values whole (per_query.csv), so it agrees with
    # scipy on the independently computed values themselves.
    assert row["p_ttest"] == pytest.approx(sps.ttest_rel(b, a).pvalue, rel=1e-9)
    # randomisation: both are Monte Carlo estimates of the same exact p; they must agree within their errors
    n_ref = 200_000
    p_ref = _sign_flip_p(b - a, n_ref, seed=7)
    p_ek = row["p_randomization"]
    se = math.sqrt(p_ref * (1 - p_ref) / 10_000 + p_ref * (1 - p_ref) / n_ref)
    assert abs(p_ek - p_ref) <= 4 * se + 1e-4, (p_ek, p_ref, se)
    # a real difference is being tested: neither p is trivially 0 or 1 here (on the slice bm25 vs dense is not
    # significant, p ~0.9, so the pair is bm25 vs hybrid-rrf, p ~0.04)
    assert 1e-4 < p_ref < 0.5
