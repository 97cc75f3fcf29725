"""The PyTorch backend: devices, precisions, the training step, OOM, FLOPs, versions.

The training step itself is :mod:`accelbench.backends.torch.step`. torch is
imported inside functions only.
"""

from __future__ import annotations

import re
import shutil
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import BaseBackend, DeviceInfo, FlopCount, ShapeLimits
from accelbench.backends.registry import register_backend
from accelbench.errors import ConfigError, UnsupportedError
from accelbench.spec import PRECISIONS, Precision

if TYPE_CHECKING:
    from accelbench.backends.torch.distributed import TorchDistributed
    from accelbench.backends.torch.step import TorchTrainStep
    from accelbench.spec import FastPaths, RunSpec
    from accelbench.workloads.registry import Workload

_DEVICE_RE = re.compile(r"^(cpu|mps|cuda)(?::(\d+))?$")


def normalize_device(device: str) -> str:
    """Canonical device string: ``cpu``, ``mps`` or ``cuda:N``.

    Raises:
        ConfigError: the string is not a device name accelbench understands.
    """
    m = _DEVICE_RE.match(device.strip().lower())
    if not m:
        raise ConfigError(f"unknown device {device!r}; use cpu, cuda, cuda:N or mps")
    kind, index = m.group(1), m.group(2)
    if kind == "cuda":
        return f"cuda:{index or 0}"
    if index not in (None, "0"):
        raise ConfigError(f"device {device!r}: only index 0 exists for {kind}")
    return kind


def supported_precisions(device: str) -> tuple[Precision, ...]:
    """Precisions accelbench can run on ``device`` (already checked to exist)."""
    import torch

    dev = normalize_device(device)
    if dev == "cpu":
        return ("fp32", "amp_bf16")
    if dev == "mps":
        return ("fp32", "amp_fp16")
    index = int(dev.split(":")[1])
    major, _minor = torch.cuda.get_device_capability(index)
    is_rocm = torch.version.hip is not None
    out: list[Precision] = ["fp32"]
    if major >= 8 and not is_rocm:
        out.append("tf32")  # TF32 tensor cores exist from Ampere (sm_80) on
    out.append("amp_fp16")
    if torch.cuda.is_bf16_supported():
        out.append("amp_bf16")
    return tuple(p for p in PRECISIONS if p in out)


