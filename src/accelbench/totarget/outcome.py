"""What one run to a target produced: its evaluation points and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from accelbench.input_stats import InputStats

Status = Literal["reached", "not_reached", "diverged"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """The target of every seed's run and when a run stops short of it."""

    target: float
    eval_every: int
    """Training samples between evaluations (rounded up to whole steps)."""
    max_time_s: float
    """Cap on the training clock (evaluations included)."""
    max_samples: int
    """Cap on the training samples."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalPoint:
    """One evaluation on the held-out split."""

    samples: int
    """Training samples (sequences or images) seen before this evaluation."""
    time_s: float
    """Seconds since the training clock started, this evaluation included."""
    metric: float
    """The held-out metric (loss in nats, or accuracy)."""
    train_loss: float
    """The last training step's loss."""
    energy_j: float | None = None
    """Energy of the device boundary from the clock's start to this point (the run layer
    fills it from the sensors' samples, or an estimate's power x ``time_s``); None:
    unavailable (the record's energy says why)."""
    energy_rel_95: float | None = None
    """95% relative error bound of ``energy_j`` (``Energy.point_rel_95``); None: none
    (absent from records stored before point bounds)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOutcome:
    """One seed's run, as the framework backend returns it."""

    seed: int
    status: Status
    reason: str
    """Why it stopped: the target reached, the cap hit, or the non-finite loss."""
    startup_s: float
    """Building the model, optimizer and data before the clock started (reported apart)."""
    time_s: float
    """Training clock at the stop, evaluations included."""
    samples: int
    eval_s: float
    """The part of ``time_s`` spent evaluating."""
    points: tuple[EvalPoint, ...]
    input: InputStats | None = None
    """The step's wait for its batches over the run, as ``run --data`` measures it (None:
    batches drawn in memory, or a record from before it was measured)."""

    def best(self, *, lower_is_better: bool) -> float | None:
        """The best held-out metric seen (None before any evaluation)."""
        values = [p.metric for p in self.points]
        if not values:
            return None
        return min(values) if lower_is_better else max(values)
