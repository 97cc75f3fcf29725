"""The PyTorch backend: devices, precisions, the training step, OOM, FLOPs, versions.

The runner only sees :class:`TorchTrainStep`: ``step()`` runs one full
training iteration (forward, loss, backward, optimizer step) and
``synchronize()`` waits for the device, so timings cover finished work.
torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from accelbench.backends.base import DeviceInfo, FlopCount, host_peak_rss
from accelbench.errors import ConfigError, UnsupportedError
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


#: ``--compile``: torch.compile's defaults (the mode and backend practitioners start from).
COMPILE_MODE = "default"
COMPILE_BACKEND = "inductor"

#: Device kinds whose torch has the fused implementation of each optimizer accelbench builds
#: (``torch.utils._foreach_utils._get_fused_kernels_supported_devices`` in torch 2.4+).
FUSED_OPTIMIZER_DEVICES: dict[str, tuple[str, ...]] = {
    "sgd": ("cpu", "cuda", "mps"),
    "adamw": ("cpu", "cuda", "mps"),
}

#: Betas of ``adamw``: the large-model practice (GPT-3, Llama), not torch's 0.999 default.
ADAMW_BETAS = (0.9, 0.95)


def check_fast_paths(spec: RunSpec, family: str, optimizer: str) -> None:
    """Refuse fast paths that cannot act on this case, before anything runs (imports no
    torch: the rules are about names only).

    Args:
        spec: The case.
        family: The workload's family (``cnn``, ``rnn`` ...).
        optimizer: The workload's optimizer (``sgd`` or ``adamw``).

    Raises:
        ConfigError: channels-last on a model without 2-D convolutions, or a fused
            optimizer accelbench cannot build.
        UnsupportedError: the device has no fused kernel, or torch.compile on a CPU
            without the C++ compiler inductor needs.
    """
    fast = spec.fast_paths
    kind = spec.device.split(":")[0]
    if fast.channels_last and family != "cnn":
        raise ConfigError(
            f"--channels-last: {spec.workload} (family {family}) has no 2-D convolutions; "
            "the option applies to the convolutional workloads (family cnn) only"
        )
    if fast.fused_optimizer:
        devices = FUSED_OPTIMIZER_DEVICES.get(optimizer)
        if devices is None:
            raise ConfigError(f"--fused-optimizer: {spec.workload}'s optimizer {optimizer!r} "
                              "has no fused implementation; drop the option")
        if kind not in devices:
            raise UnsupportedError(f"--fused-optimizer: torch has no fused {optimizer} on "
                                   f"{kind}; drop the option")
    if fast.compile and kind == "cpu" and not _cxx_compiler():
        raise UnsupportedError("--compile: torch.compile (inductor) needs a C++ compiler on "
                               "a CPU and none was found; install g++ or set CXX")


def _cxx_compiler() -> str | None:
    import os

    names = [os.environ["CXX"]] if os.environ.get("CXX") else []
    return next((found for name in (*names, "g++", "c++", "clang++")
                 if (found := shutil.which(name))), None)


def make_optimizer(
    name: str, params: list[torch.nn.Parameter], *, lr: float, weight_decay: float,
    fused: bool,
) -> torch.optim.Optimizer:
    """The workload's optimizer: ``sgd`` (momentum 0.9, the paper's) or ``adamw`` (betas
    0.9/0.95 and the workload's decoupled weight decay).

    Args:
        name: The workload's ``optimizer``.
        params: The model's parameters.
        lr: Learning rate.
        weight_decay: Decoupled weight decay (``adamw`` only).
        fused: Use the fused implementation (one kernel for all parameters); else
            torch's default (``foreach`` where available).

    Raises:
        ConfigError: an optimizer accelbench does not know.
    """
    import torch

    # None (not False) keeps torch's own default choice (foreach) for the unfused case.
    flag = True if fused else None
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, fused=flag)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=ADAMW_BETAS, weight_decay=weight_decay,
                                 fused=flag)
    raise ConfigError(f"unknown optimizer {name!r}; a workload's optimizer is sgd or adamw")


def _channels_last(t: Any) -> Any:
    """An image batch (4-D tensor) in NHWC memory order; other tensors as they are."""
    import torch

    if isinstance(t, torch.Tensor) and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    return t


def _dynamo_graphs() -> int:
    """Graphs TorchDynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class TorchTrainStep:
    """One workload's training step, built once on its device.

    Args:
        impl: The workload's torch implementation.
        spec: The case; its device and precision must already be checked.
    """

    compile_s: float | None = None

    def __init__(self, impl: TorchModel, spec: RunSpec) -> None:
        import torch

        from accelbench.backends.torch.distributed import rank_device, wrap_model

        self.spec = spec
        self.device = rank_device(spec.device)  # cuda:LOCAL_RANK in a rank of a CUDA case
        if spec.threads is not None:
            torch.set_num_threads(spec.threads)
        self._configure_math(spec.precision)
        torch.manual_seed(spec.seed)
        gen = torch.Generator().manual_seed(spec.seed)
        workload = impl.workload
        fast = spec.fast_paths
        model = impl.build_model(spec.size)
        self.param_count = sum(p.numel() for p in model.parameters())
        model = model.to(self.device).train()
        if fast.channels_last:
            # Module.to takes memory_format at run time; torch's stubs omit it.
            model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        # Order matters for what follows: the model is on its device first, then wrapped for
        # data parallelism (DDP, a distributed case), then compiled; the optimizer holds the
        # parameters themselves, which neither wrapper copies.
        self.model = wrap_model(model, self.device)  # DDP when torch.distributed is up
        params = list(model.parameters())
        self.batch = impl.make_batch(spec.size, spec.batch_size, self.device, gen)
        if fast.channels_last:
            self.batch = tuple(_channels_last(t) for t in self.batch)
        self.optimizer = make_optimizer(
            workload.optimizer, params, lr=workload.learning_rate,
            weight_decay=workload.weight_decay, fused=fast.fused_optimizer,
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
        self._compiled: dict[str, Any] = {}
        self._graphs_before = 0
        if fast.compile:
            self._compile()

    def _compile(self) -> None:
        """``torch.compile`` the model and run the first step here, so that tracing and
        code generation (forward and backward) are timed as ``compile_s`` and never enter
        warm-up or the measured steps."""
        import torch
        from torch._dynamo.utils import counters

        # Counts before and after: this compile's own graphs and cache use, and (in extra())
        # whether anything recompiled while measuring.
        before = _dynamo_graphs()
        hits, misses = (counters["inductor"][k] for k in ("fxgraph_cache_hit",
                                                          "fxgraph_cache_miss"))
        breaks = sum(counters["graph_break"].values())
        # torch.compile of a Module returns a Module (OptimizedModule) sharing its parameters.
        self.model = cast("torch.nn.Module", torch.compile(
            self.model, mode=COMPILE_MODE, backend=COMPILE_BACKEND))
        t0 = time.perf_counter()
        self.step()
        self.synchronize()
        self.compile_s = time.perf_counter() - t0
        # A warm inductor cache (on by default, shared by every process of the user) makes
        # compile_s a cache load rather than a compile: the record says which it was.
        self._compiled = {
            "mode": COMPILE_MODE, "backend": COMPILE_BACKEND,
            "what": "model (forward and backward; loss and optimizer eager)",
            "graphs_at_build": _dynamo_graphs() - before,
            "graph_breaks": sum(counters["graph_break"].values()) - breaks,
            "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"] - hits,
            "fx_graph_cache_misses": counters["inductor"]["fxgraph_cache_miss"] - misses,
        }
        self._graphs_before = before

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
        """The optimizer as built and the fast paths acting on the case: for ``--compile``,
        its mode and backend, the graphs compiled while the step was built, and any
        recompiled while measuring (then the step times include compile work)."""
        fast = self.spec.fast_paths
        # Read back from the optimizer, not the flag: what torch actually built.
        out: dict[str, Any] = {
            "optimizer": type(self.optimizer).__name__,
            "optimizer_impl": "fused" if self.optimizer.defaults.get("fused") else "default",
        }
        if fast.channels_last:
            out["memory_format"] = "channels_last"
        if self._compiled:
            compiled = dict(self._compiled)
            total = _dynamo_graphs() - self._graphs_before
            compiled["graphs_after_build"] = total - compiled["graphs_at_build"]
            if compiled["graphs_after_build"] > 0:
                compiled["note"] = (f"{compiled['graphs_after_build']} graph(s) recompiled "
                                    "after the first step: their compile time is in the "
                                    "step times")
            out["compile"] = compiled
        return out

    def peak_memory(self) -> tuple[int | None, str]:
        """CUDA/ROCm: ``torch.cuda.max_memory_allocated`` (tensors, not the allocator's
        cache); CPU: the worker's peak RSS; MPS: not reported."""
        import torch

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

    def check_fast_paths(self, spec: RunSpec, family: str, optimizer: str) -> None:
        """Refuse fast paths that cannot act on the case (:func:`check_fast_paths`)."""
        check_fast_paths(spec, family, optimizer)

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
