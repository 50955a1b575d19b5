"""`evalkit answer`: a run (the arguments of `evalkit run`) whose injected blocks are answered by a reader model and
judged (:mod:`evalkit.workflows.answer`; docs/answers.md). Same as `evalkit run --answer`."""
from __future__ import annotations

from evalkit.commands.options import add_answer_args
from evalkit.commands.run import add_run_args, cmd_run


def register(sub) -> None:
    p = sub.add_parser("answer", help="answer every question with a reader model over each retriever's injected "
                                      "block, judge it, attribute wrong answers (a run folder with answers)")
    add_run_args(p)
    add_answer_args(p, required=True)
    p.set_defaults(fn=cmd_run, answer=True)
