"""Junk files that sit in the workspace folder but are not memory: ``node_modules/``, ``.git/``, ``logs/``.

A memory indexer without exclusion globs picks them up (OpenClaw's issue of 2026-08-04 in the notes). They
deliberately contain the same error codes and config keys as real notes (EADDRINUSE, SQLITE_BUSY,
``moduleResolution``, ``strictPort``) so that a retriever without a junk filter is tempted by them. No query
is ever labelled with a junk chunk. ``.git/config`` carries a fake token in its remote URL (a secret).
All text here is written for this project.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta

LEFT_PAD_README = """\
# left-pad

Pad the left side of a string with a character until it reaches a given length.

## Install

    npm install left-pad

## Usage

    const leftPad = require('left-pad')
    leftPad('7', 3, '0')   // => '007'
    leftPad('abc', 6)      // => '   abc'
    leftPad(17, 5, 0)      // => '00017'

## API

### leftPad(value, length, [fill])

`value` is converted to a string. `length` is the final length; if the string is already that long it is
returned unchanged. `fill` defaults to a single space; numbers are converted to strings.

## Notes

Modern runtimes ship `String.prototype.padStart`, which does the same thing. This package is kept for old
code that still depends on it.

## License

WTFPL
"""

STYLE_SPEC_CHANGELOG = """\
# Changelog

## 20.3.1
- Fix the package `exports` map so that bundlers resolving with `"moduleResolution": "bundler"` find the
  ESM entry point. Projects on `"moduleResolution": "node"` may see `ERR_MODULE_NOT_FOUND` when importing
  deep paths; switch to `bundler` or `node16`.

## 20.3.0
- Add validation for the `text-variable-anchor-offset` layout property.
- Expression types: `slice` accepts strings and arrays.

## 20.2.0
- Drop the CommonJS build; the package is ESM only.
- Minimum Node.js version is 18.

## 20.1.1
- Fix a crash in `migrate` when a style has no `sources`.
"""

PACKAGE_LOCK = """\
{
  "name": "tidepool-experiment",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "node_modules/left-pad": {
      "version": "1.3.0",
      "resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
      "license": "WTFPL"
    },
    "node_modules/@maplibre/maplibre-gl-style-spec": {
      "version": "20.3.1",
      "license": "ISC",
      "bin": {"gl-style-format": "dist/gl-style-format.mjs", "gl-style-migrate": "dist/gl-style-migrate.mjs"}
    },
    "node_modules/vite": {
      "version": "5.4.2",
      "dev": true,
      "license": "MIT",
      "engines": {"node": "^18.0.0 || >=20.0.0"}
    }
  }
}
"""

GIT_CONFIG = """\
[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
\tignorecase = true
\tprecomposeunicode = true
[remote "origin"]
\turl = https://alexmoreau:<<GITHUB_PAT_GITCONFIG>>@github.com/alexmoreau/agent-workspace.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[branch "main"]
\tremote = origin
\tmerge = refs/heads/main
"""

COMMIT_EDITMSG = """\
notes: daily log 2026-08-31

# Please enter the commit message for your changes. Lines starting
# with '#' will be ignored, and an empty message aborts the commit.
#
# On branch main
# Changes to be committed:
#\tnew file:   memory/2026-08-31.md
#\tmodified:   MEMORY.md
#
"""


def _git_log_head(rng: random.Random, days: list[str]) -> str:
    """``.git/logs/HEAD``: one reflog line per committed daily note (a sample of them)."""
    lines = []
    prev = "0" * 40
    for iso in days[:: max(1, len(days) // 40)]:
        sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
        when = int(datetime.fromisoformat(iso + "T21:00:00+00:00").timestamp()) + rng.randint(0, 7200)
        lines.append(f"{prev} {sha} Alex Moreau <alex@moreau.example> {when} +0100\tcommit: notes: daily log {iso}")
        prev = sha
    return "\n".join(lines) + "\n"


def _gateway_log(rng: random.Random, iso: str, incident: str | None) -> str:
    t = datetime.fromisoformat(iso + "T08:00:00+00:00")
    lines = []

    def emit(level: str, msg: str) -> None:
        nonlocal t
        t += timedelta(seconds=rng.randint(1, 900))
        lines.append(f"{t.strftime('%Y-%m-%dT%H:%M:%S')}.{rng.randint(0, 999):03d}Z {level} {msg}")

    emit("INFO", "gateway starting (pid %d)" % rng.randint(20000, 90000))
    emit("INFO", "listening on ws://127.0.0.1:18789")
    emit("INFO", "memory: index ready (provider=%s, chunks=%d)" % (
        "openai" if iso < "2026-05-25" else "remote", rng.randint(120, 900)))
    if incident == "eaddrinuse":
        for _ in range(4):
            emit("ERROR", "listen EADDRINUSE: address already in use 127.0.0.1:18789")
            emit("WARN", "gateway exited with code 1; restarting in 5s (launchd)")
    if incident == "sqlite_busy":
        for _ in range(3):
            emit("WARN", "memory: sync failed: SQLITE_BUSY: database is locked (main.sqlite); retrying")
        emit("INFO", "memory: reindex complete after embedding model change")
    for _ in range(rng.randint(6, 10)):
        emit("INFO", rng.choice([
            "session main: turn completed in %d ms" % rng.randint(800, 9000),
            "heartbeat: HEARTBEAT_OK",
            "memory: search returned %d results in %d ms" % (rng.randint(0, 6), rng.randint(20, 400)),
            "cron: daily-notes flush ok",
            "channel telegram: message delivered",
        ]))
    emit("INFO", "gateway stopping (signal SIGTERM)")
    return "\n".join(lines) + "\n"


def junk_files(rng: random.Random, days: list[str]) -> list[tuple[str, str, str]]:
    """``[(path, text, mtime)]`` of the junk files (``<<...>>`` placeholders still to be filled)."""
    return [
        ("node_modules/left-pad/README.md", LEFT_PAD_README, "2026-04-02T14:11:08Z"),
        ("node_modules/@maplibre/maplibre-gl-style-spec/CHANGELOG.md", STYLE_SPEC_CHANGELOG,
         "2026-04-02T14:11:09Z"),
        ("node_modules/.package-lock.json", PACKAGE_LOCK, "2026-04-02T14:11:10Z"),
        (".git/config", GIT_CONFIG, "2026-03-02T18:40:51Z"),
        (".git/COMMIT_EDITMSG", COMMIT_EDITMSG, "2026-08-31T21:17:44Z"),
        (".git/logs/HEAD", _git_log_head(rng, days), "2026-08-31T21:17:44Z"),
        ("logs/gateway-2026-03-02.log", _gateway_log(rng, "2026-03-02", None), "2026-03-02T23:59:58Z"),
        ("logs/gateway-2026-04-17.log", _gateway_log(rng, "2026-04-17", "eaddrinuse"), "2026-04-17T23:59:58Z"),
        ("logs/gateway-2026-05-25.log", _gateway_log(rng, "2026-05-25", "sqlite_busy"), "2026-05-25T23:59:58Z"),
        ("logs/gateway-2026-07-03.log", _gateway_log(rng, "2026-07-03", "eaddrinuse"), "2026-07-03T23:59:58Z"),
    ]
