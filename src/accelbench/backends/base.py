"""The framework seam: the :class:`Backend` protocol and the registry of backends.

A backend owns everything that touches a framework: device names and checks,
the precisions each device supports, building a case's training step,
synchronisation, OOM classification, FLOP and parameter counting, the
software/device versions stored with a record, and the operator benchmarks it
can run. Everything outside ``accelbench.backends`` reaches a framework only
through this protocol, so the CLI, store, report and analysis layers import
none.

Backend modules import their framework inside functions only: looking a
backend up is free, and a missing framework fails at the point of use with
the install command (:class:`~accelbench.errors.UnsupportedError`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from accelbench.backends import registry
from accelbench.errors import ConfigError, UnsupportedError

if TYPE_CHECKING:
    from accelbench.backends.ranks import DistributedHooks
    from accelbench.spec import FastPaths, RunSpec
    from accelbench.workloads.registry import Workload


@runtime_checkable
class TrainStep(Protocol):
    """One case's training step, built once on its device by a backend."""

    param_count: int
    """Trainable parameters of the model."""
    compile_s: float | None
    """Seconds of the first call (trace + compile) where the framework compiles; else None."""

    def step(self) -> None:
        """One training iteration (forward, loss, backward, optimizer); may return early."""

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work."""

    def loss_value(self) -> float | None:
        """The last step's loss as a float (synchronises)."""

    def extra(self) -> dict[str, Any]:
        """Backend-specific facts for the record (e.g. XLA's FLOP estimate)."""

    def peak_memory(self) -> tuple[int | None, str]:
        """The case's peak memory in bytes so far and what it counts (device memory
        allocated by the framework, or the worker's peak host RSS on a CPU), or
        ``(None, why)``."""

    # Optional: ``block_timer()`` (:mod:`accelbench.backends.blocks`), where the framework
    # can time several steps with one wait for the device, or none on the loop; and
    # ``phase_steps() -> PhaseSteps | None`` (see :func:`phase_steps_of`) for ``--phases``.


