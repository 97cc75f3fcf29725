"""Short times for people: a step of 12 µs and one of 2 s both read with significant digits.

A fixed ``{ms:.3f} ms`` printed a JAX step of a few hundred nanoseconds as ``0.000 ms``;
:func:`fmt_time` picks the unit (ns, µs, ms, s) so that a non-zero time never reads as
zero.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "\u00b5s"), (1e-9, "ns"))


def fmt_time(seconds: float | None, digits: int = 4) -> str:
    """``seconds`` with ``digits`` significant digits in the largest unit (s, ms, µs, ns)
    that keeps it at 1 or more: ``12.35 ms``, ``840.2 µs``, ``3.1 ns``; ``0 s`` for zero;
    ``-`` for None, NaN or a negative time."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    if seconds == 0:
        return "0 s"
    for scale, unit in _UNITS:
        if seconds >= scale or unit == "ns":
            value = seconds / scale
            text = f"{value:.{digits}g}"
            if "e" in text and value >= 1:  # 1.234e+04 s: the digits, not a power
                text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
    raise AssertionError("unreachable")


def fmt_ms(seconds: float | None) -> str:
    """``seconds`` as a number of milliseconds for a column headed in ms: 3 significant
    digits below 100 ms (``0.000312``, ``12.3``), whole ms above (``1,234``)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def utc_now() -> str:
    """The current UTC time as records and the store keep it (ISO 8601, milliseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
