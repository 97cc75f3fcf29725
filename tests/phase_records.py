"""Hand-built ``--phases`` records (:class:`accelbench.phases.Phases`) with realistic figures
and every energy status, for the tests of what shows the phases (store, run summary,
compare, report, exports). The worker that measures them is tested elsewhere."""

from __future__ import annotations

import dataclasses

from accelbench.phases import Difference, Loop, Phase, Phases
from accelbench.result import Result


def _diff(value: float | None, half: float, status: str = "measured",
          note: str = "") -> Difference:
    ci = (value - half, value + half) if value is not None else None
    return Difference(value=value, ci95=ci, status=status, note=note)  # type: ignore[arg-type]


def make_phases(*, forward_s: float = 0.030, backward_s: float = 0.060,  # noqa: PLR0913
                optimizer_s: float = 0.008, input_s: float | None = 0.004,
                communication_s: float | None = None, step_s: float = 0.100,
                energy: bool = True, scale_j: float = 1.0,
                optimizer_energy: str = "indistinguishable",
                communication_energy: str = "negative",
                notes: tuple[str, ...] = ()) -> Phases:
    """A resnet50-like step on one GPU: forward 30 ms, backward 60 ms, optimizer 8 ms of a
    100 ms step (sum 98%); energy per step from the differential loops at ~250 W: forward
    7.2 J and backward 15.6 J measured (times ``scale_j``), the optimizer's
    ``optimizer_energy`` (``indistinguishable``: CI includes 0), communication (where
    given) ``communication_energy``, input unavailable (outside the loops); the optimizer's
    direct and differential times disagree; ``notes``: the record's own."""
    no_energy = "no power sensor readable here (NVML, AMD SMI, RAPL): energy unavailable"
    phases = [
        Phase(name="forward", time_s=forward_s,
              time_ci95_s=(forward_s * 0.98, forward_s * 1.02),
              diff_time=_diff(forward_s * 1.01, forward_s * 0.03),
              energy=_diff(7.2 * scale_j, 0.3 * scale_j) if energy
              else Difference(value=None, note=no_energy), agrees=True),
        Phase(name="backward", time_s=backward_s,
              time_ci95_s=(backward_s * 0.98, backward_s * 1.02),
              diff_time=_diff(backward_s * 0.99, backward_s * 0.03),
              energy=_diff(15.6 * scale_j, 0.5 * scale_j) if energy
              else Difference(value=None, note=no_energy), agrees=True),
        Phase(name="optimizer", time_s=optimizer_s,
              time_ci95_s=(optimizer_s * 0.95, optimizer_s * 1.05),
              diff_time=_diff(optimizer_s * 1.3, optimizer_s * 0.1),
              energy=(_diff(0.3, 0.7, "indistinguishable",
                            "the CI includes 0: the update costs too little to resolve")
                      if optimizer_energy == "indistinguishable" else
                      _diff(1.1 * scale_j, 0.2 * scale_j)) if energy
              else Difference(value=None, note=no_energy),
              agrees=False,
              note="direct and differential times disagree (fused update in the full step)"),
    ]
    if communication_s is not None:
        phases.append(Phase(
            name="communication", time_s=communication_s,
            time_ci95_s=(communication_s * 0.9, communication_s * 1.1),
            diff_time=_diff(communication_s, communication_s * 0.2),
            energy=(_diff(-0.8, 0.3, "negative", "step without no_sync used more energy: "
                          "a busy machine?") if communication_energy == "negative" else
                    _diff(2.0 * scale_j, 0.4 * scale_j)) if energy
            else Difference(value=None, note=no_energy),
            agrees=True))
    if input_s is not None:
        phases.insert(0, Phase(
            name="input", time_s=input_s, time_ci95_s=(input_s * 0.9, input_s * 1.1),
            energy=Difference(value=None, note="outside the measured step: no loop for it"),
            in_step=False, note="host-to-device copy; the headline step has its batch on "
                                "the device already"))
    in_step = sum(p.time_s or 0.0 for p in phases if p.in_step)
    rel = (in_step - step_s) / step_s
    return Phases(
        phases=tuple(phases), method="CUDA events around each phase (attribution pass)",
        attribution_steps=50, step_time_s=step_s, sum_rel_diff=rel,
        loops=(Loop(name="forward", iterations=(200, 200, 200),
                    time_s=(forward_s,) * 3, energy_j=(7.2,) * 3 if energy else ()),
               Loop(name="step", iterations=(100, 100, 100), time_s=(step_s,) * 3,
                    energy_j=(24.0,) * 3 if energy else ())),
        energy_source="integrated_samples" if energy else "unavailable",
        energy_note="" if energy else no_energy,
        notes=notes,
    )


def with_phases(result: Result, phases: Phases | None = None) -> Result:
    """``result`` with ``phases`` (default: :func:`make_phases` at its median step time)."""
    step = result.stats.median_s if result.stats is not None else 0.1
    if phases is None:
        phases = make_phases(forward_s=0.3 * step, backward_s=0.6 * step,
                             optimizer_s=0.08 * step, step_s=step)
    return dataclasses.replace(result, phases=phases)
