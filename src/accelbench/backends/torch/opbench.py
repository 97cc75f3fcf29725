"""PyTorch's operator benchmarks: tensors of an operator case, one execution, math modes."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError
from accelbench.opbench.cases import OpCase
from accelbench.opbench.precision import op_precision

if TYPE_CHECKING:
    import torch

Step = Callable[[], None]


def torch_dtype(precision: str) -> torch.dtype:
    """Tensor dtype of an operator precision (tf32 computes on fp32 tensors)."""
    import torch

    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[op_precision(precision)]


@contextlib.contextmanager
def math_mode(precision: str) -> Iterator[None]:
    """TF32 on for ``tf32`` only (fp32 means true fp32), restored afterwards."""
    import torch

    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
    )
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        (
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
            torch.backends.cudnn.benchmark,
        ) = saved


def synchronizer(device: str) -> Callable[[], None]:
    """A function that waits until ``device`` has finished its queued work."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    if dev.type == "mps":
        return torch.mps.synchronize
    return lambda: None


class _Alloc:
    """Random tensors of one case's device and dtype (the case's seed set before)."""

    def __init__(self, device: str, precision: str) -> None:
        import torch

        self.dev = torch.device(device)
        self.dtype = torch_dtype(precision)

    def randn(self, *shape: int, grad: bool = False, cl: bool = False) -> Any:
        import torch

        t = torch.randn(*shape, device=self.dev, dtype=self.dtype)
        if cl:
            t = t.contiguous(memory_format=torch.channels_last)
        return t.requires_grad_(grad)


def _matmul(s: Mapping[str, int], backward: bool, alloc: _Alloc) -> Step:
    import torch

    a, b = alloc.randn(s["m"], s["k"]), alloc.randn(s["k"], s["n"])
    c = torch.empty(s["m"], s["n"], device=alloc.dev, dtype=alloc.dtype)

    def matmul() -> None:
        torch.mm(a, b, out=c)

    return matmul


def _conv2d(s: Mapping[str, int], backward: bool, alloc: _Alloc) -> Step:
    import torch
    import torch.nn.functional as F

    # NHWC: logical NCHW tensors in channels_last memory, the layout of the paper's shapes.
    x = alloc.randn(s["n"], s["c_in"], s["h"], s["w"], grad=backward, cl=True)
    w = alloc.randn(s["c_out"], s["c_in"], s["kh"], s["kw"], grad=backward, cl=True)
    stride = s["stride"]
    if not backward:

        def conv_fwd() -> None:
            with torch.no_grad():
                F.conv2d(x, w, stride=stride)

        return conv_fwd
    with torch.no_grad():
        dy = torch.randn_like(F.conv2d(x, w, stride=stride)).contiguous(
            memory_format=torch.channels_last
        )

    def conv_fwd_bwd() -> None:
        y = F.conv2d(x, w, stride=stride)
        torch.autograd.grad(y, (x, w), dy)

    return conv_fwd_bwd


def _lstm(s: Mapping[str, int], backward: bool, alloc: _Alloc) -> Step:
    import torch

    lstm = torch.nn.LSTM(s["input_size"], s["hidden_size"], batch_first=True)
    lstm = lstm.to(device=alloc.dev, dtype=alloc.dtype)
    xs = alloc.randn(s["batch"], s["seq_len"], s["input_size"], grad=backward)
    if not backward:

        def lstm_fwd() -> None:
            with torch.no_grad():
                lstm(xs)

        return lstm_fwd
    dout = alloc.randn(s["batch"], s["seq_len"], s["hidden_size"])
    inputs = (xs, *lstm.parameters())

    def lstm_fwd_bwd() -> None:
        out, _ = lstm(xs)
        torch.autograd.grad(out, inputs, dout)

    return lstm_fwd_bwd


def _attention(s: Mapping[str, int], backward: bool, alloc: _Alloc) -> Step:
    import torch
    import torch.nn.functional as F

    q = alloc.randn(s["batch"], s["heads"], s["q_len"], s["head_dim"], grad=backward)
    k = alloc.randn(s["batch"], s["heads"], s["kv_len"], s["head_dim"], grad=backward)
    v = alloc.randn(s["batch"], s["heads"], s["kv_len"], s["head_dim"], grad=backward)
    if not backward:

        def attn_fwd() -> None:
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v)

        return attn_fwd
    do = alloc.randn(s["batch"], s["heads"], s["q_len"], s["head_dim"])

    def attn_fwd_bwd() -> None:
        o = F.scaled_dot_product_attention(q, k, v)
        torch.autograd.grad(o, (q, k, v), do)

    return attn_fwd_bwd


#: One builder per operator: its tensors allocated, one execution returned.
_BUILDERS: dict[str, Callable[[Mapping[str, int], bool, _Alloc], Step]] = {
    "matmul": _matmul, "conv2d": _conv2d, "lstm": _lstm, "attention": _attention,
}


def build_step(case: OpCase, device: str, seed: int = 0) -> Step:
    """Allocate the case's tensors on ``device`` and return one execution of it.

    Forward passes run under ``torch.no_grad``; forward+backward computes the
    gradients of every input (and of the LSTM's weights) with
    ``torch.autograd.grad`` against a fixed output gradient, so nothing
    accumulates across iterations.
    """
    import torch

    alloc = _Alloc(device, case.precision)
    torch.manual_seed(seed)
    builder = _BUILDERS.get(case.op)
    if builder is None:
        raise ConfigError(f"unknown operator {case.op!r}")
    return builder(case.shape, case.pass_ == "forward_backward", alloc)


def _release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


class TorchOps:
    """The operator side of the torch backend (see :mod:`accelbench.execution.opbench`)."""

    def build_step(self, case: OpCase, device: str, seed: int = 0) -> Step:
        return build_step(case, device, seed)

    def synchronizer(self, device: str) -> Callable[[], None]:
        return synchronizer(device)

    def math_mode(self, precision: str) -> contextlib.AbstractContextManager[None]:
        return math_mode(precision)

    def release(self, device: str) -> None:
        _release(device)

    def threads(self, n: int | None) -> int:
        """Set the CPU thread count when ``n`` is given; return the one in effect."""
        import torch

        if n is not None:
            torch.set_num_threads(n)
        return torch.get_num_threads()

    def copy_step(self, device: str, n: int) -> Step:
        """One device-to-device copy of ``n`` float32 values (two buffers allocated once)."""
        import torch

        dev = torch.device(device)
        src = torch.ones(n, device=dev, dtype=torch.float32)
        dst = torch.empty_like(src)

        def copy() -> None:
            dst.copy_(src)

        return copy

    def free_bytes(self, device: str) -> int | None:
        """Free memory of an accelerator, or None where unknown (the CPU is asked elsewhere)."""
        if not device.startswith("cuda"):
            return None
        import torch

        try:
            return int(torch.cuda.mem_get_info(int(device.split(":")[1]))[0])
        except Exception:  # free memory unknown: the caller keeps its default
            return None
