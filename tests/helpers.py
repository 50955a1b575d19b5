"""Small datasets written by the tests themselves (BEIR layout), and a real `chroma run` server."""
from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # files in the real formats the tests read

TOPICS = {
    "net": ["Configured the Omada router and moved IoT devices to VLAN 10.",
            "AdGuard DNS runs on 192.168.10.2 and blocks trackers for the whole house.",
            "The Wi-Fi access point in the garage keeps dropping clients at night."],
    "db": ["SQLITE_BUSY errors appeared when two workers wrote to the cache database.",
           "We migrated the billing service from SQLite to Postgres 16 in April.",
           "Nightly Postgres backups run at 2am UTC and are copied to the NAS."],
    "build": ["NETSDK1005 means the target framework is missing from the project assets file.",
              "dotnet build fails on the CI runner until the SDK 8.0.204 is installed.",
              "The deploy pipeline uses GitHub Actions with a blue green strategy."],
    "food": ["Dinner plans: lasagna on Friday, tacos on Saturday.",
             "The bakery on Main Street sells sourdough on weekends only.",
             "Grandma's soup recipe needs leeks, potatoes and a bay leaf."],
}
QUERIES = [("q1", "which VLAN are the IoT devices on", "g1", {"net-0": 2, "net-1": 1}),
           ("q2", "database locked errors from concurrent writers", "g1", {"db-0": 2}),
           ("q3", "what does NETSDK1005 mean", "g2", {"build-0": 2, "build-1": 1}),
           ("q4", "when do the postgres backups run", "g1", {"db-2": 2}),
           ("q5", "where to buy sourdough bread", "g2", {"food-1": 2}),
           ("q6", "how is the deployment done", "g2", {"build-2": 2})]


