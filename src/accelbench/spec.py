"""What to measure: :class:`RunSpec` and :class:`MeasurementPolicy`.

Both are frozen and validated on construction, so every object that travels
from the CLI or the API to the runner is known to be well formed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from accelbench.errors import ConfigError
from accelbench.workloads.sizes import SIZES, SizeName

Precision = Literal["fp32", "tf32", "amp_fp16", "amp_bf16"]
Framework = Literal["torch", "jax"]
StopReason = Literal["iterations", "target_ci", "max_time", "max_iterations"]
DistBackend = Literal["auto", "gloo", "nccl"]
"""torch.distributed backend of a multi-rank case: ``auto`` is NCCL on CUDA/ROCm, gloo on CPUs."""
Boundary = Literal["device", "device+host", "node"]
"""What an energy figure covers: the accelerator only (the paper's figures), the
accelerator plus the host's CPU packages and DRAM, or the whole node (an external meter)."""

PRECISIONS: tuple[str, ...] = get_args(Precision)
FRAMEWORKS: tuple[str, ...] = get_args(Framework)
BOUNDARIES: tuple[str, ...] = get_args(Boundary)
DIST_BACKENDS: tuple[str, ...] = get_args(DistBackend)
#: Most ranks per node and nodes a topology may name.
MAX_RANKS_PER_NODE = 1024
MAX_NODES = 65536
MAX_ENERGY_TRIALS = 100
"""Most energy trials (measurement windows) one case may ask for."""

#: The largest integer a store column holds everywhere (PostgreSQL INTEGER): batch sizes,
#: iteration counts and limits above it would overflow after the case ran.
MAX_INT32 = 2**31 - 1
#: Most measured (or warm-up) iterations a policy may ask for.
MAX_ITERATIONS = 10_000_000
#: Longest wall-clock limit or measurement time accepted (one week), in seconds.
MAX_SECONDS = 7 * 24 * 3600.0
#: Most CPU threads any record may name (the machine's own CPUs bound new cases).
MAX_THREADS = 65536
MAX_REPEATS = 100
"""Most runs of one case (``--repeats``)."""


def check_number(
    name: str, value: float, *, lo: float | None = None, hi: float | None = None,
    lo_open: bool = False,
) -> float:
    """``value`` if it is a finite number within bounds, else :class:`ConfigError` naming
    the option: NaN and Inf are refused everywhere (a NaN timeout disables the timeout)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ConfigError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {value:g}")
    if hi is not None and value > hi:
        raise ConfigError(f"{name} must be <= {hi:g}, got {value:g}")
    return value


def check_int(name: str, value: int, *, lo: int = 1, hi: int = MAX_INT32) -> int:
    """``value`` if it is an integer in ``[lo, hi]``, else :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def max_threads() -> int:
    """Most CPU threads a case may ask for: the CPUs this process may run on."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)

#: Short names users type for precisions, mapped to the canonical name.
PRECISION_ALIASES: dict[str, str] = {
    "fp16": "amp_fp16",
    "bf16": "amp_bf16",
    "mixed": "amp_fp16",
    "float32": "fp32",
}


def normalize_precision(name: str) -> Precision:
    """Return the canonical precision for ``name`` or raise :class:`ConfigError`."""
    canonical = PRECISION_ALIASES.get(name, name)
    if canonical not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}"
        )
    return canonical  # type: ignore[return-value]


#: Other names users type for frameworks; ``pytorch`` is also how records before 0.2 named it.
FRAMEWORK_ALIASES: dict[str, str] = {"pytorch": "torch", "flax": "jax"}


def normalize_framework(name: str) -> Framework:
    """Return the canonical framework for ``name`` or raise :class:`ConfigError`."""
    from accelbench.backends.registry import normalize_framework as registered

    return registered(name)  # type: ignore[return-value]


def check_size(name: str) -> SizeName:
    """Return ``name`` if some workload has that size, else raise :class:`ConfigError`.

    Whether the case's own workload has it is checked where the case is prepared
    (``Workload.check_size``).
    """
    if name in SIZES:
        return name
    # Imported here: the registry imports this module.
    from accelbench.workloads.registry import all_size_names

    known = all_size_names()
    if not isinstance(name, str) or name not in known:
        extra = [s for s in known if s not in SIZES]
        more = f" (or a workload's own: {', '.join(extra)})" if extra else ""
        raise ConfigError(f"unknown size {name!r}; choose one of {', '.join(SIZES)}{more}")
    return name


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasurementPolicy:
    """How a case is timed."""

    warmup_min: int = 5
    """Fewest warm-up iterations; warm-up goes on until the step time stops falling. The
    minimum is honoured even past ``warmup_max_time_s``."""
    warmup_max: int = 50
    """Most warm-up iterations."""
    warmup_max_time_s: float = 30.0
    """Seconds after which warm-up stops once its minimum is done."""
    iterations: int | None = None
    """Exact number of measured iterations; disables adaptive stopping when set (and the
    minimum: the user asked for exactly this many)."""
    target_ci: float = 0.02
    """Adaptive stop: CI95 half-width of throughput relative to the median."""
    min_iterations: int = 10
    """Fewest measured iterations for an ``ok`` case (``--min-iterations``): measurement
    goes on past ``max_time_s`` to reach it, unless ``strict_max_time``."""
    max_iterations: int = 1000
    """Most measured iterations."""
    max_time_s: float = 60.0
    """Seconds of measured iterations after which the adaptive loop stops (a target: the
    minimum is still reached, unless ``strict_max_time``)."""
    strict_max_time: bool = False
    """``--strict-max-time``: ``max_time_s`` is a hard cap; a case cut below
    ``min_iterations`` by it is stored as ``insufficient``, without a CI."""
    trim_fraction: float = 0.01
    """Fraction dropped at each end for the trimmed mean (the paper: 10 of 1000)."""
    timeout_s: float = 900.0
    """Wall-clock limit of the whole worker (build, warm-up, measurement)."""
    repeats: int = 1
    """``--repeats``: runs of the case, each in a fresh worker (a suite interleaves them
    with its other cases); their headline CI covers the variation between runs."""

    def __post_init__(self) -> None:
        check_int("warm-up minimum", self.warmup_min, lo=0, hi=MAX_ITERATIONS)
        check_int("warm-up maximum", self.warmup_max, lo=0, hi=MAX_ITERATIONS)
        if self.warmup_max < self.warmup_min:
            raise ConfigError("warm-up bounds must satisfy 0 <= warmup_min <= warmup_max")
        check_number("warm-up time", self.warmup_max_time_s, lo=0, hi=MAX_SECONDS)
        if self.iterations is not None:
            check_int("--iterations", self.iterations, lo=1, hi=MAX_ITERATIONS)
        check_number("--target-ci", self.target_ci, lo=0.0, lo_open=True, hi=0.999)
        check_int("--min-iterations", self.min_iterations, lo=2, hi=MAX_ITERATIONS)
        check_int("--max-iterations", self.max_iterations, lo=1, hi=MAX_ITERATIONS)
        if self.iterations is None and self.max_iterations < self.min_iterations:
            raise ConfigError(
                f"--max-iterations ({self.max_iterations}) is below --min-iterations "
                f"({self.min_iterations})"
            )
        check_number("--max-time", self.max_time_s, lo=0.0, lo_open=True, hi=MAX_SECONDS)
        check_number("trim fraction", self.trim_fraction, lo=0.0, hi=0.499)
        check_number("--timeout", self.timeout_s, lo=0.0, lo_open=True, hi=MAX_SECONDS)
        check_int("--repeats", self.repeats, lo=1, hi=MAX_REPEATS)


@dataclass(frozen=True, kw_only=True, slots=True)
class MeterOptions:
    """How energy is measured around a case."""

    enabled: bool = True
    """Measure power and energy at all (``--no-energy`` turns it off)."""
    interval_s: float = 0.01
    """Power sampling interval (the paper sampled every 2 ms)."""
    counter_poll_s: float = 0.1
    """Poll interval of CPU energy counters (RAPL), which integrate in hardware."""
    idle_s: float = 3.0
    """Seconds of idle baseline before the case; 0 (``--no-idle``) skips it."""
    cpu_tdp_w: float | None = None
    """TDP of the CPU packages, for an estimate where no CPU sensor exists."""
    energy_trials: int = 1
    """Measurement windows, each after a random delay; energy per sample is their median
    (``--energy-trials``)."""
    settle_max_s: float = 0.0
    """Longest thermal settle before measuring: training steps run until power and
    temperature stop drifting, at most this long (``--settle-s``; 0: no settle)."""
    boundary: Boundary = "device"
    """What the headline energy covers (``--boundary``): ``device``, ``device+host`` or
    ``node`` (needs a node meter)."""
    node_meter: str | None = None
    """A registered node meter (``ipmi``, ``cmd`` or a plugin's) read beside the devices
    (``--node-meter``)."""
    node_meter_cmd: str | None = None
    """Command printing the node's power in watts, for the ``cmd`` node meter
    (``--node-meter-cmd``; implies ``node_meter="cmd"``)."""
    node_meter_interval_s: float = 1.0
    """Sampling interval of the node meter; at most 1 s (MLPerf Power samples at >= 1 Hz)."""

    def __post_init__(self) -> None:
        check_number("--meter-interval-ms", self.interval_s * 1e3, lo=0.5, hi=10_000)
        check_number("--counter-poll-ms", self.counter_poll_s * 1e3, lo=0.5, hi=60_000)
        check_number("--idle-s", self.idle_s, lo=0.0, hi=3600.0)
        if self.cpu_tdp_w is not None:
            check_number("--cpu-tdp-w", self.cpu_tdp_w, lo=0.0, lo_open=True, hi=5000.0)
        check_int("--energy-trials", self.energy_trials, lo=1, hi=MAX_ENERGY_TRIALS)
        check_number("--settle-s", self.settle_max_s, lo=0.0, hi=3600.0)
        check_number("node meter interval (s)", self.node_meter_interval_s, lo=0.01, hi=1.0)
        if self.boundary not in BOUNDARIES:
            raise ConfigError(f"unknown energy boundary {self.boundary!r}; choose one of "
                              f"{', '.join(BOUNDARIES)}")
        if self.node_meter_cmd is not None:
            if not self.node_meter_cmd.strip():
                raise ConfigError("--node-meter-cmd must not be empty")
            if self.node_meter is None:
                object.__setattr__(self, "node_meter", "cmd")
            elif self.node_meter != "cmd":
                raise ConfigError(f"--node-meter-cmd is for the 'cmd' node meter; it conflicts "
                                  f"with --node-meter {self.node_meter}")
        if self.node_meter is not None and not self.node_meter.strip():
            raise ConfigError("--node-meter must not be empty")
        if self.node_meter == "cmd" and self.node_meter_cmd is None:
            raise ConfigError("--node-meter cmd needs --node-meter-cmd 'COMMAND PRINTING WATTS'")
        if self.boundary == "node" and self.node_meter is None:
            raise ConfigError("--boundary node needs a node meter: --node-meter ipmi, or "
                              "--node-meter-cmd 'COMMAND PRINTING WATTS'")
        if not self.enabled:
            given = [flag for flag, on in (
                ("--cpu-tdp-w", self.cpu_tdp_w is not None),
                ("--energy-trials", self.energy_trials != 1),
                ("--settle-s", self.settle_max_s > 0),
                ("--node-meter", self.node_meter is not None),
                ("--boundary", self.boundary != "device"),
            ) if on]
            if given:
                raise ConfigError(f"{given[0]} needs energy measurement; it conflicts with "
                                  "--no-energy")


@dataclass(frozen=True, kw_only=True, slots=True)
class Topology:
    """Where a case's ranks run: data parallel over ``nnodes`` x ``nproc_per_node`` devices
    (torchrun's meaning). Each rank keeps the spec's per-device batch (weak scaling).

    ``nnodes``, ``nproc_per_node`` and ``dist_backend`` make the case (they are in its key);
    ``node_rank`` and ``rdzv_endpoint`` only say how this node joins it."""

    nnodes: int = 1
    """Nodes taking part (``--nnodes``)."""
    nproc_per_node: int = 1
    """Ranks, one device each, on every node (``--nproc-per-node``)."""
    dist_backend: DistBackend = "auto"
    """torch.distributed backend (``--dist-backend``): ``auto``, ``gloo`` or ``nccl``."""
    node_rank: int = 0
    """This node's rank among ``nnodes`` (``--node-rank``)."""
    rdzv_endpoint: str | None = None
    """``HOST:PORT`` of the rendezvous all nodes join (``--rdzv-endpoint``); needed with
    more than one node."""

    def __post_init__(self) -> None:
        check_int("--nnodes", self.nnodes, lo=1, hi=MAX_NODES)
        check_int("--nproc-per-node", self.nproc_per_node, lo=1, hi=MAX_RANKS_PER_NODE)
        if self.dist_backend not in DIST_BACKENDS:
            raise ConfigError(f"unknown --dist-backend {self.dist_backend!r}; choose one of "
                              f"{', '.join(DIST_BACKENDS)}")
        check_int("--node-rank", self.node_rank, lo=0, hi=MAX_NODES)
        if self.node_rank >= self.nnodes:
            raise ConfigError(f"--node-rank must be below --nnodes ({self.nnodes}), "
                              f"got {self.node_rank}")
        if self.rdzv_endpoint is not None:
            host, sep, port = self.rdzv_endpoint.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"--rdzv-endpoint must be HOST:PORT, got "
                                  f"{self.rdzv_endpoint!r}")
        elif self.nnodes > 1:
            raise ConfigError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT (a node all "
                              "nodes can reach)")

    @property
    def world_size(self) -> int:
        """Ranks in all: nodes x ranks per node."""
        return self.nnodes * self.nproc_per_node

    @property
    def distributed(self) -> bool:
        """True when the case spans more than one rank."""
        return self.world_size > 1

    def key(self) -> dict[str, Any]:
        """What makes two topologies the same for a case's key."""
        return {"nnodes": self.nnodes, "nproc_per_node": self.nproc_per_node,
                "dist_backend": self.dist_backend}


@dataclass(frozen=True, kw_only=True, slots=True)
class FastPaths:
    """Framework fast paths a case may turn on (off by default: the paper's suite stays the
    paper's). Each is part of the case's key and record."""

    compile: bool = False
    """``--compile``: ``torch.compile`` the model; its compile time is stored as
    ``compile_s``, never in throughput."""
    channels_last: bool = False
    """``--channels-last``: NHWC memory format for convolutional models and their inputs."""
    fused_optimizer: bool = False
    """``--fused-optimizer``: the optimizer's fused implementation (one kernel for all
    parameters)."""

    def enabled(self) -> tuple[str, ...]:
        """Names of the fast paths turned on, in field order."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name))


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceSettings:
    """Device operating point a case runs at (``accelbench sweep``): None leaves a knob as
    it is. The sweep sets them before the case and restores the originals after."""

    power_limit_w: float | None = None
    """GPU power limit (NVML power management limit, amdsmi power cap), watts."""
    sm_clock_mhz: int | None = None
    """Locked GPU core clock, MHz."""
    mem_clock_mhz: int | None = None
    """Locked GPU memory clock, MHz."""
    cpu_max_freq_khz: int | None = None
    """CPU ``scaling_max_freq``, kHz."""
    cpu_power_limit_w: float | None = None
    """RAPL package long-term power limit (``constraint_0_power_limit_uw``), watts."""

    def __post_init__(self) -> None:
        for name, hi in (("power_limit_w", 10_000.0), ("cpu_power_limit_w", 10_000.0)):
            value = getattr(self, name)
            if value is not None:
                check_number(name.replace("_", "-"), value, lo=0.0, lo_open=True, hi=hi)
        for name in ("sm_clock_mhz", "mem_clock_mhz"):
            value = getattr(self, name)
            if value is not None:
                check_int(name.replace("_", "-"), value, lo=1, hi=100_000)
        if self.cpu_max_freq_khz is not None:
            check_int("cpu-max-freq-khz", self.cpu_max_freq_khz, lo=1, hi=100_000_000)

    def given(self) -> dict[str, float | int]:
        """The knobs set, by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    """One benchmark case: a workload at a size, batch size, precision and device."""

    workload: str
    """Registered workload name (``accelbench list``)."""
    size: SizeName = "paper"
    """Model size: ``tiny`` for tests, ``small``, or ``paper`` (the paper's configuration)."""
    batch_size: int
    """Samples per step, in the workload's sample unit (tokens for the transformer)."""
    precision: Precision = "fp32"
    """Numeric precision of the training step."""
    device: str = "cpu"
    """``cpu``, ``cuda:N``, ``mps`` (torch) or ``tpu:N`` (jax)."""
    framework: Framework = "torch"
    """Framework backend that builds and trains the model: ``torch`` or ``jax``."""
    threads: int | None = None
    """CPU threads for the framework (None: the framework's default)."""
    tag: str = ""
    """Free text a user attaches to the record."""
    seed: int = 0
    """Seed for the synthetic data and the model's initial weights."""
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    """Timing policy."""
    meters: MeterOptions = field(default_factory=MeterOptions)
    """Energy measurement options."""
    topology: Topology = field(default_factory=Topology)
    """Ranks and nodes of a data-parallel case (one device, one rank by default);
    ``batch_size`` is per rank."""
    fast_paths: FastPaths = field(default_factory=FastPaths)
    """Framework fast paths (compile, channels-last, fused optimizer)."""
    settings: DeviceSettings = field(default_factory=DeviceSettings)
    """Device operating point (power limit, clocks) the case ran at."""

    def __post_init__(self) -> None:
        if not self.workload or not self.workload.strip():
            raise ConfigError("workload name must not be empty")
        check_size(self.size)
        check_int("batch size", self.batch_size, lo=1, hi=MAX_INT32)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )
        if self.framework not in FRAMEWORKS:
            object.__setattr__(self, "framework", normalize_framework(self.framework))
        if self.threads is not None:
            # The machine's own bound is checked where a case is prepared (runner.cases):
            # a record read back on a smaller machine is still well formed.
            check_int("--threads", self.threads, lo=1, hi=MAX_THREADS)
        check_int("seed", self.seed, lo=0, hi=MAX_INT32)

    def case_key(self) -> str:
        """A stable hash of what makes two cases the same case (for suite resume)."""
        ident: dict[str, Any] = {
            "workload": self.workload,
            "size": self.size,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "device": self.device,
            "framework": self.framework,
            "threads": self.threads,
        }
        # Added only when not the default, so cases from before they existed keep their key.
        if self.topology.key() != Topology().key():
            ident["topology"] = self.topology.key()
        if self.fast_paths.enabled():
            ident["fast_paths"] = list(self.fast_paths.enabled())
        if self.settings.given():
            ident["settings"] = self.settings.given()
        blob = json.dumps(ident, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        """Inverse of :meth:`to_dict`; unknown keys (from newer versions) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        if "framework" in kwargs:
            kwargs["framework"] = normalize_framework(kwargs["framework"])
        nested: tuple[tuple[str, type], ...] = (
            ("policy", MeasurementPolicy), ("meters", MeterOptions), ("topology", Topology),
            ("fast_paths", FastPaths), ("settings", DeviceSettings))
        for key, kind in nested:
            value = kwargs.get(key)
            if isinstance(value, dict):
                known = {f.name for f in dataclasses.fields(kind)}
                kwargs[key] = kind(**{k: v for k, v in value.items() if k in known})
        return cls(**kwargs)
