"""A verified cache file streamed to disk holds exactly what wrapping the whole pickle in memory would (magic,
sha256, length, payload), reads back equal, and a torn one is rejected with its one stderr line."""
from __future__ import annotations

import pickle

import numpy as np

from retrievers import cachefile


def test_streamed_entry_is_the_wrapped_pickle_and_reads_back(tmp_path, capsys):
    obj = {"big": np.arange(200_000, dtype=np.int64), "strided": np.arange(20)[::3], "text": "é" * 70_000,
           "nested": [{"k": i} for i in range(100)]}
    path = tmp_path / "bm25" / "entry.ekc"
    cachefile.write(path, obj)
    raw = path.read_bytes()
    assert raw == cachefile.wrap(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    back = cachefile.read(path)
    assert back.keys() == obj.keys() and back["text"] == obj["text"] and back["nested"] == obj["nested"]
    assert np.array_equal(back["big"], obj["big"]) and np.array_equal(back["strided"], obj["strided"])
    assert cachefile.unwrap(raw) == pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    path.write_bytes(raw[:-1])
    assert cachefile.read(path) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"evalkit: cache: {path} is corrupt (truncated:"), err
    assert not list(path.parent.glob("*.tmp"))  # no temporary file left behind
