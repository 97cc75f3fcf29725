"""PyTorch backend: device resolution, precision support and the training step.

The runner only sees :class:`TorchTrainStep`: ``step()`` runs one full
training iteration (forward, loss, backward, optimizer step) and
``synchronize()`` waits for the device, so timings cover finished work.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.spec import PRECISIONS, Precision, RunSpec

if TYPE_CHECKING:
    import torch

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


def check_device(device: str) -> str:
    """Normalise ``device`` and make sure this machine has it.

    Raises:
        UnsupportedError: the device is not present.
    """
    import torch

    dev = normalize_device(device)
    if dev.startswith("cuda"):
        index = int(dev.split(":")[1])
        if not torch.cuda.is_available():
            raise UnsupportedError(
                f"device {dev} is unavailable: PyTorch sees no CUDA/ROCm GPU "
                f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"
            )
        count = torch.cuda.device_count()
        if index >= count:
            raise UnsupportedError(
                f"device {dev} is unavailable: PyTorch sees {count} GPU(s) "
                f"(cuda:0..cuda:{count - 1})"
            )
    elif dev == "mps" and not (
        getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()
    ):
        raise UnsupportedError("device mps is unavailable on this machine")
    return dev


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


def check_precision(device: str, precision: Precision) -> None:
    """Refuse an unsupported precision/device pair before anything runs.

    Raises:
        UnsupportedError: with the list of precisions the device supports.
    """
    ok = supported_precisions(device)
    if precision not in ok:
        raise UnsupportedError(
            f"precision {precision} is not supported on {device}; supported: {', '.join(ok)}"
        )


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` is an out-of-memory condition of the host or a device."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    # Some backends (MPS, older ROCm) raise RuntimeError with this text instead.
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


class TorchTrainStep:
    """One workload's training step, built once on its device.

    Args:
        workload: The registered workload.
        spec: The case; its device and precision must already be checked.
    """

    def __init__(self, workload: Workload, spec: RunSpec) -> None:
        import torch

        self.spec = spec
        self.device = torch.device(spec.device)
        if spec.threads is not None:
            torch.set_num_threads(spec.threads)
        self._configure_math(spec.precision)
        torch.manual_seed(spec.seed)
        gen = torch.Generator().manual_seed(spec.seed)
        model = workload.build_model(spec.size)
        self.param_count = sum(p.numel() for p in model.parameters())
        self.model = model.to(self.device).train()
        self.batch = workload.make_batch(spec.size, spec.batch_size, self.device, gen)
        self.optimizer = torch.optim.SGD(
            self.model.parameters(), lr=workload.learning_rate, momentum=0.9
        )
        self._loss_fn: Callable[[Any, Any], torch.Tensor] = workload.loss
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
