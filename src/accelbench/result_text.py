"""How one result reads in words, wherever it is shown (``run``, ``results``, the report,
``compare``): its CI, its energy and that energy's provenance, its device settings and
topology, its place among ``--repeats`` runs, the peak its MFU is against, and why its
energy is missing.

Energy always carries its provenance: :func:`energy_kind` is ``measured`` (a hardware
counter or integrated power samples), ``estimated``, ``partly estimated`` or
``unavailable``; an unavailable energy is None, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelbench.result import ONE_RUN_SCOPE, UNRELIABLE_REL_HALFWIDTH, Result

MEASURED_SOURCES = frozenset({"counter", "integrated_samples"})


def topology_text(nnodes: int, nproc_per_node: int, *, lead: str = "") -> str:
    """``2x8`` (nodes x ranks per node) for a data-parallel case (``lead`` before it);
    empty for one device, so single-device cases read as they always did."""
    return f"{lead}{nnodes}x{nproc_per_node}" if nnodes * nproc_per_node > 1 else ""


#: Short labels of energy provenance for narrow tables (measured carries none).
ENERGY_KIND_SHORT = {"estimated": "est.", "partly estimated": "part est."}


def fmt_energy_j(value: float) -> str:
    """Joules with an SI prefix and 3 significant digits: ``12.3 mJ``."""
    mag = abs(value)
    for scale, prefix in ((1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "\u00b5"), (1e-9, "n")):
        if mag >= scale:
            return f"{value / scale:.3g} {prefix}J"
    return f"{value:.3g} J"


def energy_text(value: float | None, kind: str, boundary: str = "device") -> str:
    """``1.23 J`` (measured), ``1.23 J (est.)``, ``1.23 J (part est.)`` or ``-``: estimated
    energy is told apart from measured energy in every table, at a glance; so is a
    boundary other than the device (``1.23 J (node)``, ``1.23 J (est., device+host)``)."""
    if value is None:
        return "-"
    marks = [m for m in (ENERGY_KIND_SHORT.get(kind),
                         boundary if boundary != "device" else None) if m]
    return fmt_energy_j(value) + (f" ({', '.join(marks)})" if marks else "")


BOUND_UNAVAILABLE = "error bound unavailable"
"""What a table shows where a record's energy has no 95% bound (stored before bounds
existed, or a sensor too little is known of): never a made-up bound."""


def bound_text(rel_u95: float | None) -> str:
    """The 95% error bound of an energy figure: ``+- 2.1%`` (two significant digits under
    10%, whole percent above), or :data:`BOUND_UNAVAILABLE` where there is none."""
    if rel_u95 is None:
        return BOUND_UNAVAILABLE
    pct = 100 * rel_u95
    return f"+- {pct:.2g}%" if pct < 10 else f"+- {pct:.0f}%"


def ci_scope(runs: int = 1) -> str:
    """What a CI covers: ``iterations of 1 run``, or ``R runs`` for a ``--repeats`` group
    (two-level bootstrap: runs, then iterations)."""
    return ONE_RUN_SCOPE if runs <= 1 else f"{runs} runs"


def ci_unreliable(rel_halfwidth: float | None) -> bool:
    """Whether a CI is wider than its estimate (relative half-width above 100%)."""
    return rel_halfwidth is not None and rel_halfwidth > UNRELIABLE_REL_HALFWIDTH


def ci_text(rel_halfwidth: float | None, n: int | None = None) -> str:
    """``±3.1%``; ``unreliable (n iterations)`` when the CI is wider than the estimate;
    ``no CI (n=2)`` when a measured case has none; ``-`` when nothing was measured."""
    if rel_halfwidth is None:
        return f"no CI (n={n})" if n else "-"
    if ci_unreliable(rel_halfwidth):
        return f"unreliable ({n} iterations)" if n else "unreliable"
    pct = rel_halfwidth * 100
    return "\u00b1" + (f"{pct:.0f}" if pct >= 10 else f"{pct:.2g}") + "%"


def energy_kind(result: Result) -> str:
    """How the energy per sample of ``result`` was obtained (see module docstring)."""
    sources = {
        r.source for r in result.primary_energy
        if r.energy_j_per_sample is not None and r.source != "unavailable"
    }
    if not sources:
        return "unavailable"
    if sources <= MEASURED_SOURCES:
        return "measured"
    if sources == {"estimate"}:
        return "estimated"
    return "partly estimated"


def repeat_key(result: Result) -> tuple[str, str] | None:
    """The group of a result's ``--repeats`` runs: (suite id, case key); None without a
    suite (a lone run is its own group)."""
    if result.suite_id is None:
        return None
    return result.suite_id, result.spec.case_key()


def repeat_groups(results: Iterable[Result]) -> dict[tuple[str, str], list[Result]]:
    """The results grouped by :func:`repeat_key` (oldest first in each group)."""
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        key = repeat_key(r)
        if key is not None:
            out.setdefault(key, []).append(r)
    for group in out.values():
        group.sort(key=lambda r: (r.started_at, r.id))
    return out


def repeat_positions(results: Sequence[Result]) -> dict[str, tuple[int, int]]:
    """``{id: (run number from 1, runs)}`` of each result among ``results``; ``runs`` is
    the larger of the runs listed and the runs the policy asked for (``--repeats``)."""
    out: dict[str, tuple[int, int]] = {}
    for group in repeat_groups(results).values():
        asked = max(r.spec.policy.repeats for r in group)
        for i, r in enumerate(group, start=1):
            out[r.id] = (i, max(asked, len(group)))
    for r in results:
        out.setdefault(r.id, (1, r.spec.policy.repeats))
    return out


def peak_source(result: Result) -> str:
    """Which peak the result's MFU is computed against (``machine["mfu_peak"]["source"]``),
    ``""`` for records that predate robust peaks or have no peak."""
    info = (result.machine or {}).get("mfu_peak")
    return str(info.get("source") or "") if isinstance(info, dict) else ""


def settings_text(result: Result) -> str:
    """The device settings a case ran under (``power_limit_w=200``), ``""`` for none."""
    return " ".join(f"{k}={v:g}" for k, v in result.spec.settings.given().items())


def energy_missing_reason(result: Result) -> str:
    """Why ``result`` has no energy per sample, from its readings' notes, as a fix where
    there is one: a CPU without a sensor and without a TDP entry for its model names
    ``--cpu-tdp-w``, the only way to an estimate there."""
    notes = [e.note for e in (result.primary_energy or result.energy)
             if e.energy_j_per_sample is None and e.note]
    if any("--cpu-tdp-w" in n for n in notes):
        model = ((result.machine or {}).get("cpu") or {}).get("model") or "unknown"
        return (f"no power sensor and no TDP for CPU model '{model}'; set --cpu-tdp-w W "
                "(its TDP in watts) when running")
    return "; ".join(dict.fromkeys(notes)) or "no energy reading was recorded"


def energy_missing_line(results: Sequence[Result]) -> list[str]:
    """One footer line saying why energy is missing where an ``ok`` row shows ``-``
    (``energy unavailable: no power sensor and no TDP for CPU model 'AMD EPYC'; set
    --cpu-tdp-w W ...``); none when every ``ok`` row has energy."""
    missing = [r for r in results if r.status == "ok" and r.energy_j_per_sample is None]
    if not missing:
        return []
    reasons: dict[str, int] = {}
    for r in missing:
        reason = energy_missing_reason(r)
        reasons[reason] = reasons.get(reason, 0) + 1
    ok = sum(1 for r in results if r.status == "ok")
    where = "" if len(missing) == ok else f" in {len(missing)} of {ok} ok rows"
    if len(reasons) == 1:
        return [f"energy unavailable{where}: {next(iter(reasons))}"]
    shown = "; ".join(f"{reason} ({n})" for reason, n in list(reasons.items())[:2])
    more = "; more: `accelbench results show ID`" if len(reasons) > 2 else ""
    return [f"energy unavailable{where}: {shown}{more}"]
