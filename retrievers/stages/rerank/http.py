"""HTTP rerank APIs (the provider formats memory-lancedb-pro @6a50220 speaks, seed 000) and their answers.

Providers (request built by :func:`build_request`, answer read by :func:`lancedb_items` or :func:`strict_scores`):

=============  ==========================================  ================================  ======================
provider       auth header                                 documents                         scores
=============  ==========================================  ================================  ======================
``jina``       ``Authorization: Bearer <key>``             ``["text", …]``                   ``results[].relevance_score``
``siliconflow`` same as jina                               same                              same
``pinecone``   ``Api-Key: <key>``, ``X-Pinecone-API-Version: 2024-10``  ``[{"text": …}, …]`` + ``rank_fields: ["text"]``  ``data[].score``
=============  ==========================================  ================================  ======================

Body: ``{model, query, documents, top_n}`` (``top_n`` = number of documents) plus ``rank_fields`` for pinecone,
serialised like JavaScript's ``JSON.stringify`` (compact, UTF-8). Every answer item carries ``index`` (position in
``documents``).

Two readers:

* :func:`lancedb_items` reproduces what the shipped TypeScript does with an answer, JavaScript coercions included
  (see its docstring); it raises :class:`RerankFallback` exactly where the original falls through to the cosine
  fallback.
* :func:`strict_scores` is for the generic stages (``rerank.cross_encoder``, ``rerank.yes_no``): a well-formed answer
  or a :class:`RerankFallback` naming what is wrong.

The timeout is a socket timeout (connect and every read). The original aborts the ``fetch`` after 5 s, which only
bounds the time to the response headers; a server that trickles its body is bounded here but not there.
"""
from __future__ import annotations

import http.client
import json
import math
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PROVIDERS = ("jina", "siliconflow", "pinecone")
JINA_ENDPOINT = "https://api.jina.ai/v1/rerank"
JINA_MODEL = "jina-reranker-v3"
PINECONE_API_VERSION = "2024-10"


class RerankFallback(Exception):
    """The reranker answer cannot be used; ``reason`` is a short machine-readable label."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def build_request(provider: str, api_key: str, model: str, query: str, documents: list[str],
                  top_n: int) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and JSON body for one rerank call (``top_n`` is the number of documents in lancedb-pro)."""
    if provider == "pinecone":
        headers = {"Content-Type": "application/json", "Api-Key": api_key,
                   "X-Pinecone-API-Version": PINECONE_API_VERSION}
        body = {"model": model, "query": query, "documents": [{"text": t} for t in documents], "top_n": top_n,
                "rank_fields": ["text"]}
        return headers, body
    if provider in ("jina", "siliconflow"):
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
        return headers, {"model": model, "query": query, "documents": list(documents), "top_n": top_n}
    raise ValueError(f"unknown rerank provider {provider!r} (valid: {', '.join(PROVIDERS)})")


