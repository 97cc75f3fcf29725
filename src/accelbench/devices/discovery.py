"""What this machine is: CPU, memory, the accelerators a framework sees, software versions."""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from accelbench.frameworks import DEFAULT_FRAMEWORK, lookup
from accelbench.version import __version__

#: Where Linux describes the CPU (its model and feature flags).
CPUINFO = Path("/proc/cpuinfo")


def _cpu_model() -> str:
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags(cpuinfo: str) -> set[str]:
    """The CPU's feature flags in ``cpuinfo`` (text as ``/proc/cpuinfo`` holds it: the
    ``flags`` line on x86, ``Features`` on Arm; the first processor's)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


def _cpu_flags() -> set[str] | None:
    """This CPU's flags; None where ``/proc/cpuinfo`` cannot be read (not Linux)."""
    try:
        return cpu_flags(CPUINFO.read_text())
    except OSError:
        return None


#: Instructions that compute a mixed precision natively on a CPU, per precision: x86
#: (AVX-512 and AMX) and Arm (BF16, half-precision SIMD) names as ``/proc/cpuinfo`` spells
#: them. Without any, the framework converts to fp32 and back around every operation (or
#: takes a slow reference path): the precision runs, emulated, often far slower than fp32.
NATIVE_PRECISION_FLAGS = {
    "amp_bf16": ("avx512_bf16", "amx_bf16", "bf16", "svebf16"),
    "amp_fp16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp"),
}


def precision_support(precision: str, flags: set[str] | None) -> dict[str, Any] | None:
    """Whether a CPU with ``flags`` computes ``precision`` natively, as the record keeps it
    (``machine["precision_support"]``): ``precision``, ``native`` (bool), ``flags`` (the
    native instructions present) and ``note`` (why it is emulated); None for a precision
    every CPU runs as it is (fp32, tf32) or where the flags are unknown."""
    wanted = NATIVE_PRECISION_FLAGS.get(precision)
    if wanted is None or flags is None:
        return None
    present = [f for f in wanted if f in flags]
    x86 = [f for f in wanted if "_" in f]
    note = "" if present else (
        f"{precision} is emulated on this CPU: it has no native {precision[4:]} instructions "
        f"({'/'.join(x86)}), so the framework converts to fp32 and back around each "
        "operation; expect it slower than fp32")
    return {"precision": precision, "native": bool(present), "flags": present, "note": note}


def cpu_precision_support(precision: str) -> dict[str, Any] | None:
    """:func:`precision_support` of ``precision`` on this machine's CPU."""
    return precision_support(precision, _cpu_flags())


def cpu_info() -> dict[str, Any]:
    """CPU model, cores, memory and the vector extensions relevant to training."""
    flags = _cpu_flags() or set()
    interesting = ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16",
                   "amx_fp16"]
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = os.cpu_count() or 0
    return {
        "model": _cpu_model(),
        "arch": platform.machine(),
        "physical_cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "usable_cores": affinity,
        "memory_bytes": psutil.virtual_memory().total,
        "isa": [f for f in interesting if f in flags],
    }


def gpu_info(framework: str = DEFAULT_FRAMEWORK) -> list[dict[str, Any]]:
    """Every accelerator ``framework`` sees here (call it where the framework may be imported:
    in a worker or a probe), with the precisions accelbench supports on it."""
    return [d.to_dict() for d in lookup(framework).devices() if d.device != "cpu"]


@functools.cache
def git_commit() -> str | None:
    """Commit of the accelbench checkout this code runs from, if it is one."""
    here = Path(__file__).resolve().parent
    for parent in [here, *here.parents]:
        if (parent / ".git").exists():
            try:
                out = subprocess.run(
                    ["git", "-C", str(parent), "rev-parse", "HEAD"],
                    capture_output=True, text=True, timeout=5, check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                return None
            return out.stdout.strip() or None if out.returncode == 0 else None
    return None


def software_info(framework: str | None = None) -> dict[str, Any]:
    """accelbench and Python versions, plus the framework's and its vendor libraries'."""
    out: dict[str, Any] = {
        "accelbench": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "executable": sys.executable,
    }
    if framework is not None:
        out["framework"] = framework
        out.update(lookup(framework).versions())
    return out


def machine_info(framework: str = DEFAULT_FRAMEWORK) -> dict[str, Any]:
    """The machine description stored with every result (call it inside the worker)."""
    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_info(),
        "gpus": gpu_info(framework),
        "software": software_info(framework),
    }
