"""Theoretical peaks: a small, cited table of accelerators and a CPU estimate.

Every value is dense (no structured sparsity), per chip/package, in FLOP/s
and bytes/s. ``fp16`` and ``bf16`` are tensor-core (matrix) rates with fp32
accumulation; ``fp32`` is the non-tensor-core rate on NVIDIA GPUs and the
matrix-core rate on AMD Instinct GPUs (AMD lists both; GEMMs use the matrix
cores). TPUs have no native fp32 matrix rate, so their fp32 and tf32 are
unknown (None), never guessed.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

T = 1e12
G = 1e9


@dataclass(frozen=True)
class TheoreticalPeak:
    """Published peaks of one device model."""

    name: str
    """Device model as the vendor names it."""
    match: tuple[str, ...]
    """Lower-case substrings that must all occur in the device name."""
    flop_per_s: Mapping[str, float] = field(hash=False)
    """Peak per precision (``fp32``, ``tf32``, ``fp16``, ``bf16``); missing means unknown."""
    bytes_per_s: float | None
    """Peak memory bandwidth."""
    source: str
    """Where the numbers come from."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "flop_per_s": dict(self.flop_per_s),
            "bytes_per_s": self.bytes_per_s,
            "source": self.source,
        }


def _p(**values: float) -> Mapping[str, float]:
    return MappingProxyType(values)


_NV_V100 = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018)"
_NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense rates"
_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), dense rates (sparse / 2)"
_NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), dense rates (sparse / 2)"
_AMD_MI250X = "AMD Instinct MI250X accelerator datasheet; fp32 = matrix rate (vector 47.9 TF)"
_AMD_MI300X = "AMD Instinct MI300X accelerator datasheet; dense rates, fp32 = matrix rate"
_TPU_V2 = "Jouppi et al., 'A Domain-Specific Supercomputer for Training DNNs', CACM 2020, Table 3"
_TPU_V3 = "Google Cloud TPU v3 documentation (cloud.google.com/tpu/docs/v3); CACM 2020"
_TPU_V4 = "Google Cloud TPU v4 documentation (cloud.google.com/tpu/docs/v4)"
_TPU_V5E = "Google Cloud TPU v5e documentation (cloud.google.com/tpu/docs/v5e)"
_TPU_V5P = "Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p)"

#: Most specific entries first: the first whose ``match`` all occur in the name wins.
THEORETICAL_PEAKS: tuple[TheoreticalPeak, ...] = (
    TheoreticalPeak("Tesla V100S PCIe", ("v100s",),
                    _p(fp32=16.4 * T, fp16=130 * T), 1134 * G, _NV_V100),
    TheoreticalPeak("Tesla V100 PCIe", ("v100", "pcie"),
                    _p(fp32=14 * T, fp16=112 * T), 900 * G, _NV_V100),
    TheoreticalPeak("Tesla V100 SXM2", ("v100",),
                    _p(fp32=15.7 * T, fp16=125 * T), 900 * G, _NV_V100),
    TheoreticalPeak("A100 80GB PCIe", ("a100", "80gb", "pcie"),
                    _p(fp32=19.5 * T, tf32=156 * T, fp16=312 * T, bf16=312 * T), 1935 * G,
                    _NV_A100),
    TheoreticalPeak("A100 80GB SXM4", ("a100", "80gb"),
                    _p(fp32=19.5 * T, tf32=156 * T, fp16=312 * T, bf16=312 * T), 2039 * G,
                    _NV_A100),
    TheoreticalPeak("A100 40GB", ("a100",),
                    _p(fp32=19.5 * T, tf32=156 * T, fp16=312 * T, bf16=312 * T), 1555 * G,
                    _NV_A100),
    TheoreticalPeak("H100 PCIe", ("h100", "pcie"),
                    _p(fp32=51 * T, tf32=378 * T, fp16=756 * T, bf16=756 * T), 2000 * G,
                    _NV_H100),
    TheoreticalPeak("H100 NVL", ("h100", "nvl"),
                    _p(fp32=60 * T, tf32=417.5 * T, fp16=835.5 * T, bf16=835.5 * T), 3900 * G,
                    _NV_H100),
    TheoreticalPeak("H100 SXM5", ("h100",),
                    _p(fp32=67 * T, tf32=494.7 * T, fp16=989.4 * T, bf16=989.4 * T), 3350 * G,
                    _NV_H100),
    TheoreticalPeak("H200 NVL", ("h200", "nvl"),
                    _p(fp32=60 * T, tf32=417.5 * T, fp16=835.5 * T, bf16=835.5 * T), 4800 * G,
                    _NV_H200),
    TheoreticalPeak("H200 SXM", ("h200",),
                    _p(fp32=67 * T, tf32=494.7 * T, fp16=989.4 * T, bf16=989.4 * T), 4800 * G,
                    _NV_H200),
    TheoreticalPeak("Instinct MI250X", ("mi250x",),
                    _p(fp32=95.7 * T, fp16=383 * T, bf16=383 * T), 3276.8 * G, _AMD_MI250X),
    TheoreticalPeak("Instinct MI300X", ("mi300x",),
                    _p(fp32=163.4 * T, tf32=653.7 * T, fp16=1307.4 * T, bf16=1307.4 * T),
                    5300 * G, _AMD_MI300X),
    TheoreticalPeak("TPU v2", ("tpu", "v2"), _p(bf16=46 * T), 700 * G, _TPU_V2),
    TheoreticalPeak("TPU v3", ("tpu", "v3"), _p(bf16=123 * T), 900 * G, _TPU_V3),
    TheoreticalPeak("TPU v4", ("tpu", "v4"), _p(bf16=275 * T), 1200 * G, _TPU_V4),
    TheoreticalPeak("TPU v5p", ("tpu", "v5p"), _p(bf16=459 * T), 2765 * G, _TPU_V5P),
    # "TPU v5 lite" is how JAX names a v5e.
    TheoreticalPeak("TPU v5e", ("tpu", "v5"), _p(bf16=197 * T), 819 * G, _TPU_V5E),
)


