"""JAX's operator benchmarks: the same cases as torch's, jitted, on one device.

Inputs are placed on the device once; each execution is one call of a jitted
function whose result is kept, so the synchroniser can block on it. conv2d is
NHWC with an HWIO kernel, the layout XLA prefers; the LSTM layer is a
``lax.scan`` over time, as the JAX models run it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any

from accelbench.backends.jax.runtime import MATMUL_PRECISION, import_jax, jax_device, limit_cpus
from accelbench.errors import ConfigError
from accelbench.opbench.cases import OpCase
from accelbench.opbench.precision import op_precision

Step = Callable[[], None]

_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _lstm_layer(xs: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """One LSTM layer over (N, T, I) inputs, gates i, f, g, o; returns (N, T, H)."""
    jax = import_jax()
    import jax.numpy as jnp

    n, h = xs.shape[0], w_hh.shape[0]
    x_proj = jnp.einsum("nti,ig->tng", xs, w_ih) + b

    def cell(carry: Any, xg: Any) -> tuple[Any, Any]:
        hh, cc = carry
        gates = xg + hh @ w_hh
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(g)
        hh = jax.nn.sigmoid(o) * jnp.tanh(cc)
        return (hh, cc), hh

    zeros = jnp.zeros((n, h), xs.dtype)
    _, out = jax.lax.scan(cell, (zeros, zeros), x_proj)
    return jnp.swapaxes(out, 0, 1)


class JaxOps:
    """The operator side of the JAX backend (see :mod:`accelbench.execution.opbench`)."""

    def __init__(self) -> None:
        self._last: list[Any] = []

    def _runner(self, fn: Callable[..., Any], *args: Any) -> Step:
        """Compile ``fn`` for ``args`` now (outside the timed loop); return one execution."""
        jax = import_jax()
        compiled = jax.jit(fn).lower(*args).compile()
        self._last = []

        def run() -> None:
            self._last = [compiled(*args)]

        return run

    def build_step(self, case: OpCase, device: str, seed: int = 0) -> Step:
        """Allocate the case's arrays on ``device`` and return one execution of it.

        Forward+backward computes the gradients of every input (and of the LSTM's
        weights) with ``jax.vjp`` against a fixed output gradient.
        """
        jax = import_jax()
        import jax.numpy as jnp

        dev = jax_device(device)
        dtype = jnp.dtype(_DTYPES[op_precision(case.precision)])
        keys = iter(jax.random.split(jax.random.key(seed), 8))
        s = case.shape
        backward = case.pass_ == "forward_backward"

        def randn(*shape: int) -> Any:
            return jax.device_put(jax.random.normal(next(keys), shape, dtype), dev)

        def with_grads(f: Callable[..., Any], out_shape: tuple[int, ...], *args: Any) -> Step:
            if not backward:
                return self._runner(f, *args)
            dy = randn(*out_shape)

            def fwd_bwd(dy: Any, *a: Any) -> Any:
                _, vjp = jax.vjp(f, *a)
                return vjp(dy)

            return self._runner(fwd_bwd, dy, *args)

        if case.op == "matmul":
            a, b = randn(s["m"], s["k"]), randn(s["k"], s["n"])
            return self._runner(jnp.matmul, a, b)
        if case.op == "conv2d":
            stride = s["stride"]
            x = randn(s["n"], s["h"], s["w"], s["c_in"])
            w = randn(s["kh"], s["kw"], s["c_in"], s["c_out"])

            def conv(x: Any, w: Any) -> Any:
                return jax.lax.conv_general_dilated(
                    x, w, (stride, stride), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))

            out = jax.eval_shape(conv, x, w).shape
            return with_grads(conv, out, x, w)
        if case.op == "lstm":
            i, h = s["input_size"], s["hidden_size"]
            xs = randn(s["batch"], s["seq_len"], i)
            w_ih, w_hh, b = randn(i, 4 * h), randn(h, 4 * h), randn(4 * h)
            return with_grads(_lstm_layer, (s["batch"], s["seq_len"], h), xs, w_ih, w_hh, b)
        if case.op == "attention":
            # jax's layout is (batch, length, heads, head_dim).
            q = randn(s["batch"], s["q_len"], s["heads"], s["head_dim"])
            k = randn(s["batch"], s["kv_len"], s["heads"], s["head_dim"])
            v = randn(s["batch"], s["kv_len"], s["heads"], s["head_dim"])
            return with_grads(jax.nn.dot_product_attention, q.shape, q, k, v)
        raise ConfigError(f"unknown operator {case.op!r}")

    def synchronizer(self, device: str) -> Callable[[], None]:
        """Block until the last execution's result is computed."""
        jax = import_jax()
        del device

        def sync() -> None:
            jax.block_until_ready(self._last)

        return sync

    @contextlib.contextmanager
    def math_mode(self, precision: str) -> Iterator[None]:
        """fp32 means true fp32 matmuls; tf32 allows TensorFloat-32 (read at compile time)."""
        jax = import_jax()
        with jax.default_matmul_precision(MATMUL_PRECISION.get(op_precision(precision),
                                                               "default")):
            yield

    def release(self, device: str) -> None:
        del device
        self._last = []
        gc.collect()

    def threads(self, n: int | None) -> int:
        """XLA sizes its CPU pool once per process: limit the CPUs and report them."""
        return limit_cpus(n)

    def copy_step(self, device: str, n: int) -> Step:
        """One device-side copy of ``n`` float32 values (read once, written once)."""
        jax = import_jax()
        import jax.numpy as jnp

        src = jax.device_put(jnp.ones((n,), jnp.float32), jax_device(device))
        return self._runner(lambda x: x + 0.0, src)

    def free_bytes(self, device: str) -> int | None:
        """Free device memory from XLA's allocator statistics, where it reports them."""
        if device == "cpu":
            return None
        stats: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            stats = jax_device(device).memory_stats() or {}
        limit, used = stats.get("bytes_limit"), stats.get("bytes_in_use", 0)
        return int(limit - used) if limit else None
