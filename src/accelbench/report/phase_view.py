"""The report's phase table and notes (HTML and Markdown), from each charted case's phases
in words (:mod:`accelbench.phase_text`); :mod:`accelbench.report.phase_plots` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.phase_text import ms as ms
from accelbench.phase_text import notes, table_rows
from accelbench.phases import PHASE_MEANING, SUM_TOLERANCE_REL
from accelbench.result import Result

EXPLAINED = (
    "With `--phases`, a case's training step is split into its phases: "
    + "; ".join(f"{name}: {meaning}" for name, meaning in PHASE_MEANING.items())
    + ". Time per phase is measured directly in an attribution pass after the measured "
    "window (synchronised at each phase boundary), so the headline throughput is never "
    "measured on a changed step; the in-step phases' sum is checked against the measured "
    f"step time (\u00b1{SUM_TOLERANCE_REL:.0%}). No power sensor resolves a phase inside "
    "one step (NVML updates about every 100 ms), so energy per phase comes from "
    "differential steady-state loops (forward only, forward + backward, the full step, and "
    "for a data-parallel case the step without gradient all-reduce), each at least as long "
    "as the case's energy window, with bootstrap CIs over repeated trials; the same loops "
    "give a second, differential time that must agree with the direct one. A phase whose "
    "energy CI includes 0 is shown as indistinguishable from 0, a negative difference as "
    "negative, an energy without a sensor as unavailable with the reason: never clipped."
)
"""The report's words on the phase figures (HTML and Markdown)."""


def report_rows(cases: Sequence[tuple[Any, Result]]) -> list[dict[str, str]]:
    """The report's phase table: one row per phase of each charted case (``cases``:
    (row, result) pairs, :func:`accelbench.report.phase_plots.phase_rows`)."""
    from accelbench.report.phase_plots import bar_label

    out = []
    for row, r in cases:
        for i, cells in enumerate(table_rows(r)):
            out.append({"case": bar_label(row) if i == 0 else "", "id": r.id[:8]
                        if i == 0 else "", **cells})
    return out


def report_notes(cases: Sequence[tuple[Any, Result]]) -> list[str]:
    """Each charted case's phase notes (the sum check, disagreements, the record's own)."""
    from accelbench.report.phase_plots import bar_label

    return [f"{bar_label(row)}: {note}" for row, r in cases for note in notes(r)]
