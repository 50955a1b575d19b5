"""`evalkit stages`: the registered pipeline stages (name, kind, summary); ``--markdown`` prints the generated stage
reference page (``docs/stages.md``: every stage with its parameters, types, defaults and allowed values)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("stages", help="list the pipeline stages a preset can use; --markdown prints the stage "
                                      "reference page (docs/stages.md)")
    p.add_argument("--markdown", action="store_true",
                   help="print the full reference (every parameter with type, default and allowed values) as "
                        "Markdown: `evalkit stages --markdown > docs/stages.md`")
    p.set_defaults(fn=run)


def run(args) -> int:
    from evalkit.report.listings import stages_lines  # lazy: startup
    from evalkit.report.stage_reference import first_line, render  # lazy: startup
    from retrievers.stages import REGISTRY  # lazy: startup
    if args.markdown:
        print(render(), end="")
        return 0
    rows = [(name, cls.kind, first_line(cls.__doc__)) for name, cls in sorted(REGISTRY.items())]
    print("\n".join(stages_lines(rows)))
    return 0
