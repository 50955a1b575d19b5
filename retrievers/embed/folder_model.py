"""A plain sentence-transformers model folder read without sentence-transformers: its tokenizer call before the
transformer and its mean pooling and normalisation after it, in torch float32 — what the ``openvino`` backend needs
once its compiled transformer is kept (:mod:`retrievers.embed.openvino`).

Why: ``import sentence_transformers`` costs ~10 s and ~500 MB in every process that embeds (it imports its trainer,
its multimodal and chat stacks and loads the transformer's weights into torch), while a process whose compiled
model is in the cache needs only the tokenizer (``transformers``' fast tokenizer, from the folder's own files) and
two torch operations. Measured on the 2-core AVX2 VM, a fresh process to its first vector with a warm cache: 8.3 s and
770 MB through sentence-transformers; the figures of this path are in docs/embedding.md.

**Same vectors, bit for bit**, for the folders it takes (:func:`plain_folder`): a ``Transformer`` → ``Pooling``
(mean of the token embeddings, nothing else) → optional ``Normalize`` pipeline, with no lower-casing of its own and no
prompts. Its :meth:`FolderModel.preprocess` makes the call sentence-transformers makes for a list of texts
(``padding=True``, ``truncation="longest_first"``, ``max_length`` = the model's, torch tensors) and
:meth:`FolderModel.pool` is the float32 branch of sentence-transformers' mean ``Pooling`` and ``Normalize``, the same
torch operations in the same order. tests/parity/test_folder_model.py holds both to sentence-transformers on
real corpora (input ids and vectors equal, not close); any other folder is loaded by sentence-transformers.

The sentence-transformers model itself is still loaded, lazily, when the transformer has to be converted (a cold
cache), and let go once it is converted: :meth:`FolderModel.load_sentence_transformer`.

Usage (it loads a tokenizer and torch, so not a doctest; the parity test runs it)::

    m = FolderModel(model_path(), 256, load_tokenizer(model_path()))
    feats = m.preprocess(["a memory note"])   # input_ids, attention_mask, token_type_ids: (1, 5) int64
"""
from __future__ import annotations

import json
from pathlib import Path

#: the module types of a plain folder, as sentence-transformers 2-5 and 6 write them in ``modules.json``
TRANSFORMER = ("sentence_transformers.models.Transformer", "sentence_transformers.base.modules.transformer.Transformer")
POOLING = ("sentence_transformers.models.Pooling", "sentence_transformers.sentence_transformer.modules.pooling.Pooling")
NORMALIZE = ("sentence_transformers.models.Normalize", "sentence_transformers.base.modules.normalize.Normalize")
#: the pooling modes a Pooling config can switch on; a plain folder has only the mean of the tokens
POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens",
                 "lasttoken")
#: the Transformer module's settings (``sentence_bert_config.json``) a plain folder may have: a text-only
#: feature-extraction transformer whose last hidden state is the token embeddings (sentence-transformers 6 writes
#: these; older versions only ``max_seq_length`` and ``do_lower_case``)
TRANSFORMER_SETTINGS = {"transformer_task": "feature-extraction",
                        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
                        "module_output_name": "token_embeddings"}


def _json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def plain_folder(path: str) -> bool:
    """True when the sentence-transformers folder ``path`` is one :class:`FolderModel` reproduces exactly: modules
    ``Transformer`` (at the folder's root; a text feature extractor) → ``Pooling`` (the mean of the tokens, alone,
    prompt tokens included) → optionally ``Normalize``, as sentence-transformers 2-6 write them; no ``do_lower_case``
    of sentence-transformers' own; no prompt that prepends anything; a ``tokenizer.json`` (a fast tokenizer).

    >>> plain_folder("/nonexistent")
    False
    """
    folder = Path(path)
    modules = _json(folder / "modules.json")
    if not isinstance(modules, list) or not (folder / "tokenizer.json").is_file():
        return False
    types = [m.get("type") for m in modules if isinstance(m, dict)]
    if (len(types) != len(modules) or len(types) not in (2, 3) or types[0] not in TRANSFORMER
            or types[1] not in POOLING or (len(types) == 3 and types[2] not in NORMALIZE)
            or modules[0].get("path", "") != ""):
        return False
    pooling = _json(folder / modules[1].get("path", "") / "config.json")
    if not isinstance(pooling, dict):
        return False
    mode = pooling.get("pooling_mode")
    on = [m for m in POOLING_MODES if pooling.get(f"pooling_mode_{m}")]
    if (not (mode == "mean" and not on or mode is None and on == ["mean_tokens"])
            or pooling.get("include_prompt", True) is not True or _dimension(pooling) is None):
        return False
    bert = _json(folder / "sentence_bert_config.json") or {}
    if not isinstance(bert, dict) or bert.get("do_lower_case"):
        return False
    extra = {k: v for k, v in bert.items() if k not in ("max_seq_length", "do_lower_case")}
    if any(TRANSFORMER_SETTINGS.get(k, object()) != v for k, v in extra.items()):
        return False
    st = _json(folder / "config_sentence_transformers.json") or {}
    prompts = st.get("prompts") if isinstance(st, dict) else None
    return (isinstance(st, dict) and st.get("default_prompt_name") is None
            and (not prompts or isinstance(prompts, dict) and not any(prompts.values())))  # "" prepends nothing