#: Lower-case texts of out-of-memory errors torch raises as plain RuntimeError: the CPU
#: allocator (``DefaultCPUAllocator: can't allocate memory``), a C++ ``std::bad_alloc``
#: surfacing through the bindings, CUDA/ROCm caching allocators and MPS.
_OOM_TEXTS = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "std::bad_alloc",
    "hiperroroutofmemory",
)


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` is an out-of-memory condition of the host or a device."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    oom_type = getattr(torch, "OutOfMemoryError", None) or getattr(
        torch.cuda, "OutOfMemoryError", None
    )
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(t in text for t in _OOM_TEXTS)


#: Device kinds whose torch has the fused implementation of each optimizer accelbench builds
#: (``torch.utils._foreach_utils._get_fused_kernels_supported_devices`` in torch 2.4+).
FUSED_OPTIMIZER_DEVICES: dict[str, tuple[str, ...]] = {
    "sgd": ("cpu", "cuda", "mps"),
    "adamw": ("cpu", "cuda", "mps"),
}

def check_fast_paths(fast_paths: FastPaths, device: str, workload: Workload) -> None:
    """Refuse fast paths that cannot act on a case, before anything runs (imports no
    torch: the rules are about names only).

    Args:
        fast_paths: The case's fast paths.
        device: The case's device (canonical name).
        workload: The case's workload (its name, family and optimizer decide).

    Raises:
        ConfigError: channels-last on a model without 2-D convolutions, or a fused
            optimizer accelbench cannot build.
        UnsupportedError: the device has no fused kernel, or torch.compile on a CPU
            without the C++ compiler inductor needs.
    """
    kind = device.split(":")[0]
    family, optimizer = workload.family, workload.optimizer
    if fast_paths.channels_last and family != "cnn":
        raise ConfigError(
            f"--channels-last: {workload.name} (family {family}) has no 2-D convolutions; "
            "the option applies to the convolutional workloads (family cnn) only"
        )
    if fast_paths.fused_optimizer:
        devices = FUSED_OPTIMIZER_DEVICES.get(optimizer)
        if devices is None:
            raise ConfigError(f"--fused-optimizer: {workload.name}'s optimizer {optimizer!r} "
                              "has no fused implementation; drop the option")
        if kind not in devices:
            raise UnsupportedError(f"--fused-optimizer: torch has no fused {optimizer} on "
                                   f"{kind}; drop the option")
    if fast_paths.compile and kind == "cpu" and not _cxx_compiler():
        raise UnsupportedError("--compile: torch.compile (inductor) needs a C++ compiler on "
                               "a CPU and none was found; install g++ or set CXX")


def _cxx_compiler() -> str | None:
    import os

    names = [os.environ["CXX"]] if os.environ.get("CXX") else []
    return next((found for name in (*names, "g++", "c++", "clang++")
                 if (found := shutil.which(name))), None)


@register_backend
class TorchBackend(BaseBackend):
    """PyTorch: ``cpu``, ``cuda:N`` (NVIDIA CUDA or AMD ROCm builds) and ``mps``."""

    name = "torch"
    #: ``pytorch`` is also how records before 0.2 named it.
    aliases = ("pytorch",)
    label = "PyTorch"
    compile_label = "torch.compile"
    has_fast_paths = True
    has_phases = True
    #: ``--parallel fsdp|tp|fsdp+tp`` (backends/torch/sharding.py).
    shards = True
    #: Tensor parallelism over more ranks than key/value heads replicates them
    #: (:mod:`accelbench.backends.torch.sharding`).
    tp_replicates_kv_heads = True
    totarget = "accelbench.backends.torch.totarget"
    #: ``--data generated|PATH``: a DataLoader feeds the step (backends/torch/input.py).
    has_data_loader = True
    #: --phases with --data: the pieces train on the batch held, the wait is the input.
    has_phases_with_data = True
    #: --data under fsdp, tp and fsdp+tp: a rank's sampler shards by its data-parallel
    #: replica (backends/torch/input.shard_sampler).
    shards_data = True
    list_order = 0
    package = "torch"
    #: torch.optim's optimizers import TorchDynamo when the first one is built.
    preload_modules = ("torch._dynamo",)
    install_hint = "pip install torch  (see https://pytorch.org/get-started/locally/)"
    models = "accelbench.backends.torch.models"
    #: A workload class with these methods is its own torch implementation (0.1's form).
    self_implementing = ("build_model", "make_batch", "loss")
    stack_packages = ("torch",)
    version_facts = (("torch", "PyTorch"), ("cuda", "CUDA"), ("hip", "ROCm"),
                     ("cudnn", "cuDNN"), ("torch_threads", "torch threads"))
    device_libraries = ("cuda", "hip", "cudnn")
    model_sources = ("backends/torch/models/*.py", "backends/torch/model.py",
                     "backends/torch/flops.py")
    # Calibrated on the quiet runs of `benchmarks/noise.py --part 3` (2-CPU VM, load
    # 1.5-2.7 from the runs themselves, other processes < 0.5 core: 16 torch runs of every
    # tiny workload, 2 s measured each): the largest quiet q3/q1 was 1.18, the largest
    # trimmed-mean distance 6%; the limits are those plus 10% room, never below 0.3's
    # defaults. Two modes clustered in time (a 10-14% minority 11-33% slower, a mean moved
    # by 1-3%) are what a quiet run of this VM shows up to a shift of 5%. In-sample: rerun
    # part 3 to check them out of sample.
    quiet_shape = {"cpu": ShapeLimits(1.30, 0.10, "16 quiet torch runs (noise.py part 3)",
                                      shift=0.05)}

    def normalize_device(self, device: str) -> str:
        return normalize_device(device)

    def devices(self) -> list[DeviceInfo]:
        """The CPU, every GPU the installed torch sees, and MPS where present."""
        import torch

        from accelbench.devices.discovery import cpu_info
        from accelbench.devices.gpu.nvidia import driver_version

        out = [DeviceInfo(device="cpu", name=str(cpu_info()["model"]), vendor="cpu",
                          precisions=supported_precisions("cpu"))]
        if torch.cuda.is_available():
            rocm = torch.version.hip is not None
            driver = driver_version() if not rocm else None
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                out.append(DeviceInfo(
                    device=f"cuda:{i}",
                    name=props.name,
                    vendor="amd" if rocm else "nvidia",
                    uuid=str(getattr(props, "uuid", "")) or None,
                    precisions=supported_precisions(f"cuda:{i}"),
                    details={
                        "memory_bytes": int(props.total_memory),
                        "compute_capability": f"{props.major}.{props.minor}",
                        "multiprocessors": props.multi_processor_count,
                        "driver_version": driver,
                        "runtime": (f"ROCm {torch.version.hip}" if rocm
                                    else f"CUDA {torch.version.cuda}"),
                    },
                ))
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            out.append(DeviceInfo(device="mps", name="Apple GPU (MPS)", vendor="apple",
                                  precisions=supported_precisions("mps"),
                                  details={"runtime": "Metal"}))
        return out

    def versions(self) -> dict[str, Any]:
        """torch, CUDA/ROCm, cuDNN and oneDNN versions and the thread count."""
        import torch

        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "hip": torch.version.hip,
            "cudnn": cudnn,
            "mkldnn": torch.backends.mkldnn.is_available(),
            "torch_threads": torch.get_num_threads(),
        }

    def build_step(self, spec: RunSpec, impl: Any) -> TorchTrainStep:
        from accelbench.backends.torch.step import TorchTrainStep

        return TorchTrainStep(impl, spec)

    def check_fast_paths(self, fast_paths: FastPaths, device: str, workload: Workload) -> None:
        """Refuse fast paths that cannot act on the case (:func:`check_fast_paths`)."""
        check_fast_paths(fast_paths, device, workload)

    def distributed(self) -> TorchDistributed:
        """torch.distributed: torchrun's elastic launcher, gloo or NCCL, DDP."""
        from accelbench.backends.torch.distributed import TorchDistributed

        return TorchDistributed()

    def check_sharding(self, spec: RunSpec) -> None:
        """``--parallel``/``--act-ckpt``: the workload has the plan the mode needs
        (:func:`accelbench.backends.torch.sharding.check`)."""
        from accelbench.backends.torch.sharding import check
        from accelbench.workloads.registry import get_workload

        wl = get_workload(spec.workload)
        cfg = wl.config(spec.size) if callable(getattr(wl, "config", None)) else None
        widths = tuple(int(getattr(cfg, n)) for n in ("heads", "ffn", "mlp")
                       if isinstance(getattr(cfg, n, None), int))
        kv = getattr(cfg, "kv_heads", None)
        check(spec, widths, kv_heads=kv if isinstance(kv, int) else None)

    def is_oom(self, exc: BaseException) -> bool:
        return is_oom(exc)

    def param_count(self, impl: Any, size: str) -> int:
        """Counted on the meta device: nothing is allocated."""
        import torch

        with torch.device("meta"):
            model = impl.build_model(size)
        return sum(p.numel() for p in model.parameters())

    def count_flops(self, impl: Any, size: str, batch_size: int) -> FlopCount:
        from accelbench.backends.torch.flops import count_flops

        return count_flops(impl, size, batch_size)

    def ops(self) -> Any:
        """The operator benchmarks (matmul, conv2d, LSTM layer, attention, device copy)."""
        from accelbench.backends.torch.opbench import TorchOps

        return TorchOps()

    def breakdown(self, spec: RunSpec, impl: Any, *, repeats: int = 3, warmup: int = 2
                  ) -> tuple[dict[str, list[float]], float]:
        """Per-operator counts and times of one training step (the roofline breakdown)."""
        from accelbench.backends.torch.breakdown import profile_step

        return profile_step(spec, impl, repeats=repeats, warmup=warmup)

    def device_uuid(self, device: str) -> str | None:
        if not device.startswith("cuda"):
            return None
        import torch

        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
        return str(uuid) if uuid else None
