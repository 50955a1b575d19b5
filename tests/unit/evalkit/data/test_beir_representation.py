"""A plain BEIR folder is embedded by the published MTEB/BEIR protocol by default (issue 22): title + text, truncated
at the model's max word pieces, one vector per document — checked against an independent sentence-transformers
computation on a small folder with long documents; MaxP is the explicit ``--representation maxp``; the index
manifest and the run header say which representation was used and why; an evalkit-exported folder keeps the
representation its loader declared."""
from __future__ import annotations

import json

import numpy as np
import pytest

from evalkit.data.registry import load_dataset
from retrievers.embed.model import Embedder, model_path
from retrievers.index.shared import IndexSettings, SharedIndex, describe_representation

FILLER = ("The committee reviewed the quarterly figures, the staffing plan and the facilities budget in detail "
          "before moving on to other business. ")


def write_folder(root, sidecar: dict | None = None):
    root.mkdir(parents=True)
    docs = [
        {"_id": "d1", "title": "Heat pump", "text": FILLER * 30 + "\nThe heat pump defrost cycle runs every 40 min."},
        {"_id": "d2", "title": "Garden", "text": "Tomatoes need six hours of sun. " + FILLER * 25},
        {"_id": "d3", "title": "", "text": "A short note about the router firmware update on Tuesday."},
        {"_id": "d4", "title": "Recipes", "text": FILLER * 3 + "\nLasagne: ricotta layers, bake 45 minutes."},
    ]
    with open(root / "corpus.jsonl", "w") as fh:
        fh.writelines(json.dumps(d) + "\n" for d in docs)
    with open(root / "queries.jsonl", "w") as fh:
        fh.write(json.dumps({"_id": "q1", "text": "how often does the heat pump defrost?"}) + "\n")
        fh.write(json.dumps({"_id": "q2", "text": "how much sun do tomatoes need"}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    if sidecar is not None:
        (root / "evalkit.json").write_text(json.dumps(sidecar))
    return root


@pytest.mark.slow  # > 5 s (loads the torch model and embeds three ways): left out of make test-unit, run by make test
def test_beir_folder_default_is_the_mteb_truncation_protocol(tmp_path):
    folder = write_folder(tmp_path / "beir")
    ds = load_dataset(str(folder))
    cache = tmp_path / "cache"
    emb = Embedder(cache_dir=cache, backend="torch", progress=False)
    default = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="exact"), cache_dir=cache)
    trunc = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="exact", representation="truncate"),
                        cache_dir=cache)
    maxp = SharedIndex(ds, embedder=emb, settings=IndexSettings(backend="exact", representation="maxp"),
                       cache_dir=cache)
    assert default.representation == "truncate" and maxp.representation == "maxp"
    assert len(default.unit_doc) == 4 and len(maxp.unit_doc) > 4  # the long documents really are long
    assert np.array_equal(default.unit_emb, trunc.unit_emb)
    # independent computation: sentence-transformers on "title text", max_seq_length 256, normalised
    from sentence_transformers import SentenceTransformer  # here, not at the top: its import costs every
    # test worker ~10 s at collection

    st = SentenceTransformer(model_path(), device="cpu")
    st.max_seq_length = 256
    texts = [f"{d.title} {d.text}" if d.title else d.text for d in ds.documents]
    want = st.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=1)
    assert np.allclose(default.corpus.embeddings, want, atol=1e-5)
    assert not np.allclose(maxp.corpus.embeddings[0], want[0], atol=1e-3)  # MaxP is a different representation
    m = default.manifest()
    assert m["representation"] == "truncate" and "MTEB" in m["representation_source"]
    assert m["embedding"]["backend"] == "torch" and m["embedding"]["max_length"] == 256
    line = describe_representation(m)
    assert line.startswith("representation truncate (dataset default: a plain BEIR folder: the MTEB/BEIR")
    assert maxp.manifest()["representation_source"] == "--representation"


def test_exported_folder_keeps_its_loaders_representation(tmp_path):
    plain_export = load_dataset(str(write_folder(tmp_path / "a", sidecar={"name": "x", "unit": "chunk"})))
    assert "representation" not in plain_export.info  # memory-style export: the index default (MaxP)
    declared = load_dataset(str(write_folder(tmp_path / "b", sidecar={"name": "y", "info": {
        "representation": "maxp-user"}})))
    assert declared.info["representation"] == "maxp-user"
