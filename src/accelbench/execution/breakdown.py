"""Profiling one training step by operator for the roofline: the step built and run by its
backend (:func:`breakdown_step`), here or in an isolated worker with a timeout
(:func:`breakdown_isolated`, what ``accelbench roofline --model`` uses), aggregated by
:mod:`accelbench.roofline.breakdown`.
"""

from __future__ import annotations

from typing import Any

from accelbench.backends.opkinds import op_kind
from accelbench.roofline.breakdown import (
    UNATTRIBUTED,
    ModelBreakdown,
    OpStats,
    aggregate_by_kind,
)
from accelbench.spec import RunChoices

#: How long one isolated breakdown may take (building the model, warm-up and profiled steps).
BREAKDOWN_TIMEOUT_S = 900.0


def _profiler(framework: str) -> Any:
    """The backend's per-operator profiler of a training step.

    Raises:
        UnsupportedError: the backend has none.
    """
    from accelbench.backends import get_backend
    from accelbench.errors import UnsupportedError

    profile = getattr(get_backend(framework), "breakdown", None)
    if profile is None:
        raise UnsupportedError(
            f"a per-operator breakdown of a training step is available for torch only, "
            f"not {framework}"
        )
    return profile


def breakdown_step(
    workload_name: str, choices: RunChoices, *, repeats: int = 3, warmup: int = 2,
) -> ModelBreakdown:
    """Count and time one training step of a workload, by operator and kind.

    Args:
        workload_name: Registered workload.
        choices: Size, batch size, precision, device, framework and threads of the step
            (the framework's backend builds and profiles it).
        repeats: Profiled steps (operator times and the step time are their means).
        warmup: Untimed steps first.

    Raises:
        ConfigError / UnsupportedError: unknown workload, size, precision or device, or a
            backend without a per-operator profiler.
    """
    from accelbench.execution.peaks import device_name_of
    from accelbench.planning.cases import prepare_case
    from accelbench.workloads.registry import get_implementation

    spec = prepare_case(workload_name, choices).spec
    profile = _profiler(spec.framework)
    stats, step_time_s = profile(spec, get_implementation(spec.workload, spec.framework),
                                 repeats=repeats, warmup=warmup)
    ops = tuple(
        sorted(
            (
                OpStats(name=name, kind=op_kind(name), n_calls=int(v[0]), flops=float(v[1]),
                        bytes=float(v[2]), time_s=float(v[4]), output_elements=float(v[3]))
                for name, v in stats.items()
            ),
            key=lambda o: -o.time_s,
        )
    )
    kinds = aggregate_by_kind(ops)
    attributed_s = sum(k.time_s for k in kinds)
    kinds += (OpStats(name=UNATTRIBUTED, kind=UNATTRIBUTED, n_calls=0, flops=0.0, bytes=0.0,
                      time_s=max(0.0, step_time_s - attributed_s)),)
    return ModelBreakdown(
        workload=spec.workload, size=spec.size, batch_size=spec.batch_size,
        precision=spec.precision, device=spec.device,
        device_name=device_name_of(spec.device, spec.framework),
        # Operator times can only exceed the wall time they were measured in by rounding.
        step_time_s=max(step_time_s, attributed_s),
        ops=ops, kinds=kinds,
    )


def breakdown_in_worker(spec: dict[str, Any], repeats: int, warmup: int) -> dict[str, Any]:
    """Worker side of :func:`breakdown_isolated`."""
    choices = RunChoices(
        size=spec["size"], batch_size=spec["batch_size"], precision=spec["precision"],
        device=spec["device"], framework=spec["framework"], threads=spec.get("threads"))
    return breakdown_step(spec["workload"], choices, repeats=repeats, warmup=warmup).to_dict()


def breakdown_isolated(
    workload_name: str, choices: RunChoices, *, repeats: int = 3, warmup: int = 2,
    timeout_s: float = BREAKDOWN_TIMEOUT_S,
) -> ModelBreakdown:
    """:func:`breakdown_step` in an isolated worker (the model's code never runs here).

    The choices are validated here first (a bad workload is a :class:`ConfigError`
    before any process starts). A worker that crashes, exits or runs past
    ``timeout_s`` raises a one-line :class:`~accelbench.errors.WorkerError`
    (``roofline --model W: worker killed by signal SIGSEGV: ...``).
    """
    from accelbench.isolation.isolate import call
    from accelbench.planning.cases import prepare_case
    from accelbench.workloads.registry import worker_plugins

    spec = prepare_case(workload_name, choices).spec
    _profiler(spec.framework)
    data = call(
        "accelbench.execution.breakdown:breakdown_in_worker",
        {"spec": spec.to_dict(), "repeats": repeats, "warmup": warmup},
        what=f"roofline --model {spec.workload}", timeout_s=timeout_s,
        plugins=worker_plugins(spec.workload, spec.framework), spec=spec.to_dict(),
        warm=spec.framework,
    )
    return ModelBreakdown.from_dict(data)
