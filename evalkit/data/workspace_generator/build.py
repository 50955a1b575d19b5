"""Generate the ``memory-workspace`` benchmark: an OpenClaw-style memory folder, its chunks, labelled queries
and a query log, written in the BEIR layout (DESIGN.md §4).

Usage::

    python -m evalkit.data.workspace_generator.build [--out datasets/memory-workspace] [--stats] [--materialize DIR]

Everything derives from ``SEED`` through ``random.Random`` instances with fixed string seeds (one stream
per purpose, one per daily file), iteration is over sorted keys, nothing reads the clock, and JSON is written
in a fixed key order with ``ensure_ascii=False`` and ``\\n`` line endings — so the output is byte-identical
on every run and on every machine.

Module map (this package): ``model`` (seed, calendar, constants, :class:`Workspace`: imported by the others),
``content`` (note syntax, filler, fake secrets), ``notes_spring`` / ``notes_summer`` (daily notes), ``evergreen``
(``MEMORY.md`` and topic briefs), ``junk`` (``node_modules/``, ``.git/``, ``logs/``), ``chunk`` (the chunker),
``labels`` (targets → qrels), ``queries`` (query material), ``log`` (the query log), ``questions`` (labelled
queries: temporal generation, qrels, checks, as_of, split), ``card`` (counts and the dataset card), and this
module, the orchestrator (the only one importing the others).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from evalkit.data.workspace_generator.card import render_card, stats_markdown
from evalkit.data.workspace_generator.chunk import chunk_markdown
from evalkit.data.workspace_generator.content import (
    WorkspaceFile,
    fake_secrets,
    fill_placeholders,
    filler_notes,
    layout,
    parse_body,
    parse_days,
    todo_notes,
)
from evalkit.data.workspace_generator.evergreen import MEMORY_MD, TOPICS
from evalkit.data.workspace_generator.junk import junk_files
from evalkit.data.workspace_generator.log import build_query_log
from evalkit.data.workspace_generator.model import (  # noqa: F401  (the generator's public names)
    ABBR,
    CATEGORIES,
    CHUNK_OVERLAP,
    CHUNK_TOKENS,
    DEFAULT_OUT,
    END,
    GROUP,
    IMPORTANCE,
    KIND_IMPORTANCE,
    N_DAILY,
    SEED,
    START,
    TOPIC_LANG,
    VACATION,
    WEEKDAYS,
    Workspace,
    days_between,
    doc_refs,
    iso_time,
    rng_for,
)
from evalkit.data.workspace_generator.notes_spring import DAYS_SPRING
from evalkit.data.workspace_generator.notes_summer import DAYS_SUMMER
from evalkit.data.workspace_generator.revisions import revisions
from evalkit.data.workspace_generator.questions import assign_splits, label_queries, query_record


def _fill_notes(body: list, secrets: dict[str, str]) -> list:
    for item in body:
        if item is not None:
            item.lines = [fill_placeholders(line, secrets) for line in item.lines]
    return body


def build_workspace(seed: int = SEED) -> Workspace:
    secrets = fake_secrets(rng_for(seed, "secrets"))
    material = parse_days(DAYS_SPRING)
    for iso, v in parse_days(DAYS_SUMMER).items():
        if iso in material:
            raise ValueError(f"day {iso} written in both note modules")
        material[iso] = v
    rng = rng_for(seed, "calendar")
    free = [d for d in days_between(START, END) if d not in material and not (VACATION[0] <= d <= VACATION[1])]
    weekdays = [d for d in free if date.fromisoformat(d).weekday() < 5]
    weekends = [d for d in free if date.fromisoformat(d).weekday() >= 5]
    n_weekend = N_DAILY - len(material) - len(weekdays)
    if n_weekend < 0 or n_weekend > len(weekends):
        raise ValueError(f"cannot make {N_DAILY} daily files from {len(material)} written days")
    extra = sorted(weekdays + rng.sample(weekends, n_weekend))

    files: list[WorkspaceFile] = []
    for iso in sorted(set(material) | set(extra)):
        frng = rng_for(seed, f"filler:{iso}")  # one stream per day: editing one day leaves the others alone
        mrng = rng_for(seed, f"mtime:{iso}")
        lang, body = material.get(iso, ("en", []))
        body = _fill_notes(list(body), secrets)
        if lang == "en":
            k = frng.choice((0, 1, 1, 2, 2, 3)) if iso in material else frng.randint(2, 4)
            head = next((i for i, n in enumerate(body) if n is not None and n.kind == "heading"), len(body))
            for note in filler_notes(frng, iso, k):  # filler goes among the day's first bullets
                body.insert(frng.randint(0, head), note)
                head += 1
            todo = todo_notes(frng, iso, frng.choice((0, 1, 2, 2, 3)))
            if todo:
                body += [None] + todo
        d = date.fromisoformat(iso)
        header = [f"# {iso} ({WEEKDAYS[lang][d.weekday()]})", ""]
        f = layout(f"memory/{iso}.md", "daily", header, body, day=iso)
        f.mtime = iso_time(d, mrng.randint(18, 23), mrng.randint(0, 59), mrng.randint(0, 59))
        files.append(f)

    evergreen = [layout("MEMORY.md", "curated", [], _fill_notes(parse_body(MEMORY_MD, "en", START), secrets))]
    for path in sorted(TOPICS):
        since, text = TOPICS[path]
        evergreen.append(layout(path, "topic", [], _fill_notes(parse_body(text, TOPIC_LANG.get(path, "en"), since),
                                                               secrets)))
    files += evergreen
    jrng = rng_for(seed, "junk")
    for path, text, mtime in junk_files(jrng, [f.day for f in files if f.day]):
        text = fill_placeholders(text, secrets)
        lines = text.rstrip("\n").split("\n")
        files.append(WorkspaceFile(path=path, tier="junk", lines=lines, notes=[], mtime=mtime, created=mtime))
    files.sort(key=lambda f: f.path)
    notes = [n for f in files for n in f.notes]
    keys = [n.key for n in notes if n.key]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"note keys used twice: {dupes}")
    ws = Workspace(files=files, secrets=secrets, notes=notes)
    # MEMORY.md and the topic briefs as they stood on each day a line was written (workspace_generator.revisions):
    # the end version keeps the file's place in ``files``, the older ones go to ``revisions``
    for f in evergreen:
        *older, last = revisions(f, ws.note_day)
        f.created, f.mtime = last.created, last.mtime
        ws.revisions[f.path] = older
    return ws


def materialize(ws: Workspace, out: Path) -> None:
    """Write the raw workspace folder (Markdown files, junk included) under ``out``."""
    for f in ws.files:
        p = out / f.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.text, encoding="utf-8", newline="\n")


# ------------------------------------------------------------------------------------------------ corpus

def _chunk_lang(f: WorkspaceFile, start: int, end: int) -> str:
    weight: dict[str, int] = {}
    for n in f.notes:
        lo, hi = max(start, n.first_line), min(end, n.last_line)
        if lo <= hi:
            weight[n.lang] = weight.get(n.lang, 0) + sum(len(x) for x in n.lines[lo - n.first_line: hi - n.first_line + 1])
    if not weight:
        return "en"
    return max(sorted(weight), key=lambda k: weight[k])


def build_corpus(ws: Workspace) -> list[dict]:
    """Chunk every file; one BEIR document per chunk, metadata as in the dataset card."""
    secret_values = sorted(ws.secrets.values())
    docs = []
    for f in (v for g in ws.files for v in ws.versions(g)):
        for c in chunk_markdown(f.text, CHUNK_TOKENS, CHUNK_OVERLAP):
            inside = [n for n in f.notes if n.first_line <= c.end_line and n.last_line >= c.start_line]
            if f.tier in IMPORTANCE:
                imp = IMPORTANCE[f.tier]
            else:
                imp = max([KIND_IMPORTANCE[n.kind] for n in inside] or [0.3])
            secret = any(s in c.text for s in secret_values)
            dup = sorted({n.dup for n in inside if n.dup})
            docs.append({
                "_id": f"{f.name}#L{c.start_line}-L{c.end_line}",
                "title": "",
                "text": c.text,
                "metadata": {
                    "path": f.path,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "timestamp": f"{f.day}T00:00:00Z" if f.day else None,
                    "created": f.created,
                    "retired": f.retired,
                    "mtime": f.mtime,
                    "importance": imp,
                    "group": GROUP,
                    "source": "memory",
                    "tier": f.tier,
                    "lang": _chunk_lang(f, c.start_line, c.end_line),
                    "contains_secret": secret,
                    "dup_group": dup[0] if dup else None,
                },
            })
    ids = [d["_id"] for d in docs]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate chunk ids")
    return docs


# ------------------------------------------------------------------------------------------------ output

def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(dumps(r) + "\n" for r in rows), encoding="utf-8", newline="\n")


@dataclass
class Bench:
    ws: Workspace
    docs: list[dict]
    queries: list  # list[workspace_questions.Q]
    splits: dict[str, str]
    dropped: list  # list[workspace_questions.Dropped]
    log: list[dict]


def generate(seed: int = SEED) -> Bench:

    ws = build_workspace(seed)
    docs = build_corpus(ws)
    queries, dropped = label_queries(ws, docs, seed)
    splits = assign_splits(queries, seed, docs)
    log = build_query_log(ws, docs, queries, seed)
    return Bench(ws, docs, queries, splits, dropped, log)


def write(bench: Bench, out: Path) -> list[Path]:

    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    write_jsonl(out / "corpus.jsonl", bench.docs)
    write_jsonl(out / "queries.jsonl", [query_record(q, bench.splits[q.id]) for q in bench.queries])
    for s in ("train", "test"):
        rows = ["query-id\tcorpus-id\tscore"]
        for q in bench.queries:
            if bench.splits[q.id] == s:
                rows += [f"{q.id}\t{d}\t{g}" for d, g in sorted(q.qrels.items())]
        (out / "qrels" / f"{s}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8", newline="\n")
    write_jsonl(out / "querylog.jsonl", bench.log)
    (out / "README.md").write_text(render_card(bench), encoding="utf-8", newline="\n")
    return [out / p for p in OUTPUT_FILES]


OUTPUT_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv", "querylog.jsonl", "README.md")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evalkit.data.workspace_generator.build",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: datasets/memory-workspace)")
    ap.add_argument("--stats", action="store_true", help="print the counts tables (as in the card) and exit")
    ap.add_argument("--materialize", type=Path, metavar="DIR", help="also write the raw workspace folder to DIR")
    ap.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    bench = generate(args.seed)
    if args.stats:
        sys.stdout.write(stats_markdown(bench))
        return 0
    paths = write(bench, args.out)
    if args.materialize:
        materialize(bench.ws, args.materialize)
        print(f"workspace written to {args.materialize}", file=sys.stderr)
    print(f"wrote {len(paths)} files to {args.out} ({len(bench.docs)} chunks, {len(bench.queries)} queries, "
          f"{len(bench.log)} log events)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
