"""Running operator cases in-process with the framework-neutral measurement loop.

Each case allocates its tensors on the device, is timed by
:func:`accelbench.runner.measure.run_loop` (warm-up, device-synchronised
iterations, adaptive stop) and releases its memory before the next one. An
out-of-memory failure becomes status ``oom``, any other failure ``error``;
neither stops the remaining cases.
"""

from __future__ import annotations

import contextlib
import gc
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from accelbench.errors import ConfigError, UnsupportedError
from accelbench.ops.cases import OpCase
from accelbench.ops.result import OpResult
from accelbench.runner.measure import ProgressFn, run_loop
from accelbench.spec import MeasurementPolicy

if TYPE_CHECKING:
    import torch

#: Training precision of accelbench -> the GEMM format whose peak bounds it.
TRAINING_TO_OP_PRECISION: dict[str, str] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "amp_fp16": "fp16",
    "amp_bf16": "bf16",
    "fp16": "fp16",
    "bf16": "bf16",
}

Step = Callable[[], None]


def op_precision(precision: str) -> str:
    """Map a training or operator precision to the operator/GEMM precision.

    ``amp_fp16`` maps to ``fp16`` and ``amp_bf16`` to ``bf16``: mixed-precision
    training is bounded by the half-precision GEMM peak.

    Raises:
        ConfigError: unknown precision.
    """
    try:
        return TRAINING_TO_OP_PRECISION[precision]
    except KeyError:
        raise ConfigError(
            f"unknown precision {precision!r}; choose one of fp32, tf32, fp16, bf16"
        ) from None


def op_precisions(device: str) -> tuple[str, ...]:
    """Operator precisions ``device`` supports (the device must exist)."""
    from accelbench.frameworks.torch_backend import supported_precisions

    return tuple(TRAINING_TO_OP_PRECISION[p] for p in supported_precisions(device))


def check_op_precision(device: str, precision: str) -> None:
    """Refuse a precision the device cannot run.

    Raises:
        UnsupportedError: with the supported list.
    """
    ok = op_precisions(device)
    if op_precision(precision) not in ok:
        raise UnsupportedError(
            f"precision {precision} is not supported on {device}; supported: {', '.join(ok)}"
        )


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


