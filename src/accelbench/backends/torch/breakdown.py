"""Per-operator counts and times of one torch training step, for the roofline breakdown.

Two passes over real training steps of the workload on its device:

1. A dispatch-level counter (``OpCounter``, a ``TorchDispatchMode``)
   sees every aten operator the step runs after autograd and autocast. FLOPs
   come from :mod:`torch.utils.flop_counter`'s formulas, plus analytic ones
   for the fused recurrent kernels (``mkldnn_rnn_layer``, ``_cudnn_rnn``,
   ``miopen_rnn`` and their backward passes) and CPU flash attention, which
   it lacks. Bytes are each distinct input tensor read once and each output
   written once (views move nothing).
2. The PyTorch profiler times the same operators, in a separate pass so the
   counter's Python overhead is not in the times: the inclusive time of each
   top-level call of a counted operator (device time on a GPU). The step time is
   the wall time of these same profiled steps, so operator times are shares of it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accelbench.backends.opkinds import IGNORED_OPS, NO_TRAFFIC_KINDS, op_kind
from accelbench.opbench.formulas import attention_flops

if TYPE_CHECKING:
    from accelbench.spec import RunSpec


def _rnn_gemm_flops(inp: Any, weights: Sequence[Any]) -> int:
    """2 x (sum of the weight matrices) x (time steps x batch) for a fused RNN kernel."""
    steps_x_batch = inp.numel() // inp.shape[-1]
    return 2 * steps_x_batch * sum(int(w.numel()) for w in weights if w.dim() == 2)


def _extra_flops(name: str, args: Sequence[Any]) -> int | None:
    """FLOPs of operators :mod:`torch.utils.flop_counter` has no formula for."""
    if name == "mkldnn_rnn_layer":
        return _rnn_gemm_flops(args[0], args[1:3])
    if name == "mkldnn_rnn_layer_backward":
        return 2 * _rnn_gemm_flops(args[0], args[1:3])
    if name in ("_cudnn_rnn", "miopen_rnn"):
        return _rnn_gemm_flops(args[0], args[1])
    if name in ("_cudnn_rnn_backward", "miopen_rnn_backward"):
        return 2 * _rnn_gemm_flops(args[0], args[1])
    if name == "_scaled_dot_product_flash_attention_for_cpu":
        q, k = args[0], args[1]
        b, h, lq, d = q.shape
        return attention_flops(b, h, lq, k.shape[-2], d)
    if name == "_scaled_dot_product_flash_attention_for_cpu_backward":
        q, k = args[1], args[2]
        b, h, lq, d = q.shape
        return 2 * attention_flops(b, h, lq, k.shape[-2], d)
    return None


def _tensor_bytes(t: Any) -> int:
    try:
        storage = int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        storage = None
    logical = int(t.numel()) * int(t.element_size())
    return min(logical, storage) if storage is not None else logical


def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    leaves, _ = tree_flatten(obj)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _make_counter() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class OpCounter(TorchDispatchMode):
        """Counts calls, FLOPs and minimum bytes of every aten operator, by name."""

        def __init__(self) -> None:
            super().__init__()
            self.stats: dict[str, list[float]] = {}

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = func.overloadpacket.__name__
            flops = 0
            packet = func.overloadpacket
            if packet in flop_registry:
                flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
            else:
                extra = _extra_flops(name, args)
                flops = extra or 0
            if name in IGNORED_OPS:
                return out
            nbytes = 0
            outputs = _tensors(out)
            if not func.is_view and op_kind(name) not in NO_TRAFFIC_KINDS:
                # Inputs read once and outputs written once; an in-place op's
                # tensor is both read and written.
                for group in (_tensors((args, kwargs)), outputs):
                    seen: set[int] = set()
                    for t in group:
                        if id(t) not in seen:
                            seen.add(id(t))
                            nbytes += _tensor_bytes(t)
            entry = self.stats.setdefault(name, [0, 0, 0, 0])
            entry[0] += 1
            entry[1] += flops
            entry[2] += nbytes
            entry[3] += sum(int(t.numel()) for t in outputs)
            return out

    return OpCounter()


def _profile_times(step: Any, sync: Any, names: set[str], repeats: int, cuda: bool
                   ) -> tuple[dict[str, float], float]:
    """Seconds per step of each counted operator (top-level calls only, averaged), and the
    mean wall time of the same profiled steps."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            step()
        sync()
        wall_s = (time.perf_counter() - t0) / repeats
    qualified = {f"aten::{n}": n for n in names}
    totals: dict[str, float] = {}
    for ev in prof.events():
        name = qualified.get(ev.name)
        if name is None:
            continue
        parent = ev.cpu_parent
        nested = False
        while parent is not None:
            if parent.name in qualified:
                nested = True
                break
            parent = parent.cpu_parent
        if nested:
            continue
        micros = ev.device_time_total if cuda else ev.cpu_time_total
        totals[name] = totals.get(name, 0.0) + float(micros) * 1e-6
    return {k: v / repeats for k, v in totals.items()}, wall_s


def profile_step(spec: RunSpec, impl: Any, *, repeats: int = 3, warmup: int = 2
                 ) -> tuple[dict[str, list[float]], float]:
    """Counts and times of every operator of one training step of ``impl``.

    Returns:
        ``{op name: [calls, flops, bytes, output elements, seconds per step]}`` and
        the step time measured the same way as the operator times: the mean wall time
        of the profiled steps (so the operators' times are shares of it).
    """
    from accelbench.backends.torch.step import TorchTrainStep

    step = TorchTrainStep(impl, spec)
    for _ in range(max(0, warmup)):
        step.step()
    step.synchronize()
    counter = _make_counter()
    with counter:
        step.step()
    step.synchronize()
    stats: dict[str, list[float]] = counter.stats
    op_times, step_time_s = _profile_times(
        step.step, step.synchronize, set(stats), max(1, repeats), spec.device.startswith("cuda")
    )
    for name, v in stats.items():
        v.append(op_times.get(name, 0.0))
    return stats, step_time_s