def lookup_device(device_name: str | None) -> TheoreticalPeak | None:
    """The table entry for ``device_name`` (e.g. ``NVIDIA H100 80GB HBM3``), or None."""
    if not device_name:
        return None
    name = device_name.lower()
    for entry in THEORETICAL_PEAKS:
        if all(part in name for part in entry.match):
            return entry
    return None


# --------------------------------------------------------------------------- CPU


@dataclass(frozen=True)
class CpuPeakEstimate:
    """Peak of a CPU from cores x FLOP/cycle x clock, with its assumptions.

    ``flop_per_s`` is None where any factor is unknown.
    """

    precision: str
    flop_per_s: float | None
    cores: int | None
    flop_per_cycle_per_core: int | None
    clock_hz: float | None
    clock_source: str
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "flop_per_s": self.flop_per_s,
            "cores": self.cores,
            "flop_per_cycle_per_core": self.flop_per_cycle_per_core,
            "clock_hz": self.clock_hz,
            "clock_source": self.clock_source,
            "assumptions": list(self.assumptions),
        }


#: FMA units per core assumed for AVX-512 and AVX2 CPUs: 2 on Xeon Gold/Platinum
#: (Skylake-SP and later) and client cores; some Xeon Silver/Bronze parts have 1, which
#: would halve the estimate. AMD Zen 4 has two FMA pipes too, but 256 bits wide: it
#: executes an AVX-512 FMA in two halves (see :func:`cpu_microarch`).
FMA_UNITS_ASSUMED = 2


@dataclass(frozen=True)
class CpuMicroarch:
    """What ``/proc/cpuinfo``'s vendor, family and model say about the FMA datapath."""

    name: str
    """``AMD Zen 4``, ``AMD Zen 3`` ...; ``""`` where not recognised."""
    fma_bits: int | None
    """Width of each FMA pipe in bits where known (Zen 4: 256, even for AVX-512)."""
    note: str


#: AMD family 0x19 model ranges (upper nibble of the model) by core: Zen 3 is Milan
#: (0x0x), Vermeer (0x2x), Rembrandt (0x4x), Cezanne/Barcelo (0x5x); Zen 4 is Genoa
#: (0x1x), Raphael (0x6x), Phoenix/Hawk Point (0x7x), Bergamo/Siena (0xAx). Sources:
#: AMD's Processor Programming References per family 19h model; Linux
#: arch/x86/kernel/cpu/amd.c (the Zen 4 model list).
_AMD_19H_ZEN4 = frozenset({0x1, 0x6, 0x7, 0xA})
_AMD_19H_ZEN3 = frozenset({0x0, 0x2, 0x4, 0x5})


