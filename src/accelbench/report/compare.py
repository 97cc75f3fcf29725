"""Compare two selections of results: throughput and energy ratios with bootstrap CIs.

Selector syntax (for ``accelbench compare A B``):

- ``KEY=VALUE[,KEY=VALUE...]``: every result matching all pairs. Keys: ``device``,
  ``precision``, ``framework``, ``workload``, ``size``, ``suite`` (suite id), ``tag``,
  ``id`` (prefix), e.g. ``device=cuda:0``, ``precision=amp_bf16,device=cuda:0`` or
  ``framework=jax``.
- ``suite:SUITE_ID`` or ``id:PREFIX``: explicitly a suite or one result.
- a bare word: a suite id if one matches it exactly, else a unique result-id prefix.

Cases of A and B are matched on (workload, size, batch size, device, precision,
framework) minus the compared axes: device is an axis when A and B hold different
sets of devices, precision and framework likewise (``framework=torch
framework=jax`` gives the JAX/torch ratios per workload and precision). When a
side holds several results of one case, the newest is used.

Methods (``B / A``; a throughput ratio above 1 means B is faster, an energy ratio
below 1 means B needs less energy per sample):

- throughput ratio = (spsB / median tB) / (spsA / median tA), with a 95% percentile
  bootstrap CI from resampling each side's raw iteration times independently
  (fixed seed, 2000 resamples); significant when the CI excludes 1.
- energy ratio = EB / EA of the stored energies per sample. Energy per sample is
  average power x step time / samples per step, so its CI resamples the iteration
  times of each side (the unit of resampling) with the average power held fixed:
  E* = E x mean(t*) / mean(t). The CI thus covers timing variability only, not the
  power sensor's own error. Without energy on both sides there is no ratio; with
  fewer than 2 iterations on a side there is a ratio but no CI, never an invented one.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from accelbench.errors import ConfigError
from accelbench.report.rows import device_name, energy_kind
from accelbench.result import Result
from accelbench.spec import normalize_framework, normalize_precision
from accelbench.store import ResultFilter, Store

RESAMPLES = 2000
SEED = 20200519
LEVEL = 0.95
MATCH_FIELDS = ("workload", "size", "batch_size", "device", "precision", "framework")
AXES = ("device", "precision", "framework")

SELECTOR_KEYS = {
    "device": "device",
    "precision": "precision",
    "framework": "framework",
    "workload": "workload",
    "size": "size",
    "suite": "suite_id",
    "suite_id": "suite_id",
    "tag": "tag",
    "id": "id",
}



@dataclass(frozen=True, kw_only=True, slots=True)
class Selector:
    """A parsed selector."""

    text: str
    kind: Literal["filter", "suite", "id", "word"]
    pairs: tuple[tuple[str, str], ...] = ()
    """(ResultFilter field, value) pairs of a ``filter`` selector."""
    value: str = ""
    """The suite id, id prefix or bare word of the other kinds."""


def parse_selector(text: str) -> Selector:
    """Parse the selector syntax in the module docstring.

    Raises:
        ConfigError: empty selector, unknown key, or a pair without a value.
    """
    text = text.strip()
    if not text:
        raise ConfigError("empty selector; use e.g. device=cuda:0, suite:ID or a result id")
    for prefix, kind in (("suite:", "suite"), ("id:", "id")):
        if text.startswith(prefix) and "=" not in text:
            value = text[len(prefix):]
            if not value:
                raise ConfigError(f"selector {text!r} lacks a value after {prefix!r}")
            return Selector(text=text, kind=kind, value=value)  # type: ignore[arg-type]
    if "=" not in text:
        return Selector(text=text, kind="word", value=text)
    pairs = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"selector part {part!r} must look like KEY=VALUE")
        if key not in SELECTOR_KEYS:
            raise ConfigError(
                f"unknown selector key {key!r}; use one of {', '.join(sorted(SELECTOR_KEYS))}"
            )
        name = SELECTOR_KEYS[key]
        if name == "precision":
            value = normalize_precision(value)
        elif name == "framework":
            value = normalize_framework(value)
        pairs.append((name, value))
    return Selector(text=text, kind="filter", pairs=tuple(pairs))


def _ids_with_prefix(store: Store, prefix: str, limit: int = 3) -> list[str]:
    import sqlalchemy as sa

    from accelbench.store import schema

    t = schema.results
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(t.c.id).where(t.c.id.like(f"{prefix}%")).limit(limit)
        ).all()
    return [r[0] for r in rows]


def select(store: Store, selector: Selector, base: ResultFilter | None = None) -> list[Result]:
    """The results ``selector`` picks (restricted by ``base``), newest first.

    Raises:
        ConfigError: nothing matches, or an id prefix is ambiguous.
    """
    base = base or ResultFilter()
    if selector.kind == "word":
        in_suite = store.query(_merge(base, {"suite_id": selector.value}))
        if in_suite:
            return in_suite
        ids = _ids_with_prefix(store, selector.value)
        if not ids:
            raise ConfigError(
                f"{selector.text!r} is neither a suite id nor a result id in {store.url}; "
                "selectors look like device=cuda:0, suite:ID or id:PREFIX"
            )
        return _by_id(store, selector, ids, base)
    if selector.kind == "suite":
        found = store.query(_merge(base, {"suite_id": selector.value}))
        if not found:
            raise ConfigError(f"no results of suite {selector.value!r} match in {store.url}")
        return found
    if selector.kind == "id":
        return _by_id(store, selector, _ids_with_prefix(store, selector.value), base)
    fields = dict(selector.pairs)
    rid = fields.pop("id", None)
    found = store.query(_merge(base, fields))
    if rid is not None:
        found = [r for r in found if r.id.startswith(rid)]
    if not found:
        raise ConfigError(f"no results match {selector.text!r} in {store.url}")
    return found


def _merge(base: ResultFilter, fields: dict[str, str]) -> ResultFilter:
    for name, value in fields.items():
        current = getattr(base, name)
        if current is not None and current != value:
            raise ConfigError(f"selector sets {name}={value} but the filters say {current}")
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def _by_id(store: Store, selector: Selector, ids: list[str], base: ResultFilter) -> list[Result]:
    if not ids:
        raise ConfigError(f"no result id starts with {selector.value!r} in {store.url}")
    if len(ids) > 1:
        raise ConfigError(
            f"result-id prefix {selector.value!r} is ambiguous ({', '.join(ids[:2])}, ...); "
            "type more characters"
        )
    result = store.get(ids[0])
    if result is None:  # pragma: no cover - deleted between the two reads
        raise ConfigError(f"result {ids[0]} vanished from {store.url}")
    return [result]


# -- statistics -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Ratio:
    """A ratio B/A with its 95% CI, or the reason it has none."""

    value: float | None
    ci95: tuple[float, float] | None = None
    significant: bool | None = None
    """Whether the CI excludes 1; None without a CI."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "value": self.value,
            "ci95": list(self.ci95) if self.ci95 else None,
            "significant": self.significant,
            "note": self.note,
        }


