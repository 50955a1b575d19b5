"""The listings of `evalkit runs`, `evalkit stages` and `evalkit systems`: one line per item, in columns. Imports
nothing heavy (`evalkit runs` stays a quick command).

>>> for line in systems_lines([("notes", "python", "ab12", "a store"), ("kb-server", "mcp", "cd34", "a server")]):
...     print(line)
notes      python  ab12  a store
kb-server  mcp     cd34  a server
"""
from __future__ import annotations


def runs_lines(runs) -> list[str]:
    """`evalkit runs`: a header, then each run folder (:class:`evalkit.runfolder.history.RunSummary`-like: ``when``,
    ``path``, ``datasets``, ``retrievers``, ``headline``, ``latest``)."""
    out = [f"{'when (UTC)':<19}  {'folder':<44}  {'datasets':<18}  retrievers / headline (best nDCG@10)"]
    for r in runs:
        rets = ", ".join(r.retrievers[:4]) + (f" +{len(r.retrievers) - 4}" if len(r.retrievers) > 4 else "")
        mark = "  (latest)" if r.latest else ""
        out.append(f"{r.when:<19}  {str(r.path):<44}  {', '.join(r.datasets):<18}  {rets} — {r.headline}{mark}")
    return out


def stages_lines(rows: list[tuple[str, str, str]]) -> list[str]:
    """`evalkit stages`: (name, kind, summary) per stage, names padded to the longest."""
    w = max(len(n) for n, _, _ in rows)
    return [f"{name:<{w}}  {kind:<9}  {summary}" for name, kind, summary in rows]


def systems_lines(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """`evalkit systems`: (name, kind, hash, description) per system file, names padded to the longest."""
    w = max(len(r[0]) for r in rows)
    return [f"{name:<{w}}  {kind:<6}  {h}  {desc}" for name, kind, h, desc in rows]
