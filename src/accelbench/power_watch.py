"""What ``accelbench power`` watches: :class:`PowerWatch`, its options declared once (the
command line is generated from the fields, and :func:`accelbench.meters.watch_power`
checks its arguments by building one)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.options import option, validate_fields
from accelbench.spec import MAX_SECONDS


@dataclass(frozen=True, kw_only=True, slots=True)
class PowerWatch:
    """How often and how long live power is shown."""

    interval_ms: int = option(500, flag="--interval-ms", lo=1, hi=3_600_000,
                              help="refresh interval")
    duration: float | None = option(None, flag="--duration", lo=0.0, lo_open=True,
                                    hi=MAX_SECONDS,
                                    help="seconds to watch (default: until Ctrl-C)")

    def __post_init__(self) -> None:
        validate_fields(self)  # NaN or Inf would watch forever