def _cpuinfo_field(text: str, name: str) -> str | None:
    m = re.search(rf"^{re.escape(name)}\s*:\s*(.*)$", text, re.M)
    return m.group(1).strip() if m else None


def cpu_microarch(root: Path = Path("/")) -> CpuMicroarch:
    """The core microarchitecture of the first CPU, from ``/proc/cpuinfo``'s vendor,
    ``cpu family`` and ``model`` (only what changes the FMA width is recognised)."""
    text = _cpuinfo_text(root)
    vendor = _cpuinfo_field(text, "vendor_id") or ""
    try:
        family = int(_cpuinfo_field(text, "cpu family") or "")
        model = int(_cpuinfo_field(text, "model") or "")
    except ValueError:
        return CpuMicroarch("", None, "cpu family/model not in /proc/cpuinfo")
    where = f"{vendor} family 0x{family:x} model 0x{model:x}"
    if vendor == "AuthenticAMD" and family == 0x19:
        if model >> 4 in _AMD_19H_ZEN4:
            return CpuMicroarch(
                "AMD Zen 4", 256,
                f"AMD Zen 4 ({where}): AVX-512 runs on two 256-bit FMA pipes (each 512-bit "
                "FMA in two halves), so half the FLOP/cycle of two 512-bit FMA units",
            )
        if model >> 4 in _AMD_19H_ZEN3:
            return CpuMicroarch("AMD Zen 3", 256, f"AMD Zen 3 ({where}): two 256-bit FMA pipes")
    return CpuMicroarch("", None, f"{where}: FMA width not known per model")
#: Intel AMX (TMUL) BF16/FP16 rate per core: 1024 FLOP/cycle (Intel's figure of
#: 2048 INT8 ops or 1024 BF16 FLOPs per cycle per core for Sapphire Rapids).
AMX_FLOP_PER_CYCLE = 1024


