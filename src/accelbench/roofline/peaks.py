"""Which measured peak MFU is computed against, read from the store.

MFU is computed against a robust peak (:func:`robust_peak`), not the latest: a GEMM
measured while other jobs ran can read 2-3x low, and MFU must not move with when
``peaks`` last ran. The robust peak is the best of the quiet measurements; without a
quiet one, the cited theoretical peak of the device (accelerators in the table); else
the best of all measurements, labelled as such. A lower measurement added later never
changes it, and a stored result keeps the peak it was given (``machine["mfu_peak"]``).

Peaks are measured by :mod:`accelbench.execution.peaks`; theoretical peaks come from
:mod:`accelbench.roofline.theoretical`.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from accelbench.opbench.precision import op_precision
from accelbench.roofline.theoretical import lookup_device
from accelbench.store.opbench import BANDWIDTH, Peak

if TYPE_CHECKING:
    from accelbench.store.db import Store


PeakKind = Literal["measured_quiet", "theoretical", "measured"]


@dataclass(frozen=True, slots=True)
class MfuPeak:
    """The peak MFU is computed against, and which it is."""

    value: float
    kind: PeakKind
    """``measured_quiet`` (best of quiet measurements), ``theoretical`` (cited) or
    ``measured`` (best of measurements none of which is known quiet)."""
    source: str
    """In words: which peak, from how many measurements, when (or the citation)."""
    peak_id: str | None = None
    measured_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (stored in ``Result.machine["mfu_peak"]``)."""
        return dataclasses.asdict(self)


def is_quiet(peak: Peak) -> bool:
    """Whether ``peak`` was measured on a quiet machine (False where not recorded)."""
    noise = peak.details.get("noise") if isinstance(peak.details, dict) else None
    return isinstance(noise, dict) and noise.get("quiet") is True


def robust_peak(
    store: Store, device: str, precision: str, *, hostname: str | None = None,
    device_name: str | None = None,
) -> MfuPeak | None:
    """The peak MFU uses for ``device`` at ``precision`` (rules in the module docstring).

    Args:
        store: The results store.
        device: ``cpu``, ``cuda:N``, ``tpu:N``.
        precision: ``fp32``, ``tf32``, ``fp16``, ``bf16``, ``amp_fp16``, ``amp_bf16``.
        hostname: Host the peaks were measured on (default: this one).
        device_name: The device's model name, for the cited theoretical peak.
    """
    prec = op_precision(precision)
    found = store.query_peaks(device=device, hostname=hostname or socket.gethostname(),
                        precisions=[prec], latest_only=False)
    quiet = [p for p in found if is_quiet(p)]
    if quiet:
        best = max(quiet, key=lambda p: (p.value, p.created_at))
        return MfuPeak(
            value=best.value, kind="measured_quiet", peak_id=best.id,
            measured_at=best.created_at,
            source=(f"measured {prec} peak, best of {len(quiet)} quiet measurement(s) "
                    f"({len(found)} in all), {best.created_at}"),
        )
    if device != "cpu":
        entry = lookup_device(device_name)
        value = entry.flop_per_s.get(prec) if entry else None
        if entry is not None and value:
            why = "no quiet measurement" if found else "never measured"
            return MfuPeak(value=value, kind="theoretical",
                           source=f"theoretical {prec} peak of {entry.name} ({why}): "
                                  f"{entry.source}")
    if found:
        best = max(found, key=lambda p: (p.value, p.created_at))
        return MfuPeak(
            value=best.value, kind="measured", peak_id=best.id, measured_at=best.created_at,
            source=(f"measured {prec} peak, best of {len(found)} measurement(s), none known "
                    f"quiet (machine state not recorded or loaded), {best.created_at}"),
        )
    return None


def peak_flop_per_s(
    store: Store, device: str, precision: str, *, hostname: str | None = None,
    device_name: str | None = None,
) -> float | None:
    """The GEMM peak of ``device`` on this host for ``precision`` that MFU uses: the
    robust peak (:func:`robust_peak`), or None when nothing is known.

    ``precision`` may be a training precision: ``amp_fp16`` looks up the fp16
    peak and ``amp_bf16`` the bf16 one (``accelbench peaks --measure`` measures them).

    Args:
        store: The results store.
        device: ``cpu`` or ``cuda:N``.
        precision: ``fp32``, ``tf32``, ``fp16``, ``bf16``, ``amp_fp16``, ``amp_bf16``.
        hostname: Host the peak was measured on (default: this one).
        device_name: The device's model name (for the cited theoretical fallback).
    """
    peak = robust_peak(store, device, precision, hostname=hostname, device_name=device_name)
    return peak.value if peak else None


def peak_bytes_per_s(store: Store, device: str, *, hostname: str | None = None) -> float | None:
    """The cached measured memory bandwidth of ``device`` on this host, or None."""
    peak = store.latest_peak(device, BANDWIDTH, hostname=hostname or socket.gethostname())
    return peak.value if peak else None

