"""A real `chroma run` server on 127.0.0.1 as the vector backend (``--backend chroma-http``): the same metrics as
embedded Chroma, byte for byte."""
import json

import pytest

from evalkit.cli import main
from tests.helpers import ChromaServer


@pytest.mark.server
def test_chroma_server_mode_gives_the_same_metrics(tiny, cache, tmp_path):
    args = ["run", "--dataset", str(tiny), "--retrievers", "dense,hybrid-rrf"]
    assert main(args + ["--out", str(tmp_path / "embedded")]) == 0
    with ChromaServer(tmp_path / "server-data") as srv:
        assert main(args + ["--backend", "chroma-http", "--chroma-url", srv.url, "--out", str(tmp_path / "http")]) == 0
    a = (tmp_path / "embedded" / "metrics.json").read_text()
    b = (tmp_path / "http" / "metrics.json").read_text()
    assert a == b
    man = json.loads((tmp_path / "http" / "manifest.json").read_text())
    assert man["index_settings"]["backend"] == "chroma-http"
