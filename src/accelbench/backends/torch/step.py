"""The PyTorch training step: one full iteration (forward, loss, backward, optimizer step).

The runner only sees :class:`TorchTrainStep`: ``step()`` runs one training
iteration and ``synchronize()`` waits for the device, so timings cover finished
work. On CUDA, measurement times blocks of steps with CUDA events between the steps and
one host synchronize per block (:class:`EventBlocks`): each step keeps its own time, and
the host never stops the queue between two steps. torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from accelbench.backends.base import host_peak_rss
from accelbench.backends.blocks import BlockTime
from accelbench.backends.torch.phases import TorchPhaseSteps
from accelbench.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from accelbench.backends.torch.model import TorchModel
    from accelbench.data.stall import InputTimer
    from accelbench.spec import Precision, RunSpec

#: ``--compile``: torch.compile's defaults (the mode and backend practitioners start from).
COMPILE_MODE = "default"
COMPILE_BACKEND = "inductor"

#: Betas of ``adamw``: the large-model practice (GPT-3, Llama), not torch's 0.999 default.
ADAMW_BETAS = (0.9, 0.95)


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


class EventBlocks:
    """Blocks of steps timed by device events: an event before the first step and after
    each, one wait (on the last event) per block; step i's time is the span between events
    i and i + 1, the block's the span from the first event to the last.

    Args:
        step: One training step (returns once its work is queued).
        new_event: A new timing event with ``record(stream)``, ``synchronize()`` and
            ``elapsed_time(other)`` in milliseconds (``torch.cuda.Event(enable_timing=True)``).
        stream: Where the step's work goes (the device's current stream); None: the
            current device's.
    """

    clock = ("CUDA events between steps, one host synchronize per block; per-step times "
             "from the events")

    def __init__(self, step: Callable[[], None], new_event: Callable[[], Any],
                 stream: Any = None) -> None:
        self._step = step
        self._new_event = new_event
        self._stream = stream

    def run_block(self, k: int) -> BlockTime:
        events = [self._new_event() for _ in range(k + 1)]
        step, stream = self._step, self._stream
        events[0].record(stream)
        for i in range(k):
            step()
            events[i + 1].record(stream)
        events[-1].synchronize()
        per_step = tuple(events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(k))
        return BlockTime(events[0].elapsed_time(events[-1]) / 1e3, per_step)


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

        from accelbench.backends.torch.distributed import rank_device
        from accelbench.backends.torch.sharding import parallelize

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
        # Order matters for what follows: the model is on its device first, then spread
        # over the ranks (--parallel: DDP by default in a distributed case, FSDP2 or tensor
        # parallel), then compiled; the optimizer holds the parameters as they are after
        # that (FSDP2 and the TP plan replace them by their shards; DDP keeps them).
        self.model, self.sharding = parallelize(model, spec, self.device)
        params = list(model.parameters())
        self.batch = impl.make_batch(spec.size, spec.batch_size, self.device, gen)
        # --data generated|PATH: each step takes its batch from a DataLoader, timed.
        self._next_batch: Callable[[], tuple[Any, ...]] | None = None
        self.input_timer: InputTimer | None = None
        if spec.data != "synthetic":
            from accelbench.backends.torch.input import open_feed

            self._next_batch, self.input_timer = open_feed(workload, spec, self.device)
            self.batch = self._next_batch()  # the workers start here, outside any window
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
        if self._compiled["graphs_at_build"] == 0:
            # TorchDynamo skips what it cannot trace (nn.LSTM, for one) and runs it eagerly:
            # the flag then changes nothing, and the record must not read as compiled code.
            self._compiled["note"] = (
                "torch.compile compiled no graph of the model: every step ran eagerly, so "
                "--compile changed nothing in this case (TorchDynamo skipped the model's code)")
        self._graphs_before = before

    @staticmethod
    def _configure_math(precision: Precision) -> None:
        configure_math(precision)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        import torch

        if self._autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._autocast_dtype)

    def step(self) -> None:
        """One training iteration; does not wait for the device. With a data loader, the
        iteration starts by waiting for its batch (timed by :attr:`input_timer`)."""
        if self._next_batch is not None:
            batch = self._next_batch()
            self.batch = tuple(_channels_last(t) for t in batch) \
                if self.spec.fast_paths.channels_last else batch
        self.compute_step()

    def compute_step(self) -> None:
        """:meth:`step` on the batch it holds, without taking the next (``--phases``'
        pieces: the wait for a batch is the input phase, measured in the step itself)."""
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

    def forward_loss(self) -> torch.Tensor:
        """Forward and loss as :meth:`step` runs them (its autocast), for ``--phases``."""
        with self._autocast():
            return self._loss_fn(self.model, self.batch)

    def phase_steps(self) -> TorchPhaseSteps:
        """The step's pieces for ``--phases`` (:mod:`accelbench.backends.torch.phases`)."""
        return TorchPhaseSteps(self)

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

    def block_timer(self) -> EventBlocks | None:
        """CUDA (and ROCm): :class:`EventBlocks` on the step's stream; None elsewhere (a CPU
        step is synchronous: each is timed on its own)."""
        import torch

        if self.device.type != "cuda":
            return None

        def new_event() -> Any:
            return torch.cuda.Event(enable_timing=True)

        # The step's kernels go to its device's current stream (not the current device's).
        return EventBlocks(self.step, new_event, torch.cuda.current_stream(self.device))

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
        if self.sharding:
            out["sharding"] = self.sharding
        if self._compiled:
            compiled = dict(self._compiled)
            total = _dynamo_graphs() - self._graphs_before
            compiled["graphs_after_build"] = total - compiled["graphs_at_build"]
            if compiled["graphs_after_build"] > 0 and "note" not in compiled:
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


def configure_math(precision: Precision) -> None:
    """The process's math settings for ``precision`` (``run``'s and ``train``'s): fp32
    means true fp32, for PyTorch enables TF32 convolutions by default on Ampere+."""
    import torch

    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
