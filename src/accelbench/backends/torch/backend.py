"""The PyTorch backend: devices, precisions, the training step, OOM, FLOPs, versions.

The runner only sees :class:`TorchTrainStep`: ``step()`` runs one full
training iteration (forward, loss, backward, optimizer step) and
``synchronize()`` waits for the device, so timings cover finished work.
torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.backends.base import DeviceInfo, FlopCount, host_peak_rss
from accelbench.errors import ConfigError
from accelbench.spec import PRECISIONS, Precision, RunSpec

if TYPE_CHECKING:
    import torch

    from accelbench.backends.torch.model import TorchModel

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


class TorchTrainStep:
    """One workload's training step, built once on its device.

    Args:
        impl: The workload's torch implementation.
        spec: The case; its device and precision must already be checked.
    """

    compile_s: float | None = None

    def __init__(self, impl: TorchModel, spec: RunSpec) -> None:
        import torch

        self.spec = spec
        self.device = torch.device(spec.device)
        if spec.threads is not None:
            torch.set_num_threads(spec.threads)
        self._configure_math(spec.precision)
        torch.manual_seed(spec.seed)
        gen = torch.Generator().manual_seed(spec.seed)
        workload = impl.workload
        model = impl.build_model(spec.size)
        self.param_count = sum(p.numel() for p in model.parameters())
        self.model = model.to(self.device).train()
        self.batch = impl.make_batch(spec.size, spec.batch_size, self.device, gen)
        self.optimizer = torch.optim.SGD(
            self.model.parameters(), lr=workload.learning_rate, momentum=0.9
        )
        self._loss_fn: Callable[[Any, Any], torch.Tensor] = impl.loss
        self._autocast_dtype = {
            "amp_fp16": torch.float16,
            "amp_bf16": torch.bfloat16,
        }.get(spec.precision)
        # Loss scaling only for fp16: bf16 has fp32's exponent range.
        self.scaler = (
            torch.amp.GradScaler(self.device.type) if spec.precision == "amp_fp16" else None
        )
        self.last_loss: torch.Tensor | None = None

    @staticmethod
    def _configure_math(precision: Precision) -> None:
        import torch

        # fp32 means true fp32: PyTorch enables TF32 convolutions by default on Ampere+.
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        if self._autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._autocast_dtype)

    def step(self) -> None:
        """One training iteration; does not wait for the device."""
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss = self._loss_fn(self.model, self.batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.last_loss = loss.detach()

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work."""
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "mps":
            torch.mps.synchronize()

    def loss_value(self) -> float | None:
        """The last step's loss as a float (synchronises)."""
        return float(self.last_loss.float().item()) if self.last_loss is not None else None

    def extra(self) -> dict[str, Any]:
        """Nothing backend-specific to add for torch."""
        return {}

    def peak_memory(self) -> tuple[int | None, str]:
        """CUDA/ROCm: ``torch.cuda.max_memory_allocated`` (tensors, not the allocator's
        cache); CPU: the worker's peak RSS; MPS: not reported."""
        if self.device.type == "cuda":
            return (int(torch.cuda.max_memory_allocated(self.device)),
                    "torch.cuda.max_memory_allocated (device tensors, peak)")
        if self.device.type == "cpu":
            return host_peak_rss()
        return None, f"peak memory is not reported on {self.device.type}"


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


class TorchBackend:
    """PyTorch: ``cpu``, ``cuda:N`` (NVIDIA CUDA or AMD ROCm builds) and ``mps``."""

    name = "torch"
    package = "torch"
    install_hint = "pip install torch  (see https://pytorch.org/get-started/locally/)"

    def normalize_device(self, device: str) -> str:
        return normalize_device(device)

    def prepare_process(self, spec: RunSpec) -> None:
        """Nothing to set before torch is imported (threads are set with the step)."""
        del spec

    def devices(self) -> list[DeviceInfo]:
        """The CPU, every GPU the installed torch sees, and MPS where present."""
        import torch

        from accelbench.devices.discovery import cpu_info

        out = [DeviceInfo(device="cpu", name=str(cpu_info()["model"]), vendor="cpu",
                          precisions=supported_precisions("cpu"))]
        if torch.cuda.is_available():
            rocm = torch.version.hip is not None
            driver = _nvidia_driver() if not rocm else None
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
        return TorchTrainStep(impl, spec)

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
        from accelbench.backends.torch.ops import TorchOps

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