def _resample_stats(
    times_s: np.ndarray, rng: np.random.Generator, resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Medians and means of ``resamples`` bootstrap resamples of ``times_s``."""
    n = times_s.size
    medians = np.empty(resamples)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        draws = times_s[rng.integers(0, n, size=(stop - start, n))]
        medians[start:stop] = np.median(draws, axis=1)
        means[start:stop] = draws.mean(axis=1)
    return medians, means


def _interval(values: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _significant(ci: tuple[float, float]) -> bool:
    return ci[0] > 1.0 or ci[1] < 1.0


def ratios(
    times_a_s: Sequence[float],
    samples_per_step_a: int,
    times_b_s: Sequence[float],
    samples_per_step_b: int,
    *,
    energy_a_j_per_sample: float | None = None,
    energy_b_j_per_sample: float | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[Ratio, Ratio]:
    """Throughput ratio and energy-per-sample ratio B/A (methods in the module docstring).

    Args:
        times_a_s: Raw measured iteration times of A.
        samples_per_step_a: Samples per step of A.
        times_b_s: Raw measured iteration times of B.
        samples_per_step_b: Samples per step of B.
        energy_a_j_per_sample: Stored energy per sample of A, None when unavailable.
        energy_b_j_per_sample: Likewise for B.
        resamples: Bootstrap resamples.
        seed: Seed of the generator (fixed: the same samples give the same CI).

    Returns:
        ``(throughput_ratio, energy_ratio)``.
    """
    ta = np.asarray(times_a_s, dtype=float)
    tb = np.asarray(times_b_s, dtype=float)
    if ta.size == 0 or tb.size == 0:
        side = "A" if ta.size == 0 else "B"
        none = Ratio(value=None, note=f"no iteration times on side {side}")
        return none, none
    tput_a = samples_per_step_a / float(np.median(ta))
    tput_b = samples_per_step_b / float(np.median(tb))
    tput_value = tput_b / tput_a
    if energy_a_j_per_sample is None or energy_b_j_per_sample is None:
        side = "A and B" if energy_a_j_per_sample is None and energy_b_j_per_sample is None \
            else ("A" if energy_a_j_per_sample is None else "B")
        energy = Ratio(value=None, note=f"energy unavailable on {side}")
    elif energy_a_j_per_sample <= 0:
        energy = Ratio(value=None, note="energy per sample of A is not positive")
    else:
        energy = Ratio(value=energy_b_j_per_sample / energy_a_j_per_sample)
    if ta.size < 2 or tb.size < 2:
        note = "fewer than 2 iterations on a side: no CI"
        return (
            Ratio(value=tput_value, note=note),
            energy if energy.value is None else Ratio(value=energy.value, note=note),
        )
    rng = np.random.default_rng(seed)
    med_a, mean_a = _resample_stats(ta, rng, resamples)
    med_b, mean_b = _resample_stats(tb, rng, resamples)
    boot_tput = (samples_per_step_b / med_b) / (samples_per_step_a / med_a)
    ci = _interval(boot_tput)
    tput = Ratio(value=tput_value, ci95=ci, significant=_significant(ci))
    if energy.value is not None:
        boot_energy = energy.value * (mean_b / tb.mean()) / (mean_a / ta.mean())
        eci = _interval(boot_energy)
        energy = Ratio(
            value=energy.value, ci95=eci, significant=_significant(eci),
            note="CI from step-time resampling, average power held fixed",
        )
    return tput, energy


# -- matching ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseComparison:
    """One matched case: A's and B's results and the ratios B/A."""

    key: dict[str, Any]
    """The matched fields (workload, size, batch_size and the non-axis device/precision)."""
    a: Result
    b: Result
    throughput: Ratio
    energy: Ratio
    energy_kind: str
    """``measured`` when both sides' energy is measured, else the weaker provenance."""

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready form."""
        sa, sb = self.a.stats, self.b.stats
        return {
            **self.key,
            "a_id": self.a.id,
            "b_id": self.b.id,
            "a_device": self.a.spec.device,
            "b_device": self.b.spec.device,
            "a_device_name": device_name(self.a),
            "b_device_name": device_name(self.b),
            "a_precision": self.a.spec.precision,
            "b_precision": self.b.spec.precision,
            "a_framework": self.a.spec.framework,
            "b_framework": self.b.spec.framework,
            "a_status": self.a.status,
            "b_status": self.b.status,
            "sample_unit": self.a.sample_unit,
            "a_samples_per_s": sa.samples_per_s if sa else None,
            "b_samples_per_s": sb.samples_per_s if sb else None,
            "throughput_ratio": self.throughput.value,
            "throughput_ratio_ci95": list(self.throughput.ci95) if self.throughput.ci95
            else None,
            "throughput_significant": self.throughput.significant,
            "throughput_note": self.throughput.note,
            "a_energy_j_per_sample": self.a.energy_j_per_sample,
            "b_energy_j_per_sample": self.b.energy_j_per_sample,
            "energy_ratio": self.energy.value,
            "energy_ratio_ci95": list(self.energy.ci95) if self.energy.ci95 else None,
            "energy_significant": self.energy.significant,
            "energy_note": self.energy.note,
            "energy_kind": self.energy_kind,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """Everything ``accelbench compare`` reports."""

    a_label: str
    b_label: str
    axes: tuple[str, ...]
    """Fields that differ between A and B (``device``, ``precision``, ``framework``)."""
    match_on: tuple[str, ...]
    cases: tuple[CaseComparison, ...]
    only_a: tuple[dict[str, Any], ...] = ()
    only_b: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "a": self.a_label,
            "b": self.b_label,
            "axes": list(self.axes),
            "match_on": list(self.match_on),
            "method": {
                "ratio": "B / A",
                "ci": f"{LEVEL:.0%} percentile bootstrap, {RESAMPLES} resamples, seed {SEED}",
                "significant": "CI excludes 1",
                "energy_ci": "step times resampled, average power held fixed",
            },
            "cases": [c.to_dict() for c in self.cases],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "notes": list(self.notes),
        }


def _weaker_kind(a: str, b: str) -> str:
    order = ["unavailable", "estimated", "partly estimated", "measured"]
    return min(a, b, key=order.index)


def compare_results(
    a: Sequence[Result],
    b: Sequence[Result],
    *,
    a_label: str = "A",
    b_label: str = "B",
    resamples: int = RESAMPLES,
) -> Comparison:
    """Match the cases of ``a`` and ``b`` and compute the ratios B/A for each match."""
    axes = tuple(
        ax for ax in AXES
        if {getattr(r.spec, ax) for r in a} != {getattr(r.spec, ax) for r in b}
    )
    match_on = tuple(f for f in MATCH_FIELDS if f not in axes)
    notes: list[str] = []
    side_a, dup_a = _index(a, match_on)
    side_b, dup_b = _index(b, match_on)
    for label, dups in ((a_label, dup_a), (b_label, dup_b)):
        if dups:
            notes.append(f"{label}: {dups} older result(s) of the same case ignored (newest used)")
    if not axes and {r.id for r in a} == {r.id for r in b}:
        notes.append("A and B select the same results")
    cases = []
    for key in sorted(side_a.keys() & side_b.keys(), key=lambda k: tuple(map(str, k))):
        ra, rb = side_a[key], side_b[key]
        if ra.status != "ok" or rb.status != "ok":
            bad = ", ".join(
                f"{lab} is {r.status}" for lab, r in (("A", ra), ("B", rb)) if r.status != "ok"
            )
            tput = energy = Ratio(value=None, note=bad)
        else:
            tput, energy = ratios(
                ra.iteration_times_s, ra.samples_per_step, rb.iteration_times_s,
                rb.samples_per_step, energy_a_j_per_sample=ra.energy_j_per_sample,
                energy_b_j_per_sample=rb.energy_j_per_sample, resamples=resamples,
            )
        cases.append(
            CaseComparison(
                key=dict(zip(match_on, key, strict=True)), a=ra, b=rb, throughput=tput,
                energy=energy, energy_kind=_weaker_kind(energy_kind(ra), energy_kind(rb)),
            )
        )
    only_a = tuple(dict(zip(match_on, k, strict=True)) for k in side_a.keys() - side_b.keys())
    only_b = tuple(dict(zip(match_on, k, strict=True)) for k in side_b.keys() - side_a.keys())
    if not cases:
        notes.append(
            "no case appears on both sides (matched on " + ", ".join(match_on) + ")"
        )
    return Comparison(
        a_label=a_label, b_label=b_label, axes=axes, match_on=match_on, cases=tuple(cases),
        only_a=only_a, only_b=only_b, notes=tuple(notes),
    )


def _index(
    results: Sequence[Result], match_on: Sequence[str]
) -> tuple[dict[tuple[Any, ...], Result], int]:
    out: dict[tuple[Any, ...], Result] = {}
    dups = 0
    for r in results:
        key = tuple(getattr(r.spec, f) for f in match_on)
        if key in out:
            dups += 1
            # Prefer an ok result, then the newest.
            old = out[key]
            if (r.status == "ok", r.finished_at) <= (old.status == "ok", old.finished_at):
                continue
        out[key] = r
    return out, dups


def compare(
    store: Store, a: str, b: str, *, base: ResultFilter | None = None,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Resolve selectors ``a`` and ``b`` in ``store`` and compare them."""
    ra = select(store, parse_selector(a), base)
    rb = select(store, parse_selector(b), base)
    return compare_results(ra, rb, a_label=a, b_label=b, resamples=resamples)


# -- rendering --------------------------------------------------------------------------

CSV_COLUMNS = (
    "workload", "size", "batch_size", "device", "precision", "framework", "a_id", "b_id",
    "a_device", "b_device", "a_precision", "b_precision", "a_framework", "b_framework",
    "a_status", "b_status", "sample_unit",
    "a_samples_per_s", "b_samples_per_s", "throughput_ratio", "throughput_ratio_ci95_low",
    "throughput_ratio_ci95_high", "throughput_significant", "a_energy_j_per_sample",
    "b_energy_j_per_sample", "energy_ratio", "energy_ratio_ci95_low", "energy_ratio_ci95_high",
    "energy_significant", "energy_kind", "throughput_note", "energy_note",
)


def to_csv(comparison: Comparison) -> str:
    """One CSV row per matched case."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    for case in comparison.cases:
        row = case.to_dict()
        for name in ("throughput_ratio", "energy_ratio"):
            ci = row.pop(f"{name}_ci95")
            row[f"{name}_ci95_low"] = ci[0] if ci else ""
            row[f"{name}_ci95_high"] = ci[1] if ci else ""
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def _fmt_ratio(r: Ratio) -> str:
    if r.value is None:
        return r.note or "-"
    text = f"{r.value:.3f}"
    if r.ci95:
        text += f" [{r.ci95[0]:.3f}, {r.ci95[1]:.3f}]"
    return text


def _fmt_sig(r: Ratio) -> str:
    if r.significant is None:
        return "-"
    return "yes" if r.significant else "no"


def table(comparison: Comparison) -> Any:
    """A rich table of the comparison."""
    from rich.table import Table

    from accelbench.render import fmt_rate

    t = Table(
        title=f"B = {comparison.b_label}  vs  A = {comparison.a_label}  (ratios B/A)",
        header_style="bold",
    )
    for col in (*comparison.match_on, *(f"{ax} A/B" for ax in comparison.axes),
                "A /s", "B /s", "throughput B/A [95% CI]", "sig.",
                "energy/sample B/A [95% CI]", "sig."):
        t.add_column(col)
    for case in comparison.cases:
        axis_cells = [
            f"{getattr(case.a.spec, ax)} / {getattr(case.b.spec, ax)}" for ax in comparison.axes
        ]
        sa, sb = case.a.stats, case.b.stats
        energy = _fmt_ratio(case.energy)
        if case.energy.value is not None and case.energy_kind != "measured":
            energy += f" ({case.energy_kind})"
        t.add_row(
            *(str(case.key[f]) for f in comparison.match_on),
            *axis_cells,
            fmt_rate(sa.samples_per_s) if sa else case.a.status,
            fmt_rate(sb.samples_per_s) if sb else case.b.status,
            _fmt_ratio(case.throughput),
            _fmt_sig(case.throughput),
            energy,
            _fmt_sig(case.energy),
        )
    return t
