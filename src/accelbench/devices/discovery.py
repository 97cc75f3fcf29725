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

from accelbench.version import __version__


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_info() -> dict[str, Any]:
    """CPU model, cores, memory and the vector extensions relevant to training."""
    flags = _cpu_flags()
    interesting = ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16"]
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


def gpu_info(framework: str = "torch") -> list[dict[str, Any]]:
    """Every accelerator ``framework`` sees here (call it where the framework may be imported:
    in a worker or a probe), with the precisions accelbench supports on it."""
    from accelbench.backends import get_backend

    return [d.to_dict() for d in get_backend(framework).devices() if d.device != "cpu"]


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
        from accelbench.backends import get_backend

        out["framework"] = framework
        out.update(get_backend(framework).versions())
    return out


def machine_info(framework: str = "torch") -> dict[str, Any]:
    """The machine description stored with every result (call it inside the worker)."""
    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_info(),
        "gpus": gpu_info(framework),
        "software": software_info(framework),
    }
