"""What a live system's answers say: a malformed search answer names the keys it did have, an ingest answer says which
notes the system kept (a declared success path, else a boolean success / ok key, else the status), and a Python
system's identity follows its code (the files of its module's package)."""
from __future__ import annotations

import sys

import pytest

from retrievers.errors import ConfigError
from retrievers.systems.mapping import AnswerMap, IngestAnswerMap
from retrievers.systems.protocol import SystemFault
from retrievers.systems.python import code_files, code_hash


def test_a_wrapped_answer_names_the_keys_it_found():
    m = AnswerMap(results="results", id="metadata.evk_id", text="memory")
    with pytest.raises(SystemFault) as e:  # mcp-memory-service wrapped its answer in {"result": …}
        m.read({"result": {"results": []}}, "system s")
    assert e.value.kind == "malformed" and "has no 'results' (its keys: result)" in str(e.value)
    with pytest.raises(SystemFault, match=r"no 'data.hits' \(at 'data': its keys: items, total\)"):
        AnswerMap(results="data.hits", id="id").read({"data": {"items": [], "total": 0}}, "system s")
    with pytest.raises(SystemFault, match=r"hit 1 has neither 'metadata.evk_id' nor 'memory' \(its keys: content, "
                                          r"id\)"):
        m.read({"results": [{"content": "x", "id": 3}]}, "system s")


@pytest.mark.parametrize("body, declared, refused", [
    ({"success": False, "message": "Duplicate content detected"}, None,
     {"a": "Duplicate content detected", "b": "Duplicate content detected"}),
    ({"ok": True}, None, {}),
    ({"ids": ["m1", "m2"]}, None, {}),       # no success key: the 2xx status said it
    (None, None, {}),                        # an empty 2xx body
    ({"stored": [True, False], "error": "too long"}, "stored", {"b": "too long"}),
    ({"result": {"success": False}}, "result.success", {"a": "refused", "b": "refused"}),
])
def test_ingest_answers(body, declared, refused):
    assert IngestAnswerMap(success=declared).refused(body, ["a", "b"], "system s") == refused


def test_ingest_answer_not_the_declared_shape():
    with pytest.raises(SystemFault, match=r"no 'stored' \(its keys: ids\)"):
        IngestAnswerMap(success="stored").refused({"ids": [1]}, ["a"], "system s")
    with pytest.raises(SystemFault, match="neither a boolean nor a list of 2 booleans"):
        IngestAnswerMap(success="stored").refused({"stored": [True]}, ["a", "b"], "system s")
    with pytest.raises(ConfigError, match="unknown key"):
        IngestAnswerMap.from_table({"sucess": "x"}, "f.toml [http.ingest.answer]")


def test_code_hash_follows_the_package_files(tmp_path, monkeypatch):
    pkg = tmp_path / "mysys_code"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "keyword.py").write_text("def search():\n    return []\n")
    (pkg / "driver.mjs").write_text("// a helper the module runs\n")
    (tmp_path / "elsewhere.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mysys_code.keyword  # noqa: F401
    try:
        assert list(code_files(["mysys_code.keyword"])) == ["mysys_code/__init__.py", "mysys_code/driver.mjs",
                                                            "mysys_code/keyword.py"]
        h0 = code_hash(["mysys_code.keyword"])
        (tmp_path / "elsewhere.py").write_text("x = 2\n")  # outside the package: not its code
        assert code_hash(["mysys_code.keyword"]) == h0
        (pkg / "driver.mjs").write_text("// changed\n")   # a file beside the module: its code
        h1 = code_hash(["mysys_code.keyword"])
        (pkg / "keyword.py").write_text("def search():\n    return [1]\n")
        h2 = code_hash(["mysys_code.keyword"])
        assert len({h0, h1, h2}) == 3
        assert code_hash(["no.such.module"]) is None
    finally:
        for m in [m for m in sys.modules if m.startswith("mysys_code")]:
            del sys.modules[m]
