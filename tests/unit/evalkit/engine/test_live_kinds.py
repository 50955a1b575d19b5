"""A live-system kind is its own module (an Adapter subclass registered with ``@kind``) plus the import line in
retrievers/systems/file.py: the system file's table key, the default concurrency and the stderr log are declared on
the class, and nothing else — the file reader, the harness's driver — names a kind."""
from __future__ import annotations

from typing import Any

import pytest

from evalkit.engine.live.cache import ResponseCache
from evalkit.engine.live.retriever import run_system
from retrievers.systems.adapter import KINDS, Adapter, check_keys, kind
from retrievers.systems.file import system_from_dict
from retrievers.systems.protocol import Answer, Hit
from retrievers.types import Dataset, Document, Query


class EchoFirst(Adapter):
    """A kind that answers every query with the documents it was given, newest first."""

    default_concurrency = 2

    def __init__(self, table: dict, label: str, concurrency: int, timeout: float):
        super().__init__(label)
        self.prefix = table["prefix"]
        self.store: dict[str, list[Document]] = {}

    @classmethod
    def validate(cls, table: dict[str, Any], where: str) -> dict[str, Any]:
        check_keys(table, {"prefix"}, set(), where)
        return {"prefix": table.get("prefix", "")}

    async def ingest(self, documents, *, group):
        self.store.setdefault(group, []).extend(documents)
        return {}

    async def search(self, query, *, k, as_of, group, context):
        docs = self.store.get(group, [])[::-1][:k]
        return Answer([Hit(id=d.id, text=self.prefix + d.text) for d in docs])


@pytest.fixture
def echo_kind():
    kind("echo-first")(EchoFirst)
    yield EchoFirst
    KINDS.pop("echo-first")


def test_a_kind_declared_in_its_own_module_is_read_and_driven_with_no_other_edit(echo_kind, tmp_path):
    spec = system_from_dict({"kind": "echo-first", "echo-first": {"prefix": "> "}, "name": "echo", "k": 2}, "t")
    assert spec.limits.concurrency == 2 and isinstance(spec.open(), EchoFirst)
    docs = [Document("d1", "one", created=1.0), Document("d2", "two", created=2.0), Document("d3", "three", created=3.0)]
    ds = Dataset("tiny", docs, [Query("q1", "first", as_of=1.5), Query("q2", "later", as_of=3.5)],
                 {"q1": {"d1": 1}, "q2": {"d3": 1}})
    run = run_system(spec, ds, "strict", cache=ResponseCache(tmp_path / "r.sqlite"), log=lambda m: None)
    # strict: q1 is asked when only d1 is in; q2 after all three (newest first); texts mapped back by id
    assert [d for d, _ in run.results["q1"].ranked] == ["d1"]
    assert [d for d, _ in run.results["q2"].ranked] == ["d3", "d2"]
    assert run.results["q2"].block == "> three\n\n> two"
    assert run.info["live_asked"] == 2.0 and run.info["live_faults"] == 0.0


def test_the_shipped_kinds_keep_their_defaults():
    assert (KINDS["python"].default_concurrency, KINDS["http"].default_concurrency,
            KINDS["mcp"].default_concurrency) == (1, 4, 4)
    assert not KINDS["http"].logs_stderr
    mcp = {"search": {"tool": "s", "answer": {"results": "r", "id": "id"}}}
    assert KINDS["mcp"](dict(mcp, command=["x"]), "m", 1, 1.0).logs_stderr
    assert not KINDS["mcp"](dict(mcp, url="http://127.0.0.1:1/mcp"), "m", 1, 1.0).logs_stderr


def test_an_unknown_kind_table_is_still_one_error():
    with pytest.raises(Exception, match=r"unknown key\(s\) nope"):
        system_from_dict({"kind": "http", "http": {}, "nope": {}}, "t")
