"""`evalkit answer`: a run (the arguments of `evalkit run`) whose injected blocks are answered by a reader model and
judged (:mod:`evalkit.workflows.answer`; docs/answers.md). Same as `evalkit run --answer`. `evalkit answer
RUN_FOLDER`: answer the blocks a saved run injected, without running its retrievers again."""
from __future__ import annotations

import sys
from pathlib import Path

from evalkit.commands.options import add_answer_args, answer_spec, csv_option, load_options
from evalkit.commands.run import add_run_args, cmd_run
from evalkit.errors import CLIError


def register(sub) -> None:
    p = sub.add_parser("answer", help="answer every question with a reader model over each retriever's injected "
                                      "block, judge it, attribute wrong answers (a run folder with answers); "
                                      "RUN_FOLDER: answer a saved run's blocks without running it again")
    p.add_argument("run_folder", nargs="?", default=None, metavar="RUN_FOLDER",
                   help="a saved run folder: answer the blocks it recorded (its retrievers do not run again; "
                        "--retrievers picks some of them, --dataset names a folder-path dataset); --out is required")
    add_run_args(p, required=False)
    add_answer_args(p, required=True)
    p.set_defaults(fn=cmd_answer, answer=True)


def cmd_answer(args) -> int:
    if args.run_folder is None:
        if not args.dataset or not args.retrievers:
            raise CLIError("evalkit answer needs --dataset and --retrievers (or a saved RUN_FOLDER to answer)")
        return cmd_run(args)
    from evalkit.report import print_table, write_reports  # lazy: startup
    from evalkit.workflows.answer import answer_folder  # lazy: startup
    folder = Path(args.run_folder)
    if not folder.is_dir():
        raise CLIError(f"{folder} is not a run folder")
    if not args.out:
        raise CLIError("answering a saved run folder needs --out FOLDER (the saved folder is never changed)")
    if args.dataset and "," in args.dataset:
        raise CLIError("--dataset with a RUN_FOLDER names one dataset (a folder-path dataset the run used)")
    spec = answer_spec(args)
    if spec.budgets:
        raise CLIError("--budgets re-packs each preset at every budget, which runs it again: not with a RUN_FOLDER")
    writer = answer_folder(folder, spec, Path(args.out), args.dataset,
                           csv_option(args.retrievers, "--retrievers") if args.retrievers else None,
                           load_options(args), argv=sys.argv)
    write_reports(writer)
    written = writer.write()
    print_table(writer)
    print(f"wrote {written}")
    return 0
