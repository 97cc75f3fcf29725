"""What to measure: :class:`RunSpec` and the option dataclasses it holds.

Every option is one field here, declared with :func:`accelbench.options.option` (default,
help, bounds, flag, unit, conflicts): the CLI's arguments and the API's keywords are
generated from these fields. All are frozen and validated on construction (one check per
field, driven by the same declaration), so every object that travels from the CLI or the
API to the runner is known to be well formed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from accelbench.errors import ConfigError
from accelbench.frameworks import DEFAULT_FRAMEWORK, is_registered, normalize_framework
from accelbench.names import MAX_TAG_LEN, fold, tag_problem
from accelbench.options import MAX_INT32, OTHERS, Option, bounds_problem, option, validate_fields
from accelbench.workloads.sizes import SIZES, SizeName

Precision = Literal["fp32", "tf32", "amp_fp16", "amp_bf16"]
Framework = str
"""A framework backend's registry key (:func:`accelbench.frameworks.framework_names`)."""
StopReason = Literal["iterations", "target_ci", "max_time", "max_iterations"]
DistBackend = Literal["auto", "gloo", "nccl"]
#: ``--parallel``: how a model is spread over the ranks (docs/sharding.md).
Parallel = Literal["ddp", "fsdp", "tp", "fsdp+tp"]
"""torch.distributed backend of a multi-rank case: ``auto`` is NCCL on CUDA/ROCm, gloo on CPUs."""
Boundary = Literal["device", "device+host", "node"]
"""What energy covers: the accelerator (the paper's), plus host CPUs and DRAM, or the node."""

PRECISIONS: tuple[str, ...] = get_args(Precision)
BOUNDARIES: tuple[str, ...] = get_args(Boundary)
DIST_BACKENDS: tuple[str, ...] = get_args(DistBackend)
MAX_RANKS_PER_NODE, MAX_NODES = 1024, 65536  # most ranks per node, nodes of a topology
MAX_ENERGY_TRIALS = 100
"""Most energy trials (measurement windows) one case may ask for."""

#: Most measured (or warm-up) iterations a policy may ask for.
MAX_ITERATIONS = 10_000_000
#: Longest wall-clock limit or measurement time accepted (one week), in seconds.
MAX_SECONDS = 7 * 24 * 3600.0
#: Most CPU threads any record may name (the machine's own CPUs bound new cases).
MAX_THREADS = 65536
MAX_REPEATS = 100
"""Most runs of one case (``--repeats``)."""
MAX_LOADER_WORKERS = 256
"""Most data loader workers (``--loader-workers``)."""
DEFAULT_LOADER_WORKERS = 8
"""Most loader workers a case gets by default (fewer where this process has fewer CPUs)."""


def check_number(
    name: str, value: float, *, lo: float | None = None, hi: float | None = None,
    lo_open: bool = False,
) -> float:
    """``value`` if it is a finite number within bounds, else :class:`ConfigError` naming
    the option: NaN and Inf are refused everywhere (a NaN timeout disables the timeout).
    The check is :func:`accelbench.options.bounds_problem`, the one behind every option."""
    problem = bounds_problem(value, Option(help="", lo=lo, hi=hi, lo_open=lo_open), float)
    if problem:
        raise ConfigError(f"{name} {problem}")
    return value


def check_int(name: str, value: int, *, lo: int = 1, hi: int = MAX_INT32) -> int:
    """``value`` if it is an integer in ``[lo, hi]``, else :class:`ConfigError`."""
    problem = bounds_problem(value, Option(help="", lo=lo, hi=hi), int)
    if problem:
        raise ConfigError(f"{name} {problem}")
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
    """Return the canonical precision for ``name`` (any letter case, or an alias) or raise
    :class:`ConfigError`."""
    folded = fold(name)
    canonical = PRECISION_ALIASES.get(folded, folded)
    if canonical not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}"
        )
    return canonical  # type: ignore[return-value]


