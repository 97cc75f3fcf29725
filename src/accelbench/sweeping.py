"""A sweep over device settings: one workload run once per setting (power limits,
locked clocks, CPU frequency, RAPL limits), each setting applied before its case and
restored after it, as a resumable suite; then the throughput-energy frontier. Both
``accelbench sweep`` and :func:`accelbench.api.sweep` run :func:`run_sweep`.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError
from accelbench.frameworks import DEFAULT_FRAMEWORK
from accelbench.keywords import (
    allowed_for,
    apply_keywords,
    check_keywords,
    keywords_of,
    plan_case,
    resolve,
)
from accelbench.names import number_problem
from accelbench.options import Option, bounds_problem, field_options, option, validate_fields
from accelbench.result import Result
from accelbench.spec import RunChoices

if TYPE_CHECKING:
    from accelbench.execution.orchestrate import SuiteCallback

#: The grain of ``auto`` values in a knob's unit, where not 1 (DeviceSettings field -> grain).
AUTO_GRAIN: dict[str, float] = {"cpu_max_freq_khz": 100_000.0}
INT_KNOBS = ("sm_clock_mhz", "mem_clock_mhz", "cpu_max_freq_khz")
POSITIVE = Option(help="", lo=0.0, lo_open=True)


def value_list(text: str) -> list[float] | str:
    """``auto`` or comma-separated positive numbers, in the order given (an argparse
    type: ``argparse.ArgumentTypeError`` on anything else)."""
    if text.strip().lower() == "auto":
        return "auto"
    values = []
    for part in text.split(","):
        try:
            if number_problem(part):
                raise ValueError(part)
            v = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r} is not a number (give e.g. 200,250,300 or auto)") from None
        if not v > 0 or not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{part.strip()!r} must be a positive number")
        values.append(v)
    return values


def knob_values(flag: str, text: str) -> list[float] | str:
    """:func:`value_list` of ``text``, refused as :class:`ConfigError` naming ``flag``."""
    try:
        return value_list(text)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepKnobs:
    """The device settings ``sweep`` steps through: each field is the
    :class:`~accelbench.spec.DeviceSettings` field it sets, its flag takes the values."""

    power_limit_w: list[float] | str | None = option(
        None, flag="--power-limits", parse=value_list, metavar="W,...|auto",
        help="GPU power limits in W (NVML power limit, AMD power cap)")
    sm_clock_mhz: list[float] | str | None = option(
        None, flag="--sm-clocks", parse=value_list, metavar="MHZ,...|auto",
        help="locked GPU core clocks in MHz (NVIDIA)")
    mem_clock_mhz: list[float] | str | None = option(
        None, flag="--mem-clocks", parse=value_list, metavar="MHZ,...|auto",
        help="locked GPU memory clocks in MHz (NVIDIA)")
    cpu_max_freq_khz: list[float] | str | None = option(
        None, flag="--cpu-max-freqs", parse=value_list, metavar="KHZ,...|auto",
        help="cpufreq scaling_max_freq in kHz (every policy)")
    cpu_power_limit_w: list[float] | str | None = option(
        None, flag="--cpu-power-limits", parse=value_list, metavar="W,...|auto",
        help="RAPL package long-term power limits in W")

    def __post_init__(self) -> None:
        for fo in field_options(SweepKnobs):
            value = getattr(self, fo.name)
            if isinstance(value, str):  # the API's "200,250" or "auto", as typed
                object.__setattr__(self, fo.name, knob_values(fo.opt.name, value))
            elif value is not None:
                for v in value:
                    problem = bounds_problem(v, POSITIVE, float)
                    if problem:
                        raise ConfigError(f"{fo.opt.name} {problem}")


@dataclass(frozen=True, kw_only=True, slots=True)
class FrontierPick:
    """Which setting the frontier recommends."""

    max_slowdown: float = option(
        0.1, flag="--max-slowdown", lo=0.0, hi=0.999, metavar="F",
        help="pick the least energy per sample among settings within this fraction of the "
        "fastest's throughput")

    def __post_init__(self) -> None:
        validate_fields(self)


def gpu_target(gpu: int | None, device: str) -> str:
    """The vendor device string of the GPU whose knobs the sweep sets: GPU ``gpu``, else
    the one ``device`` names."""
    from accelbench.tuning.base import gpu_device

    index = gpu
    if index is None:
        kind, _, idx = device.partition(":")
        if kind not in ("cuda", "rocm", "hip"):
            raise ConfigError("GPU knobs need a GPU: pass --device cuda:N, or --gpu N for the "
                              "GPU to tune")
        index = int(idx) if idx.isdigit() else 0
    return gpu_device(index)


def plan_settings(knobs: SweepKnobs, gpu: int | None,
                  device: str) -> tuple[list[Any], Any, list[Any]]:
    """(settings in sweep order, the knobs' target, the knobs) of ``knobs``; ``auto``
    resolved against each knob's allowed range. Changes nothing."""
    from accelbench.spec import DeviceSettings
    from accelbench.tuning.base import GPU_KNOBS, UNITS, knob_for, pick, spread
    from accelbench.tuning.guard import Target

    flags = {fo.name: fo.opt.name for fo in field_options(SweepKnobs)}
    given = {name: getattr(knobs, name) for name in flags if getattr(knobs, name) is not None}
    if not given:
        raise ConfigError("nothing to sweep: give --power-limits, --sm-clocks, --mem-clocks, "
                          "--cpu-max-freqs or --cpu-power-limits")
    tunes_gpu = any(name in GPU_KNOBS for name in given)
    if gpu is not None and not tunes_gpu:
        raise ConfigError("--gpu names the GPU whose knobs are set; it needs a GPU knob "
                          "(--power-limits, --sm-clocks or --mem-clocks)")
    target = Target(gpu=gpu_target(gpu, device) if tunes_gpu else None)
    axes: list[list[tuple[str, float | int]]] = []
    chosen = []
    for name, values in given.items():
        grain = AUTO_GRAIN.get(name, 1.0)
        knob = knob_for(target.device_of(name), name)
        chosen.append(knob)
        allowed = list(knob.allowed())
        if values == "auto":
            values = (pick(allowed) if name in ("sm_clock_mhz", "mem_clock_mhz")
                      else spread(min(allowed), max(allowed), grain=grain))
        # Out-of-range values are refused here, before the first setting changes anything.
        for v in values:
            if not min(allowed) <= v <= max(allowed):
                raise ConfigError(
                    f"{flags[name]} {v:g} is outside {knob.device}'s range "
                    f"{min(allowed):g}-{max(allowed):g} {UNITS[name]}")
        axes.append([(name, int(v) if name in INT_KNOBS else v) for v in values])
    settings = [DeviceSettings(**dict(combo))  # type: ignore[arg-type]
                for combo in itertools.product(*axes)]
    return settings, target, chosen


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What :func:`run_sweep` measured: its suite id, every stored result of the sweep
    (settings measured earlier under the same id too) and their frontier."""

    suite_id: str
    results: list[Result]
    frontier: Any
    """The :class:`~accelbench.report.frontier.Frontier` (``to_dict()``, ``points``)."""


#: The keywords of :func:`run_sweep`: the case's options and objects but the device
#: settings (the knobs set them), the knobs by their flags' names, and ``db``.
SWEEP_KEYWORDS = allowed_for(("choices", "policy", "meters"), extra=("db",)) | set(
    keywords_of(SweepKnobs))


def run_sweep(workload: str, choices: RunChoices | None = None, *, gpu: int | None = None,
              suite_id: str | None = None, max_slowdown: float = 0.1,
              on_event: SuiteCallback | None = None, **options: Any) -> SweepOutcome:
    """Measure ``workload`` once per device setting (every combination of the knobs
    given, in order), each setting applied before its case and restored after it (also
    on errors, Ctrl-C and SIGTERM), stored as suite ``suite_id`` (a new one when None;
    settings stored already are skipped). Plugins must be loaded.

    Raises:
        TypeError: a keyword that is no option (with the closest names).
        ConfigError: bad input or a value outside a knob's range, before any change.
        PrivilegeError: a knob this process may not set, before any change.
    """
    from accelbench.execution.orchestrate import new_suite_id, run_cases
    from accelbench.report.frontier import frontier_from_results
    from accelbench.store import ResultFilter, open_store
    from accelbench.tuning import guard

    check_keywords("sweep", options, SWEEP_KEYWORDS)
    db = options.pop("db", None)
    knobs = apply_keywords(SweepKnobs, None, options)
    pick = FrontierPick(max_slowdown=max_slowdown)
    opts = resolve({**options, "choices": choices})
    if opts.choices.data != "synthetic":
        raise ConfigError("sweep: data other than synthetic is not built for sweeps yet; "
                          "measure it with run --data")
    settings, target, chosen = plan_settings(knobs, gpu, opts.choices.device)
    guard.check_privileges(chosen)  # a knob this process may not set: nothing changed
    cases = [plan_case(workload, dataclasses.replace(opts, settings=s)) for s in settings]
    sid = suite_id or new_suite_id("sweep")
    with open_store(db) as st:
        st.check_writable()
        run_cases(st, sid, cases, False, on_event,
                  case_context=lambda c: guard.applied(st, c.spec.settings, target))
        stored = st.query(ResultFilter(suite_id=sid))
    return SweepOutcome(sid, stored, frontier_from_results(
        stored, max_slowdown=pick.max_slowdown))


@dataclass(frozen=True, kw_only=True, slots=True)
class ToTargetSweep:
    """``sweep --to-target``: the runs to a target made at each setting."""

    recipe: Any
    """The :class:`~accelbench.totarget.recipes.Recipe` trained."""
    limits: Any
    """Its :class:`~accelbench.totarget.outcome.Limits` (target and caps)."""
    seeds: int
    metering: Any
    """The :class:`~accelbench.totarget.energy.Metering` (idle baseline, node meter, TDP)."""
    eta: float
    framework: str = DEFAULT_FRAMEWORK
    threads: int = 1
    """CPU threads each run trains with (as ``train --threads``)."""


def zeus_max_power_w(chosen: list[Any]) -> float | None:
    """Zeus weighs time by the device's maximum power limit: where the sweep sets a power
    limit, the highest it allows; else None (the frontier takes the highest mean power)."""
    for knob in chosen:
        if knob.name in ("power_limit_w", "cpu_power_limit_w"):
            return float(max(knob.allowed()))
    return None


def run_totarget_sweep(plan: ToTargetSweep, knobs: SweepKnobs, *, gpu: int | None = None,
                       suite_id: str | None = None, db: str | None = None,
                       on_group: Any = None) -> tuple[str, Any]:
    """Train ``plan.recipe`` to its target ``plan.seeds`` times at each setting of
    ``knobs`` (applied before the setting's runs and restored after them, as
    :func:`run_sweep` does), each setting's runs stored as one group of the sweep
    ``suite_id`` (settings already stored under it are skipped). Returns the sweep id and
    the :class:`~accelbench.totarget.frontier.ToTargetFrontier` of every stored setting.

    Raises:
        ConfigError: bad input or a value outside a knob's range, before any change.
        PrivilegeError: a knob this process may not set, before any change.
    """
    from accelbench.execution.orchestrate import new_suite_id
    from accelbench.store import open_store
    from accelbench.totarget.frontier import frontier
    from accelbench.totarget.run import run_seeds
    from accelbench.tuning import guard

    settings, target, chosen = plan_settings(knobs, gpu, "cpu")
    guard.check_privileges(chosen)
    sid = suite_id or new_suite_id("sweep")
    with open_store(db) as st:
        st.check_writable()
        done = {tuple(sorted(r.settings.items())) for r in st.totarget_runs(
            workload=plan.recipe.workload) if r.sweep_id == sid}
        for s in settings:
            if tuple(sorted(s.given().items())) in done:
                continue
            with guard.applied(st, s, target):
                recs = run_seeds(plan.recipe, plan.limits, seeds=plan.seeds,
                                 metering=plan.metering, framework=plan.framework,
                                 threads=plan.threads)
            recs = [dataclasses.replace(r, sweep_id=sid, settings=dict(s.given()))
                    for r in recs]
            st.save_totarget(recs)
            if on_group is not None:
                on_group(recs)
        stored = [r for r in st.totarget_runs(workload=plan.recipe.workload)
                  if r.sweep_id == sid]
    groups: dict[str, list[Any]] = {}
    for r in stored:
        groups.setdefault(r.group_id, []).append(r)
    return sid, frontier(list(groups.values()), eta=plan.eta,
                         max_power_w=zeus_max_power_w(chosen))
