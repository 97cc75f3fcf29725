"""Workloads for the isolation tests: a tiny MLP that trains, and three that misbehave.

Loaded as a plugin file (``--plugin tests/plugins/faulty.py``), the same way a
user's own workload module is, so the worker must import it by path. torch is imported
inside the methods (as in tests/plugins/iso_models.py): the CLI process that loads the
plugin stays without it, as a command without one would (torch's import: 1.4 s quiet,
about 4 s at load 6, in every command of the many tests that load a test plugin).
"""

from __future__ import annotations

import ctypes
import os
import time

from accelbench.workloads.registry import Batch, Workload, register_workload


class _TinyMLP(Workload):
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (8,), "small": (32,), "paper": (64,)}
    learning_rate = 0.05

    def build_model(self, size):  # type: ignore[no-untyped-def]
        from torch import nn

        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)


@register_workload
class TinyMLP(_TinyMLP):
    name = "test_mlp"
    description = "a 2-layer MLP that trains in microseconds"


@register_workload
class RaisesMemoryError(_TinyMLP):
    name = "test_oom"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        raise MemoryError("synthetic host out-of-memory")


@register_workload
class Hangs(_TinyMLP):
    name = "test_hang"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        time.sleep(3600)
        raise AssertionError("unreachable")


@register_workload
class Segfaults(_TinyMLP):
    name = "test_segfault"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        if os.environ.get("ACCELBENCH_TEST_NO_SEGFAULT"):
            return super().loss(model, batch)
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        raise AssertionError("unreachable")


@register_workload
class Raises(_TinyMLP):
    name = "test_error"

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        raise ValueError("a bug in the user's model")


@register_workload
class FailsAfterTwelve(_TinyMLP):
    """Trains 12 steps (2 warm-up + 10 measured with --warmup-min/max 2 --iterations 10),
    then raises: whatever runs after the measured window (--phases) fails."""

    name = "test_fails_after_12"
    calls = 0

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        FailsAfterTwelve.calls += 1
        if FailsAfterTwelve.calls > 12:
            raise ValueError("fails after the measured window")
        return super().loss(model, batch)
