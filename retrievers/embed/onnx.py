"""A sentence-transformers model's transformer run on ONNX Runtime: the ``onnx`` embedding backend.

Why not sentence-transformers' own ``backend="onnx"``: it needs ``optimum``, whose ONNX exporter (``optimum-onnx``)
pins ``transformers<4.58``, which forces sentence-transformers back from 6.x to 5.x for the whole environment.
ONNX Runtime itself is already installed (chromadb depends on it), so evalkit exports the model with torch's own
exporter and runs it with ``onnxruntime`` directly, keeping everything around the transformer sentence-transformers':

* **export** (:func:`export`, once per weights, into the cache — :func:`retrievers.embed.model.onnx_folder`): the
  transformer (``model[0].auto_model``) traced by ``torch.onnx.export`` with dynamic batch and sequence axes
  (``last_hidden_state`` out), then ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``,
  model type ``bert``: attention, LayerNorm/SkipLayerNorm, GELU and bias fusions — the same fusions optimum's
  ``O2`` applies; no approximate GELU, no fp16) → ``model_O2.onnx``.
* **encode** (:class:`OnnxSentenceEncoder`): tokenisation by the model's own ``preprocess`` (same pieces, same
  truncation at ``max_seq_length``), the transformer on an ``InferenceSession``, then the model's own modules after
  the transformer (pooling, Dense, Normalize …) in torch, then L2 normalisation — so pooling and normalisation
  are the model's, bit for bit; only the transformer's arithmetic differs (fused kernels: cosine to torch
  >= 0.99999 measured). Batches are formed longest-first by character length, as sentence-transformers does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from retrievers.embed.bf16 import SentenceModelWrapper

OUTPUT = "last_hidden_state"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export(st_model, folder: Path, level: str) -> None:
    """Write ``folder/model.onnx`` (plain export) and ``folder/model_<level>.onnx`` (fused) for ``st_model``."""
    import torch  # lazy: optional-dep
    from onnxruntime.transformers.optimizer import optimize_model  # lazy: optional-dep

    auto = st_model[0].auto_model
    feats = st_model.preprocess(["an export probe sentence", "a second, longer export probe sentence here"])
    names = [n for n in INPUTS if n in feats]

    class Wrapped(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            return self.m(**dict(zip(names, args)), return_dict=True).last_hidden_state

    axes = {n: {0: "batch", 1: "sequence"} for n in names + [OUTPUT]}
    plain = folder / "model.onnx"
    with torch.inference_mode():
        torch.onnx.export(Wrapped(auto).eval(), tuple(feats[n] for n in names), str(plain), input_names=names,
                          output_names=[OUTPUT], dynamic_axes=axes, opset_version=17, dynamo=False)
    cfg = auto.config
    opt = optimize_model(str(plain), model_type="bert", num_heads=int(getattr(cfg, "num_attention_heads", 0) or 0),
                         hidden_size=int(getattr(cfg, "hidden_size", 0) or 0), opt_level=1, use_gpu=False)
    opt.save_model_to_file(str(folder / f"model_{level}.onnx"))


class OnnxSentenceEncoder(SentenceModelWrapper):
    """SentenceTransformer-like ``encode`` over an ONNX transformer (see the module docstring)."""

    def __init__(self, st_model, onnx_file: Path, threads: int | None = None):
        import onnxruntime as ort  # lazy: optional-dep
        self.st = st_model
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            so.intra_op_num_threads = threads
        # ORT's pool threads spin while waiting for work by default: on a shared, oversubscribed machine (2 cores,
        # several processes) the spinning steals the cores the work needs; torch's pool blocks instead
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(onnx_file), so, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.onnx_file = str(onnx_file)

    def forward(self, texts: list[str]):
        """Sentence embeddings (torch, not normalised unless the model's own modules do it) of one batch."""
        import torch  # lazy: optional-dep
        feats = self.st.preprocess(list(texts))
        feed = {n: feats[n].numpy().astype(np.int64, copy=False) for n in self.input_names}
        hidden = self.session.run([OUTPUT], feed)[0]
        feats["token_embeddings"] = torch.from_numpy(hidden)
        with torch.inference_mode():
            for module in list(self.st)[1:]:
                feats = module(feats)
        return feats["sentence_embedding"]

    def encode_few(self, texts: list[str]) -> np.ndarray:
        """A few texts as one batch, normalised (latency mode's query embedding: no sorting or batching)."""
        import torch  # lazy: optional-dep
        emb = torch.nn.functional.normalize(self.forward(list(texts)), p=2, dim=1)
        return emb.numpy().astype(np.float32, copy=False)

    def encode(self, texts, batch_size: int = 64, normalize_embeddings: bool = True, convert_to_numpy: bool = True,
               show_progress_bar: bool = False) -> np.ndarray:
        import torch  # lazy: optional-dep
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.get_sentence_embedding_dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = [None] * len(texts)
        for i in range(0, len(texts), batch_size):
            idx = order[i:i + batch_size]
            emb = self.forward([texts[j] for j in idx])
            if normalize_embeddings:
                emb = torch.nn.functional.normalize(emb, p=2, dim=1)
            for j, v in zip(idx, emb.numpy().astype(np.float32, copy=False)):
                out[j] = v
        return np.stack(out)
