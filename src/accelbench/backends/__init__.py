"""Framework backends (PyTorch, JAX) behind one declared seam.

``accelbench.backends.base`` declares the :class:`~accelbench.backends.base.Backend`
protocol and the registry; ``accelbench.backends.probe`` asks a backend, in a
subprocess, what this machine offers, so callers outside this package never
import a framework. Nothing outside ``accelbench.backends`` imports torch or jax.
"""

from accelbench.backends.base import (
    Backend,
    DeviceInfo,
    FlopCount,
    TrainStep,
    get_backend,
    register_backend,
    workload_flops,
)

__all__ = ["Backend", "DeviceInfo", "FlopCount", "TrainStep", "get_backend", "register_backend",
           "workload_flops"]
