"""Rank device x precision x batch-size options for one workload from what the store holds.

An option is the newest successful result of one (device, precision, batch size)
at one model size; the paper's published figures can be added as options of
their own, always labelled ``published``. Options are ranked three ways: by
energy per sample (lowest first), by throughput (highest first) and by cost per
million samples (lowest first), after the user's constraints remove options.
An option whose constrained quantity is unknown (no energy, no cost rates) is
excluded from that constraint's ranking, with the reason said, never guessed.

Only ``ok`` results are options (``diverged`` and ``insufficient`` ones never are).
Of several runs of one option the newest quiet one is used; a noisy run only where
there is nothing else, and then an :class:`~accelbench.errors.AccelbenchWarning`
says so (``exclude_noisy`` leaves noisy runs out altogether). Each option carries
its throughput CI, shown in the ranking.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from accelbench.errors import AccelbenchWarning
from accelbench.report.cost import CaseCost, CostConfig, case_cost
from accelbench.report.reference import SHORT_CITATION, load_reference
from accelbench.report.rows import (
    SIZE_ORDER,
    CaseRow,
    case_rows,
    newest_briefs,
    newest_per_case,
)
from accelbench.result import Result
from accelbench.spec import check_size, normalize_precision
from accelbench.store.briefs import ResultBrief


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    """One candidate: a device, precision, batch size (and model size) with its numbers."""

    origin: Literal["measured", "published"]
    device: str
    device_name: str
    precision: str
    batch_size: int
    size: str
    sample_unit: str
    samples_per_s: float
    energy_j_per_sample: float | None
    energy_kind: str
    cost: CaseCost | None
    result_id: str | None
    """The stored result behind a measured option."""
    ci95: tuple[float, float] | None = None
    """95% CI of the throughput (None: published, or fewer than 3 iterations)."""
    ci_rel_halfwidth: float | None = None
    noisy: bool = False
    noise_reasons: tuple[str, ...] = ()
    suite_id: str | None = None
    finished_at: str = ""
    energy_boundary: str = "device"
    """What the energy covers (published rows: the device, the paper's GPU only)."""
    framework: str = ""
    """The framework a measured option ran in (``""``: published)."""
    fast_paths: tuple[str, ...] = ()

    @property
    def cost_per_msample(self) -> float | None:
        """Total cost per million samples, where rates are known."""
        return self.cost.cost_per_msample if self.cost else None

    @property
    def label(self) -> str:
        """``device precision bs=N``, then the framework where it is not the default
        (``jax``) and any fast paths (``+compile``), so two options never read the same;
        plus the origin for published rows."""
        from accelbench.report.rows import DEFAULT_FRAMEWORK, fast_paths_text

        fw = f" {self.framework}" if self.framework not in ("", DEFAULT_FRAMEWORK) else ""
        text = (f"{self.device_name} {self.precision} bs={self.batch_size}{fw}"
                f"{fast_paths_text(self.fast_paths, lead=' ')}")
        return f"{text} (published)" if self.origin == "published" else text

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "origin": self.origin,
            "device": self.device,
            "device_name": self.device_name,
            "precision": self.precision,
            "batch_size": self.batch_size,
            "size": self.size,
            "framework": self.framework or None,
            "fast_paths": list(self.fast_paths),
            "sample_unit": self.sample_unit,
            "samples_per_s": self.samples_per_s,
            "energy_j_per_sample": self.energy_j_per_sample,
            "energy_kind": self.energy_kind,
            "energy_boundary": self.energy_boundary,
            "cost_per_msample": self.cost_per_msample,
            "cost": self.cost.to_dict() if self.cost else None,
            "result_id": self.result_id,
            "samples_per_s_ci95": list(self.ci95) if self.ci95 else None,
            "ci_rel_halfwidth": self.ci_rel_halfwidth,
            "noisy": self.noisy,
            "noise_reasons": list(self.noise_reasons),
            "suite_id": self.suite_id,
            "finished_at": self.finished_at,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    """The rankings and everything said about them."""

    workload: str
    size: str | None
    answerable: bool
    """False when the store holds too little to rank anything."""
    message: str
    """One plain sentence: the answer's headline or why there is none."""
    by_energy: tuple[Option, ...] = ()
    by_throughput: tuple[Option, ...] = ()
    by_cost: tuple[Option, ...] = ()
    excluded: tuple[tuple[Option, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "workload": self.workload,
            "size": self.size,
            "answerable": self.answerable,
            "message": self.message,
            "by_energy": [o.to_dict() for o in self.by_energy],
            "by_throughput": [o.to_dict() for o in self.by_throughput],
            "by_cost": [o.to_dict() for o in self.by_cost],
            "excluded": [{"option": o.to_dict(), "reason": why} for o, why in self.excluded],
            "notes": list(self.notes),
        }


def _measured_option(row: CaseRow, costs: CostConfig) -> Option:
    return Option(
        origin="measured", device=row.device, device_name=row.device_name,
        precision=row.precision, batch_size=row.batch_size, size=row.size,
        sample_unit=row.sample_unit, samples_per_s=float(row.samples_per_s or 0.0),
        energy_j_per_sample=row.energy_j_per_sample, energy_kind=row.energy_kind,
        cost=case_cost(row, costs.rates_for(row.device, row.device_name)),
        result_id=row.result_id,
        ci95=(row.ci95_low_samples_per_s, row.ci95_high_samples_per_s)
        if row.ci95_low_samples_per_s is not None and row.ci95_high_samples_per_s is not None
        else None,
        ci_rel_halfwidth=row.ci_rel_halfwidth, noisy=row.noisy,
        noise_reasons=row.noise_reasons, suite_id=row.suite_id, finished_at=row.finished_at,
        energy_boundary=row.energy_boundary, framework=row.framework,
        fast_paths=tuple(row.fast_paths),
    )


def _published_options(
    workload: str, precision: str | None, costs: CostConfig
) -> tuple[list[Option], list[tuple[Option, str]]]:
    options, excluded = [], []
    for ref in load_reference(workload=workload, precision=precision):
        # Cost rates of a published device apply only when configured for its name.
        rates = costs.devices.get(ref.device)
        opt = Option(
            origin="published", device=ref.device, device_name=ref.device,
            precision=ref.precision, batch_size=ref.batch_size, size="paper",
            sample_unit=ref.sample_unit, samples_per_s=ref.samples_per_s or 0.0,
            energy_j_per_sample=ref.energy_j_per_sample,
            energy_kind="measured" if ref.energy_j_per_sample is not None else "unavailable",
            cost=None, result_id=None,
        )
        if rates is not None:
            row_like = _ref_row(opt)
            opt = _with_cost(opt, case_cost(row_like, rates))
        if ref.status != "ok" or ref.samples_per_s is None:
            excluded.append((opt, f"{ref.status} in {SHORT_CITATION}"))
        else:
            options.append(opt)
    return options, excluded


def _with_cost(opt: Option, cost: CaseCost | None) -> Option:
    return dataclasses.replace(opt, cost=cost)


def _ref_row(opt: Option) -> CaseRow:
    return CaseRow(
        result_id="", suite_id=None, status="ok", error=None, workload="", size=opt.size,
        batch_size=opt.batch_size, precision=opt.precision, device=opt.device,
        device_name=opt.device_name, framework="", threads=None, tag="",
        sample_unit=opt.sample_unit, samples_per_step=opt.batch_size,
        samples_per_s=opt.samples_per_s, ci95_low_samples_per_s=None,
        ci95_high_samples_per_s=None, ci_rel_halfwidth=None, step_time_s=None, iterations=0,
        stop_reason=None,
        avg_power_w=None, energy_j_per_sample=opt.energy_j_per_sample,
        energy_source="published", energy_kind=opt.energy_kind, energy_note="", mfu=None,
        param_count=None, hostname=None, started_at="", finished_at="",
    )


@dataclass(frozen=True, kw_only=True)
class Wanted:
    """What a recommendation is asked: which options count, which are kept, how many shown."""

    size: str | None = None
    """Model size; None picks the largest size the store has for the workload."""
    precision: str | None = None
    """Only this precision."""
    min_samples_per_s: float | None = None
    """Drop options below this throughput."""
    max_cost_per_msample: float | None = None
    """Drop options above this cost per million samples (and those whose cost is unknown)."""
    include_reference: bool = False
    """Also rank the paper's published rows (paper size only)."""
    exclude_noisy: bool = False
    """Leave noisy runs out (otherwise a noisy run is used only where an option has no
    quiet one, with a warning)."""
    top: int = 5
    """Options shown per ranking."""


def recommend(
    results: Sequence[Result] | Sequence[ResultBrief],
    workload: str,
    wanted: Wanted = Wanted(),
    *,
    costs: CostConfig | None = None,
    store_label: str = "the store",
    load: Callable[[Sequence[ResultBrief]], list[Result]] | None = None,
) -> Recommendation:
    """Rank the options for ``workload`` (see the module docstring).

    Args:
        results: Results to choose from (any workload; others are ignored), or their
            briefs (:mod:`accelbench.store.briefs`, newest first) with ``load``: the
            options are then chosen on the briefs and only the chosen results (and those
            of device-setting sweeps) are decoded whole.
        workload: The workload to recommend for.
        wanted: The size, precision and constraints asked, and how many options shown.
        costs: Price and carbon rates.
        store_label: How to name the store in messages.
        load: Decodes briefs' results whole (given with briefs).

    Raises:
        ConfigError: unknown precision or size.
    """
    costs = costs or CostConfig()
    exclude_noisy, include_reference = wanted.exclude_noisy, wanted.include_reference
    prec = normalize_precision(wanted.precision) if wanted.precision else None
    if wanted.size is not None:
        check_size(wanted.size)
    mine: list[Any] = [r for r in results if r.spec.workload == workload]
    if load is not None:
        chosen_results = load(newest_briefs(mine, exclude_noisy=exclude_noisy,
                                            prefer_quiet=True))
        swept = load([r for r in mine if r.spec.settings.given()])
    else:
        chosen_results, swept = mine, mine
    rows = [
        row for row in newest_per_case(case_rows(chosen_results),
                                       exclude_noisy=exclude_noisy, prefer_quiet=True)
        if prec is None or row.precision == prec
    ]
    notes: list[str] = []
    n_noisy = sum(1 for r in mine if r.noisy and r.status == "ok")
    if exclude_noisy and n_noisy:
        notes.append(f"--exclude-noisy: left out {n_noisy} noisy run(s)")
    chosen, rows = _choose_size(rows, wanted.size, notes)
    options = [_measured_option(row, costs) for row in rows]
    excluded: list[tuple[Option, str]] = []
    if include_reference and chosen in (None, "paper"):
        published, published_excluded = _published_options(workload, prec, costs)
        options += published
        excluded += published_excluded
    elif include_reference:
        notes.append(f"published figures are for size 'paper', not {chosen!r}: left out")

    if not options:
        return Recommendation(
            workload=workload, size=chosen, answerable=False,
            message=_too_little_data(mine, workload, prec, chosen, store_label,
                                     include_reference),
            excluded=tuple(excluded), notes=tuple(notes),
        )
    feasible = _feasible(options, wanted.min_samples_per_s, wanted.max_cost_per_msample,
                         excluded)

    if not feasible:
        return Recommendation(
            workload=workload, size=chosen, answerable=False,
            message=(
                f"No option satisfies the constraints: all {len(options)} measured or "
                "published option(s) were excluded (reasons below)."
            ),
            excluded=tuple(excluded), notes=tuple(notes),
        )

    with_energy = _one_boundary([o for o in feasible if o.energy_j_per_sample is not None],
                                notes)
    by_energy = sorted(with_energy, key=lambda o: (o.energy_j_per_sample, -o.samples_per_s))
    by_tput = sorted(feasible, key=lambda o: -o.samples_per_s)
    with_cost = [o for o in feasible if o.cost_per_msample is not None]
    by_cost = sorted(with_cost, key=lambda o: (o.cost_per_msample, -o.samples_per_s))
    notes += _ranking_notes(feasible, with_energy, with_cost)
    noisy = [o for o in feasible if o.noisy]
    if noisy:
        listed = "; ".join(
            f"{o.label} ({', '.join(o.noise_reasons[:1]) or 'flagged'})" for o in noisy[:3]
        ) + ("; ..." if len(noisy) > 3 else "")
        warnings.warn(
            f"{len(noisy)} ranked option(s) rest on noisy measurements (marked !): {listed}; "
            "rerun them on a quiet machine or pass --exclude-noisy",
            AccelbenchWarning, stacklevel=2,
        )
    no_ci = [o for o in feasible if o.origin == "measured" and o.ci95 is None]
    if no_ci:
        notes.append(f"{len(no_ci)} option(s) have no CI (fewer than 3 measured iterations): "
                     "their place in the throughput ranking is not established")
    from accelbench.report.frontier import recommend_lines

    notes.extend(recommend_lines(swept))  # power-limit / clock sweeps of this workload
    return Recommendation(
        workload=workload, size=chosen, answerable=True,
        message=_best_of(by_tput[0], by_energy, by_cost),
        by_energy=tuple(by_energy[:wanted.top]), by_throughput=tuple(by_tput[:wanted.top]),
        by_cost=tuple(by_cost[:wanted.top]), excluded=tuple(excluded), notes=tuple(notes),
    )


def _choose_size(rows: list[CaseRow], size: str | None, notes: list[str]
                 ) -> tuple[str | None, list[CaseRow]]:
    """The model size to rank (given, else the largest measured) and its rows."""
    sizes = sorted({row.size for row in rows}, key=lambda s: SIZE_ORDER.get(s, 9))
    chosen = size
    if chosen is None and sizes:
        chosen = sizes[-1]
        if len(sizes) > 1:
            notes.append(
                f"ranking size {chosen!r}, the largest measured; also measured: "
                f"{', '.join(sizes[:-1])} (choose with --size)"
            )
    if chosen is not None:
        rows = [row for row in rows if row.size == chosen]
    if chosen is not None and chosen != "paper":
        notes.append(
            f"size {chosen!r} is a scaled-down model: its ranking need not hold at paper size"
        )
    return chosen, rows


def _too_little_data(mine: Sequence[Result | ResultBrief], workload: str, prec: str | None,
                     chosen: str | None, store_label: str, include_reference: bool) -> str:
    failed = [r for r in mine if r.status != "ok"]
    what = f"workload {workload!r}" + (f" at precision {prec}" if prec else "") + (
        f" at size {chosen!r}" if chosen else ""
    )
    if not mine:
        detail = f"{store_label} holds no results for {what}"
    elif failed and len(failed) == len(mine):
        statuses = ", ".join(sorted({r.status for r in failed}))
        detail = f"{store_label} holds only failed runs ({statuses}) for {what}"
    else:
        detail = f"{store_label} holds no successful results for {what}"
    return (
        f"Too little data to recommend anything: {detail}. Measure some options "
        f"first, e.g. `accelbench run {workload} --size {chosen or 'paper'} "
        f"--precision {prec or 'fp32'}` on each device, or `accelbench suite paper "
        f"--workload {workload}`" + (
            "" if include_reference else "; or add --reference for published figures"
        ) + "."
    )


def _feasible(options: Sequence[Option], min_samples_per_s: float | None,
              max_cost_per_msample: float | None, excluded: list[tuple[Option, str]]
              ) -> list[Option]:
    """The options the constraints keep; each other one goes in ``excluded`` with why."""
    feasible = []
    for opt in options:
        if min_samples_per_s is not None and opt.samples_per_s < min_samples_per_s:
            excluded.append((opt, f"throughput {opt.samples_per_s:.4g}/s < {min_samples_per_s:g}"))
            continue
        if max_cost_per_msample is not None:
            cost = opt.cost_per_msample
            if cost is None:
                excluded.append(
                    (opt, "cost unknown (set --price-per-hour and/or --electricity-price)")
                )
                continue
            if cost > max_cost_per_msample:
                excluded.append((opt, f"cost {cost:.4g}/Msample > {max_cost_per_msample:g}"))
                continue
        feasible.append(opt)
    return feasible


def _one_boundary(with_energy: list[Option], notes: list[str]) -> list[Option]:
    """Figures of different boundaries do not compare: keep the device's (the paper's and
    the default), or else the most common one, and say what was left out."""
    boundaries = {o.energy_boundary for o in with_energy}
    if len(boundaries) <= 1:
        return with_energy
    keep = "device" if "device" in boundaries else max(
        sorted(boundaries), key=lambda b: sum(o.energy_boundary == b for o in with_energy))
    left = [o for o in with_energy if o.energy_boundary != keep]
    notes.append(
        f"{len(left)} option(s) whose energy covers another boundary "
        f"({', '.join(sorted(boundaries - {keep}))}) are not in the energy ranking, "
        f"which compares {keep} figures only"
    )
    return [o for o in with_energy if o.energy_boundary == keep]


def _ranking_notes(feasible: Sequence[Option], with_energy: Sequence[Option],
                   with_cost: Sequence[Option]) -> list[str]:
    notes = []
    if not with_energy:
        notes.append(
            "no option has an energy measurement: energy ranking empty (no power sensor "
            "was readable when these ran; see `accelbench devices`)"
        )
    elif len(with_energy) < len(feasible):
        notes.append(
            f"{len(feasible) - len(with_energy)} option(s) without energy data are not "
            "in the energy ranking"
        )
    if any(o.energy_kind != "measured" for o in with_energy):
        notes.append("energy marked 'estimated' is a model, not a measurement")
    if not with_cost:
        notes.append(
            "no cost ranking: give --price-per-hour and/or --electricity-price "
            "(or store them in the config file)"
        )
    if len(feasible) == 1:
        notes.append("only one option is available: nothing to rank it against")
    return notes


def _best_of(best: Option, by_energy: Sequence[Option], by_cost: Sequence[Option]) -> str:
    message = f"Fastest: {best.label} at {best.samples_per_s:.4g} {best.sample_unit}s/s"
    if by_energy:
        e = by_energy[0]
        message += (
            f"; most energy-efficient: {e.label} at {e.energy_j_per_sample:.4g} "
            f"J/{e.sample_unit} ({e.energy_kind})"
        )
    if by_cost:
        c = by_cost[0]
        cur = f" {c.cost.currency}" if c.cost and c.cost.currency else ""
        message += f"; cheapest: {c.label} at {c.cost_per_msample:.4g}{cur} per million samples"
    return message + "."
