"""The step's wait for its next batch, timed where the step asks for it, and the record's
``input`` section (DESIGN: input pipelines are measured where the step asks for its next
batch, never guessed inside the loader).

The step (a backend's) adds one wait per batch it takes; the worker marks where the
measured window opens (:meth:`InputTimer.open`) and, after it, reads the window's waits
beside its step times (:meth:`InputTimer.window`). Each step time includes its wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from accelbench.stats import bootstrap_median_ci

METHOD = ("time from asking the loader for the next batch until it is on the step's "
          "device, inside each timed step (the step time includes it)")


class InputTimer:
    """Waits for batches, in the order the step took them."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = dict(facts)
        """What the record says about the pipeline (source, path, layout, workers ...)."""
        self.waits_s: list[float] = []
        self._start = 0

    def take(self, fetch: Callable[[], Any]) -> Any:
        """``fetch()``'s batch, its wait added."""
        t0 = time.perf_counter()
        batch = fetch()
        self.waits_s.append(time.perf_counter() - t0)
        return batch

    def open(self) -> None:
        """The measured window starts with the next batch taken."""
        self._start = len(self.waits_s)

    def window(self, steps: int, times_s: Sequence[float], block_steps: Sequence[int] = ()
               ) -> dict[str, Any]:
        """The record's ``input``: the facts, each measured step's wait, their median and
        its 95% CI, and the stall fraction (waits over step time, the window's sums).
        ``times_s``/``block_steps``: the loop's series (per-step means of blocks where
        ``block_steps`` is given)."""
        waits = self.waits_s[self._start:self._start + steps]
        total = (sum(t * k for t, k in zip(times_s, block_steps, strict=False))
                 if block_steps else sum(times_s))
        out: dict[str, Any] = {**self.facts, "method": METHOD, "wait_s": waits}
        if waits:
            lo, hi = bootstrap_median_ci(waits)
            import statistics

            out["wait_median_s"] = statistics.median(waits)
            out["wait_median_ci95_s"] = [lo, hi]
            out["wait_mean_s"] = sum(waits) / len(waits)
            out["stall_fraction"] = sum(waits) / total if total > 0 else None
        return out


def stall_line(record: dict[str, Any] | None) -> str | None:
    """``input  generated, 2 workers: waited 1.2 ms/step (median; CI 1.0-1.4), stall
    3.1% of the step``: ``run``'s summary line, or None without an ``input`` section."""
    if not record or "wait_median_s" not in record:
        return None
    from accelbench.durations import fmt_time

    lo, hi = record.get("wait_median_ci95_s") or (None, None)
    ci = f"; CI {fmt_time(lo, 2)}-{fmt_time(hi, 2)}" if lo is not None else ""
    frac = record.get("stall_fraction")
    share = f", stall {100 * frac:.1f}% of the step time" if frac is not None else ""
    workers = record.get("loader_workers")
    return (f"{record.get('source')}, {workers} loader worker{'' if workers == 1 else 's'}: "
            f"waited "
            f"{fmt_time(record['wait_median_s'], 2)}/step (median{ci}){share}")
