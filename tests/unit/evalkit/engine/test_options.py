"""evalkit.engine.options.RunOptions: one frozen object of a run's options, each field documented."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

from evalkit.engine.options import RunOptions
from evalkit.workflows import run as run_flow
from retrievers.index.shared import IndexSettings


def test_frozen_and_normalised():
    o = RunOptions(settings=IndexSettings(), load_opts=None, run_files=None, systems=None)
    assert (o.load_opts, o.run_files, o.systems) == ({}, {}, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.limit = 3  # type: ignore[misc]
    assert dataclasses.replace(o, limit=3).limit == 3 and o.limit is None


def test_every_field_has_a_docstring():
    src = inspect.getsource(RunOptions)
    for f in dataclasses.fields(RunOptions):
        after = src.split(f"\n    {f.name}:", 1)[1].split("\n", 2)[1].strip()
        assert after.startswith('"""'), f.name


def test_the_run_workflow_takes_the_object_not_a_parameter_list():
    params = inspect.signature(run_flow.run).parameters
    assert "options" in params
    assert not {f.name for f in dataclasses.fields(RunOptions)} & set(params)
