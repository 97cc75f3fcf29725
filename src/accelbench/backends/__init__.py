"""Framework backends (PyTorch, JAX, or a plugin's) behind one declared seam.

``accelbench.backends.base`` declares the :class:`~accelbench.backends.base.Backend`
protocol (every framework decision: devices, precisions, the train step, fast paths,
distributed hooks, OOM, FLOPs); ``accelbench.backends.registry`` keys backends by
framework name; ``accelbench.isolation.ask`` asks a backend, in a subprocess, what
this machine offers, so callers outside this package never import a framework.
Nothing outside ``accelbench.backends`` imports torch or jax.
"""

from accelbench.backends.base import (
    Backend,
    BaseBackend,
    DeviceInfo,
    FlopCount,
    ShapeLimits,
    TrainStep,
    caused_by_oom,
    get_backend,
    workload_flops,
)
from accelbench.backends.registry import (
    DEFAULT_FRAMEWORK,
    compile_label,
    framework_label,
    framework_names,
    normalize_framework,
    register_backend,
    stack_packages,
)

__all__ = ["DEFAULT_FRAMEWORK", "Backend", "BaseBackend", "DeviceInfo", "FlopCount",
           "ShapeLimits", "TrainStep", "caused_by_oom", "compile_label",
           "framework_label", "framework_names", "get_backend", "normalize_framework",
           "register_backend", "stack_packages", "workload_flops"]