def _cpuinfo_text(root: Path) -> str:
    try:
        return (root / "proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_flags(root: Path = Path("/")) -> set[str]:
    """ISA flags of the first CPU in ``/proc/cpuinfo`` (empty where unreadable)."""
    for line in _cpuinfo_text(root).splitlines():
        if line.startswith("flags") or line.startswith("Features"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_clock_hz(root: Path = Path("/")) -> tuple[float | None, str]:
    """Highest clock of the CPU and where it was read; ``(None, "unknown")`` when not found.

    Prefers cpufreq's ``cpuinfo_max_freq`` (the maximum, turbo included); falls
    back to the ``cpu MHz`` of ``/proc/cpuinfo``, which is the current clock on
    bare metal and usually the nominal (TSC) clock under a hypervisor.
    """
    max_freq = root / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    try:
        return float(max_freq.read_text().strip()) * 1e3, "cpufreq cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    mhz = [
        float(m.group(1))
        for m in re.finditer(r"^cpu MHz\s*:\s*([\d.]+)", _cpuinfo_text(root), re.M)
    ]
    if mhz:
        return max(mhz) * 1e6, "/proc/cpuinfo 'cpu MHz' (current or nominal clock, not turbo)"
    return None, "unknown"


def cpu_cores() -> int | None:
    """Physical cores this process may run on (logical CPUs / threads per core)."""
    import psutil

    logical = psutil.cpu_count(logical=True)
    physical = psutil.cpu_count(logical=False)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = logical or 0
    if not logical or not physical or not usable:
        return physical or None
    per_core = max(1, logical // physical)
    return max(1, usable // per_core)


def _fp32_per_cycle(flags: set[str], uarch: CpuMicroarch | None
                    ) -> tuple[int, tuple[str, ...]] | None:
    """fp32 FLOP per cycle per core of the widest FMA the flags show, with its assumptions;
    None without AVX2/AVX-512 FMA."""
    units = FMA_UNITS_ASSUMED
    lanes_512 = 16
    if uarch is not None and uarch.fma_bits is not None:
        lanes_512 = min(16, uarch.fma_bits // 32)
    if "avx512f" in flags:
        fp32, isa = lanes_512 * 2 * units, "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        fp32, isa = 8 * 2 * units, "AVX2+FMA"
    else:
        return None
    if uarch is not None and uarch.fma_bits is not None:
        return fp32, (
            f"{isa} on {uarch.name}: {fp32 // (2 * units)} fp32 lanes per pipe x 2 (FMA) x "
            f"{units} {uarch.fma_bits}-bit FMA pipes per core",
            uarch.note,
        )
    return fp32, (
        f"{isa}: {fp32 // (2 * units)} fp32 lanes x 2 (FMA) x {units} FMA units per core "
        "(units assumed; not readable from cpuinfo)",
    )


#: Half precisions: (AMX flag, AMX name, vector flag, the vector rate's note, why none).
_HALF = {
    "bf16": ("amx_bf16", "AMX-BF16", "avx512_bf16", "AVX512_BF16 dot products: 2x the fp32 rate",
             "no native bf16 instructions: bf16 runs through fp32 conversion"),
    "fp16": ("amx_fp16", "AMX-FP16", "avx512_fp16", "AVX512_FP16: 2x the fp32 lanes",
             "no native fp16 arithmetic: fp16 runs through fp32 conversion"),
}


def cpu_flop_per_cycle(
    precision: str, flags: set[str], uarch: CpuMicroarch | None = None
) -> tuple[int | None, tuple[str, ...]]:
    """FLOP per cycle per core for ``precision`` given the ISA flags and, where known, the
    microarchitecture's FMA width (:func:`cpu_microarch`), with assumptions."""
    vector = _fp32_per_cycle(flags, uarch)
    if vector is None:
        return None, ("no AVX2/AVX-512 FMA flags found: FLOP/cycle unknown",)
    fp32, base = vector
    if precision == "tf32":
        return None, ("CPUs have no TF32 mode",)
    if precision == "fp32":
        return fp32, base
    if precision not in _HALF:
        return None, (f"unknown precision {precision!r}",)
    amx, amx_name, avx, avx_note, none = _HALF[precision]
    if amx in flags:
        return AMX_FLOP_PER_CYCLE, (
            f"Intel {amx_name}: {AMX_FLOP_PER_CYCLE} FLOP/cycle per core (Intel's figure)",
        )
    if avx in flags:
        return 2 * fp32, (*base, avx_note)
    return None, (none,)


@functools.lru_cache(maxsize=16)
def cpu_peak_estimate(precision: str, root: Path = Path("/")) -> CpuPeakEstimate:
    """CPU peak for ``precision`` = cores x FLOP/cycle x clock, each factor stated.

    The clock is the highest the system reports; sustained AVX-512/AMX clocks
    are often lower, so the estimate is an upper bound. The assumptions say which
    clock is assumed (the maximum/turbo clock from cpufreq, or the current/nominal
    one from /proc/cpuinfo) and the FMA datapath (per microarchitecture where known).
    """
    flags = cpu_flags(root)
    per_cycle, notes = cpu_flop_per_cycle(precision, flags, cpu_microarch(root))
    clock, clock_source = cpu_clock_hz(root)
    cores = cpu_cores()
    assumptions = list(notes)
    if clock is None:
        assumptions.append("clock unknown (no cpufreq and no 'cpu MHz' in /proc/cpuinfo)")
    elif clock_source.startswith("cpufreq"):
        assumptions.append(
            f"clock assumed: the maximum (turbo) clock {clock / 1e9:.2f} GHz from "
            f"{clock_source}, on every core at once; all-core FMA clocks are lower, so this "
            "is an upper bound")
    else:
        assumptions.append(
            f"clock assumed: {clock / 1e9:.2f} GHz from {clock_source}; the base or "
            "current clock, not the maximum")
    if cores is None:
        assumptions.append("core count unknown")
    value = (
        float(cores * per_cycle * clock)
        if cores is not None and per_cycle is not None and clock is not None
        else None
    )
    return CpuPeakEstimate(
        precision=precision,
        flop_per_s=value,
        cores=cores,
        flop_per_cycle_per_core=per_cycle,
        clock_hz=clock,
        clock_source=clock_source,
        assumptions=tuple(assumptions),
    )


def theoretical_flop_per_s(device: str, device_name: str | None, precision: str) -> float | None:
    """Theoretical peak FLOP/s of ``device`` for an operator precision, None where unknown."""
    if device == "cpu":
        return cpu_peak_estimate(precision).flop_per_s
    entry = lookup_device(device_name)
    return entry.flop_per_s.get(precision) if entry else None


def theoretical_bytes_per_s(device: str, device_name: str | None) -> float | None:
    """Theoretical memory bandwidth of ``device``; unknown (None) for CPUs."""
    if device == "cpu":
        return None
    entry = lookup_device(device_name)
    return entry.bytes_per_s if entry else None
