"""A third framework in one file: ``toyfw``, a linear model trained with numpy.

Loaded with ``--plugin``, like a user's. It registers a backend (the framework name is a
registry key, not a fixed list), a workload, and the workload's toyfw implementation
by decorator; it touches nothing else in accelbench. tests/test_toyfw.py runs it through
the real runner and store.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelbench.backends import (
    BaseBackend,
    DeviceInfo,
    FlopCount,
    ShapeLimits,
    register_backend,
)
from accelbench.errors import ConfigError
from accelbench.workloads import Workload, implements, register_workload

#: Features of the linear model at each size.
WIDTHS = {"tiny": 8, "small": 64, "paper": 256}


@register_backend
class ToyBackend(BaseBackend):
    """numpy on the CPU: fp32 only, no fast paths, no data-parallel runs."""

    name = "toyfw"
    aliases = ("toy",)
    label = "Toy (numpy)"
    package = "numpy"
    install_hint = "pip install numpy"
    # Its facts, read by the rest of accelbench through the registry.
    stack_packages = ("numpy",)
    version_facts = (("numpy", "numpy (toyfw)"),)
    quiet_shape = {"cpu": ShapeLimits(1.6, 0.3, "toyfw's own limits")}

    def normalize_device(self, device: str) -> str:
        if device.strip().lower() not in ("cpu", "cpu:0"):
            raise ConfigError(f"unknown device {device!r} for toyfw; use cpu")
        return "cpu"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(device="cpu", name="toy CPU", vendor="cpu", precisions=("fp32",))]

    def versions(self) -> dict[str, Any]:
        return {"numpy": np.__version__}

    def build_step(self, spec: Any, impl: Any) -> ToyStep:
        return ToyStep(impl, spec)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError) or "toy out of memory" in str(exc)

    def param_count(self, impl: Any, size: str) -> int:
        return WIDTHS[size] + 1

    def count_flops(self, impl: Any, size: str, batch_size: int) -> FlopCount:
        width = WIDTHS[size]
        return FlopCount(workload=impl.workload.name, size=size, batch_size=batch_size,
                         forward_flop_per_sample=2.0 * width,
                         train_flop_per_sample=6.0 * width, method="toy_analytic",
                         device="cpu", param_count=width + 1)


class ToyStep:
    """Least-squares regression on a fixed synthetic batch, one SGD step per call."""

    def __init__(self, impl: Any, spec: Any) -> None:
        rng = np.random.default_rng(spec.seed)
        width = WIDTHS[spec.size]
        self.x = rng.standard_normal((spec.batch_size, width)).astype(np.float32)
        self.y = self.x @ rng.standard_normal(width).astype(np.float32)
        self.w = np.zeros(width, np.float32)
        self.b = np.float32(0.0)
        self.lr = np.float32(impl.workload.learning_rate)
        self.param_count = width + 1
        self.last_loss: float | None = None
        self.compile_s: float | None = None  # numpy compiles nothing

    def step(self) -> None:
        err = self.x @ self.w + self.b - self.y
        self.last_loss = float(np.mean(err * err))
        grad = 2.0 * err / len(err)
        self.w -= self.lr * (self.x.T @ grad)
        self.b -= self.lr * np.float32(grad.sum())

    def synchronize(self) -> None:
        """numpy is synchronous."""

    def loss_value(self) -> float | None:
        return self.last_loss

    def extra(self) -> dict[str, Any]:
        return {"toy": True}

    def peak_memory(self) -> tuple[int | None, str]:
        return None, "toyfw reports no memory"


@register_workload
class ToyRegression(Workload):
    name = "toy_regression"
    family = "test"
    sample_unit = "sample"
    description = "least squares on random features (toyfw only)"
    default_batch_sizes = {"tiny": (16,), "small": (64,), "paper": (256,)}
    learning_rate = 0.05
    loss_kind = "mse"


@implements("toy_regression", framework="toyfw")
class ToyRegressionImpl:
    """The toyfw implementation: the model lives in :class:`ToyStep`."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
