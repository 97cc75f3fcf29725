"""Workloads for the distributed fault tests: one rank dies or runs out of memory mid-case.

Loaded as a plugin file (``--plugin tests/plugins/dist_faults.py``) by every rank. Each
rank writes ``rank-R.pid`` (its own pid and its agent's) into ``$ACCELBENCH_TEST_PID_DIR``
when it builds, so a test can check afterwards that none of them is left.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import torch
from torch import nn

from accelbench.workloads.registry import Batch, Workload, register_workload

#: The rank that misbehaves, and after how many of its steps.
BAD_RANK = 1
BAD_AFTER_STEPS = 4
_STEPS = [0]  # steps this process has taken (one model per rank process)


class _DistMLP(Workload):
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (32,), "paper": (64,)}
    learning_rate = 0.05

    def build_model(self, size):  # type: ignore[no-untyped-def]
        pid_dir = os.environ.get("ACCELBENCH_TEST_PID_DIR")
        if pid_dir:
            rank = os.environ.get("RANK", "x")
            Path(pid_dir, f"rank-{rank}.pid").write_text(f"{os.getpid()} {os.getppid()}\n")
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def misbehave(self) -> None:
        raise NotImplementedError

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        _STEPS[0] += 1
        if os.environ.get("RANK") == str(BAD_RANK) and _STEPS[0] > BAD_AFTER_STEPS:
            self.misbehave()
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)


@register_workload
class RankKilled(_DistMLP):
    name = "test_dist_kill"

    def misbehave(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


@register_workload
class RankOom(_DistMLP):
    name = "test_dist_oom"

    def misbehave(self) -> None:
        raise MemoryError("synthetic out-of-memory on one rank")


@register_workload
class RankFine(_DistMLP):
    name = "test_dist_ok"

    def misbehave(self) -> None:
        pass  # every rank trains: the plugin's pid files without a fault
