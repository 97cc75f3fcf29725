"""A worker's record of its case: filled in as the case runs, finished when it ends.

The record is the request's draft :class:`~accelbench.result.Result`, completed field by
field (:class:`Draft`), so a case that fails late still reports what was known; the
worker sends it as :meth:`Result.to_dict`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import caused_by_oom
from accelbench.execution.request import utc_now
from accelbench.result import Result, Status

if TYPE_CHECKING:
    from accelbench.backends.base import TrainStep
    from accelbench.spec import RunSpec


@dataclasses.dataclass(slots=True)
class Draft:
    """The case's record as far as it is known: a case that fails late (OOM in its first
    step) still reports what was known before (parameter count, build time)."""

    result: Result

    def add(self, **fields: Any) -> None:
        """Set fields of the record (names are :class:`Result` fields)."""
        self.result = dataclasses.replace(self.result, **fields)


def check_loss(step: TrainStep, where: str, found: list[str]) -> None:
    """Append one line to ``found`` when the last loss is NaN or infinite."""
    if found:
        return
    loss = step.loss_value()
    if loss is not None and not math.isfinite(loss):
        found.append(f"loss became {loss} at {where}; the case diverged (lower the learning "
                     "rate or use a wider precision)")


def count_here(spec: RunSpec) -> dict[str, Any]:
    """The model's facts, counted here (inside the isolated worker, because counting runs
    the user's model code); the parent caches the answer."""
    from accelbench.planning import facts

    return facts.count_here(spec.workload, spec.size, spec.framework)


def flop_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The FLOP fields of the record among ``facts`` (the built model's own parameter
    count is already in the record)."""
    from accelbench.planning.facts import FLOP_KEYS

    return {k: v for k, v in facts.items() if k in FLOP_KEYS}


def backend_extra(step: TrainStep, flop_per_sample: float | None) -> dict[str, Any]:
    """The backend's own facts, with a note where its FLOP estimate disagrees with ours."""
    try:
        extra = dict(step.extra())
    except Exception as exc:  # extra facts must never hide the measurement
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    theirs, ours = extra.get("xla_flop_per_sample"), flop_per_sample
    if theirs and ours:
        diff = theirs / ours - 1.0
        extra["xla_flop_rel_diff"] = diff
        if abs(diff) > 0.10:
            extra["note"] = (
                f"XLA's cost analysis counts {theirs / 1e9:.4g} GFLOP/sample, "
                f"{diff:+.0%} from accelbench's {ours / 1e9:.4g} (XLA also counts elementwise "
                "work, and counts a loop body such as an RNN's scan once)"
            )
    return extra


def failure(framework: str, exc: BaseException) -> tuple[Status, str]:
    """The status (``oom`` or ``error``) and the one-line reason of a case that raised."""
    status: Status = "oom" if caused_by_oom(framework, exc) else "error"
    return status, f"{type(exc).__name__}: {exc}".strip()


def finish(result: Result) -> Result:
    """Stamp the end time and the machine on a finished case's record."""
    try:
        from accelbench.devices import machine_info

        machine: dict[str, Any] = machine_info(result.spec.framework)
    except Exception as exc:  # machine info must never hide the measurement
        machine = {"error": f"machine info unavailable: {exc}"}
    support = precision_support(result.spec)
    if support is not None:
        machine["precision_support"] = support
    return dataclasses.replace(result, finished_at=utc_now(), machine=machine)


def precision_support(spec: RunSpec) -> dict[str, Any] | None:
    """Whether the case's CPU computes its mixed precision natively (``amp_bf16`` with
    no bf16 instructions is emulated, and slow): :func:`~accelbench.devices.discovery.
    precision_support` for a CPU case; None for an accelerator or a precision that needs
    no instructions of its own."""
    if spec.device != "cpu":
        return None
    try:
        from accelbench.devices.discovery import cpu_precision_support

        return cpu_precision_support(spec.precision)
    except Exception:  # never hide the measurement
        return None
