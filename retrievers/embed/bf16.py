"""A sentence-transformers model run on torch in bfloat16 autocast: the ``bf16`` embedding backend.

On a CPU with native bfloat16 arithmetic (the ``avx512_bf16`` or ``amx_bf16`` flag in ``/proc/cpuinfo``: AMD Zen 4,
Intel Sapphire Rapids and later) torch's oneDNN runs the transformer's matrix products in bfloat16 with float32
accumulation, about twice the throughput of float32 for the same model; LayerNorm, softmax, pooling and the final
L2 normalisation stay float32. Measured on all-MiniLM-L6-v2: minimum cosine to the float32 vectors 0.99997.
Without the CPU flag torch emulates bfloat16 and is slower than float32, so
:func:`retrievers.embed.model.default_backend` picks this backend only when the flag is there (:func:`cpu_has_bf16`).

**A vector depends only on its text.** In bfloat16 a padded batch changes a text's vector (up to 5e-4 per
component) with the length of its batch companions, which would make a content-keyed cache depend on which texts
happened to be embedded together (a cold and a warm run would disagree). :class:`Bf16SentenceEncoder` therefore
batches texts of exactly the same token length only — no padding at all — and with no padding the vector is bit
for bit the same whatever the batch size or the companions (tested: alone, in a batch of 64, reversed).
``length_order`` lets the cached :class:`retrievers.embed.model.Embedder` hand it texts sorted by token length, so the
equal-length batches stay large.
"""
from __future__ import annotations

import abc
import contextlib
from pathlib import Path

import numpy as np

CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# a batch of fewer word pieces (texts x length) runs on one thread: on a shared 2-core machine the hand-off between
# threads at every operation of a small batch costs more than the second thread saves (measured under load: 320
# SciFact texts, 2 threads 52 s wall, one thread for the small batches 45 s, fp32 on 2 threads 32 s)
SMALL_BATCH_TOKENS = 4096


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """True when the CPU advertises native bfloat16 arithmetic: a ``flags`` line of ``cpuinfo`` (default: the text of
    ``/proc/cpuinfo``; absent on non-Linux systems → False) names ``avx512_bf16`` or ``amx_bf16``."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and any(f in value.split() for f in CPU_FLAGS):
            return True
    return False


class SentenceModelWrapper:
    """What an encoder built around a SentenceTransformer ``st`` passes through to it (tokenizer, max length,
    dimension); the ``bf16`` and ``onnx`` encoders are ones."""

    st = None

    @property
    def tokenizer(self):
        return self.st.tokenizer

    @property
    def max_seq_length(self) -> int:
        return self.st.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, n: int) -> None:
        self.st.max_seq_length = n

    def get_sentence_embedding_dimension(self) -> int:
        get = getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension
        return int(get())  # sentence-transformers 6 renamed it


class EqualLengthEncoder(SentenceModelWrapper, abc.ABC):
    """SentenceTransformer-like ``encode`` in batches of texts of exactly one token length, so that a vector depends
    only on its text (see the module docstring): shared by the ``bf16`` and ``openvino`` encoders, which supply
    :meth:`forward` (one unpadded batch's sentence embeddings) and may wrap the loop in :meth:`context`."""

    def token_lengths(self, texts: list[str], chunk: int = 2048) -> list[int]:
        """Each text's number of word pieces as the model sees it (special tokens included, cut at max length);
        tokenised ``chunk`` texts at a time, so ~40k texts never hold all their token lists at once."""
        out: list[int] = []
        for i in range(0, len(texts), chunk):
            enc = self.st.tokenizer(list(texts[i:i + chunk]), truncation=True, max_length=self.st.max_seq_length,
                                    padding=False, return_attention_mask=False, return_token_type_ids=False)
            out.extend(len(ids) for ids in enc["input_ids"])
        return out

    def length_order(self, texts: list[str]) -> list[int]:
        """Indices of ``texts`` by token length (stable), for a caller that embeds them in chunks."""
        n = self.token_lengths(texts)
        return sorted(range(len(texts)), key=n.__getitem__)

    def context(self):
        """What the whole encode loop runs under (default: torch's inference mode)."""
        import torch  # lazy: optional-dep
        return torch.inference_mode()

    @abc.abstractmethod
    def forward(self, batch: dict, n_tokens: int):
        """The sentence embeddings (float32 torch tensor, not normalised) of one batch of ``n_tokens`` word pieces
        (each runtime implements it: torch autocast in :class:`Bf16SentenceEncoder`, OpenVINO in
        :class:`retrievers.embed.openvino.OpenVinoSentenceEncoder`)."""

    def encode(self, texts, batch_size: int = 64, normalize_embeddings: bool = True, convert_to_numpy: bool = True,
               show_progress_bar: bool = False) -> np.ndarray:
        """(n, dim) float32 embeddings in the order of ``texts``: tokenised together (``preprocess``: the model's
        own tokenisation and truncation), then run in batches of at most ``batch_size`` texts of one token length,
        each cut to that length (no pad position reaches the transformer)."""
        import torch  # lazy: optional-dep
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        feats = self.st.preprocess(texts)
        mask = feats["attention_mask"]
        lengths = mask.sum(dim=1).tolist()
        keys = [k for k, v in feats.items() if torch.is_tensor(v) and v.shape == mask.shape]
        rest = {k: v for k, v in feats.items() if k not in keys}  # e.g. sentence-transformers' "modality"
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            groups.setdefault(n, []).append(i)
        out = np.zeros((len(texts), self.get_sentence_embedding_dimension()), dtype=np.float32)
        self.st.eval()
        with self.context():
            for n, idx in sorted(groups.items(), reverse=True):
                for s in range(0, len(idx), batch_size):
                    part = idx[s:s + batch_size]
                    keep = mask[part].bool()  # right- or left-padded: the text's own positions, in order
                    batch = dict(rest, **{k: feats[k][part][keep].view(len(part), n) for k in keys})
                    emb = self.forward(batch, len(part) * n).float()
                    if normalize_embeddings:
                        emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                    out[part] = emb.numpy()
        return out

    def encode_few(self, texts: list[str]) -> np.ndarray:
        """Latency mode's query embedding: the same vectors as :meth:`encode`, normalised."""
        return self.encode(list(texts))


class Bf16SentenceEncoder(EqualLengthEncoder):
    """:class:`EqualLengthEncoder` of a (float32) SentenceTransformer under bfloat16 autocast. The wrapped model is
    shared with the ``torch`` backend."""

    def __init__(self, st_model):
        self.st = st_model

    def context(self):
        import torch  # lazy: optional-dep
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
        return stack

    def forward(self, batch: dict, n_tokens: int):
        with _threads(1 if n_tokens < SMALL_BATCH_TOKENS else 0):
            return self.st(batch)["sentence_embedding"]


@contextlib.contextmanager
def _threads(n: int):
    """torch's intra-op threads set to ``n`` for the block (0: unchanged), then restored."""
    import torch  # lazy: optional-dep
    before = torch.get_num_threads()
    if n and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n and n != before:
            torch.set_num_threads(before)
