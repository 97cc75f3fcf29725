"""Test plugin: ``warm_spy``, a tiny regressor whose module notes, when it is imported,
whether torch was already imported in that process (this file imports torch only inside
its methods). Its model, built only in a case's worker, writes that note with the
worker's pid and parent pid to ``$ACCELBENCH_TEST_WARM_SPY`` (one JSON line a build)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from accelbench.workloads import Batch, Workload, register_workload

#: Whether torch was imported before this plugin: in a worker forked by the warm server,
#: yes (the server imported it before any request); in a fresh ``python -m``, no.
TORCH_BEFORE_PLUGIN = "torch" in sys.modules


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


@register_workload
class WarmSpy(Workload):
    name = "warm_spy"
    family = "mlp"
    sample_unit = "sample"
    description = "one linear layer that reports how its worker started (test plugin)"
    default_batch_sizes = {"tiny": (8,), "small": (8,), "paper": (8,)}

    def build_model(self, size: str) -> Any:
        from torch import nn

        out = os.environ.get("ACCELBENCH_TEST_WARM_SPY")
        if out:
            with open(out, "a", encoding="utf-8") as f:
                f.write(json.dumps({"torch_before_plugin": TORCH_BEFORE_PLUGIN,
                                    "pid": os.getpid(), "ppid": os.getppid(),
                                    "sid": os.getsid(0),
                                    "db": os.environ.get("ACCELBENCH_DB"),
                                    "parent": _cmdline(os.getppid())}) + "\n")
        return nn.Linear(16, 1)

    def make_batch(self, size: str, batch_size: int, device: str, generator: Any) -> Batch:
        import torch

        x = torch.randn(batch_size, 16, generator=generator).to(device)
        return (x, x.sum(dim=1, keepdim=True))

    def loss(self, model: Any, batch: Any) -> Any:
        from torch import nn

        x, y = batch
        return nn.functional.mse_loss(model(x), y)


@register_workload
class WarmDies(WarmSpy):
    name = "warm_dies"
    description = "says its last words on stderr and exits with code 3 (test plugin)"

    def build_model(self, size: str) -> Any:
        print("warm_dies: last words", file=sys.stderr, flush=True)
        os._exit(3)
