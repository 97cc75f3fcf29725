"""Starting JAX in this process, and naming its devices: what the backend, the FLOP counter
and the operator benchmarks share.

jax reads its environment once, at import: :func:`import_jax` sets it first
(:func:`prepare_process`), so every module of this backend gets jax through it.
"""

from __future__ import annotations

import functools
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
        if spec.device == "cpu" and spec.topology.devices:
            host_devices(spec.topology.devices)


#: The XLA flag that splits the CPU into host devices.
_HOST_DEVICES = "--xla_force_host_platform_device_count"


def host_devices(n: int) -> None:
    """Ask for ``n`` XLA host devices on the CPU (``--devices N`` of a CPU case): through
    ``XLA_FLAGS`` and jax's ``jax_num_cpu_devices``, which act only before jax starts its
    CPU client; :func:`mesh_devices` says so where it had started already."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if
             not f.startswith(_HOST_DEVICES)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{_HOST_DEVICES}={n}"])
    import contextlib
    import sys

    jax = sys.modules.get("jax")
    if jax is not None:  # the client started already: mesh_devices says so
        with contextlib.suppress(Exception):
            jax.config.update("jax_num_cpu_devices", n)


def mesh_devices(device: str, n: int) -> list[Any]:
    """``n`` devices of the platform of ``device`` (the mesh of ``--devices N``): one
    process's from its index on; of many jax.distributed processes, ``n`` / processes of
    each process's own, from the index on in each, in process order (a process may see
    more devices than its share: a CPU split into more host devices, a GPU node's).

    Raises:
        UnsupportedError: jax sees fewer.
    """
    jax = import_jax()
    kind, _, index = normalize_device(device).partition(":")
    platform = {"cuda": "gpu"}.get(kind, kind)
    try:
        seen = list(jax.devices(platform))
    except RuntimeError:
        seen = []
    processes = sorted({d.process_index for d in seen}) or [0]
    per = max(1, n // len(processes))
    devices: list[Any] = []
    for p in processes:
        devices += [d for d in seen if d.process_index == p][int(index or 0):][:per]
    if len(devices) < n:
        how = (" (XLA host devices are fixed when jax starts its CPU client, before which "
               "--devices sets them; this process had started it)" if kind == "cpu" else "")
        if len(processes) > 1:
            raise UnsupportedError(f"--devices {per}: one of the {len(processes)} processes "
                                   f"sees fewer {kind} devices from {device} on ({len(devices)} "
                                   f"of the mesh's {n} in all){how}")
        raise UnsupportedError(f"--devices {n}: jax sees {len(devices)} {kind} device(s) "
                               f"from {device} on{how}")
    return devices[:n]


def limit_cpus(n: int | None) -> int:
    """Restrict this process to its first ``n`` allowed CPUs (XLA's pools follow the
    affinity; it sizes them once per process); return the CPUs it may use."""
    if not hasattr(os, "sched_setaffinity"):
        return os.cpu_count() or 1
    if n is not None:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    return len(os.sched_getaffinity(0))


def import_jax() -> Any:
    """The jax module, imported after :func:`prepare_process` (without a spec), with
    :func:`linear_time_tracing` applied."""
    prepare_process()
    import jax

    linear_time_tracing()
    return jax


@functools.cache
def linear_time_tracing() -> bool:
    """Make a probe of a tracer's ``sharding`` cheap again; True when this process's jax
    needed it (and now has it). Done once per process: :func:`import_jax` calls it on
    every use, some inside ``--phases``' timed pieces.

    flax NNX's ``Variable.set_value`` probes ``getattr(value, "sharding", None)`` on every
    assignment (a BatchNorm's running statistics, an RNG stream's counter). Under a trace
    the value is a tracer whose ``sharding`` raises AttributeError, and jax (0.10) builds
    that error's message by walking every equation traced so far: tracing a model with
    BatchNorm is quadratic in its size. Tiny Inception-v3: 37 s to count its FLOPs, of
    which 25 s in that message, on this project's 2-core CPU. Upstream removed the walk
    (jax-ml/jax#40041, "Avoid quadratic tracing behaviour"); this does the same here: the
    same AttributeError, without the tracer's origin in its message. Nothing else changes.
    """
    try:
        from jax._src import core
    except ImportError:  # pragma: no cover - a jax without this module
        return False
    prop = core.Tracer.__dict__.get("sharding")
    if not isinstance(prop, property) or prop.fget is None:
        return False
    names = getattr(prop.fget, "__code__", None)
    if names is None or "_origin_msg" not in names.co_names:
        return False  # a jax that no longer walks the trace there

    def sharding(self: Any) -> Any:
        raise AttributeError(
            f"The 'sharding' attribute is not available on {self._error_repr()}.")

    core.Tracer.sharding = property(sharding)  # type: ignore[assignment]
    return True


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
    """The ``jax.Device`` of an accelbench device name (among this process's own: one of
    many jax.distributed processes counts its devices from 0 too).

    Raises:
        UnsupportedError: JAX does not see that device.
    """
    jax = import_jax()
    dev = normalize_device(device)
    kind, _, index = dev.partition(":")
    platform = {"cuda": "gpu"}.get(kind, kind)
    try:
        devices = jax.local_devices(backend=platform)
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
