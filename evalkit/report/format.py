"""Number text for every human output — run reports, compare, replay, ablation, gate, tune and perf: one module, so
a value reads the same wherever it is printed and a rule is changed in one place.

Every function takes a value that may be missing (``None`` or NaN, :func:`isnan`) and returns its text; where a
table wants another mark for a missing value than the reports' en dash it says so with ``missing=``.

======================  =============================================  ====================================
function                rule                                           e.g.
======================  =============================================  ====================================
:func:`fmt`             fixed digits                                   ``0.713``
:func:`fmt_value`       fixed digits for floats, other values as text  ``0.7130``, ``12``, ``rrf``
:func:`fmt_signed`      with a sign (``zero`` for ``|v| < 5e-7``)      ``+0.012``
:func:`fmt_delta`       a difference: ``±0.000`` when it rounds to 0   ``-0.040``, ``±0.000``
:func:`fmt_pct`         a share as a percentage                        ``71.3%``
:func:`fmt_ci`          an interval of differences                     ``[-0.010, +0.020]``
:func:`fmt_ci_holm`     the Holm-level interval (``unbounded``)        ``[+0.004, +0.031]``
:func:`fmt_p_cell`      a p-value cell (:func:`~evalkit.measures.      ``0.003``, ``<0.001``, ``0.0498``
                        stats.format_p`` without ``p=``)
:func:`fmt_p3`          a p-value to 3 digits                          ``0.041``, ``<0.001``
:func:`fmt_ms`          milliseconds, digits by magnitude              ``0.412``, ``12.35``, ``1,204``
:func:`fmt_count`       a mean count, digits by magnitude              ``3.2``, ``1,204``
:func:`fmt_auto`        any perf cell: yes/NO, thousands, exponents    ``1,204``, ``3.20``, ``2.10e-04``
:func:`fmt_kilo`        a large count in k / M                         ``412k``, ``1.25M``
:func:`fmt_short`       a parameter value, 6 significant digits        ``0.333333``
:func:`fmt_mmss`        seconds as minutes and seconds                 ``3m07s``
:func:`sort_value`      a sort key that puts missing values last       (descending order)
======================  =============================================  ====================================

The run folder's metrics files have their own fixed rule (6 decimals, empty when missing:
:func:`evalkit.runfolder.write.value_text`): that is a file format, not a display.

Usage::

    from evalkit.report.format import fmt, fmt_delta
    fmt(0.71349), fmt_delta(-0.00004), fmt(float("nan"))   # ('0.713', '±0.000', '–')
"""
from __future__ import annotations

import math

import numpy as np

from evalkit.measures import stats

MISSING = "–"


def isnan(v) -> bool:
    """``None`` or a float NaN (numpy floats included)."""
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))


def fmt(v, digits: int = 3, missing: str = MISSING) -> str:
    """``v`` with ``digits`` decimals."""
    return missing if isnan(v) else f"{v:.{digits}f}"


def fmt_value(v, digits: int = 4, missing: str = MISSING) -> str:
    """A float with ``digits`` decimals; any other value (an int, a name) as its text."""
    if isnan(v):
        return missing
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def fmt_signed(v, digits: int = 3, missing: str = MISSING, zero: str | None = None) -> str:
    """``v`` with its sign; ``zero`` (when given) for a value within 5e-7 of 0."""
    if isnan(v):
        return missing
    return zero if zero is not None and abs(v) < 5e-7 else f"{v:+.{digits}f}"


def fmt_delta(v, digits: int = 3) -> str:
    """A difference with its sign; ``±0.000`` when it rounds to zero at ``digits`` (no ``+0.000`` / ``-0.000``)."""
    if isnan(v):
        return MISSING
    s = f"{v:+.{digits}f}"
    return "±0.000"[:digits + 3] if s.strip("+-0.") == "" else s


def fmt_pct(v, digits: int = 1, missing: str = MISSING) -> str:
    """A share in [0, 1] as a percentage: ``0.713`` → ``71.3%``."""
    return missing if isnan(v) else f"{100 * v:.{digits}f}%"


def fmt_ci(lo, hi, digits: int = 3) -> str:
    """An interval of differences, ``[lo, hi]`` with signs."""
    if isnan(lo) or isnan(hi):
        return MISSING
    return f"[{fmt_delta(lo, digits)}, {fmt_delta(hi, digits)}]"


def fmt_ci_holm(lo, hi) -> str:
    """The Holm-adjusted interval of a comparison (:attr:`~evalkit.measures.stats.PairedResult.ci_holm_low` /
    ``_high``): ``unbounded`` when too few queries differ to reject any difference at its level."""
    if isnan(lo) or isnan(hi):
        return MISSING
    if math.isinf(lo) or math.isinf(hi):
        return "unbounded"
    return fmt_ci(lo, hi)


def fmt_p_cell(p, alpha: float = stats.ALPHA) -> str:
    """A p-value in a table cell: :func:`evalkit.measures.stats.format_p` (as many digits as it takes to stay on
    p's side of ``alpha``: 0.0098 is ``0.0098`` at alpha 0.01, never ``0.010`` beside a mark) without its ``p=``:
    ``0.003``, ``<0.001``, ``–``."""
    return stats.format_p(p, alpha).removeprefix("p=").removeprefix("p")


def fmt_p3(v, missing: str = "-") -> str:
    """A p-value to 3 decimals, ``<0.001`` below that."""
    if isnan(v):
        return missing
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def fmt_ms(v: float) -> str:
    """Milliseconds: 3 decimals below 1, 2 below 100, then whole with thousands separators."""
    return f"{v:.3f}" if v < 1 else (f"{v:.2f}" if v < 100 else f"{v:,.0f}")


def fmt_count(v: float) -> str:
    """A mean count: 1 decimal below 100, then whole with thousands separators."""
    return MISSING if isnan(v) else (f"{v:.1f}" if v < 100 else f"{v:,.0f}")


def fmt_auto(v) -> str:
    """Any cell of a perf table: ``-`` when missing, yes / NO for a flag, integers with thousands separators,
    floats with digits by magnitude (exponent below 0.001)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if v != v:
            return "-"
        a = abs(v)
        if a >= 1000:
            return f"{v:,.0f}"
        if a >= 100:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3f}" if a >= 0.001 or a == 0 else f"{v:.2e}"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    return str(v)


def fmt_kilo(x: float) -> str:
    """A large count: ``1.25M`` from a million up, else ``412k``."""
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k"


def fmt_short(v) -> str:
    """A parameter value in a config string: floats to 6 significant digits, lists item by item."""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_short(x) for x in v) + "]"
    return str(v)


def fmt_mmss(seconds: float) -> str:
    """Seconds as ``3m07s``."""
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def sort_value(v) -> float:
    """A sort key for a value that may be missing: the value, or -1.0 (last in a descending order of values >= 0)."""
    return -1.0 if isnan(v) else float(v)
