"""Config front ends: a seed system's own configuration file → a preset that ``extends`` the as-shipped preset
with the values the original would run with (``evalkit preset from-config``).

One module per system, each a ``resolve(config, **call) -> Resolution`` that applies the original's resolution
rules — defaults for absent keys, clamps, JavaScript coercion of non-numbers, contradictory flags — and cites
each rule (PIPELINES.md section or source file). The stages take raw values (what the original *function*
accepts); what the original does to a *config value* before calling them lives here.

* ``openclaw`` — ``agents.defaults.memorySearch`` (:mod:`.openclaw`)
* ``lancedb-pro`` — the memory-lancedb-pro plugin config / its ``retrieval`` block (:mod:`.lancedb_pro`)
* ``hookclaw-v2.0``, ``hookclaw-v2.1`` — the HookClaw plugin config (:mod:`.hookclaw`)
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from retrievers.presets.config import hookclaw, lancedb_pro, openclaw
from retrievers.presets.config.common import ConfigError, Resolution

#: system name → resolve function
FRONT_ENDS: dict[str, Callable[..., Resolution]] = {
    "openclaw": openclaw.resolve,
    "lancedb-pro": lancedb_pro.resolve,
    "hookclaw-v2.0": hookclaw.resolve_v20,
    "hookclaw-v2.1": hookclaw.resolve_v21,
}


def read_config(path: str | Path) -> Any:
    """A JSON config file (NaN / Infinity literals accepted, as Python's json reads them). One-line errors."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid JSON (line {exc.lineno}: {exc.msg}); JSON5 comments and "
                          f"trailing commas are not read") from None


#: per-call settings each front end takes (anything else given is a one-line error)
CALL_OPTIONS = {"openclaw": ("agent", "provider"), "lancedb-pro": ("limit", "category"),
                "hookclaw-v2.0": (), "hookclaw-v2.1": ()}


def from_config(system: str, config: Any, **call: Any) -> Resolution:
    """Resolve ``config`` as ``system`` does (see :data:`FRONT_ENDS`); ``call`` carries per-call settings
    (openclaw: ``agent``, ``provider``; lancedb-pro: ``limit``, ``category``)."""
    fn = FRONT_ENDS.get(system)
    if fn is None:
        raise ConfigError(f"unknown system {system!r} (valid: {', '.join(FRONT_ENDS)})")
    given = {k: v for k, v in call.items() if v is not None}
    wrong = sorted(set(given) - set(CALL_OPTIONS[system]))
    if wrong:
        takes = ", ".join("--" + o for o in CALL_OPTIONS[system]) or "none"
        raise ConfigError(f"--{wrong[0]} does not apply to --system {system} (it takes: {takes})")
    return fn(config, **given)


def _toml_value(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return v  # tomli_w writes inf / -inf
    if isinstance(v, dict):
        return {k: _toml_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_toml_value(x) for x in v]
    return v


def preset_toml(res: Resolution, name: str) -> str:
    """The preset as TOML text, headed by the resolution as comments."""
    import tomli_w  # lazy: startup

    head = [f"# {name}: written by `evalkit preset from-config --system {res.system}`",
            "# resolved as the original resolves its config:"]
    head += [f"#   {r.line()}" for r in res.rules]
    head += [f"#   note: {n}" for n in res.notes]
    return "\n".join(head) + "\n\n" + tomli_w.dumps(_toml_value(res.preset(name)))


def resolution_text(res: Resolution) -> str:
    """What the user reads: the resolved config (the original's names) and how each value was obtained."""
    lines = [f"{res.system}: resolved configuration (as the original runs it)"]
    lines += [f"  {r.line()}" for r in res.rules]
    lines += [f"  note: {n}" for n in res.notes]
    lines.append(f"  → preset extends {res.extends}: {res.summary}")
    return "\n".join(lines)


__all__ = ["FRONT_ENDS", "CALL_OPTIONS", "Resolution", "from_config", "read_config", "preset_toml", "resolution_text"]
