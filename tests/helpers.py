"""Small datasets written by the tests themselves (BEIR layout), and a real `chroma run` server."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

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