def _dimension(pooling: dict) -> int | None:
    """A Pooling config's input dimension (``embedding_dimension`` since sentence-transformers 6, before it
    ``word_embedding_dimension``)."""
    dim = pooling.get("embedding_dimension", pooling.get("word_embedding_dimension"))
    return dim if isinstance(dim, int) and dim > 0 else None


class FolderModel:
    """What the ``openvino`` encoder uses of a :func:`plain_folder` model — :meth:`preprocess`, :meth:`pool`,
    ``tokenizer``, ``max_seq_length``, the dimension — without sentence-transformers (see the module docstring).
    ``tokenizer``: the folder's tokenizer (:func:`retrievers.embed.loading.load_tokenizer`).

    Usage (loads a tokenizer and torch; tests/parity/test_folder_model.py runs it)::

        m = FolderModel(model_path(), 256, load_tokenizer(model_path()))
        m.pool(hidden, m.preprocess(["a note"])["attention_mask"])  # (1, 384), given the transformer's hidden states
    """

    def __init__(self, path: str, max_seq_length: int, tokenizer):
        if not plain_folder(path):
            raise ValueError(f"{path}: not a plain Transformer → mean Pooling → Normalize folder")
        self.path = str(path)
        self.max_seq_length = max_seq_length
        modules = _json(Path(path) / "modules.json")
        pooling = _json(Path(path) / modules[1].get("path", "") / "config.json")
        self.dim = _dimension(pooling)
        self.normalize = len(modules) == 3
        #: the folder's own tokenizer (:func:`retrievers.embed.loading.load_tokenizer`: ``transformers.AutoTokenizer``
        #: from its files, the one sentence-transformers loads from it; one per folder per process)
        self.tokenizer = tokenizer

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def eval(self):
        """Nothing to switch: no torch module of its own (sentence-transformers' ``eval()``, for the encoders)."""
        return self

    def preprocess(self, texts: list[str]) -> dict:
        """The transformer's inputs for ``texts``, as sentence-transformers' ``preprocess`` makes them for a list of
        texts: padded to the longest, cut at :attr:`max_seq_length` (``longest_first``), int64 torch tensors."""
        return dict(self.tokenizer(list(texts), padding=True, truncation="longest_first", return_tensors="pt",
                                   max_length=self.max_seq_length))

    def pool(self, token_embeddings, attention_mask):
        """The sentence embeddings of a batch's float32 token embeddings (batch, length, dim): the mean over the
        positions ``attention_mask`` keeps (sentence-transformers' float32 mean ``Pooling``: the masked sum over
        positions, divided by the mask's sum clamped at 1e-9), L2-normalised when the folder has ``Normalize``."""
        import torch  # lazy: optional-dep
        mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
        total = (token_embeddings * mask).sum(dim=1, dtype=torch.float32)
        count = torch.clamp(mask.sum(dim=1, dtype=torch.float32), min=1e-9)
        emb = (total / count).to(token_embeddings.dtype)
        if self.normalize:
            emb = torch.nn.functional.normalize(emb, p=2, dim=-1)
        return emb

    def load_sentence_transformer(self):
        """The folder loaded by sentence-transformers (torch float32), freshly: only converting the transformer (a
        cold cache) needs its weights, and the caller lets them go once the model is converted."""
        from sentence_transformers import SentenceTransformer  # lazy: startup
        st = SentenceTransformer(self.path, device="cpu")
        st.max_seq_length = self.max_seq_length
        return st
