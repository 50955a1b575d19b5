"""Arguments and option parsing shared by several commands (index settings, comma-separated lists)."""
from __future__ import annotations

import os

from evalkit.errors import CLIError


def csv_option(value: str | None, option: str) -> list[str] | None:
    """A comma-separated option's items; None when the option was not given, CLIError when it was given empty
    (``--retrievers ""`` or ``","`` must not quietly run nothing, or everything)."""
    if value is None:
        return None
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items:
        raise CLIError(f"{option} {value!r}: no names given (give one or more, comma separated)")
    return items


def index_settings(args):
    from retrievers.index.shared import HNSWSettings, IndexSettings  # lazy: startup
    backend = args.backend or os.environ.get("EVALKIT_BACKEND") or "exact"
    if getattr(args, "chroma_url", None) or (os.environ.get("EVALKIT_CHROMA_URL") and not args.backend):
        backend = "chroma-http"
    h = HNSWSettings(ef_search=args.ef_search, ef_construction=args.ef_construction, max_neighbors=args.m)
    return IndexSettings(backend=backend, representation=args.representation, hnsw=h,
                         chroma_url=getattr(args, "chroma_url", None),
                         as_of_visibility=getattr(args, "as_of_visibility", None) or "auto")


def add_data_args(p):
    """Options of how a dataset is read (``qrels_unknown`` of :func:`evalkit.data.beir.load_beir`)."""
    p.add_argument("--qrels-unknown", choices=["error", "drop"], default="error",
                   help="a qrels row naming a query or document the dataset lacks: error (default: one line naming "
                        "file:line of the first few, exit 2, nothing written) or drop (score without them; one "
                        "warning line, a note in the report and the manifest)")


def load_options(args) -> dict:
    """The loader options of :func:`add_data_args` as keyword arguments for ``load_dataset``."""
    return {"qrels_unknown": getattr(args, "qrels_unknown", None) or "error"}


def add_index_args(p):
    add_embed_args(p)
    p.add_argument("--backend", choices=["exact", "hnsw", "chroma", "chroma-http"], default=None,
                   help="vector search backend: exact (default; the same bits on every machine), hnsw (Chroma's "
                        "approximate index, embedded; 'chroma' is its older name; the run states its recall@k "
                        "against exact on a sample), chroma-http (HNSW on a Chroma server); env EVALKIT_BACKEND")
    p.add_argument("--chroma-url", default=None, help="Chroma server URL for chroma-http (env EVALKIT_CHROMA_URL)")
    p.add_argument("--representation", choices=["auto", "truncate", "maxp"], default="auto",
                   help="long documents: truncate at 256 tokens or split and score by best piece (MaxP)")
    p.add_argument("--ef-search", type=int, default=200,
                   help="Chroma HNSW ef_search (candidates examined per search; higher = closer to exact, slower)")
    p.add_argument("--ef-construction", type=int, default=200,
                   help="Chroma HNSW ef_construction (candidates examined while building the graph)")
    p.add_argument("--m", type=int, default=32, help="HNSW max neighbours")
    p.add_argument("--as-of-visibility", choices=["auto", "strict", "all"], default="auto",
                   help="which documents a query searches: strict = only those created at or before its as_of "
                        "(undated ones always), all = every document of its group; auto (default) = the protocol "
                        "the dataset (or a query-log replay: strict) declares; the run header prints it")


# ---- the embedding model (issue 22): one block ------------------------------------------------------------------
def add_embed_args(p):
    p.add_argument("--embedder", default=None,
                   help="embedding model: a local sentence-transformers model folder, or an OpenAI-compatible "
                        "endpoint http(s)://HOST/v1 (/embeddings is posted to; key from $EVALKIT_EMBED_API_KEY); "
                        "default the shipped all-MiniLM-L6-v2 (env EVALKIT_EMBEDDER)")
    p.add_argument("--embed-model", default=None,
                   help="the server's model name for an HTTP --embedder (env EVALKIT_EMBED_MODEL)")
    p.add_argument("--embed-backend", choices=["openvino", "bf16", "onnx", "torch"], default=None,
                   help="local model runtime: openvino (OpenVINO, bfloat16 when the CPU has it, else float32; "
                        "cosine >= 0.9999; the default when openvino is installed), bf16 (torch in bfloat16; the "
                        "default without openvino when the CPU has native bfloat16), torch (float32, the reference; "
                        "the default otherwise) or onnx (ONNX Runtime); env EVALKIT_EMBED_BACKEND")
    p.add_argument("--embed-timeout", type=float, default=60.0, help="HTTP --embedder: seconds per request")


def embedder_from_args(args, **kw):
    """The run's Embedder from --embedder / --embed-model / --embed-backend (or their environment variables)."""
    from retrievers.embed.model import make_embedder  # lazy: startup
    if getattr(args, "embed_timeout", 60.0) <= 0:
        raise CLIError("--embed-timeout must be > 0")
    emb = make_embedder(getattr(args, "embedder", None), backend=getattr(args, "embed_backend", None),
                        model=getattr(args, "embed_model", None), timeout=getattr(args, "embed_timeout", 60.0), **kw)
    if emb.backend == "http":
        emb.dim  # one probe request: a server that is down or wrong fails now, before any dataset work
    return emb