def check_size(name: str) -> SizeName:
    """Return ``name`` (canonical: lower case) if some workload has that size, else raise
    :class:`ConfigError`.

    Whether the case's own workload has it is checked where the case is prepared
    (``Workload.check_size``).
    """
    name = fold(name)
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
    """How a case is timed. Warm-up goes on until the step time stops falling (at least
    ``warmup_min`` iterations, even past ``warmup_max_time_s``)."""

    warmup_min: int = option(5, label="warm-up minimum", lo=0, hi=MAX_ITERATIONS,
                             help="fewest warm-up iterations")
    warmup_max: int = option(50, label="warm-up maximum", lo=0, hi=MAX_ITERATIONS,
                             help="most warm-up iterations")
    warmup_max_time_s: float = option(30.0, label="warm-up time", lo=0.0, hi=MAX_SECONDS,
                                      help="seconds after which warm-up stops once its "
                                      "minimum is done")
    iterations: int | None = option(
        None, flag="--iterations", lo=1, hi=MAX_ITERATIONS, why="an exact count",
        conflicts=("min_iterations", "max_iterations", "target_ci", "min_time_s"),
        help="exact measured iterations (no adaptive stop, no minimum, never extended: "
        "energy is unavailable when N steps are too short a window)")
    target_ci: float = option(
        0.02, flag="--target-ci", lo=0.0, lo_open=True, hi=0.999,
        help="stop when the CI95 half-width is within this fraction of the median")
    min_iterations: int = option(
        10, flag="--min-iterations", lo=2, hi=MAX_ITERATIONS,
        help="fewest measured iterations for an ok case (reached past --max-time unless "
        "--strict-max-time)")
    max_iterations: int = option(1000, flag="--max-iterations", lo=1, hi=MAX_ITERATIONS,
                                 help="most measured iterations")
    max_time_s: float = option(
        60.0, flag="--max-time", lo=0.0, lo_open=True, hi=MAX_SECONDS,
        help="seconds of measurement per case after which the adaptive stop ends it (a "
        "target: the minimum iterations are still reached)")
    min_time_s: float = option(
        0.0, flag="--min-time", lo=0.0, hi=MAX_SECONDS,
        default_text="default 0; 2 for the quick suite",
        help="seconds of measurement before the CI target may stop a case (not with an "
        "exact --iterations count)")
    strict_max_time: bool = option(
        False, flag="--strict-max-time", requires=("max_time_s",),
        help="--max-time is a hard cap: a case cut below the minimum is stored as "
        "insufficient, without a CI")
    trim_fraction: float = option(0.01, label="trim fraction", lo=0.0, hi=0.499,
                                  help="fraction dropped at each end for the trimmed mean "
                                  "(the paper: 10 of 1000)")
    phases: bool = option(False, flag="--phases", help="after the measured window, split the "
                          "step's time (and energy, where a sensor reads) into forward, "
                          "backward, optimizer, communication and input")
    timeout_s: float = option(900.0, flag="--timeout", lo=0.0, lo_open=True, hi=MAX_SECONDS,
                              help="wall-clock limit of each case's worker (s)")
    repeats: int = option(
        1, flag="--repeats", lo=1, hi=MAX_REPEATS,
        default_text="default 1; 3 for the paper and frameworks suites",
        help="runs of each case, each in a fresh worker (a suite interleaves them); the "
        "headline CI then covers the variation between runs")

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.warmup_max < self.warmup_min:
            raise ConfigError("warm-up bounds must satisfy 0 <= warmup_min <= warmup_max")
        if self.iterations is None and self.max_iterations < self.min_iterations:
            raise ConfigError(
                f"--max-iterations ({self.max_iterations}) is below --min-iterations "
                f"({self.min_iterations})"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class MeterOptions:
    """How energy is measured around a case."""

    enabled: bool = option(
        True, flag="--no-energy", negate=True, conflicts=OTHERS, why="nothing is measured",
        help="do not measure power at all (recorded as unavailable, with why)")
    interval_s: float = option(0.01, flag="--meter-interval-ms", scale=1e3, lo=0.5,
                               hi=10_000.0, help="power sampling interval")
    counter_poll_s: float = option(
        0.1, flag="--counter-poll-ms", scale=1e3, lo=0.5, hi=60_000.0,
        help="poll interval of CPU energy counters, RAPL (which integrate in hardware)")
    idle_s: float = option(3.0, flag="--idle-s", lo=0.0, hi=3600.0, off_flag="--no-idle",
                           off_value=0.0, help="idle baseline before each case")
    cpu_tdp_w: float | None = option(
        None, flag="--cpu-tdp-w", lo=0.0, lo_open=True, hi=5000.0,
        help="CPU TDP in W: estimate CPU power where no sensor exists (labelled)")
    energy_trials: int = option(
        1, flag="--energy-trials", lo=1, hi=MAX_ENERGY_TRIALS, metavar="K",
        help="measure energy over K windows after random delays; energy per sample is "
        "their median, with the spread")
    cooldown_s: float = option(
        0.0, flag="--cooldown-s", lo=0.0, hi=3600.0, metavar="S",
        default_text="default 0: none",
        help="wait S seconds between a case's energy trials (--energy-trials), so a device "
        "still warming does not drift the later trials upward (docs/energy.md)")
    settle_max_s: float = option(
        0.0, flag="--settle-s", lo=0.0, hi=3600.0, metavar="S",
        default_text="default 0: none",
        help="thermal settle: train until power and temperature stop drifting, at most S "
        "seconds, before measuring")
    boundary: Boundary = option(
        "device", flag="--boundary",
        help="what the energy figure covers: device (the paper's), device+host (adds CPU "
        "packages and DRAM), node (an external meter)")
    node_meter: str | None = option(
        None, flag="--node-meter", nonempty=True, metavar="NAME",
        help="read a node meter beside the devices: ipmi (ipmitool dcmi), cmd, or one a "
        "plugin registers")
    node_meter_cmd: str | None = option(
        None, flag="--node-meter-cmd", nonempty=True, metavar="CMD",
        help="node meter: a shell command printing the node's power in watts (sampled at "
        "1 Hz; implies --node-meter cmd)")
    node_meter_interval_s: float = option(
        1.0, label="node meter interval (s)", lo=0.01, hi=1.0,
        help="sampling interval of the node meter; at most 1 s (MLPerf Power samples at "
        ">= 1 Hz)")

    def __post_init__(self) -> None:
        validate_fields(self)
        if self.node_meter_cmd is not None:
            if self.node_meter is None:
                object.__setattr__(self, "node_meter", "cmd")
            elif self.node_meter != "cmd":
                raise ConfigError(f"--node-meter-cmd is for the 'cmd' node meter; it conflicts "
                                  f"with --node-meter {self.node_meter}")
        if self.node_meter == "cmd" and self.node_meter_cmd is None:
            raise ConfigError("--node-meter cmd needs --node-meter-cmd 'COMMAND PRINTING WATTS'")
        if self.boundary == "node" and self.node_meter is None:
            raise ConfigError("--boundary node needs a node meter: --node-meter ipmi, or "
                              "--node-meter-cmd 'COMMAND PRINTING WATTS'")
        if self.cooldown_s > 0 and self.energy_trials < 2 and self.enabled:
            raise ConfigError("--cooldown-s waits between energy trials: it needs "
                              "--energy-trials 2 or more")
        if not self.enabled:
            given = [flag for flag, on in (
                ("--cpu-tdp-w", self.cpu_tdp_w is not None),
                ("--energy-trials", self.energy_trials != 1),
                ("--cooldown-s", self.cooldown_s > 0),
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

    nnodes: int = option(1, flag="--nnodes", lo=1, hi=MAX_NODES, metavar="M",
                         help="nodes taking part (more need --rdzv-endpoint)")
    nproc_per_node: int = option(1, flag="--nproc-per-node", lo=1, hi=MAX_RANKS_PER_NODE,
                                 metavar="N", help="ranks (one device each) on this node")
    dist_backend: DistBackend = option(
        "auto", flag="--dist-backend", applies=lambda t: t.distributed,
        applies_why="needs more than one rank (--nproc-per-node or --nnodes above 1)",
        help="torch.distributed backend (auto: nccl on GPUs, gloo on CPUs)")

    node_rank: int = option(0, flag="--node-rank", lo=0, hi=MAX_NODES, metavar="R",
                            requires=("nnodes",), help="this node's rank among --nnodes")
    rdzv_endpoint: str | None = option(
        None, flag="--rdzv-endpoint", nonempty=True, metavar="HOST:PORT",
        requires=("nnodes",),
        help="rendezvous every node joins (a host all nodes reach); needed with more than "
        "one node")
    parallel: Parallel = option(
        "ddp", flag="--parallel",
        help="how the model is spread over the ranks: ddp (whole model on each), fsdp "
        "(FSDP2: parameters, gradients and optimizer state sharded), tp (tensor parallel "
        "over every rank; llm, bert, vit; transformer in jax), fsdp+tp (a 2-D mesh, --tp "
        "ranks per tensor-parallel group); torch across ranks, JAX across the devices of its "
        "processes (--devices, --nproc-per-node on a CPU; docs/sharding.md)")
    tp: int | None = option(
        None, flag="--tp", lo=1, hi=MAX_RANKS_PER_NODE * MAX_NODES, metavar="N",
        default_text="default: every rank with --parallel tp",
        help="tensor-parallel degree (ranks per tensor-parallel group; divides the ranks)")
    act_ckpt: bool = option(False, flag="--act-ckpt",
                            help="activation checkpointing: each transformer block "
                            "recomputes its activations in backward")
    devices: int | None = option(
        None, flag="--devices", lo=1, hi=MAX_RANKS_PER_NODE, metavar="N",
        help="JAX: devices of each process that its mesh spans (a CPU: N XLA host "
        "devices); --parallel then spreads the model over them (docs/sharding.md)")

    def __post_init__(self) -> None:
        validate_fields(self)
        self._check_parallel()
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

    def _check_parallel(self) -> None:
        if self.tp is not None and "tp" not in self.parallel:
            raise ConfigError(f"--tp needs --parallel tp or fsdp+tp (got --parallel "
                              f"{self.parallel})")
        if self.parallel == "fsdp+tp" and self.tp is None:
            raise ConfigError("--parallel fsdp+tp needs --tp N (ranks per tensor-parallel "
                              "group; the rest of the ranks shard by FSDP)")
        if self.parallel == "tp" and self.tp not in (None, self.mesh_size):
            raise ConfigError(f"--parallel tp spreads each layer over all {self.mesh_size} "
                              f"ranks, got --tp {self.tp}; use --parallel fsdp+tp for a 2-D "
                              "mesh")
        if self.tp is not None and self.mesh_size % self.tp:
            raise ConfigError(f"--tp {self.tp} must divide the ranks ({self.mesh_size})")

    @property
    def world_size(self) -> int:
        """Ranks in all: nodes x ranks per node."""
        return self.nnodes * self.nproc_per_node

    @property
    def mesh_size(self) -> int:
        """Devices the mesh spans: the ranks, times ``--devices`` (JAX: the devices of one
        process) where given."""
        return self.world_size * (self.devices or 1)

    @property
    def tp_degree(self) -> int:
        """Ranks per tensor-parallel group (1 without tensor parallelism)."""
        if self.parallel == "tp":
            return self.mesh_size
        return self.tp if self.parallel == "fsdp+tp" and self.tp is not None else 1

    @property
    def dp_degree(self) -> int:
        """Data-parallel replicas (or FSDP shards): the ranks that see different batches'
        worth of the global batch."""
        return self.mesh_size // self.tp_degree

    @property
    def sharded(self) -> bool:
        """A mode other than plain data parallelism, activation checkpointing, or a mesh
        over one process's devices (``--devices``)."""
        return self.parallel != "ddp" or self.act_ckpt or self.devices is not None

    def sharding_key(self) -> dict[str, Any]:
        """``--parallel``, ``--tp`` and ``--act-ckpt`` where not their defaults (cases and
        records of plain DDP keep their keys and bytes)."""
        out: dict[str, Any] = {}
        if self.parallel != "ddp":
            out["parallel"] = self.parallel
        if self.tp is not None:
            out["tp"] = self.tp
        if self.act_ckpt:
            out["act_ckpt"] = True
        if self.devices is not None:
            out["devices"] = self.devices
        return out

    @property
    def distributed(self) -> bool:
        """True when the case spans more than one rank."""
        return self.world_size > 1

    def key(self) -> dict[str, Any]:
        """What makes two topologies the same for a case's key."""
        return {"nnodes": self.nnodes, "nproc_per_node": self.nproc_per_node,
                "dist_backend": self.dist_backend, **self.sharding_key()}


@dataclass(frozen=True, kw_only=True, slots=True)
class FastPaths:
    """Framework fast paths a case may turn on (off by default: the paper's suite stays the
    paper's). Each is part of the case's key and record."""

    compile: bool = option(False, flag="--compile",
                           help="torch.compile the model (compile time stored apart as "
                           "compile_s, never in throughput)")
    channels_last: bool = option(False, flag="--channels-last",
                                 help="NHWC memory format for convolutional models")
    fused_optimizer: bool = option(False, flag="--fused-optimizer",
                                   help="the optimizer's fused implementation (one kernel "
                                   "for all parameters)")

    def __post_init__(self) -> None:
        validate_fields(self)

    def enabled(self) -> tuple[str, ...]:
        """Names of the fast paths turned on, in field order."""
        return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name))


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceSettings:
    """Device operating point a case runs at (``accelbench sweep``): None leaves a knob as
    it is. The sweep sets them before the case and restores the originals after."""

    power_limit_w: float | None = option(
        None, label="power-limit-w", lo=0.0, lo_open=True, hi=10_000.0,
        help="GPU power limit (NVML power management limit, amdsmi power cap), watts")
    sm_clock_mhz: int | None = option(None, label="sm-clock-mhz", lo=1, hi=100_000,
                                      help="locked GPU core clock, MHz")
    mem_clock_mhz: int | None = option(None, label="mem-clock-mhz", lo=1, hi=100_000,
                                       help="locked GPU memory clock, MHz")
    cpu_max_freq_khz: int | None = option(None, label="cpu-max-freq-khz", lo=1,
                                          hi=100_000_000, help="CPU scaling_max_freq, kHz")
    cpu_power_limit_w: float | None = option(
        None, label="cpu-power-limit-w", lo=0.0, lo_open=True, hi=10_000.0,
        help="RAPL package long-term power limit (constraint_0_power_limit_uw), watts")

    def __post_init__(self) -> None:
        validate_fields(self)

    def given(self) -> dict[str, float | int]:
        """The knobs set, by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunChoices:
    """What a user picks for one case beside the workload (``run``, ``sweep``, the API):
    the choices :class:`RunSpec` holds once resolved (``batch_size`` None: the workload's
    default at ``size``; aliases such as ``bf16`` and ``pytorch`` accepted)."""

    size: str = option("paper", flag="--size", nonempty=True, fold=True,
                       default_text="default paper",
                       help="tiny, small, paper, or a size of the workload's own (llm: gpt2; "
                       "bert: seq512; see accelbench list)")
    batch_size: int | None = option(None, flag="--batch-size", lo=1,
                                    help="samples per step (default: the workload's)")
    precision: str = option("fp32", flag="--precision", nonempty=True, fold=True,
                            help="fp32, tf32, amp_fp16, amp_bf16 (or bf16, fp16)")
    device: str = option("cpu", flag="--device", nonempty=True, fold=True,
                         help="cpu, cuda, cuda:N, mps (torch), tpu:N (jax)")
    framework: str = option(DEFAULT_FRAMEWORK, flag="--framework", nonempty=True, fold=True,
                            canonical=normalize_framework,
                            help="framework backend: torch, jax, or one a plugin registers")
    threads: int | None = option(None, flag="--threads", lo=1, hi=MAX_THREADS,
                                 cli_hi=max_threads, help="CPU threads for the framework")
    tag: str = option("", flag="--tag", check=tag_problem,
                      help=f"free text stored with the result(s) (at most {MAX_TAG_LEN} "
                      "characters, no control characters)")
    data: str = option(
        "synthetic", flag="--data", nonempty=True, metavar="SOURCE",
        help="the step's input: synthetic (tensors made on the device), generated (a "
        "dataset written once into the cache, decoded and augmented every step), or the "
        "PATH of your own (class folders of images, or .bin token shards; docs/data.md)")
    loader_workers: int | None = option(
        None, flag="--loader-workers", lo=0, hi=MAX_LOADER_WORKERS, metavar="N",
        applies=lambda c: c.data != "synthetic",
        applies_why="needs --data generated or a PATH (synthetic data has no loader)",
        default_text=f"default: the CPUs this process may use, at most "
        f"{DEFAULT_LOADER_WORKERS}",
        help="data loader worker processes preparing batches (0: in the training process)")
    input_analysis: bool = option(
        False, flag="--input-analysis", applies=lambda c: c.data != "synthetic",
        applies_why="needs --data generated or a PATH (synthetic data has no input "
        "pipeline to analyse)",
        help="after the measured window, the case's rate with synthetic data, with the "
        "dataset in the page cache and cold, and the prep and fetch stalls they imply "
        "(DS-Analyzer's split; docs/data.md)")

    def __post_init__(self) -> None:
        validate_fields(self)


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
    framework: Framework = DEFAULT_FRAMEWORK
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
    data: str = "synthetic"
    """The step's input (``--data``): ``synthetic``, ``generated``, or the absolute path of
    a user's dataset."""
    loader_workers: int | None = None
    """Data loader worker processes (None with synthetic data: no loader)."""
    input_analysis: bool = False
    """``--input-analysis``: the synthetic, cached and cold passes after the window."""

    def __post_init__(self) -> None:
        if not self.workload or not self.workload.strip():
            raise ConfigError("workload name must not be empty")
        check_size(self.size)
        check_int("batch size", self.batch_size, lo=1, hi=MAX_INT32)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )
        object.__setattr__(self, "framework", normalize_framework(self.framework))
        if self.threads is not None:
            # The machine's own bound is checked where a case is prepared (planning.cases):
            # a record read back on a smaller machine is still well formed.
            check_int("--threads", self.threads, lo=1, hi=MAX_THREADS)
        check_int("seed", self.seed, lo=0, hi=MAX_INT32)
        if self.loader_workers is not None:
            check_int("--loader-workers", self.loader_workers, lo=0, hi=MAX_LOADER_WORKERS)

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
        if self.data != "synthetic":
            ident["data"] = self.data
            ident["loader_workers"] = self.loader_workers
        if self.input_analysis:
            ident["input_analysis"] = True
        blob = json.dumps(ident, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (synthetic data's: without the data fields, as records
        were before they existed)."""
        out = dataclasses.asdict(self)
        topo = out["topology"]
        for name, default in (("parallel", "ddp"), ("tp", None), ("act_ckpt", False),
                              ("devices", None)):
            if topo[name] == default:  # written only where used: other records keep bytes
                del topo[name]
        if self.data == "synthetic" and self.loader_workers is None:
            del out["data"], out["loader_workers"]
        if not self.input_analysis:  # written only where asked: other records keep bytes
            del out["input_analysis"]
        if not self.meters.cooldown_s:  # likewise --cooldown-s
            del out["meters"]["cooldown_s"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        """Inverse of :meth:`to_dict`; unknown keys (from newer versions) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        # A record of a plugin's framework read where the plugin is not loaded keeps its
        # framework's name (records are facts, not requests); new cases are checked
        # against the registry when they are built.
        unregistered = None
        framework = kwargs.get("framework")
        if isinstance(framework, str) and framework.strip() and not is_registered(framework):
            unregistered = framework
            kwargs["framework"] = DEFAULT_FRAMEWORK
        nested: tuple[tuple[str, type], ...] = (
            ("policy", MeasurementPolicy), ("meters", MeterOptions), ("topology", Topology),
            ("fast_paths", FastPaths), ("settings", DeviceSettings))
        for key, kind in nested:
            value = kwargs.get(key)
            if isinstance(value, dict):
                known = {f.name for f in dataclasses.fields(kind)}
                kwargs[key] = kind(**{k: v for k, v in value.items() if k in known})
        spec = cls(**kwargs)
        if unregistered is not None:
            object.__setattr__(spec, "framework", unregistered)
        return spec