@runtime_checkable
class PhaseSteps(Protocol):
    """A step's pieces for ``--phases`` (:mod:`accelbench.execution.phases`): the same
    model, batch, optimizer and precision as the measured step, used only after the
    measured window (the headline step is never changed).

    Phase names are those of :data:`accelbench.phases.PHASE_NAMES`.
    """

    method: str
    """How :meth:`timed_step` separates the phases, in words, for the record."""

    def timed_step(self) -> dict[str, float]:
        """One full training step with the device synchronised at each phase boundary;
        seconds per phase in the step (``forward``, ``backward``, ``optimizer`` and, in a
        data-parallel case, ``communication``)."""

    def loops(self) -> dict[str, Callable[[], None]]:
        """One iteration of each differential loop, queued (the caller synchronises):
        ``forward`` (forward + loss, building the graph as training does, then dropped),
        ``forward_backward``, ``step`` (the full step) and, in a data-parallel case,
        ``step_no_sync`` (the full step without the gradient all-reduce)."""

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work."""

    def input_copy(self) -> Callable[[], None] | None:
        """One host-to-device copy of a batch of the case (queued), or None where the
        batch needs none (a CPU case: the batch is made where it trains)."""


def phase_steps_of(step: Any) -> PhaseSteps | None:
    """The step's :class:`PhaseSteps` (its optional ``phase_steps()``), or None where the
    backend has none."""
    make = getattr(step, "phase_steps", None)
    pieces = make() if callable(make) else None
    return pieces if isinstance(pieces, PhaseSteps) else None


def host_peak_rss() -> tuple[int | None, str]:
    """The worker process's peak resident memory (Linux ``ru_maxrss``, KiB), which on a CPU
    is where the case's tensors live; it includes the framework's own code and buffers."""
    import resource
    import sys

    if not sys.platform.startswith("linux"):
        return None, "peak host memory is read on Linux only"
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss_kib) * 1024, "host peak RSS of the worker process, framework included"


@dataclass(frozen=True, slots=True)
class FlopCount:
    """FLOPs of one sample of a workload (in the workload's sample unit)."""

    workload: str
    size: str
    batch_size: int
    forward_flop_per_sample: float
    """Forward pass including the loss."""
    train_flop_per_sample: float
    """Forward + backward (the optimizer step is elementwise and not counted)."""
    method: str
    """How it was counted, e.g. ``flop_counter``, ``flop_counter+analytic``, ``xla_cost``."""
    analytic_forward_flop_per_sample: float = 0.0
    """The part of the forward counted analytically (recurrent layers)."""
    device: str = "meta"
    """Where counting ran: ``meta`` (no memory), ``cpu``, or ``abstract`` (shapes only)."""
    by_operator: tuple[tuple[str, float], ...] = ()
    """Forward+backward FLOPs per sample by counted operator (``rnn`` for the analytic part)."""
    param_count: int | None = None
    """Trainable parameters of the model counted (the counter builds it anyway)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "size": self.size,
            "batch_size": self.batch_size,
            "forward_flop_per_sample": self.forward_flop_per_sample,
            "train_flop_per_sample": self.train_flop_per_sample,
            "method": self.method,
            "analytic_forward_flop_per_sample": self.analytic_forward_flop_per_sample,
            "device": self.device,
            "by_operator": dict(self.by_operator),
            "param_count": self.param_count,
        }


@dataclass(frozen=True, slots=True)
class ShapeLimits:
    """The widest shape of step times a quiet run of one (framework, device kind) shows
    (:mod:`accelbench.execution.shape` flags a run beyond it)."""

    q3_q1: float
    """Largest q3/q1 of the step times (within each mode when two modes are described)."""
    trimmed: float
    """Largest |trimmed mean / median - 1|."""
    basis: str
    """Where the figures come from."""
    shift: float = 0.0
    """Largest effect of two modes clustered in time (a level shift or a burst) that a
    quiet run shows: the minority mode's share x the modes' separation, about how far it
    moves the mean. 0: any clustered two modes are flagged."""


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One device a backend can run on, as its probe saw it."""

    device: str
    """Canonical name: ``cpu``, ``cuda:N``, ``mps``, ``tpu:N``."""
    name: str
    """Human name (GPU model, CPU, TPU kind)."""
    precisions: tuple[str, ...]
    """Precisions accelbench can run on it with this backend."""
    vendor: str = ""
    uuid: str | None = None
    """Vendor UUID (GPUs), used to map the device to its power sensor."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Memory, compute capability, runtime and other facts for the record."""

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.name, "precisions": list(self.precisions),
                "vendor": self.vendor, "uuid": self.uuid, **dict(self.details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceInfo:
        known = {"device", "name", "precisions", "vendor", "uuid"}
        return cls(
            device=str(data["device"]),
            name=str(data.get("name", "")),
            precisions=tuple(data.get("precisions") or ()),
            vendor=str(data.get("vendor") or ""),
            uuid=data.get("uuid"),
            details={k: v for k, v in data.items() if k not in known},
        )


class Backend(Protocol):
    """What accelbench needs from a framework: every framework decision is made here.

    Methods may import the framework. :class:`BaseBackend` gives the defaults of the
    optional decisions (no fast paths, no data-parallel runs, host OOM only).
    """

    name: str
    """Registry key (``torch``, ``jax``): what ``--framework`` takes."""
    aliases: tuple[str, ...]
    """Other names accepted for it (``pytorch``)."""
    label: str
    """Human name for reports (``PyTorch``)."""
    compile_label: str
    """What its ``compile_s`` times (``torch.compile``, ``XLA compile``)."""
    has_fast_paths: bool
    """Whether any fast path (``--compile`` ...) can act on its cases; a suite that turns
    them on leaves a framework without them at its defaults."""
    list_order: int
    """Where it sorts among the frameworks (the built-ins first)."""
    package: str
    """The import name whose presence means the framework is installed."""
    preload_modules: tuple[str, ...]
    """Framework modules its cases import lazily, on first use, which the warm server
    imports before it forks so no case pays for them (torch: ``torch._dynamo``, which the
    first optimizer built imports: 1.5-1.8 s a case here). Nothing they run at import may
    start a thread or touch a device."""
    install_hint: str
    """The command that installs the framework for accelbench."""
    models: str | None
    """Package of its built-in model files, whose ``@implements`` decorators are read
    without importing them (so listing workloads imports no framework); None for a
    plugin, whose implementations register when it is imported."""
    self_implementing: tuple[str, ...]
    """Methods that make a workload description its own implementation for this
    backend (torch: ``build_model``, ``make_batch``, ``loss``); empty for none."""
    stack_packages: tuple[str, ...]
    """Import names of the packages whose versions identify its software stack (torch:
    ``torch``; jax: ``jax``, ``jaxlib``, ``flax``, ``optax``): a warm server holds them
    imported, so installing another version of one starts a new server."""
    version_facts: tuple[tuple[str, str], ...]
    """``(key of versions(), label)`` of each version the report's machine section shows,
    in order (``("torch", "PyTorch")``)."""
    device_libraries: tuple[str, ...]
    """Keys of ``versions()`` naming the libraries under it that ``accelbench devices`` shows
    beside its version (torch: ``cuda``, ``hip``, ``cudnn``; jax: ``jaxlib``)."""
    model_sources: tuple[str, ...]
    """Glob patterns, relative to the accelbench package, of the sources that shape its
    built-in models or their count (models, model base, FLOP counter): the shipped facts'
    fingerprint (:mod:`accelbench.planning.shipped`); empty for a plugin."""
    quiet_shape: Mapping[str, ShapeLimits]
    """The shape limits of its step times by device kind (``cpu``; ``*``: any), calibrated
    from quiet runs (``benchmarks/noise.py --part 3``); a kind not here gets the limits
    of any framework."""

    def normalize_device(self, device: str) -> str:
        """Canonical device name; raises ConfigError for names the backend does not know."""

    def prepare_process(self, spec: RunSpec) -> None:
        """Set what the framework reads once at import; a worker calls it before anything."""

    def devices(self) -> list[DeviceInfo]:
        """Every device this backend can run on here (the CPU first)."""

    def versions(self) -> dict[str, Any]:
        """Framework and vendor-library versions for the machine record."""

    def build_step(self, spec: RunSpec, impl: Any) -> TrainStep:
        """The case's training step on its device (device and precision already checked)."""

    def check_fast_paths(self, fast_paths: FastPaths, device: str, workload: Workload) -> None:
        """Refuse fast paths that cannot act on a case of ``workload`` on ``device``, before
        anything runs (imports no framework).

        Raises:
            ConfigError: a fast path the framework or the workload has no use for.
            UnsupportedError: a fast path the device cannot run.
        """

    def distributed(self) -> DistributedHooks:
        """The hooks of a case on many ranks: launcher, process group, checks.

        Raises:
            ConfigError: the framework has no data-parallel runs (yet).
        """

    def is_oom(self, exc: BaseException) -> bool:
        """True when ``exc`` is an out-of-memory condition of the host or the device."""

    def param_count(self, impl: Any, size: str) -> int:
        """Trainable parameters of ``impl`` at ``size``, without allocating them."""

    def count_flops(self, impl: Any, size: str, batch_size: int) -> FlopCount:
        """FLOPs per sample of one training step of ``impl``."""

    def device_uuid(self, device: str) -> str | None:
        """Vendor UUID of ``device`` (GPUs), to map it to its power sensor."""

    def ops(self) -> OpBackend:
        """The operator benchmarks this backend can run."""


class BaseBackend:
    """Defaults of a backend's optional decisions; a backend may subclass it and override
    what its framework offers (a new framework then writes only what it has)."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    label: ClassVar[str] = ""
    compile_label: ClassVar[str] = "compile"
    has_fast_paths: ClassVar[bool] = False
    has_phases: ClassVar[bool] = False
    """Whether its steps offer :class:`PhaseSteps` (``--phases`` is refused otherwise)."""
    has_data_loader: ClassVar[bool] = False
    """Whether its steps read ``--data generated|PATH`` through a loader (refused
    otherwise); such a step has an ``input_timer`` (:class:`accelbench.data.stall.InputTimer`)."""
    has_phases_with_data: ClassVar[bool] = False
    """Whether ``--phases`` splits a step that reads data (its ``input`` phase the measured
    wait for the next batch; refused otherwise)."""
    shards_data: ClassVar[bool] = False
    """Whether its ranks read ``--data`` by data-parallel replica under the sharded modes of
    ``--parallel`` (each rank of a tensor-parallel group its replica's batch); refused
    otherwise."""
    shards: ClassVar[bool] = False
    """Whether it trains the sharded modes of ``--parallel`` (its ``check_sharding`` says
    which)."""
    mesh_devices: ClassVar[bool] = False
    """Whether one process of it drives a mesh of several devices (``--devices N``: JAX);
    refused otherwise (torch runs one device per rank)."""
    totarget: ClassVar[str | None] = None
    """The module whose ``train_to_target`` ``accelbench train`` runs (None: refused)."""
    list_order: ClassVar[int] = 100
    package: ClassVar[str]
    preload_modules: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str]
    models: ClassVar[str | None] = None
    self_implementing: ClassVar[tuple[str, ...]] = ()
    stack_packages: ClassVar[tuple[str, ...]] = ()
    version_facts: ClassVar[tuple[tuple[str, str], ...]] = ()
    device_libraries: ClassVar[tuple[str, ...]] = ()
    model_sources: ClassVar[tuple[str, ...]] = ()
    quiet_shape: ClassVar[Mapping[str, ShapeLimits]] = {}

    def prepare_process(self, spec: RunSpec) -> None:
        """Nothing to set before the framework is imported."""
        del spec

    def check_fast_paths(self, fast_paths: FastPaths, device: str, workload: Workload) -> None:
        """No fast paths: refuse any."""
        del device, workload
        enabled = fast_paths.enabled()
        if enabled:
            raise ConfigError(f"{', '.join(enabled)}: framework {self.name} has no fast "
                              "paths; drop the option")

    def distributed(self) -> DistributedHooks:
        """No data-parallel runs."""
        raise ConfigError(f"--nproc-per-node/--nnodes: data-parallel runs are "
                          f"torch.distributed; framework {self.name} not yet (use --framework "
                          "torch)")

    def check_sharding(self, spec: RunSpec) -> None:
        """No sharded modes: ``--parallel`` other than ddp and ``--act-ckpt`` are refused."""
        topo = spec.topology
        flag = f"--parallel {topo.parallel}" if topo.parallel != "ddp" else "--act-ckpt"
        raise ConfigError(f"{flag}: framework {self.name} has no sharded training yet; "
                          "use --framework torch or --parallel ddp")

    def is_oom(self, exc: BaseException) -> bool:
        """Host memory only (``MemoryError``)."""
        return isinstance(exc, MemoryError)

    def device_uuid(self, device: str) -> str | None:
        del device
        return None

    def ops(self) -> OpBackend:
        raise UnsupportedError(f"framework {self.name} has no operator benchmarks")


class OpBackend(Protocol):
    """A backend's operator side, used by :mod:`accelbench.execution.opbench` and the peaks."""

    def build_step(self, case: Any, device: str, seed: int = 0) -> Callable[[], None]:
        """Allocate the operator case's tensors on ``device``; return one execution."""

    def synchronizer(self, device: str) -> Callable[[], None]:
        """A function that waits until ``device`` has finished its queued work."""

    def math_mode(self, precision: str) -> contextlib.AbstractContextManager[None]:
        """The framework's math settings for an operator precision (TF32 only for tf32)."""

    def release(self, device: str) -> None:
        """Free what the last case allocated."""

    def threads(self, n: int | None) -> int:
        """Set the CPU thread count when ``n`` is given; return the one in effect."""

    def copy_step(self, device: str, n: int) -> Callable[[], None]:
        """One device-to-device copy of ``n`` float32 values (for the bandwidth peak)."""

    def free_bytes(self, device: str) -> int | None:
        """Free memory of an accelerator, or None where unknown."""


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it (``raise ... from``, or raised while handling)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def get_backend(framework: str) -> Backend:
    """The backend of ``framework`` (``torch``, ``jax``, an alias such as ``pytorch``, or a
    plugin's). Looking it up does not import the framework.

    Raises:
        ConfigError: unknown framework.
    """
    backend: Backend = registry.lookup(framework)
    return backend


def caused_by_oom(framework: str, exc: BaseException) -> bool:
    """Whether ``exc`` or what caused it (a model may wrap the allocator's error) is an
    out-of-memory condition, as ``framework``'s backend classifies it; a host
    ``MemoryError`` anywhere in the chain counts even where the backend is unknown."""
    chain = exception_chain(exc)
    if any(isinstance(e, MemoryError) for e in chain):
        return True
    try:
        backend = get_backend(framework)
    except ConfigError:  # a bad request has no backend to ask
        return False
    return any(backend.is_oom(e) for e in chain)


def workload_flops(name: str, size: str, batch_size: int,
                   framework: str = registry.DEFAULT_FRAMEWORK) -> FlopCount:
    """Count the FLOPs of a registered workload in this process (imports the framework).

    The CLI and the API use the cached, subprocess-counted facts of
    :mod:`accelbench.planning.facts` instead; this is for workers, tests and benchmarks.

    Raises:
        ConfigError: unknown workload or size, no implementation, or an invalid batch size.
    """
    from accelbench.spec import check_size
    from accelbench.workloads.registry import get_implementation

    check_size(size)
    impl = get_implementation(name, framework)
    return get_backend(framework).count_flops(impl, size, batch_size)
