"""per_query.csv keeps every per-query value whole: a float written and read back is the same float (issue 41)."""
from __future__ import annotations

import json
import math

from evalkit.runfolder.read import coarser, per_query_decimals
from evalkit.runfolder.view import RunData
from evalkit.runfolder.write import RunWriter, exact_text, value_text

VALUES = [0.1 + 0.2, 1 / 3, 0.6131471927654584, 0.6309297535714575, 1e-17, 5e-324, 1.0, 0.0, 2 / 3 - 1e-16]


def test_per_query_values_round_trip_and_the_folder_says_so(tmp_path):
    w = RunWriter(tmp_path / "run")
    for i, v in enumerate(VALUES + [math.nan]):
        w.per_query.append({"dataset": "d", "retriever": "r", "query_id": f"q{i}", "category": "", "metric": "m",
                            "value": v})
    w.add_metric("d", "r", "m", sum(VALUES) / len(VALUES))
    folder = w.write()
    back = RunData.from_folder(folder)
    got = back.per_query("d", "r", "m")
    assert [got[f"q{i}"] for i in range(len(VALUES))] == VALUES  # bit for bit
    assert math.isnan(got[f"q{len(VALUES)}"])
    assert back.per_query_decimals is None and RunData.from_writer(w).per_query_decimals is None
    assert json.loads((folder / "manifest.json").read_text())["per_query_decimals"] is None
    # the means stay the metrics files' 6 decimals; a per-query value is its shortest round-trip text
    assert value_text(1 / 3) == "0.333333" and exact_text(1 / 3) == "0.3333333333333333"
    assert "0.30000000000000004" in (folder / "per_query.csv").read_text()


def test_a_folder_from_before_is_read_as_6_decimals():
    assert per_query_decimals({"schema_version": 1}) == 6
    assert per_query_decimals({"schema_version": 1, "per_query_decimals": None}) is None
    assert coarser(None, None) is None and coarser(None, 6) == 6 and coarser(4, 6) == 4
