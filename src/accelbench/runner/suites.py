"""Named suites: matrices of cases, resumable by suite id."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from accelbench.errors import ConfigError
from accelbench.spec import FastPaths, MeasurementPolicy, Topology


class SuiteCase(NamedTuple):
    """One case of a suite, before validation. ``topology`` and ``fast_paths`` set here
    belong to the case (a scaling suite's rank counts); None takes the user's options,
    else the suite's."""

    workload: str
    size: str
    batch_size: int
    precision: str
    framework: str
    topology: Topology | None = None
    fast_paths: FastPaths | None = None


#: Kept for code written against the plain 5-tuple (SuiteCase is one).
CaseTuple = SuiteCase


@dataclass(frozen=True, slots=True)
class SuiteContext:
    """What a suite's case list depends on."""

    device: str
    frameworks: tuple[str, ...]
    """The frameworks to measure (``--framework``; every installed one for ``frameworks``)."""
    supported: Mapping[str, Sequence[str]]
    """Precisions each framework supports on the device."""
    size: str | None = None
    """``--size``, for suites whose size is a choice."""


@dataclass(frozen=True, slots=True)
class SuiteDef:
    """A named suite: how to enumerate its cases and how to time them."""

    name: str
    description: str
    cases: Callable[[SuiteContext], list[CaseTuple]]
    policy: MeasurementPolicy
    idle_s: float = 3.0
    """Default idle baseline per case (where a power sensor exists)."""
    default_size: str | None = None
    """The size when the suite takes ``--size`` (None: the suite fixes its sizes)."""
    all_frameworks: bool = False
    """Measure every installed framework rather than the chosen one."""
    fast_paths: FastPaths | None = None
    """The suite's fast paths (``modern``: compile on); the user's flags replace them."""


def _implemented(name: str, fw: str) -> bool:
    from accelbench.workloads.registry import implementation_frameworks

    return fw in implementation_frameworks(name)


def _quick(ctx: SuiteContext) -> list[CaseTuple]:
    from accelbench.workloads.registry import list_workloads

    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        precisions = [p for p in ("fp32", "amp_bf16") if p in ctx.supported[fw]]
        out += [
            SuiteCase(wl.name, "tiny", wl.default_batch_sizes["tiny"][0], p, fw)
            for wl in list_workloads() if _implemented(wl.name, fw)
            for p in precisions
        ]
    return out


def _small(ctx: SuiteContext) -> list[CaseTuple]:
    from accelbench.workloads.registry import list_workloads

    return [
        SuiteCase(wl.name, "small", wl.default_batch_sizes["small"][0], "fp32", fw)
        for fw in ctx.frameworks
        for wl in list_workloads() if _implemented(wl.name, fw)
    ]


#: The paper's models and batch sizes (Wang et al. 2020, Table 10).
PAPER_MATRIX: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("resnet50", (64, 128)),
    ("vgg16", (64, 128)),
    ("inception_v3", (64, 128)),
    ("lstm", (64, 128, 256)),
    ("deepspeech2", (8, 16, 32)),
    ("transformer", (1024, 2048, 4096)),
)


def _paper(ctx: SuiteContext) -> list[CaseTuple]:
    out: list[CaseTuple] = []
    for fw in ctx.frameworks:
        # The paper ran fp32 everywhere and mixed precision (fp16 tensor cores) on the V100.
        precisions = ["fp32"]
        if ctx.device.startswith("cuda") and "amp_fp16" in ctx.supported[fw]:
            precisions.append("amp_fp16")
        out += [
            SuiteCase(name, "paper", bs, p, fw)
            for name, sizes in PAPER_MATRIX for p in precisions for bs in sizes
            if _implemented(name, fw)
        ]
    return out


def _frameworks(ctx: SuiteContext) -> list[CaseTuple]:
    """Every workload that all the frameworks implement, in each of them, side by side."""
    from accelbench.workloads.registry import list_workloads

    size = ctx.size or "tiny"
    common = [p for p in ("fp32", "amp_bf16")
              if all(p in ctx.supported[fw] for fw in ctx.frameworks)]
    return [
        SuiteCase(wl.name, size, wl.default_batch_sizes[size][0], p, fw)  # type: ignore[index]
        for wl in list_workloads()
        if all(_implemented(wl.name, fw) for fw in ctx.frameworks)
        for p in common
        for fw in ctx.frameworks
    ]


SUITES: dict[str, SuiteDef] = {
    "quick": SuiteDef(
        "quick",
        "every workload at tiny size, fp32 and bf16 where supported (about a minute on a CPU)",
        _quick,
        MeasurementPolicy(
            warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
            min_iterations=10, max_time_s=2.0, timeout_s=300.0,
        ),
        idle_s=1.0,
    ),
    "small": SuiteDef(
        "small",
        "every workload at small size, fp32",
        _small,
        MeasurementPolicy(max_time_s=20.0, target_ci=0.03, timeout_s=900.0),
    ),
    "paper": SuiteDef(
        "paper",
        "the paper's models, batch sizes and precisions (fp32; plus amp_fp16 on GPUs)",
        _paper,
        # Three runs per case: the paper's results are compared across machines, and one
        # run's CI says nothing about the next worker's (issue 15).
        MeasurementPolicy(max_time_s=60.0, target_ci=0.02, timeout_s=1800.0, repeats=3),
    ),
    "frameworks": SuiteDef(
        "frameworks",
        "every workload in every installed framework (torch, jax) at --size (default tiny), "
        "fp32 and bf16 where all support it",
        _frameworks,
        MeasurementPolicy(
            warmup_min=3, warmup_max=20, warmup_max_time_s=5.0, target_ci=0.05,
            min_iterations=10, max_time_s=2.0, timeout_s=600.0, repeats=3,
        ),
        idle_s=1.0,
        default_size="tiny",
        all_frameworks=True,
    ),
}


def get_suite(name: str) -> SuiteDef:
    """The suite called ``name``.

    Raises:
        ConfigError: unknown suite.
    """
    try:
        return SUITES[name]
    except KeyError:
        raise ConfigError(
            f"unknown suite {name!r}; choose one of {', '.join(SUITES)}"
        ) from None


def suite_policy(base: MeasurementPolicy, **overrides: object) -> MeasurementPolicy:
    """``base`` with the non-None overrides applied (validated again)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