def write_tiny_beir(root: Path, groups: bool = True) -> Path:
    """A 12-document, 6-query BEIR folder in two groups (net+db = g1, build+food = g2)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for t, texts in TOPICS.items():
            for i, text in enumerate(texts):
                meta = {"group": ("g1" if t in ("net", "db") else "g2") if groups else None,
                        "timestamp": f"2026-0{i + 1}-1{i}T00:00:00Z", "path": f"memory/2026-0{i + 1}-1{i}.md"}
                fh.write(json.dumps({"_id": f"{t}-{i}", "title": "", "text": text, "metadata": meta}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for qid, text, g, _ in QUERIES:
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": {"group": g if groups else None,
                                                                        "as_of": "2026-06-01T00:00:00Z",
                                                                        "category": "tiny"}}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    with open(root / "qrels" / "test.tsv", "w") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, _, _, rel in QUERIES:
            for d, g in rel.items():
                fh.write(f"{qid}\t{d}\t{g}\n")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaServer:
    """A real `chroma run` server on 127.0.0.1 (started and stopped by the test)."""

    def __init__(self, path: Path):
        self.path = path
        self.port = free_port()
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
        self.proc = subprocess.Popen([exe, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port",
                                      str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import urllib.request
        # 180 s: with the suite on two xdist workers beside other jobs a loaded 2-core machine was seen taking
        # over 60 s to bring `chroma run` up; a healthy start returns at the first heartbeat all the same.
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1).read()
                return self
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None:
                    raise RuntimeError("chroma run exited early")
                time.sleep(0.2)
        self.__exit__()  # `with` never calls __exit__ when __enter__ raises: stop the server here, not leak it
        raise RuntimeError("chroma server did not start within 180 s")

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def tiny_bert(root: Path) -> Path:
    """A small randomly initialised BERT (2 layers of width 64, seed 0) with the shipped model's tokenizer, saved as
    a transformers folder under ``root``: the base of a user's own sentence-transformers model in the tests, at a
    fraction of the cost of the shipped model."""
    import torch  # lazy: optional-dep
    from transformers import BertConfig, BertModel  # lazy: optional-dep

    from retrievers.embed.model import model_path  # lazy: startup
    base = root / "base"
    base.mkdir()
    shipped = Path(model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(shipped / name, base / name)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=512)).save_pretrained(base)
    return base


def random_runs(seed, n_q=6, n_docs=40, quantise=None):
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(n_docs)]
    queries, runs = [], {"vec": {}, "bm25": {}}
    for qi in range(n_q):
        qid = f"q{qi}"
        arms = {}
        for arm, lo, hi in (("vec", -0.2, 0.95), ("bm25", 0.5, 14.0)):
            hits = rng.sample(docs, rng.randint(3, 18))
            scores = [rng.uniform(lo, hi) for _ in hits]
            if quantise:
                scores = [round(s * quantise) / quantise for s in scores]
            pairs = sorted(zip(hits, scores), key=lambda p: -p[1])
            arms[arm] = [{"id": d, "score": s} for d, s in pairs]
            runs[arm][qid] = {d: s for d, s in pairs}
        queries.append({"id": qid, "query": f"query {qi}", "arms": arms})
    obj = {"documents": [{"id": d, "text": f"text {d}"} for d in docs], "queries": queries}
    return obj, runs


# ---- random inputs of the budget packer ------------------------------------------------------------------------

PIECES = ["alpha", "Beta", "  ", "\n", "\n\n", "\t", ".", "...", ",", "!", "?", "'s", "'ll", "don't", "&", "<", ">",
          '"', "\\", "12345", "3.14", "x_y", "naïve", "café", "東京", "😀", "👍🏽", "\u00a0", "-->", "</memory>",
          "{", "}", "[", "]", ":", ";", "—", "ü", "ß", "  indented", "end.", " ", "0", "```", "#", "*"]


def random_text(rng: random.Random) -> str:
    """Text made of pieces that stress a BPE tokenizer and JavaScript string rules (emoji, NBSP, markup)."""
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))


def random_budget_candidates(rng: random.Random, n_docs=12, n_q=6):
    """A candidate set of random documents (paths, line ranges, sources) and one vector arm per query."""
    from retrievers.candidates.files import candidates_from_json
    docs = []
    for i in range(n_docs):
        d = {"id": f"d{i}", "text": random_text(rng)}
        if rng.random() < 0.8:
            d["path"] = rng.choice(["MEMORY.md", f"memory/topics/t{i}.md", f"memory/2026-02-{10 + i % 18}.md",
                                    f"notes/n{i}.md", f"memory/a&b<{i}>.md"])
        if rng.random() < 0.6:
            d["start_line"], d["end_line"] = rng.randint(1, 50), rng.randint(50, 99)
        if rng.random() < 0.2:
            d["source"] = "sessions"
        docs.append(d)
    queries = []
    for qi in range(n_q):
        ids = rng.sample([d["id"] for d in docs], rng.randint(0, n_docs))
        queries.append({"id": str(qi), "query": "q",
                        "arms": {"vec": [{"id": i, "score": round(rng.uniform(-0.2, 1.2), rng.randint(1, 8))}
                                         for i in ids]}})
    return candidates_from_json({"documents": docs, "queries": queries})


def pack(cs, ctx=None, **params):
    """``budget.pack`` with ``params`` after the vector arm, run on ``cs``."""
    from retrievers.pipeline import build_pipeline
    st = build_pipeline({"name": "t", "stages": [{"type": "fuse.single", "arm": "vec"},
                                                 dict({"type": "budget.pack"}, **params)]}).run(cs, ctx)
    return st


# ---- a real run for the report tests -----------------------------------------------------------------------------

REPORT_PRESETS = "bm25,openclaw_core_2026_2_26,openclaw_core_2026_2_26_fixed_bm25_score"


def report_run(out: Path) -> Path:
    """`evalkit run` of three presets on memory-workspace (exact search) into ``out``: a real report to read."""
    from evalkit.cli import main
    rc = main(["run", "--dataset", "memory-workspace", "--retrievers", REPORT_PRESETS, "--backend", "exact",
               "--out", str(out)])
    assert rc == 0
    return out