def build_step(case: OpCase, device: str, seed: int = 0) -> Step:
    """Allocate the case's tensors on ``device`` and return one execution of it.

    Forward passes run under ``torch.no_grad``; forward+backward computes the
    gradients of every input (and of the LSTM's weights) with
    ``torch.autograd.grad`` against a fixed output gradient, so nothing
    accumulates across iterations.
    """
    import torch
    import torch.nn.functional as F

    dev = torch.device(device)
    dtype = torch_dtype(case.precision)
    torch.manual_seed(seed)
    s = case.shape
    backward = case.pass_ == "forward_backward"

    def randn(*shape: int, grad: bool = False, cl: bool = False) -> torch.Tensor:
        t = torch.randn(*shape, device=dev, dtype=dtype)
        if cl:
            t = t.contiguous(memory_format=torch.channels_last)
        return t.requires_grad_(grad)

    if case.op == "matmul":
        a, b = randn(s["m"], s["k"]), randn(s["k"], s["n"])
        c = torch.empty(s["m"], s["n"], device=dev, dtype=dtype)

        def matmul() -> None:
            torch.mm(a, b, out=c)

        return matmul

    if case.op == "conv2d":
        # NHWC: logical NCHW tensors in channels_last memory, the layout of the paper's shapes.
        x = randn(s["n"], s["c_in"], s["h"], s["w"], grad=backward, cl=True)
        w = randn(s["c_out"], s["c_in"], s["kh"], s["kw"], grad=backward, cl=True)
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

    if case.op == "lstm":
        lstm = torch.nn.LSTM(s["input_size"], s["hidden_size"], batch_first=True)
        lstm = lstm.to(device=dev, dtype=dtype)
        xs = randn(s["batch"], s["seq_len"], s["input_size"], grad=backward)
        if not backward:

            def lstm_fwd() -> None:
                with torch.no_grad():
                    lstm(xs)

            return lstm_fwd
        dout = randn(s["batch"], s["seq_len"], s["hidden_size"])
        inputs = (xs, *lstm.parameters())

        def lstm_fwd_bwd() -> None:
            out, _ = lstm(xs)
            torch.autograd.grad(out, inputs, dout)

        return lstm_fwd_bwd

    if case.op == "attention":
        q = randn(s["batch"], s["heads"], s["q_len"], s["head_dim"], grad=backward)
        k = randn(s["batch"], s["heads"], s["kv_len"], s["head_dim"], grad=backward)
        v = randn(s["batch"], s["heads"], s["kv_len"], s["head_dim"], grad=backward)
        if not backward:

            def attn_fwd() -> None:
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v)

            return attn_fwd
        do = randn(s["batch"], s["heads"], s["q_len"], s["head_dim"])

        def attn_fwd_bwd() -> None:
            o = F.scaled_dot_product_attention(q, k, v)
            torch.autograd.grad(o, (q, k, v), do)

        return attn_fwd_bwd
    raise ConfigError(f"unknown operator {case.op!r}")


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _release(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def run_case(
    case: OpCase,
    device: str,
    policy: MeasurementPolicy,
    *,
    measured_peak_flop_per_s: float | None = None,
    theoretical_peak_flop_per_s: float | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    tag: str = "",
    machine: dict[str, Any] | None = None,
    progress: ProgressFn | None = None,
) -> OpResult:
    """Measure one operator case on ``device`` (already checked) and return its record.

    Args:
        case: What to run.
        device: ``cpu`` or ``cuda:N``.
        policy: Warm-up and stopping rules (``timeout_s`` is not enforced in-process).
        measured_peak_flop_per_s: Measured GEMM peak of the case's precision, if known.
        theoretical_peak_flop_per_s: Theoretical peak of the case's precision, if known.
        device_name: Model name stored with the record.
        threads: CPU threads (None: leave the framework's setting).
        tag: Free text stored with the record.
        machine: Machine description stored with the record.
        progress: Called as the loop advances.
    """
    import torch

    from accelbench.frameworks.torch_backend import is_oom
    from accelbench.stats import bootstrap_median_ci

    if threads is not None:
        torch.set_num_threads(threads)
    common: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "case": case,
        "device": device,
        "device_name": device_name,
        "hostname": socket.gethostname(),
        "threads": threads if threads is not None else torch.get_num_threads(),
        "tag": tag,
        "machine": machine or {},
        "created_at": _utc_now(),
    }
    sync = synchronizer(device)
    try:
        with math_mode(case.precision):
            step = build_step(case, device)
            timings = run_loop(step, sync, policy, 1, progress)
        del step
    except Exception as exc:  # one failing case must not stop the others
        _release(device)
        return OpResult(
            **common,
            status="oom" if is_oom(exc) else "error",
            error=f"{type(exc).__name__}: {exc}".strip().splitlines()[0],
        )
    _release(device)
    times = timings.times_s
    import numpy as np

    median = float(np.median(times))
    low, high = bootstrap_median_ci(times)
    achieved = case.flops / median

    def pct(peak: float | None) -> float | None:
        return 100.0 * achieved / peak if peak else None

    return OpResult(
        **common,
        status="ok",
        times_s=tuple(times),
        warmup_times_s=tuple(timings.warmup_times_s),
        stop_reason=timings.stop_reason,
        median_s=median,
        ci_low_s=low,
        ci_high_s=high,
        achieved_flop_per_s=achieved,
        pct_measured_peak=pct(measured_peak_flop_per_s),
        pct_theoretical_peak=pct(theoretical_peak_flop_per_s),
    )


def run_cases(
    cases: Sequence[OpCase],
    device: str,
    policy: MeasurementPolicy,
    *,
    measured_peaks: dict[str, float] | None = None,
    theoretical_peaks: dict[str, float | None] | None = None,
    device_name: str | None = None,
    threads: int | None = None,
    tag: str = "",
    machine: dict[str, Any] | None = None,
    on_result: Callable[[OpResult], None] | None = None,
    on_start: Callable[[OpCase], None] | None = None,
    progress: ProgressFn | None = None,
) -> list[OpResult]:
    """Run ``cases`` one after another; ``on_result`` sees each record as it is made."""
    measured_peaks = measured_peaks or {}
    theoretical_peaks = theoretical_peaks or {}
    out: list[OpResult] = []
    for case in cases:
        if on_start is not None:
            on_start(case)
        res = run_case(
            case, device, policy,
            measured_peak_flop_per_s=measured_peaks.get(case.precision),
            theoretical_peak_flop_per_s=theoretical_peaks.get(case.precision),
            device_name=device_name, threads=threads, tag=tag, machine=machine,
            progress=progress,
        )
        if on_result is not None:
            on_result(res)
        out.append(res)
    return out
