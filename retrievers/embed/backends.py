"""Which embedding backend runs: the backends there are, whether each can run here, and the default
(:func:`default_backend`). What each backend is and how it was measured: :mod:`retrievers.embed.model`.

>>> "openvino" in BACKENDS and "http" not in LOCAL_BACKENDS
True
"""
from __future__ import annotations

import importlib.util
import os

#: ``openvino-f32``: OpenVINO held at float32 on every CPU (``openvino`` itself runs bfloat16 where the CPU has it):
#: the float32 reference's vectors (cosine >= 0.9999999 to ``torch``) for 2.4x fewer CPU seconds per word piece —
#: what the committed gate baseline embeds with (docs/ci.md)
BACKENDS = ("openvino", "openvino-f32", "openvino-int8", "bf16", "onnx", "torch", "http")
LOCAL_BACKENDS = ("openvino", "openvino-f32", "openvino-int8", "bf16", "onnx", "torch")


def onnx_available() -> bool:
    """True when the ONNX backend can run (``onnxruntime`` and ``onnx``, the exporter's serialiser)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))
    except (ImportError, ValueError):
        return False


def openvino_available() -> bool:
    """True when the OpenVINO backend can run (``openvino`` importable)."""
    try:
        return importlib.util.find_spec("openvino") is not None
    except (ImportError, ValueError):
        return False


def default_backend(cpuinfo: str | None = None, openvino: bool | None = None) -> str:
    """``$EVALKIT_EMBED_BACKEND``, else ``openvino`` when it is installed (``openvino``: whether it is, default
    :func:`openvino_available`; in bfloat16 or float32 as the CPU allows, the fastest measured), else ``bf16`` when
    the CPU has native bfloat16 arithmetic (:func:`retrievers.embed.bf16.cpu_has_bf16` on ``cpuinfo``, default
    ``/proc/cpuinfo``), else ``torch`` (plain
    sentence-transformers in float32, the reference; emulated bfloat16 would be slower than it). ONNX Runtime is
    opt-in (``--embed-backend onnx``): on the 2-core machine it was measured it gave the same vectors (cosine
    ≥ 0.99999) but no CPU-time gain (ratio 0.95–1.07), so it does not earn a default that re-embeds every cache."""
    from retrievers.embed.bf16 import cpu_has_bf16  # lazy: startup
    if os.environ.get("EVALKIT_EMBED_BACKEND"):
        return os.environ["EVALKIT_EMBED_BACKEND"]
    if openvino_available() if openvino is None else openvino:
        return "openvino"
    return "bf16" if cpu_has_bf16(cpuinfo) else "torch"
