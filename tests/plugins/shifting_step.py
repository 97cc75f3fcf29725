"""Workloads whose step time shifts between workers, like a real model's does (memory
layout, thread placement, clocks), but by a known amount: each worker process sleeps a
fixed per-process time per step, ``BASE_S`` x a factor taken in turn from ``FACTORS``
by the order in which processes first train (recorded in ``$ACCELBENCH_TEST_SHIFT_DIR``).
Within one worker the step time is steady, so one run's CI is tight while two runs of
the same case differ by far more than it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from accelbench.workloads.registry import Batch, Workload, register_workload

BASE_S = 0.03
FACTORS = (1.0, 3.0, 2.0)
_factor: dict[int, float] = {}


def process_factor() -> float:
    """This process's factor (the n-th process to train gets ``FACTORS[n % 3]``)."""
    pid = os.getpid()
    if pid not in _factor:
        folder = os.environ.get("ACCELBENCH_TEST_SHIFT_DIR")
        if not folder:
            _factor[pid] = 1.0
        else:
            log = Path(folder) / "pids"
            with log.open("a+", encoding="utf-8") as f:  # workers run one at a time
                f.seek(0)
                seen = f.read().split()
                f.write(f"{pid}\n")
            _factor[pid] = FACTORS[len(seen) % len(FACTORS)]
    return _factor[pid]


class _Shifting(Workload):
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (8,), "paper": (8,)}
    learning_rate = 0.01

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        if x.device.type != "meta":  # not while FLOPs are counted
            time.sleep(BASE_S * process_factor())
        return nn.functional.cross_entropy(model(x), y)


@register_workload
class ShiftingStep(_Shifting):
    name = "shifting_step"
    description = "a step that sleeps a per-worker amount (tests of repeated runs)"


@register_workload
class ShiftingStepB(_Shifting):
    name = "shifting_step_b"
    description = "a second such case, to see repeats interleaved in a suite"
