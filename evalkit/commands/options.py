"""Arguments and option parsing shared by several commands (index settings, comma-separated lists)."""
from __future__ import annotations

import os
import sys

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
    """Options of how a dataset is read (``qrels_unknown`` of :func:`evalkit.data.readers.beir.load_beir`)."""
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
    p.add_argument("--embed-backend", choices=["openvino", "openvino-f32", "openvino-int8", "bf16", "onnx", "torch"], default=None,
                   help="local model runtime: openvino (OpenVINO, bfloat16 when the CPU has it, else float32; "
                        "cosine >= 0.9999; the default when openvino is installed), openvino-f32 (the same held at "
                        "float32 on every CPU: torch's vectors, less CPU), openvino-int8 (its matrix "
                        "products in int8, NNCF-quantised: less CPU, further from float32; opt-in), bf16 (torch "
                        "in bfloat16; the "
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


def add_answer_args(p, required: bool) -> None:
    g = p.add_argument_group("answers (docs/answers.md)")
    g.add_argument("--reader", required=required, metavar="URL",
                   help="the reader's OpenAI-compatible endpoint (e.g. http://127.0.0.1:8011/v1, `evalkit serve-llm`)")
    g.add_argument("--reader-model", default=None, metavar="NAME", help="model id asked at --reader")
    g.add_argument("--reader-key-env", default=None, metavar="VAR",
                   help="environment variable holding the reader's API key (read at call time, never written)")
    g.add_argument("--reader-prompt", default="reader-v1", metavar="NAME",
                   help="reader prompt: a shipped name (evalkit/engine/prompts) or a .txt path (default reader-v1)")
    g.add_argument("--judge", action="append", default=None, metavar="URL",
                   help="a judge's endpoint; repeatable (two judges: agreement, Cohen's kappa); default: the reader's")
    g.add_argument("--judge-model", action="append", default=None, metavar="NAME",
                   help="model id of each --judge, in order (default: the reader's model)")
    g.add_argument("--judge-prompt", action="append", default=None, metavar="NAME",
                   help="prompt of each judge, in order (default judge-v1; judge-strict-v1 is shipped too)")
    g.add_argument("--judge-key-env", action="append", default=None, metavar="VAR",
                   help="environment variable with each judge's API key, in order")
    g.add_argument("--concurrency", type=int, default=4, help="calls in flight at once (default 4)")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per call before it counts as a timeout "
                                                               "(default 300: a local model on 2 cores is slow)")
    g.add_argument("--retries", type=int, default=3, help="retries of a failed call (back-off 0.5·2^i s; default 3)")
    g.add_argument("--price", default=None, metavar="IN[,OUT]",
                   help="price per million tokens in (and out) for the answer_cost column")
    g.add_argument("--budgets", default=None, metavar="T1,T2,...",
                   help="also answer each preset re-packed by its own budget rule at these injection budgets "
                        "(tokens), as retrievers <name>@<T>: accuracy against the budget, one curve per preset")


def _nth(values, i: int, default, what: str, n: int):
    if not values:
        return default
    if len(values) != n:
        raise CLIError(f"{what} is given {len(values)} times for {n} --judge endpoints: give it once per judge")
    return values[i]


def fault_line(line: str) -> None:
    """A failed call to a reader or judge, printed as it happens (one line; the retries follow)."""
    print(f"evalkit: answers: {line}", file=sys.stderr, flush=True)


def answer_spec(args):
    """The parsed answer options → :class:`evalkit.engine.answer.AnswerSpec` (CLIError for bad values)."""
    from evalkit.engine.answer import AnswerSpec, Judge, Prompt  # lazy: startup
    from evalkit.engine.llm import Endpoint  # lazy: startup
    if not args.reader:
        raise CLIError("answer runs need --reader URL (an OpenAI-compatible endpoint; `evalkit serve-llm` serves a "
                       "local one)")
    if not args.reader_model:
        raise CLIError("--reader-model NAME is required with --reader")
    if args.concurrency < 1:
        raise CLIError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.timeout <= 0 or args.retries < 0:
        raise CLIError("--timeout must be > 0 and --retries >= 0")
    price_in = price_out = None
    if args.price is not None:
        try:
            parts = [float(x) for x in args.price.split(",")]
        except ValueError:
            parts = []
        if not 1 <= len(parts) <= 2 or any(x < 0 for x in parts):
            raise CLIError(f"--price must be IN or IN,OUT (non-negative numbers per million tokens), got "
                           f"{args.price!r}")
        price_in, price_out = parts[0], parts[-1]
    budgets = ()
    if getattr(args, "budgets", None):
        try:
            budgets = tuple(sorted({int(x) for x in args.budgets.split(",")}))
        except ValueError:
            budgets = (0,)
        if not budgets or min(budgets) < 1:
            raise CLIError(f"--budgets must be positive whole token counts, comma separated, got {args.budgets!r}")
    for var in [args.reader_key_env, *(args.judge_key_env or [])]:
        if var and var not in os.environ:
            raise CLIError(f"the API key variable {var} is not set in the environment")

    def endpoint(url, model, key):
        try:
            return Endpoint(url, model, api_key_env=key, timeout=args.timeout, retries=args.retries,
                            on_fault=fault_line)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    reader = endpoint(args.reader, args.reader_model, args.reader_key_env)
    urls = args.judge or [args.reader]
    n = len(urls)
    judges = []
    for i, url in enumerate(urls):
        model = _nth(args.judge_model, i, args.reader_model, "--judge-model", n)
        prompt = _nth(args.judge_prompt, i, "judge-v1", "--judge-prompt", n)
        key = _nth(args.judge_key_env, i, args.reader_key_env, "--judge-key-env", n)
        judges.append(Judge(endpoint(url, model, key), Prompt.load(prompt)))
    labels = [j.label for j in judges]
    if len(set(labels)) != len(labels):
        raise CLIError(f"two judges are the same model with the same prompt ({labels[0]}): give another "
                       f"--judge-model or --judge-prompt")
    return AnswerSpec(reader, judges, Prompt.load(args.reader_prompt), args.concurrency, price_in, price_out,
                      budgets)
