"""What to measure: :class:`RunSpec` and :class:`MeasurementPolicy`.

Both are frozen and validated on construction, so every object that travels
from the CLI or the API to the runner is known to be well formed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from accelbench.errors import ConfigError

Precision = Literal["fp32", "tf32", "amp_fp16", "amp_bf16"]
SizeName = Literal["tiny", "small", "paper"]
Framework = Literal["torch", "jax"]
StopReason = Literal["iterations", "target_ci", "max_time", "max_iterations"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
SIZES: tuple[str, ...] = get_args(SizeName)
FRAMEWORKS: tuple[str, ...] = get_args(Framework)

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
    canonical = FRAMEWORK_ALIASES.get(name, name)
    if canonical not in FRAMEWORKS:
        raise ConfigError(
            f"unknown framework {name!r}; choose one of {', '.join(FRAMEWORKS)}"
        )
    return canonical  # type: ignore[return-value]


def check_size(name: str) -> SizeName:
    """Return ``name`` as a size or raise :class:`ConfigError`."""
    if name not in SIZES:
        raise ConfigError(f"unknown size {name!r}; choose one of {', '.join(SIZES)}")
    return name  # type: ignore[return-value]


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasurementPolicy:
    """How a case is timed."""

    warmup_min: int = 5
    """Fewest warm-up iterations; warm-up goes on until the step time stops falling."""
    warmup_max: int = 50
    """Most warm-up iterations."""
    warmup_max_time_s: float = 30.0
    """Most seconds spent warming up."""
    iterations: int | None = None
    """Exact number of measured iterations; disables adaptive stopping when set."""
    target_ci: float = 0.02
    """Adaptive stop: CI95 half-width of throughput relative to the median."""
    min_iterations: int = 10
    """Fewest measured iterations before adaptive stopping may stop."""
    max_iterations: int = 1000
    """Most measured iterations."""
    max_time_s: float = 60.0
    """Most seconds of measured iterations."""
    trim_fraction: float = 0.01
    """Fraction dropped at each end for the trimmed mean (the paper: 10 of 1000)."""
    timeout_s: float = 900.0
    """Wall-clock limit of the whole worker (build, warm-up, measurement)."""

    def __post_init__(self) -> None:
        if self.warmup_min < 0 or self.warmup_max < self.warmup_min:
            raise ConfigError("warm-up bounds must satisfy 0 <= warmup_min <= warmup_max")
        if self.iterations is not None and self.iterations < 1:
            raise ConfigError(f"--iterations must be >= 1, got {self.iterations}")
        if not 0.0 < self.target_ci < 1.0:
            raise ConfigError(f"--target-ci must be in (0, 1), got {self.target_ci}")
        if self.min_iterations < 2:
            raise ConfigError(f"min_iterations must be >= 2, got {self.min_iterations}")
        if self.max_iterations < 1:
            raise ConfigError(f"--max-iterations must be >= 1, got {self.max_iterations}")
        if self.max_time_s <= 0:
            raise ConfigError(f"--max-time must be > 0, got {self.max_time_s}")
        if not 0.0 <= self.trim_fraction < 0.5:
            raise ConfigError(f"trim fraction must be in [0, 0.5), got {self.trim_fraction}")
        if self.timeout_s <= 0:
            raise ConfigError(f"--timeout must be > 0, got {self.timeout_s}")


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

    def __post_init__(self) -> None:
        if not 0.0005 <= self.interval_s <= 10.0:
            raise ConfigError(
                f"--meter-interval-ms must be between 0.5 and 10000, got {self.interval_s * 1e3:g}"
            )
        if not 0.0005 <= self.counter_poll_s <= 60.0:
            raise ConfigError(
                "--counter-poll-ms must be between 0.5 and 60000, "
                f"got {self.counter_poll_s * 1e3:g}"
            )
        if self.idle_s < 0:
            raise ConfigError(f"--idle-s must be >= 0, got {self.idle_s}")
        if self.cpu_tdp_w is not None and not 0 < self.cpu_tdp_w <= 5000:
            raise ConfigError(f"--cpu-tdp-w must be in (0, 5000] W, got {self.cpu_tdp_w}")


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

    def __post_init__(self) -> None:
        if not self.workload:
            raise ConfigError("workload name must not be empty")
        check_size(self.size)
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ConfigError(f"batch size must be an integer, got {self.batch_size!r}")
        if self.batch_size <= 0:
            raise ConfigError(f"batch size must be > 0, got {self.batch_size}")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}"
            )
        if self.framework not in FRAMEWORKS:
            object.__setattr__(self, "framework", normalize_framework(self.framework))
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {self.threads}")

    def case_key(self) -> str:
        """A stable hash of what makes two cases the same case (for suite resume)."""
        ident = {
            "workload": self.workload,
            "size": self.size,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "device": self.device,
            "framework": self.framework,
            "threads": self.threads,
        }
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
        for key, kind in (("policy", MeasurementPolicy), ("meters", MeterOptions)):
            value = kwargs.get(key)
            if isinstance(value, dict):
                known = {f.name for f in dataclasses.fields(kind)}
                kwargs[key] = kind(**{k: v for k, v in value.items() if k in known})
        return cls(**kwargs)