def js_stringify(obj: Any) -> bytes:
    """``JSON.stringify`` bytes: no spaces, non-ASCII as UTF-8 (lone surrogates fall back to ``\\u`` escapes)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def js_json_parse(raw: bytes) -> Any:
    """``response.json()``: UTF-8 (BOM stripped, invalid bytes replaced), strict JSON (no NaN / Infinity)."""
    text = raw.decode("utf-8-sig", errors="replace")
    return json.loads(text, parse_constant=_reject_constant)


@dataclass
class HTTPOutcome:
    """One POST: ``data`` is the parsed JSON when ``reason`` is None."""

    data: Any = None
    status: int | None = None
    reason: str | None = None  # None = 2xx with a JSON body; else "http_<code>", "timeout", "connection", "invalid_json"
    detail: str = ""
    latency_ms: float = 0.0


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(endpoint: str, headers: dict[str, str], body: dict[str, Any], timeout_s: float) -> HTTPOutcome:
    """POST ``body`` as JSON; never raises for network/HTTP/JSON problems (they become ``reason``).

    Latency is measured for reports only (wall clock never enters a score). Loopback endpoints bypass any proxy.
    """
    req = urllib.request.Request(endpoint, data=js_stringify(body), headers=dict(headers), method="POST")
    opener = _DIRECT if _is_loopback(endpoint) else urllib.request.build_opener()
    t0 = time.perf_counter()
    out = HTTPOutcome()
    try:
        with opener.open(req, timeout=timeout_s) as resp:
            out.status = resp.status
            raw = resp.read()
        try:
            out.data = js_json_parse(raw)
        except ValueError as exc:
            out.reason, out.detail = "invalid_json", str(exc)[:200]
    except urllib.error.HTTPError as exc:
        out.status = exc.code
        out.reason = f"http_{exc.code}"
        try:
            out.detail = exc.read()[:200].decode("utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - the body of an error answer is informational only
            out.detail = ""
    except (TimeoutError, socket.timeout) as exc:
        out.reason, out.detail = "timeout", str(exc)
    except urllib.error.URLError as exc:
        is_timeout = isinstance(exc.reason, (TimeoutError, socket.timeout))
        out.reason, out.detail = ("timeout" if is_timeout else "connection"), str(exc.reason)[:200]
    except (OSError, ValueError, http.client.HTTPException) as exc:  # reset connections, malformed status lines, bad URLs
        out.reason, out.detail = "connection", f"{type(exc).__name__}: {exc}"[:200]
    out.latency_ms = (time.perf_counter() - t0) * 1000.0
    return out


# ---- JavaScript coercions (what the TypeScript does with an arbitrary JSON answer) ---------------------------------

_UNDEF = object()  # JavaScript `undefined` (a key that is absent)
_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029" \
         "\u202f\u205f\u3000\ufeff"
_DEC = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_RADIX = re.compile(r"0([xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_INDEX_KEY = re.compile(r"0|[1-9]\d*")


def _js_str_to_number(s: str) -> float:
    s = s.strip(_JS_WS)
    if s == "":
        return 0.0
    if s in ("Infinity", "+Infinity"):
        return math.inf
    if s == "-Infinity":
        return -math.inf
    if _DEC.fullmatch(s):
        return float(s)
    m = _RADIX.fullmatch(s)
    if m:
        base = {"x": 16, "o": 8, "b": 2}[m.group(1)[0].lower()]
        return float(int(m.group(1)[1:], base))
    return math.nan


def _js_number_to_string(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    return repr(x)  # only used to decide "is this a canonical array index", which a fraction never is


def js_string(v: Any) -> str:
    """``String(v)`` for a JSON value."""
    if v is _UNDEF:
        return "undefined"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _js_number_to_string(float(v))
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return ",".join("" if x is None or x is _UNDEF else js_string(x) for x in v)
    return "[object Object]"


def js_number(v: Any) -> float:
    """``Number(v)`` (also what ``<``/``>=``/``*`` coerce to) for a JSON value."""
    if v is _UNDEF:
        return math.nan
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return _js_str_to_number(v)
    if isinstance(v, list):
        return _js_str_to_number(js_string(v))
    return math.nan


def _is_js_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _prop(obj: Any, key: str) -> Any:
    """``obj.key`` for a JSON value (``null.key`` throws)."""
    if obj is None:
        raise RerankFallback("exception", f"cannot read property {key!r} of null")
    if isinstance(obj, dict):
        return obj.get(key, _UNDEF)
    return _UNDEF


def lancedb_items(provider: str, data: Any, n: int) -> tuple[list[tuple[int, float]], list[int], int]:
    """What memory-lancedb-pro @6a50220 makes of a 2xx JSON answer for ``n`` documents.

    Returns ``(returned, unreturned, ignored)``:

    * ``returned``: ``(row, ce)`` in response order, one per answer item whose index passes
      ``index >= 0 && index < n`` (JavaScript comparison, so numeric strings and ``null`` are compared as numbers).
      A repeated valid index appears twice (the original produces a duplicate result). ``ce`` is ``Number(score)``:
      a missing score is NaN (the caller's blend then falls back to ``0.5·s``), ``null`` is 0.
    * ``unreturned``: rows whose index is not among the answer's *numeric* indices, in input order. An item whose
      index is a string such as ``"2"`` still reaches row 2 (``results["2"]``) but does not mark it returned (a
      ``Set`` of numbers never contains a string), so that row is both reranked and unreturned, as in the original.
    * ``ignored``: answer items dropped by the range check (out of range, negative, missing or non-numeric index).

    Raises :class:`RerankFallback` where the original falls through to the cosine fallback: the score list
    (``results`` for jina/siliconflow, ``data`` for pinecone) is not an array (``bad_shape``); the top level is
    ``null`` or an item is ``null`` (TypeError: ``exception``); an in-range index that addresses no row, e.g. ``1.5``,
    ``true``, ``null`` or ``"02"`` (``results[i]`` is undefined, reading its score throws: ``exception``).
    """
    key_list, key_score = ("data", "score") if provider == "pinecone" else ("results", "relevance_score")
    items = _prop(data, key_list)
    if not isinstance(items, list):
        raise RerankFallback("bad_shape", f"no {key_list}[] array in the answer")
    parsed = [(_prop(r, "index"), _prop(r, key_score)) for r in items]
    numeric_indices = {float(i) for i, _ in parsed if _is_js_number(i)}
    returned: list[tuple[int, float]] = []
    ignored = 0
    for idx, score in parsed:
        x = js_number(idx)
        if not (x >= 0 and x < n):  # NaN fails both comparisons, like JavaScript
            ignored += 1
            continue
        key = js_string(idx)
        if not _INDEX_KEY.fullmatch(key):
            raise RerankFallback("exception", f"answer index {idx!r} addresses no document")
        returned.append((int(key), js_number(score)))
    unreturned = [i for i in range(n) if float(i) not in numeric_indices]
    return returned, unreturned, ignored


def strict_scores(provider: str, data: Any, n: int) -> list[float | None]:
    """Scores by document position from a well-formed answer (``None`` = not returned).

    Requires the provider's list (``results`` / ``data``) of objects with an integer ``index`` in ``[0, n)`` and a
    finite numeric score; a repeated index or anything else raises :class:`RerankFallback` (``bad_shape``).
    """
    key_list, key_score = ("data", "score") if provider == "pinecone" else ("results", "relevance_score")
    items = data.get(key_list) if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise RerankFallback("bad_shape", f"no {key_list}[] array in the answer")
    out: list[float | None] = [None] * n
    for k, r in enumerate(items):
        if not isinstance(r, dict):
            raise RerankFallback("bad_shape", f"{key_list}[{k}] is not an object")
        idx, sc = r.get("index"), r.get(key_score)
        if not _is_js_number(idx) or float(idx) != int(idx) or not 0 <= int(idx) < n:
            raise RerankFallback("bad_shape", f"{key_list}[{k}].index = {idx!r} is not a document position < {n}")
        if not _is_js_number(sc) or not math.isfinite(sc):
            raise RerankFallback("bad_shape", f"{key_list}[{k}].{key_score} = {sc!r} is not a finite number")
        if out[int(idx)] is not None:
            raise RerankFallback("bad_shape", f"{key_list}[{k}]: index {int(idx)} repeated")
        out[int(idx)] = float(sc)
    return out
