"""The learned guard's training sentences are data (evalkit/data/poison/defence_examples.jsonl), read by a small
reader: the texts, their kinds and their order are exactly those of the string literals they replaced."""
from __future__ import annotations

import hashlib
import json

import pytest

from evalkit.data.poison.defence_examples import EXAMPLES_FILE, ORDINARY, PAYLOADS, read_examples
from retrievers.errors import DataError

#: sha256 of json.dumps({"payloads": [...], "ordinary": [...]}, ensure_ascii=False) of the Python literals the file
#: replaced (evalkit/data/poison/defence_examples.py before the move to data)
LITERALS_SHA256 = "edd7daaa046a27c65c61368f618ded221900d1b87e4e4e1d3e369d0a93c6a401"


def test_loaded_examples_equal_the_old_literals():
    got = json.dumps({"payloads": list(PAYLOADS), "ordinary": list(ORDINARY)}, ensure_ascii=False)
    assert hashlib.sha256(got.encode()).hexdigest() == LITERALS_SHA256
    assert (len(PAYLOADS), len(ORDINARY)) == (205, 194)
    assert all(t.format(topic="x") for t in PAYLOADS + ORDINARY)  # every text is a valid format string


def test_the_file_is_one_object_a_line_in_kind_order():
    rows = [json.loads(line) for line in EXAMPLES_FILE.read_text(encoding="utf-8").splitlines()]
    assert [r["kind"] for r in rows] == ["payload"] * 205 + ["ordinary"] * 194
    assert all(set(r) == {"kind", "text"} for r in rows)


@pytest.mark.parametrize("line, why", [('{"kind": "payload", "text": "a"', "malformed JSON"),
                                       ('{"kind": "payloads", "text": "a"}', "expected"),
                                       ('{"kind": "ordinary", "text": 3}', "expected")])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, why):
    f = tmp_path / "examples.jsonl"
    f.write_text('{"kind": "payload", "text": "ok {topic}"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_examples(f)
    msg = str(exc.value)
    assert msg.startswith(f"{f}:2: ") and why in msg and "\n" not in msg
