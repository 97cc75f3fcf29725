"""What this machine is: CPU, memory, GPUs the framework sees, software versions."""

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

from accelbench import __version__


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


def _nvidia_driver() -> str | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML absent or broken: the driver version is simply unknown
        return None


def gpu_info() -> list[dict[str, Any]]:
    """Every GPU the installed PyTorch sees, with the precisions accelbench supports on it."""
    import torch

    from accelbench.frameworks.torch_backend import supported_precisions

    gpus: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        driver = _nvidia_driver() if torch.version.hip is None else None
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            gpus.append(
                {
                    "device": f"cuda:{i}",
                    "name": props.name,
                    "vendor": "amd" if torch.version.hip else "nvidia",
                    "memory_bytes": int(props.total_memory),
                    "compute_capability": f"{props.major}.{props.minor}",
                    "multiprocessors": props.multi_processor_count,
                    "uuid": str(getattr(props, "uuid", "")) or None,
                    "driver_version": driver,
                    "runtime": (
                        f"ROCm {torch.version.hip}" if torch.version.hip
                        else f"CUDA {torch.version.cuda}"
                    ),
                    "precisions": list(supported_precisions(f"cuda:{i}")),
                }
            )
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        gpus.append(
            {
                "device": "mps",
                "name": "Apple GPU (MPS)",
                "vendor": "apple",
                "memory_bytes": None,
                "runtime": "Metal",
                "precisions": list(supported_precisions("mps")),
            }
        )
    return gpus


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


def software_info() -> dict[str, Any]:
    """Framework, vendor library and accelbench versions."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "accelbench": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "cudnn": cudnn,
        "mkldnn": torch.backends.mkldnn.is_available(),
        "torch_threads": torch.get_num_threads(),
        "executable": sys.executable,
    }


def machine_info() -> dict[str, Any]:
    """The machine description stored with every result."""
    return {
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_info(),
        "gpus": gpu_info(),
        "software": software_info(),
    }
