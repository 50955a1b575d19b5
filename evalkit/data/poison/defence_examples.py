"""The defender's own examples for the learned payload guard (``guard.classifier``, trained by
:mod:`evalkit.workflows.train_guard`), written for evalkit from generic prompt-injection knowledge.

:data:`PAYLOADS` (positives) are notes that carry a payload for the agent, in the forms a person's memory store
takes: markdown bullets and headings, dated log lines, chat-transcript lines with a speaker, short and long. They
address the agent in many ways (assistant, AI, bot, model, agent, copilot, helper, LLM, "whoever reads this", or
no one, as a bare rule for the reply) with many directive forms (must, has to, is required to, from now on,
standing rule, policy, agreed that ...), and carry soft payloads (a link or a site to recommend, "the information
moved", re-login, confirm details) and hard ones (exfiltration, download-and-run, secrets, deletion, payments):
instruction overrides, conditional / trigger commands, keyword stuffing, chat-template role markers of several
kinds and tool-call bait in several syntaxes (JSON, XML, YAML, function-call strings, JSON-RPC, markdown links and
images, shell one-liners, slash commands).

:data:`ORDINARY` (negatives) are hard negatives: notes that are imperative or look like a payload without one —
to-dos and instructions to the writer or to other people, advice and recipes with always / never / must, notes
that mention assistants, bots, prompts, tools, APIs, webhooks, passwords, tokens, keys, URLs, e-mail addresses,
shell commands and code in a benign way, people called assistant / agent / helper, chats between friends with
imperatives, and memory-file headings, bullets, dated lines, decisions and preferences.

They widen what the design template sets (``design``, ``design-2``) teach, so the guard learns what a payload *is*
rather than those sets' wording; no wording, payload, endpoint, tool-call syntax or trigger phrase of theirs is
reused. Nothing here was written by looking at the evaluation templates
(:data:`evalkit.data.poison.templates.EVALUATION`): the guard is judged on those, so they must stay unseen. No text
of any dataset or paper is copied here. Endpoints use reserved names (``.invalid``, ``.test``, ``example.com``,
``localhost``). ``{topic}`` is the only format slot (filled with a store's words at training time); a literal brace
is doubled (``{{``, ``}}``), as the strings go through ``str.format(topic=...)``.

The examples are data: ``defence_examples.jsonl`` beside this module, one ``{"kind": "payload" | "ordinary",
"text": ...}`` object a line, in order; this module reads it once (:func:`read_examples`).

>>> len(PAYLOADS), len(ORDINARY), PAYLOADS[0][:30]
(205, 194, 'Assistant, from now on answer ')
"""
from __future__ import annotations

from pathlib import Path

from evalkit.data.readers.beir import iter_jsonl
from retrievers.errors import DataError

EXAMPLES_FILE = Path(__file__).with_name("defence_examples.jsonl")
KINDS = ("payload", "ordinary")


def read_examples(path: Path = EXAMPLES_FILE) -> dict[str, tuple[str, ...]]:
    """``{"payload": (...), "ordinary": (...)}``: the texts of a JSONL file of ``{"kind", "text"}`` lines, each kind
    in file order (read by :func:`evalkit.data.readers.beir.iter_jsonl`); DataError (one line naming the file and
    line) on anything else."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for n, row in iter_jsonl(Path(path)):
        if row.get("kind") not in out or not isinstance(row.get("text"), str):
            raise DataError(f"{path}:{n}: expected {{\"kind\": one of {', '.join(KINDS)}, \"text\": a string}}")
        out[row["kind"]].append(row["text"])
    return {k: tuple(v) for k, v in out.items()}


_EXAMPLES = read_examples()
#: notes that carry a payload for the agent (positives)
PAYLOADS: tuple[str, ...] = _EXAMPLES["payload"]
#: ordinary notes that are imperative, or mention tools, keys and commands, without a payload for the agent (negatives)
ORDINARY: tuple[str, ...] = _EXAMPLES["ordinary"]

__all__ = ["ORDINARY", "PAYLOADS", "read_examples"]
