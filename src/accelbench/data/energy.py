"""The input pipeline's energy (``--input-analysis``), the record's ``input["energy"]``:

- **loader host energy per sample**: the host's meters (CPU packages and DRAM, or the CPU
  estimate of ``--cpu-tdp-w``) over the first round's cached block less over its
  synthetic block, per sample (:mod:`accelbench.data.analysis` runs both over the same
  steps): what decoding,
  augmenting and moving the batches cost the host, the host's idle power over the longer
  pass included;
- **device energy while waiting, per sample**: the measured window's energy of the
  training device per sample times the stall fraction (the share of the step spent
  waiting), assuming the device draws its window-average power while it waits.

Each figure says its source (the meters' ``counter``, ``integrated_samples``,
``estimate``, ``+``-joined where they mix) and boundary (``host`` or ``device``), or is
``unavailable`` with the reason, as every energy figure of a record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.result import HOST_SCOPES, EnergyReading, boundary_readings

METHOD = ("loader host energy: the host meters' energy per sample over the first "
          "round's cached block less over its synthetic block (same steps); device energy "
          "while waiting: the window's device energy per sample x the stall fraction (the device's "
          "window-average power assumed while it waits)")


@dataclass(frozen=True, kw_only=True, slots=True)
class EnergyFigure:
    """One figure in joules per sample, with its provenance."""

    j_per_sample: float | None = None
    source: str = "unavailable"
    boundary: str = ""
    note: str = ""
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What it was read over (the loader's: the metered blocks' steps and seconds)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnergyFigure:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, kw_only=True, slots=True)
class InputEnergy:
    """The record's ``input["energy"]``."""

    loader_host: EnergyFigure
    device_waiting: EnergyFigure
    method: str = METHOD

    def to_dict(self) -> dict[str, Any]:
        return {"loader_host": self.loader_host.to_dict(),
                "device_waiting": self.device_waiting.to_dict(), "method": self.method}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputEnergy:
        return cls(loader_host=EnergyFigure.from_dict(data.get("loader_host") or {}),
                   device_waiting=EnergyFigure.from_dict(data.get("device_waiting") or {}),
                   method=data.get("method", METHOD))


def _per_sample(readings: Sequence[EnergyReading], what: str
                ) -> tuple[float | None, str, str]:
    """The readings' summed energy per sample, their sources, and why not (one line)."""
    if not readings:
        return None, "unavailable", f"no {what} reading"
    sources = "+".join(sorted({r.source for r in readings}))
    missing = [r for r in readings if r.energy_j_per_sample is None]
    if missing:
        notes = "; ".join(r.note for r in missing if r.note) or "no energy figure"
        return None, "unavailable", f"{what} ({missing[0].device}): {notes}"
    return sum(r.energy_j_per_sample or 0.0 for r in readings), sources, ""


def _host(readings: Sequence[Any]) -> list[EnergyReading]:
    return [r for r in readings if isinstance(r, EnergyReading) and r.scope in HOST_SCOPES]


def loader_host(synthetic: Sequence[Any], cached: Sequence[Any],
                blocks: dict[str, Any] | None = None) -> EnergyFigure:
    """The host's energy per sample of the cached pass less the synthetic pass's
    (``blocks``: the metered blocks' steps and seconds, kept as the figure's details)."""
    real, real_src, why_real = _per_sample(_host(cached), "the host's meters over the "
                                           "real-data pass")
    synth, synth_src, why_synth = _per_sample(_host(synthetic), "the host's meters over "
                                              "the synthetic pass")
    if real is None or synth is None:
        return EnergyFigure(boundary="host", note=f"unavailable: {why_real or why_synth}",
                            details=dict(blocks or {}))
    source = real_src if real_src == synth_src else "+".join(sorted({real_src, synth_src}))
    return EnergyFigure(j_per_sample=real - synth, source=source, boundary="host",
                        details=dict(blocks or {}))


def device_waiting(window: Sequence[EnergyReading], device: str,
                   stall_fraction: float | None) -> EnergyFigure:
    """The window's device energy per sample times the stall fraction."""
    dev = boundary_readings(window, device, "device")
    per, source, why = _per_sample(dev, "the device's meters over the window")
    if per is None:
        return EnergyFigure(boundary="device", note=f"unavailable: {why}")
    if stall_fraction is None:
        return EnergyFigure(boundary="device",
                            note="unavailable: no stall fraction (no measured step time)")
    return EnergyFigure(j_per_sample=per * stall_fraction, source=source, boundary="device")


def input_energy(synthetic: Sequence[Any], cached: Sequence[Any],
                 window: Sequence[EnergyReading], device: str,
                 stall_fraction: float | None, blocks: dict[str, Any] | None = None
                 ) -> InputEnergy:
    """Both figures (see the module)."""
    return InputEnergy(loader_host=loader_host(synthetic, cached, blocks),
                       device_waiting=device_waiting(window, device, stall_fraction))


def _fmt(fig: EnergyFigure) -> str:
    if fig.j_per_sample is None:
        return "unavailable"
    from accelbench.result_text import fmt_energy_j

    return f"{fmt_energy_j(fig.j_per_sample)}/sample ({fig.source}, {fig.boundary})"


def energy_line(record: dict[str, Any] | None) -> str | None:
    """``loader 1.2 mJ/sample on the host (counter), device 0.4 mJ/sample while waiting
    (counter)``: ``run``'s summary line, or None without the figures."""
    raw = (record or {}).get("energy")
    if not isinstance(raw, dict):
        return None
    e = InputEnergy.from_dict(raw)
    why = next((f.note for f in (e.loader_host, e.device_waiting)
                if f.j_per_sample is None and f.note), "")
    return (f"loader {_fmt(e.loader_host)}, device while waiting {_fmt(e.device_waiting)}"
            + (f"; {why}" if why else ""))
