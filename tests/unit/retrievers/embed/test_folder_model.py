"""Which model folders are read without sentence-transformers (:func:`retrievers.embed.folder_model.plain_folder`):
the shipped one, and a copy of it only while it stays a Transformer → mean Pooling → Normalize folder with no
lower-casing or prompts of its own — each change that sentence-transformers would act on sends the folder back to it.
No model is loaded here; tests/parity/test_folder_model.py holds the vectors to sentence-transformers'."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from retrievers.embed.folder_model import plain_folder
from retrievers.embed.loading import model_path


@pytest.fixture
def copy(tmp_path) -> Path:
    src = Path(model_path())
    dst = tmp_path / "model"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    return dst


def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(changes)
    path.write_text(json.dumps(data))


def test_the_shipped_folder_and_an_unchanged_copy_are_plain(copy):
    assert plain_folder(model_path()) and plain_folder(str(copy))


@pytest.mark.parametrize("change", ["cls", "mean_and_max", "lower_case", "prompts", "default_prompt", "dense",
                                    "no_fast_tokenizer", "exclude_prompt", "tokenizer_args"])
def test_a_folder_sentence_transformers_would_treat_differently_is_not_plain(copy, change):
    pooling = copy / "1_Pooling" / "config.json"
    if change == "cls":
        _edit(pooling, pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    elif change == "mean_and_max":
        _edit(pooling, pooling_mode_max_tokens=True)
    elif change == "exclude_prompt":
        _edit(pooling, include_prompt=False)
    elif change == "lower_case":
        _edit(copy / "sentence_bert_config.json", do_lower_case=True)
    elif change == "tokenizer_args":
        _edit(copy / "sentence_bert_config.json", tokenizer_args={"do_lower_case": False})
    elif change == "prompts":
        _edit(copy / "config_sentence_transformers.json", prompts={"query": "query: "})
    elif change == "default_prompt":
        _edit(copy / "config_sentence_transformers.json", default_prompt_name="query")
    elif change == "dense":
        modules = json.loads((copy / "modules.json").read_text())
        modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        (copy / "modules.json").write_text(json.dumps(modules))
    elif change == "no_fast_tokenizer":
        (copy / "tokenizer.json").unlink()
    assert not plain_folder(str(copy))
