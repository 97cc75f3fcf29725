"""Plugin workloads whose MODEL code misbehaves, for the isolation tests of ``list``,
``roofline --model`` and friends (tests/test_isolation_commands.py).

torch is imported inside the methods, so importing this plugin (which the CLI
process does for ``--plugin``) runs no framework and no model code.

* ``iso_segv``: the model's forward kills its process with SIGSEGV;
* ``iso_hang``: the model's forward sleeps for an hour;
* ``iso_exit``: building the model calls ``sys.exit(3)``;
* ``iso_marker``: a working MLP whose constructor writes ``<pid>`` into a new file
  under ``$ACCELBENCH_TEST_ISO_MARKER_DIR``, so a test can see which processes built it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from accelbench.workloads.registry import Batch, Workload, register_workload


def _mlp(forward_hook: Any = None) -> Any:
    from torch import nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            marker_dir = os.environ.get("ACCELBENCH_TEST_ISO_MARKER_DIR")
            if marker_dir and forward_hook is None:
                path = os.path.join(marker_dir, f"built-{os.getpid()}-{time.monotonic_ns()}")
                with open(path, "w") as f:
                    f.write(str(os.getpid()))
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

        def forward(self, x: Any) -> Any:
            if forward_hook is not None:
                forward_hook()
            return self.net(x)

    return MLP()


class _Base(Workload):
    family = "test"
    sample_unit = "sample"
    default_batch_sizes = {"tiny": (4,), "small": (8,), "paper": (16,)}
    learning_rate = 0.05

    def make_batch(self, size, batch_size, device, generator) -> Batch:  # type: ignore[no-untyped-def]
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        y = torch.randint(0, 4, (batch_size,), generator=generator).to(device)
        return (x, y)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        from torch import nn

        x, y = batch
        return nn.functional.cross_entropy(model(x), y)


def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang() -> None:
    time.sleep(3600)


@register_workload
class IsoSegv(_Base):
    name = "iso_segv"
    description = "forward segfaults"

    def build_model(self, size):  # type: ignore[no-untyped-def]
        return _mlp(_segfault)


@register_workload
class IsoHang(_Base):
    name = "iso_hang"
    description = "forward hangs"

    def build_model(self, size):  # type: ignore[no-untyped-def]
        return _mlp(_hang)


@register_workload
class IsoExit(_Base):
    name = "iso_exit"
    description = "building the model exits the process"

    def build_model(self, size):  # type: ignore[no-untyped-def]
        sys.exit(3)


@register_workload
class IsoMarker(_Base):
    name = "iso_marker"
    description = "a working MLP that records which process built it"

    def build_model(self, size):  # type: ignore[no-untyped-def]
        return _mlp()
