"""Starting JAX in this process, and naming its devices: what the backend, the FLOP counter
and the operator benchmarks share.

jax reads its environment once, at import: :func:`import_jax` sets it first
(:func:`prepare_process`), so every module of this backend gets jax through it.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from accelbench.spec import RunSpec

_DEVICE_RE = re.compile(r"^(cpu|cuda|gpu|tpu)(?::(\d+))?$")
#: jax's default matmul precision per accelbench precision (fp32 means true fp32); the
#: same keys name the operator precisions.
MATMUL_PRECISION = {"fp32": "float32", "tf32": "tensorfloat32"}


def prepare_process(spec: RunSpec | None = None) -> None:
    """Set what XLA reads at import: no GPU memory preallocation, and the CPU threads.

    Must run before jax is imported (workers call it first). Preallocation is
    off so that memory figures and out-of-memory behaviour mean what they say;
    a thread limit restricts the process's CPU affinity, which XLA's thread
    pools follow.
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if spec is not None:
        limit_cpus(spec.threads)


def limit_cpus(n: int | None) -> int:
    """Restrict this process to its first ``n`` allowed CPUs (XLA's pools follow the
    affinity; it sizes them once per process); return the CPUs it may use."""
    if not hasattr(os, "sched_setaffinity"):
        return os.cpu_count() or 1
    if n is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    return len(os.sched_getaffinity(0))


def import_jax() -> Any:
    """The jax module, imported after :func:`prepare_process` (without a spec)."""
    prepare_process()
    import jax

    return jax


def normalize_device(device: str) -> str:
    """Canonical device string: ``cpu``, ``cuda:N`` (also typed ``gpu:N``) or ``tpu:N``.

    Raises:
        ConfigError: a name the JAX backend does not know.
    """
    m = _DEVICE_RE.match(device.strip().lower())
    if not m:
        raise ConfigError(f"unknown device {device!r} for jax; use cpu, cuda:N or tpu:N")
    kind, index = m.group(1), m.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise ConfigError(f"device {device!r}: only index 0 exists for cpu")
        return "cpu"
    return f"{'cuda' if kind == 'gpu' else kind}:{index or 0}"


def jax_device(device: str) -> Any:
    """The ``jax.Device`` of an accelbench device name.

    Raises:
        UnsupportedError: JAX does not see that device.
    """
    jax = import_jax()
    dev = normalize_device(device)
    kind, _, index = dev.partition(":")
    platform = {"cuda": "gpu"}.get(kind, kind)
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        devices = []
    i = int(index or 0)
    if i >= len(devices):
        raise UnsupportedError(f"device {dev} is unavailable: jax sees {len(devices)} {kind}")
    return devices[i]


def split_state(model: Any) -> tuple[Any, Any, Any]:
    """``(graphdef, params, rest)`` of an NNX model: what the functional step carries."""
    from flax import nnx

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)  # type: ignore[misc]
    return graphdef, params, rest
