"""Reading runs to a target back (``accelbench train``'s groups): a group by id prefix, its
per-seed figures, the comparison of two groups, and the curves of the held-out metric against
time and energy (docs/totarget.md).

Records are read defensively: a point's energy is known only where the record says so (an
estimate's constant power times the point's clock, or a per-point figure where the record
carries one); a figure that is not known is ``None`` with the reason, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.errors import ConfigError
from accelbench.report.compare.stats import Ratio, mean_bound, seed_ratio, with_bounds
from accelbench.result_text import bound_text
from accelbench.totarget.record import ToTargetRecord
from accelbench.totarget.run import Summary, input_line, summarise, summary_line


def find_group(store: Any, prefix: str) -> list[ToTargetRecord]:
    """The runs of the one group whose id starts with ``prefix``, or a one-line refusal."""
    ids = store.totarget_group_ids(prefix)
    if not ids:
        raise ConfigError(f"no to-target group id starts with {prefix!r} in {store.where} "
                          "(accelbench results to-target lists them)")
    if len(ids) > 1:
        raise ConfigError(f"to-target group prefix {prefix!r} is ambiguous ({', '.join(ids[:2])}"
                          ", ...); type more characters")
    records: list[ToTargetRecord] = store.totarget_runs(group_id=ids[0])
    if not records:
        raise ConfigError(f"to-target group {ids[0]}: no run could be read")
    return records


def energy_to_target_j(rec: ToTargetRecord) -> float | None:
    """The energy of a run that reached the target (its clock stops there, so the energy
    over the whole clock is the energy to the target); None otherwise or unavailable."""
    if rec.outcome.status != "reached":
        return None
    return rec.energy.joules(rec.outcome.time_s)


def energy_to_target_rel_95(rec: ToTargetRecord) -> float | None:
    """The 95% relative error bound of :func:`energy_to_target_j` (the device boundary's
    sensors' bounds over the window, :meth:`Energy.rel_95`); None where that figure is
    None or its record has no bound."""
    if energy_to_target_j(rec) is None:
        return None
    return rec.energy.rel_95()


def point_energy_j(rec: ToTargetRecord, index: int) -> float | None:
    """The energy at evaluation point ``index``: the point's own figure where the record has
    one, an estimate's power times the point's clock, else None (a measured total covers
    the whole clock, not a point)."""
    point = rec.outcome.points[index]
    own = getattr(point, "energy_j", None)
    if own is not None:
        return float(own)
    if rec.energy.power_w is not None:
        return rec.energy.power_w * point.time_s
    return None


def point_energy_rel_95(rec: ToTargetRecord, index: int) -> float | None:
    """The 95% relative error bound of :func:`point_energy_j`: the point's own (stored with
    a sensor's energy), an estimate's stated model error where the figure is the
    estimate's (power x clock), else None (a record stored before point bounds)."""
    point = rec.outcome.points[index]
    own = getattr(point, "energy_rel_95", None)
    if own is not None:
        return float(own)
    if rec.energy.measured_j is None and rec.energy.power_w is not None:
        from accelbench.meters.uncertainty import ESTIMATE_MODEL_REL

        return ESTIMATE_MODEL_REL
    return None


def why_no_point_energy(rec: ToTargetRecord) -> str:
    """Why a run's curve has no energy axis."""
    if rec.energy.power_w is None and rec.energy.measured_j is None:
        return f"energy unavailable ({rec.energy.reason})"
    return "energy was measured over the whole run only, not at each evaluation"


@dataclass(frozen=True, kw_only=True, slots=True)
class SeedRow:
    """One seed's figures as shown and exported."""

    seed: int
    status: str
    samples_to_target: int | None
    time_to_target_s: float | None
    energy_to_target_j: float | None
    energy_label: str
    best_metric: float | None
    evaluations: int
    reason: str
    energy_to_target_rel_u95: float | None = None
    """95% relative error bound of ``energy_to_target_j`` (None: none)."""
    input_wait_median_s: float | None = None
    """The step's median wait for its batch (None: unavailable, ``input`` says why)."""
    input_stall_fraction: float | None = None
    """The waits' share of the steps' time (None: unavailable)."""
    input: str = ""
    """The input figures in words, or why they are unavailable."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {name: getattr(self, name) for name in self.__slots__}


def seed_rows(records: Sequence[ToTargetRecord]) -> list[SeedRow]:
    """Per seed: status, samples/time/energy to the target, the best metric."""
    return [SeedRow(seed=r.outcome.seed, status=r.outcome.status,
                    samples_to_target=r.samples_to_target, time_to_target_s=r.time_to_target_s,
                    energy_to_target_j=energy_to_target_j(r), energy_label=r.energy.label(),
                    best_metric=r.outcome.best(lower_is_better=r.recipe.lower_is_better),
                    evaluations=len(r.outcome.points), reason=r.outcome.reason,
                    energy_to_target_rel_u95=energy_to_target_rel_95(r),
                    input_wait_median_s=(r.outcome.input.wait_median_s
                                         if r.outcome.input is not None else None),
                    input_stall_fraction=(r.outcome.input.stall_fraction
                                          if r.outcome.input is not None else None),
                    input=input_line(r))
            for r in records]


def group_title(records: Sequence[ToTargetRecord]) -> str:
    """``group ID: workload size (framework), held-out metric <= target, every N samples``."""
    first = records[0]
    sense = "<=" if first.recipe.lower_is_better else ">="
    return (f"group {first.group_id}: {first.recipe.workload} {first.recipe.size} "
            f"({first.framework} on {first.device}), held-out {first.recipe.metric} {sense} "
            f"{first.target:.4g}, "
            f"evaluated every {first.eval_every} samples, {len(records)} run(s) from "
            f"{first.created_at}")


def _fmt(value: float | None, unit: str, why: str) -> str:
    return why if value is None else f"{value:.4g}{unit}"


def group_lines(records: Sequence[ToTargetRecord]) -> list[str]:
    """A group in full: its title, one line per seed, the set's score."""
    lines = [group_title(records)]
    for row in seed_rows(records):
        if row.energy_to_target_j is not None:
            energy = (f"{row.energy_to_target_j:.4g} J "
                      f"{bound_text(row.energy_to_target_rel_u95)} ({row.energy_label})")
        else:
            energy = "-" if row.status != "reached" else row.energy_label
        best = _fmt(row.best_metric, "", "none (no evaluation)")
        lines.append(
            f"seed {row.seed}: {row.status}; samples-to-target "
            f"{'-' if row.samples_to_target is None else row.samples_to_target}, time-to-target "
            f"{_fmt(row.time_to_target_s, ' s', '-')}, energy-to-target {energy}; best "
            f"{records[0].recipe.metric} {best} ({row.evaluations} evaluations); {row.input}; "
            f"{row.reason}")
    lines.append(summary_line(summarise(list(records))))
    return lines


# ----------------------------------------------------------------------------- comparison


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetComparison:
    """Group B against group A: ratios B/A of time-, energy- and samples-to-target."""

    a: str
    b: str
    """Each side's title (:func:`group_title`)."""
    time: Ratio
    energy: Ratio
    samples: Ratio
    summary_a: Summary
    summary_b: Summary
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {"a": self.a, "b": self.b, "time_to_target": self.time.to_dict(),
                "energy_to_target": self.energy.to_dict(),
                "samples_to_target": self.samples.to_dict(),
                "reached": {"a": self.summary_a.reached, "b": self.summary_b.reached},
                "runs": {"a": self.summary_a.runs, "b": self.summary_b.runs},
                "notes": list(self.notes)}


def recipe_difference(a: ToTargetRecord, b: ToTargetRecord) -> str:
    """What differs between the recipes and targets of two groups ('' when nothing does)."""
    diffs = []
    if a.recipe != b.recipe:
        ra, rb = a.recipe, b.recipe
        for name in ra.__slots__:
            if getattr(ra, name) != getattr(rb, name):
                diffs.append(f"{name} {getattr(ra, name)} vs {getattr(rb, name)}")
    if a.target != b.target:
        diffs.append(f"target {a.target:.4g} vs {b.target:.4g}")
    if a.eval_every != b.eval_every:
        diffs.append(f"eval-every {a.eval_every} vs {b.eval_every}")
    return ", ".join(diffs)


def _energy_ratio(ra: Sequence[ToTargetRecord], rb: Sequence[ToTargetRecord]) -> Ratio:
    reached = [r for r in (*ra, *rb) if r.outcome.status == "reached"]
    unknown = [r for r in reached if energy_to_target_j(r) is None]
    if unknown:
        side = "A" if unknown[0] in ra else "B"
        return Ratio(value=None, note=f"energy unavailable on {side} (seed "
                     f"{unknown[0].outcome.seed}: {unknown[0].energy.label()})")
    bounds = {r.energy.boundary for r in reached}
    if len(bounds) > 1:
        return Ratio(value=None, note=f"energy boundaries differ ({'; '.join(sorted(bounds))}); "
                     "not compared")
    reached_a = [r for r in ra if r.outcome.status == "reached"]
    reached_b = [r for r in rb if r.outcome.status == "reached"]
    ea = [energy_to_target_j(r) or 0.0 for r in reached_a]
    eb = [energy_to_target_j(r) or 0.0 for r in reached_b]
    # Each side's 95% error bound widens the CI as worst cases, as compare's energy per
    # sample does (docs/energy.md).
    return with_bounds(seed_ratio(ea, eb, what="energy-to-target"),
                       (mean_bound(ea, [energy_to_target_rel_95(r) for r in reached_a]),
                        mean_bound(eb, [energy_to_target_rel_95(r) for r in reached_b])))


def compare_groups(ra: Sequence[ToTargetRecord], rb: Sequence[ToTargetRecord], *,
                   across_recipes: bool = False) -> TargetComparison:
    """Group B against group A (seeds as samples).

    Raises:
        ConfigError: the recipes or targets differ and ``across_recipes`` was not given.
    """
    notes = []
    diff = recipe_difference(ra[0], rb[0])
    if diff and not across_recipes:
        raise ConfigError(f"compare: the groups train different recipes or targets ({diff}); "
                          "their figures to the target measure different work (add "
                          "--across-recipes to compare them anyway)")
    if diff:
        notes.append(f"recipes or targets differ ({diff}): the ratios compare different work")
    times_a = [r.time_to_target_s for r in ra if r.time_to_target_s is not None]
    times_b = [r.time_to_target_s for r in rb if r.time_to_target_s is not None]
    samples_a = [float(r.samples_to_target) for r in ra if r.samples_to_target is not None]
    samples_b = [float(r.samples_to_target) for r in rb if r.samples_to_target is not None]
    sa, sb = summarise(list(ra)), summarise(list(rb))
    for side, s in (("A", sa), ("B", sb)):
        if s.reached < s.runs:
            notes.append(f"{side}: {s.runs - s.reached} of {s.runs} runs did not reach the "
                         "target; the ratios use the runs that did")
    return TargetComparison(a=group_title(ra), b=group_title(rb),
                            time=seed_ratio(times_a, times_b, what="time-to-target"),
                            energy=_energy_ratio(ra, rb),
                            samples=seed_ratio(samples_a, samples_b, what="samples-to-target"),
                            summary_a=sa, summary_b=sb, notes=tuple(notes))


def _ratio_text(r: Ratio) -> str:
    if r.value is None:
        return f"unavailable ({r.note})"
    text = f"{r.value:.3g}"
    if r.ci95 is not None:
        verdict = "differs" if r.significant else "no difference shown"
        text += f" (95% CI {r.ci95[0]:.3g}-{r.ci95[1]:.3g}, {verdict})"
    return text + (f"; {r.note}" if r.note else "")


def comparison_lines(c: TargetComparison) -> list[str]:
    """The comparison as printed: the two groups, the three ratios, notes."""
    lines = [f"A: {c.a}", f"B: {c.b}",
             f"time-to-target B/A: {_ratio_text(c.time)}",
             f"energy-to-target B/A: {_ratio_text(c.energy)}",
             f"samples-to-target B/A: {_ratio_text(c.samples)}"]
    return lines + [f"note: {n}" for n in c.notes]


def comparison_csv(c: TargetComparison) -> str:
    """The ratios as CSV: one row per figure."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["figure", "ratio_b_over_a", "ci95_low", "ci95_high", "significant", "note"])
    for name, r in (("time_to_target", c.time), ("energy_to_target", c.energy),
                    ("samples_to_target", c.samples)):
        lo, hi = r.ci95 if r.ci95 is not None else ("", "")
        w.writerow([name, "" if r.value is None else r.value, lo, hi,
                    "" if r.significant is None else r.significant, r.note])
    return buf.getvalue()
